/**
 * What `lease run` decides about each message (src/consumer/): its outcome from the command's end
 * and results file (outcomes.ts, results.ts), how it is retried, bisected and given up
 * (retry-policy.ts), and what reaches the command's environment (delivery.ts).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { BatchMessage } from '../../src/broker/batch.js';
import { ackRule } from '../../src/consumer/ack-rule.js';
import { partitionsVariable, removeStaleBatchDirectories } from '../../src/consumer/delivery.js';
import { outcomesOf, type CommandEnd, type Outcome } from '../../src/consumer/outcomes.js';
import { parseResults, readResults, resultsCap } from '../../src/consumer/results.js';
import { RetryPolicy, type RetryOptions } from '../../src/consumer/retry-policy.js';

const message = (partition: string, n: number, transactionId = `t${n}`): BatchMessage => ({
  transactionId,
  partitionId: `pid-${partition}`,
  partition,
  data: { n },
});
const batchOf = (partition: string, from: number, count: number): BatchMessage[] =>
  Array.from({ length: count }, (_, i) => message(partition, from + i));

const exited = (status: number, inputWritten: number): CommandEnd => ({
  kind: 'exited',
  status,
  inputWritten,
  words: `it exited with status ${status}`,
});

describe('outcomesOf', () => {
  it('exit 0: completed only for the lines written to it; the rest could not have been read', () => {
    const outcomes = outcomesOf(batchOf('p', 1, 3), exited(0, 2), new Map());
    assert.deepEqual(
      outcomes.map((o) => (o.status === 'completed' ? 'completed' : o.cause)),
      ['completed', 'completed', 'unread'],
    );
  });

  it('a non-zero status fails every message it did not report; what it reported wins', () => {
    const reported = new Map([
      [0, { status: 'completed' as const, error: null }],
      [2, { status: 'failed' as const, error: 'bad payload' }],
    ]);
    const outcomes = outcomesOf(batchOf('p', 1, 3), exited(3, 3), reported);
    assert.deepEqual(outcomes[0], { status: 'completed' });
    assert.deepEqual(outcomes[1], { status: 'retry', cause: 'command', error: 'it exited with status 3', tried: 3 });
    assert.deepEqual(outcomes[2], { status: 'failed', cause: 'reported', error: 'bad payload' });
    // Exit 0 with a reported failure: the report wins.
    const failed = outcomesOf(batchOf('p', 1, 1), exited(0, 1), new Map([[0, { status: 'retry', error: null }]]));
    assert.equal(failed[0]?.status, 'retry');
  });
});

describe('results file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'queenctl-results-test-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const batch = [message('a', 1, 'x'), message('b', 2, 'x'), message('a', 3, 'tab\there')];

  it('the last line about a message wins; lines naming nothing, or not objects, are counted', () => {
    const text = [
      '{"transactionId":"tab\\there","status":"failed","error":"first"}',
      'not json',
      '{"transactionId":"nobody","status":"completed"}',
      '{"transactionId":"tab\\there","status":"completed"}',
      '{"transactionId":"x","status":"maybe"}',
      '',
    ].join('\n');
    const { reported, ignored } = parseResults(text, batch);
    assert.deepEqual(reported.get(2), { status: 'completed', error: null });
    assert.equal(ignored, 3);
  });

  it('a transaction id two partitions share: partitionId narrows it, else it names both', () => {
    const narrowed = parseResults('{"transactionId":"x","partitionId":"pid-b","status":"retry"}', batch);
    assert.deepEqual([...narrowed.reported.keys()], [1]);
    const both = parseResults('{"transactionId":"x","status":"retry"}', batch);
    assert.deepEqual([...both.reported.keys()], [0, 1]);
  });

  it('read without following a link, never from a FIFO, never past its cap', () => {
    const real = join(dir, 'real.jsonl');
    writeFileSync(real, '{"transactionId":"x","status":"failed"}\n');
    assert.equal(readResults(real, batch).ok, true);
    const link = join(dir, 'link.jsonl');
    symlinkSync(real, link);
    assert.equal(readResults(link, batch).ok, false);
    const fifo = join(dir, 'fifo.jsonl');
    execFileSync('mkfifo', [fifo], { timeout: 10_000 });
    const read = readResults(fifo, batch);
    assert.equal(read.ok, false, 'a FIFO: refused without waiting for a writer');
    const huge = join(dir, 'huge.jsonl');
    writeFileSync(huge, 'x'.repeat(resultsCap(batch.length) + 1));
    assert.equal(readResults(huge, batch).ok, false);
    // Removed by the command: it said nothing.
    const gone = readResults(join(dir, 'gone.jsonl'), batch);
    assert.ok(gone.ok && gone.reported.size === 0);
  });
});

/** The decisions of one partition's batch, as the consumer asks for them. */
function decide(policy: RetryPolicy, messages: BatchMessage[], outcomes: Outcome[]) {
  const rule = ackRule(messages, outcomes);
  return rule.map((acks) => policy.decide(acks, messages, outcomes));
}
const failing = (count: number): Outcome[] =>
  Array.from({ length: count }, () => ({ status: 'retry', cause: 'command', error: 'status 1' }));

describe('RetryPolicy', () => {
  const options: RetryOptions = { retryDelayMs: 1000, giveUpAfter: 3, onFailure: 'retry' };

  it('a retry of the same message waits twice as long each time, at most a minute', () => {
    const policy = new RetryPolicy({ ...options, giveUpAfter: 1000 });
    const one = [message('p', 1)];
    const delays: number[] = [];
    for (let i = 0; i < 9; i++) {
      const [decision] = decide(policy, one, [{ status: 'retry', cause: 'unread', error: '' }]);
      delays.push(decision?.delayMs ?? -1);
      policy.retried(one[0] as BatchMessage);
    }
    assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]);
  });

  it('a failure among others, none named, counts nothing; alone, it counts', () => {
    const policy = new RetryPolicy(options);
    const three = batchOf('p', 1, 3);
    const together: Outcome[] = three.map(() => ({ status: 'retry', cause: 'command', error: 'status 1', tried: 3 }));
    assert.deepEqual(decide(policy, three, together)[0], {
      status: 'retry',
      delayMs: 1000,
      failures: 0,
      givenUp: false,
    });
    const alone: Outcome[] = [{ status: 'retry', cause: 'command', error: 'status 1', tried: 1 }];
    assert.equal(decide(policy, [three[0] as BatchMessage], alone)[0]?.failures, 1);
  });

  it('--give-up-after: retry ends the run; failed hands it on, and a reported failure is failed at once', () => {
    const one = [message('p', 1)];
    const stay = new RetryPolicy(options);
    const run = () => decide(stay, one, failing(1))[0];
    assert.deepEqual(
      [run(), run(), run()].map((d) => [d?.status, d?.failures, d?.givenUp]),
      [
        ['retry', 1, false],
        ['retry', 2, false],
        ['retry', 3, true],
      ],
    );
    const hand = new RetryPolicy({ ...options, onFailure: 'failed' });
    const statuses = [1, 2, 3, 4].map(() => decide(hand, one, failing(1))[0]?.status);
    assert.deepEqual(statuses, ['retry', 'retry', 'failed', 'failed']);
    const reported = new RetryPolicy(options);
    const [decision] = decide(reported, one, [{ status: 'failed', cause: 'reported', error: 'bad' }]);
    assert.equal(decision?.status, 'failed');
  });

  it('what queenctl did is no failure of the message: back at once, counted nowhere', () => {
    const policy = new RetryPolicy(options);
    for (const cause of ['stopped', 'not-run'] as const) {
      const [decision] = decide(policy, batchOf('p', 1, 3), [
        { status: 'retry', cause, error: '' },
        { status: 'retry', cause, error: '' },
        { status: 'retry', cause, error: '' },
      ]);
      assert.deepEqual(decision, { status: 'retry', delayMs: 0, failures: 0, givenUp: false });
    }
  });
});

describe('QUEEN_PARTITIONS', () => {
  it('set only for plain names, never one a shell would split, glob or expand', () => {
    assert.equal(partitionsVariable(['p1', 'eu-west.2']), 'p1 eu-west.2');
    for (const name of ['eu 2', '*', 'a?', '[x]', "it's", 'a"b', '$HOME', 'a;b', 'x\u0000y', 'tab\t', '~root', '']) {
      assert.equal(partitionsVariable(['p1', name]), undefined, JSON.stringify(name));
    }
    assert.equal(partitionsVariable(Array.from({ length: 5000 }, (_, i) => `partition-${i}`)), undefined);
  });
});

describe('what the command reports', () => {
  it('an error text the broker can store: well-formed, no NUL, cut between characters', async () => {
    const { reason, MAX_REPORTED_ERROR } = await import('../../src/consumer/results.js');
    assert.equal(reason('lone \ud800 half'), 'lone \ufffd half');
    assert.equal(reason('nul\u0000here'), 'nul\ufffdhere');
    const cut = reason(`${'x'.repeat(MAX_REPORTED_ERROR - 1)}\u{1F600}`);
    assert.equal(cut.length, MAX_REPORTED_ERROR - 1, 'never half an emoji');
    assert.equal(cut, 'x'.repeat(MAX_REPORTED_ERROR - 1));
  });

  it('the first line a command that exited 0 never took counts toward --give-up-after', () => {
    const policy = new RetryPolicy({ retryDelayMs: 1, giveUpAfter: 2, onFailure: 'retry' });
    const one = [message('p', 1)];
    const unread: Outcome[] = [{ status: 'retry', cause: 'unread', error: '' }];
    assert.equal(decide(policy, one, unread)[0]?.givenUp, false);
    assert.equal(decide(policy, one, unread)[0]?.givenUp, true, 'a command that never reads ends the run');
  });
});

describe('batch directories a dead run left', () => {
  it("removes a dead run's directory of this user, mode 0700; nothing else", () => {
    const parent = mkdtempSync(join(tmpdir(), 'queenctl-stale-test-'));
    try {
      const make = (name: string, mode = 0o700): string => {
        const path = join(parent, name);
        mkdirSync(path, { mode });
        writeFileSync(join(path, 'batch.json'), '{}');
        return path;
      };
      const dead = make('queenctl-run-4000001-abcdef');
      const living = make(`queenctl-run-${process.pid}-abcdef`);
      const open = make('queenctl-run-4000002-abcdef', 0o755);
      const other = make('queenctl-run-x-abcdef');
      const target = make('elsewhere');
      symlinkSync(target, join(parent, 'queenctl-run-4000003-abcdef'));
      const alive = (pid: number): boolean => pid === process.pid;
      assert.equal(removeStaleBatchDirectories(parent, alive), 1);
      assert.equal(existsSync(dead), false, "a dead run's batch, messages included, is gone");
      for (const kept of [living, open, other, target]) assert.ok(existsSync(kept), kept);
      assert.ok(existsSync(join(target, 'batch.json')), 'a link is never followed');
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });
});
