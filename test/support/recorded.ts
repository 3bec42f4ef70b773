/** The real broker's pop and ack answers (test/fixtures/real-broker-pop-ack.txt), for the tests that replay them. */
import { readFileSync } from 'node:fs';
import type { RawAnswer } from '../../src/broker/contract.js';

/** The recorded answers by case id (`p4`, `a3`, …): status line, headers and body as received. */
export function recordedPopAck(): Map<string, RawAnswer> {
  const text = readFileSync(new URL('../../../test/fixtures/real-broker-pop-ack.txt', import.meta.url), 'utf8');
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
    answers.set(title.split(' ')[0] as string, { status: Number(status[1]), headers, body });
  }
  return answers;
}
