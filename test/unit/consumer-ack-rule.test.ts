/**
 * The rule that turns a batch's outcomes into acks (src/consumer/ack-rule.ts) against the real
 * broker's cursor (docs/broker.md, "One batch, several outcomes"; recorded in
 * test/fixtures/real-broker-mixed-acks.txt): per partition, the highest message acked completed
 * consumes everything below it, so a message acked retry or failed, or not at all, below a
 * completed one is lost for good. Every row of the recorded table, then any batch at all.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { BatchMessage } from '../../src/broker/batch.js';
import { ackRule } from '../../src/consumer/ack-rule.js';
import type { Outcome } from '../../src/consumer/outcomes.js';

type Status = 'completed' | 'retry' | 'failed';
interface Ack {
  index: number;
  status: Status;
}

const message = (partition: string, n: number): BatchMessage => ({
  transactionId: `t${n}`,
  partitionId: `pid-${partition}`,
  partition,
  data: { n },
});

const outcome = (status: Status): Outcome =>
  status === 'completed' ? { status } : { status, cause: 'reported', error: `${status} ${Math.random()}` };

/** The acks the rule sends, completions first, in the order a consumer sends them. */
function acksOf(messages: BatchMessage[], statuses: Status[]): Ack[] {
  const rule = ackRule(messages, statuses.map(outcome));
  const acks: Ack[] = [];
  for (const partition of rule) for (const index of partition.completed) acks.push({ index, status: 'completed' });
  for (const partition of rule) {
    if (partition.decisive !== null) {
      acks.push({ index: partition.decisive, status: statuses[partition.decisive] as Status });
    }
  }
  return acks;
}

/**
 * The messages the broker's cursor loses: consumed (below the highest completed message of their
 * partition) without being acked completed themselves. m1, m2 and m4 of the recording.
 */
function lostByCursor(messages: BatchMessage[], acks: Ack[]): number[] {
  const acked = new Map(acks.map((ack) => [ack.index, ack.status]));
  const highest = new Map<string, number>();
  for (const ack of acks) {
    if (ack.status !== 'completed') continue;
    const partition = (messages[ack.index] as BatchMessage).partitionId;
    highest.set(partition, Math.max(highest.get(partition) ?? -1, ack.index));
  }
  return messages
    .map((m, index) => ({ m, index }))
    .filter(({ m, index }) => index < (highest.get(m.partitionId) ?? -1) && acked.get(index) !== 'completed')
    .map(({ index }) => index);
}

const four = [1, 2, 3, 4].map((n) => message('p1', n));

describe('the cursor model of the tests', () => {
  it('loses what the recording lost when each message is acked by its own outcome (m1, m2, m4)', () => {
    const naive = (statuses: Status[]): Ack[] => statuses.map((status, index) => ({ index, status }));
    assert.deepEqual(lostByCursor(four, naive(['completed', 'retry', 'completed', 'completed'])), [1]); // m1: n=2
    assert.deepEqual(lostByCursor(four, naive(['retry', 'completed', 'completed', 'completed'])), [0]); // m2: n=1
    assert.deepEqual(lostByCursor(four, naive(['completed', 'failed', 'completed', 'completed'])), [1]); // m4: n=2
    // m3 and m5 lost nothing: nothing acked after the retry.
    assert.deepEqual(lostByCursor(four, [...naive(['completed', 'completed', 'retry'])]), []);
    assert.deepEqual(lostByCursor(four, naive(['completed', 'completed', 'completed', 'retry'])), []);
  });
});

describe('ackRule: every row of the recorded table', () => {
  const rows: Array<{ name: string; statuses: Status[]; acks: Ack[]; back: number[] }> = [
    {
      name: 'm1: 1 completed, 2 retry, 3, 4 completed',
      statuses: ['completed', 'retry', 'completed', 'completed'],
      acks: [
        { index: 0, status: 'completed' },
        { index: 1, status: 'retry' },
      ],
      back: [2, 3],
    },
    {
      name: 'm2: 1 retry, 2, 3, 4 completed',
      statuses: ['retry', 'completed', 'completed', 'completed'],
      acks: [{ index: 0, status: 'retry' }],
      back: [1, 2, 3],
    },
    {
      name: 'm3: 1, 2 completed, 3 retry, 4 completed',
      statuses: ['completed', 'completed', 'retry', 'completed'],
      acks: [
        { index: 0, status: 'completed' },
        { index: 1, status: 'completed' },
        { index: 2, status: 'retry' },
      ],
      back: [3],
    },
    {
      name: 'm4: 1 completed, 2 failed, 3, 4 completed',
      statuses: ['completed', 'failed', 'completed', 'completed'],
      acks: [
        { index: 0, status: 'completed' },
        { index: 1, status: 'failed' },
      ],
      back: [2, 3],
    },
    {
      name: 'm5: 1, 2, 3 completed, 4 retry',
      statuses: ['completed', 'completed', 'completed', 'retry'],
      acks: [
        { index: 0, status: 'completed' },
        { index: 1, status: 'completed' },
        { index: 2, status: 'completed' },
        { index: 3, status: 'retry' },
      ],
      back: [],
    },
    {
      name: 'm6: 1 completed, 2 failed, 3, 4 left',
      statuses: ['completed', 'failed', 'completed', 'completed'],
      acks: [
        { index: 0, status: 'completed' },
        { index: 1, status: 'failed' },
      ],
      back: [2, 3],
    },
  ];
  for (const row of rows) {
    it(`${row.name}: loses nothing`, () => {
      const acks = acksOf(four, row.statuses);
      assert.deepEqual(acks, row.acks);
      assert.deepEqual(ackRule(four, row.statuses.map(outcome))[0]?.comeBack, row.back);
      assert.deepEqual(lostByCursor(four, acks), []);
    });
  }

  it('each partition of a batch on its own: a failure in one never holds back the other', () => {
    const messages = [message('a', 1), message('b', 2), message('a', 3), message('b', 4)];
    const rule = ackRule(messages, (['retry', 'completed', 'completed', 'completed'] as Status[]).map(outcome));
    assert.deepEqual(rule, [
      { partitionId: 'pid-a', completed: [], decisive: 0, comeBack: [2] },
      { partitionId: 'pid-b', completed: [1, 3], decisive: null, comeBack: [] },
    ]);
  });
});

describe('ackRule: any batch, any outcomes', () => {
  const batch = fc
    .array(fc.tuple(fc.constantFrom('a', 'b', 'c'), fc.constantFrom<Status>('completed', 'retry', 'failed')), {
      minLength: 1,
      maxLength: 12,
    })
    .map((entries) => ({
      messages: entries.map(([partition], index) => message(partition, index + 1)),
      statuses: entries.map(([, status]) => status),
    }));

  it('loses no message on the broker cursor, and completes only what succeeded', () => {
    fc.assert(
      fc.property(batch, ({ messages, statuses }) => {
        const acks = acksOf(messages, statuses);
        assert.deepEqual(lostByCursor(messages, acks), []);
        for (const ack of acks) assert.equal(ack.status, statuses[ack.index]);
      }),
      { numRuns: 2000 },
    );
  });

  it('per partition: completed, then at most one other ack, then nothing; every message said once', () => {
    fc.assert(
      fc.property(batch, ({ messages, statuses }) => {
        for (const partition of ackRule(messages, statuses.map(outcome))) {
          const all = [...partition.completed, ...(partition.decisive === null ? [] : [partition.decisive])];
          const after = partition.comeBack;
          const mine = messages.flatMap((m, index) => (m.partitionId === partition.partitionId ? [index] : []));
          assert.deepEqual([...all, ...after], mine, 'in the broker order, each once');
          if (partition.decisive === null) assert.deepEqual(after, []);
          else assert.notEqual(statuses[partition.decisive], 'completed');
          for (const index of partition.completed) assert.equal(statuses[index], 'completed');
        }
      }),
      { numRuns: 2000 },
    );
  });
});
