/** The real broker's recorded answers (test/fixtures/real-broker-*.txt), for the tests that replay them. */
import { readFileSync } from 'node:fs';
import type { RawAnswer } from '../../src/broker/contract.js';

/**
 * The answers of a recording by case: `keyOf` turns a case's title into its key, and the first
 * answer of a key is kept. Recorded as received: CRLF between headers, the body exactly
 * Content-Length bytes (docs/broker.md#recorded-answers).
 */
export function recordedAnswers(fixture: string, keyOf: (title: string) => string): Map<string, RawAnswer> {
  const text = readFileSync(new URL(`../../../test/fixtures/${fixture}`, import.meta.url), 'utf8');
  const answers = new Map<string, RawAnswer>();
  for (const block of text.split(/^### /m).slice(1)) {
    const [title = '', ...rest] = block.split('\n');
    const raw = rest.join('\n');
    const status = /^HTTP\/1\.1 (\d+)/.exec(raw);
    if (!status) continue;
    const split = raw.indexOf('\r\n\r\n');
    const headers: Record<string, string> = {};
    for (const line of raw.slice(0, split).split('\r\n').slice(1)) {
      const at = line.indexOf(':');
      headers[line.slice(0, at).toLowerCase()] = line.slice(at + 1).trim();
    }
    const body = raw.slice(split + 4, split + 4 + Number(headers['content-length']));
    const key = keyOf(title);
    if (!answers.has(key)) answers.set(key, { status: Number(status[1]), headers, body });
  }
  return answers;
}

/** The pop and ack answers by case id (`p4`, `a3`, …). */
export function recordedPopAck(): Map<string, RawAnswer> {
  return recordedAnswers('real-broker-pop-ack.txt', (title) => title.split(' ')[0] as string);
}
