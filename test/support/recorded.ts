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

/** A message's state as the mixed-acks recording shows it from the database. */
export type RecordedState = 'consumed' | 'pending' | 'dead-lettered';

/**
 * The `### state of <queue>` blocks of a recording: per queue, each message's state by its
 * payload's `n` (`n=2 consumed dlq` is dead-lettered; `consumed -` and `pending -` as they say).
 */
export function recordedStates(fixture: string): Map<string, Map<number, RecordedState>> {
  const text = readFileSync(new URL(`../../../test/fixtures/${fixture}`, import.meta.url), 'utf8');
  const states = new Map<string, Map<number, RecordedState>>();
  for (const block of text.split(/^### /m).slice(1)) {
    const [title = '', ...lines] = block.split('\n');
    const queue = /^state of (\S+)/.exec(title)?.[1];
    if (queue === undefined) continue;
    const byN = new Map<number, RecordedState>();
    for (const line of lines) {
      const row = /^n=(\d+) (consumed|pending) (dlq|-)$/.exec(line.trim());
      if (row) byN.set(Number(row[1]), row[3] === 'dlq' ? 'dead-lettered' : (row[2] as RecordedState));
    }
    states.set(queue, byN);
  }
  return states;
}
