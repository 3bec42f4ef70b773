/**
 * The pop and ack contract (src/broker/pop.ts, ack.ts, batch.ts) against the real broker's
 * answers, recorded byte for byte (test/fixtures/real-broker-pop-ack.txt; docs/broker.md#pop-and-ack).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  AckOutcomeUnknown,
  ackBatchBody,
  ackItems,
  LEASE_REFUSED,
  parseAckAnswer,
  refusedForLease,
} from '../../src/broker/ack.js';
import { parseBatchRecord, type BatchRecord } from '../../src/broker/batch.js';
import type { RawAnswer } from '../../src/broker/contract.js';
import { parsePop, popPath } from '../../src/broker/pop.js';
import { AuthError, BrokerError, UsageError } from '../../src/exit.js';
import { recordedPopAck } from '../support/recorded.js';

const SERVER = 'http://broker.test:6632';

const recorded = recordedPopAck();
function answer(id: string): RawAnswer {
  const found = recorded.get(id);
  assert.ok(found, `case ${id} is in the recording`);
  return found;
}

/** The batch record acquire would have written for a recorded pop. */
function batchOf(id: string, queue: string, group?: string): BatchRecord {
  const outcome = parsePop({ queue, ...(group !== undefined && { group }) }, answer(id), SERVER);
  assert.equal(outcome.kind, 'lease');
  return { ...outcome.batch, expiresAt: null };
}

describe('the recording', () => {
  it('holds every case the contract tests read, bodies exactly Content-Length bytes', () => {
    for (const id of [
      'p1',
      'p2',
      'p3',
      'p4',
      'p7',
      'p11',
      'p16',
      'p17',
      'a1',
      'a3',
      'a5',
      'a8',
      'b1',
      'b3',
      'b5',
      'b7',
    ]) {
      const { body, headers } = answer(id);
      assert.equal(Buffer.byteLength(body), Number(headers['content-length']), id);
    }
  });
});

describe('parsePop: the recorded answers', () => {
  it('an empty queue and a queue never configured are both nothing to take (p1, p3)', () => {
    assert.deepEqual(parsePop({ queue: 'q' }, answer('p1'), SERVER), { kind: 'nothing', waited: false });
    assert.deepEqual(parsePop({ queue: 'q' }, answer('p3'), SERVER), { kind: 'nothing', waited: false });
  });

  it('a long poll that found nothing is nothing, waited (p2)', () => {
    const queue = 'rec-1796353518618-empty';
    assert.deepEqual(parsePop({ queue, waitMs: 1000 }, answer('p2'), SERVER), { kind: 'nothing', waited: true });
  });

  it('a two-partition pop is one lease over the partitions of its messages, keys kept (p4)', () => {
    const outcome = parsePop({ queue: 'rec-1796353518618-multi' }, answer('p4'), SERVER);
    assert.equal(outcome.kind, 'lease');
    const { batch, brokerDateMs } = outcome;
    assert.equal(batch.leaseId, '01a23f03-711f-7000-ad01-e534d2fc0519');
    assert.equal(batch.consumerGroup, '__QUEUE_MODE__');
    assert.deepEqual(batch.partitions, ['p2', 'p3']);
    assert.equal(batch.messages.length, 2);
    assert.deepEqual(Object.keys(batch.messages[0] ?? {}).sort(), [
      'consumerGroup',
      'createdAt',
      'data',
      'id',
      'leaseId',
      'partition',
      'partitionId',
      'producerSub',
      'traceId',
      'transactionId',
    ]);
    assert.deepEqual(batch.messages[0]?.data, { n: 3 });
    assert.equal(brokerDateMs, Date.parse('2026-12-04T03:05:19Z'));
  });

  it('a consumer group pop keeps its group (p16)', () => {
    const outcome = parsePop({ queue: 'rec-1796353518618-group', group: 'billing' }, answer('p16'), SERVER);
    assert.equal(outcome.kind, 'lease');
    assert.equal(outcome.batch.consumerGroup, 'billing');
  });

  it('a lease on no messages is its own outcome, not a batch (p11)', () => {
    const outcome = parsePop({ queue: 'rec-1796353518618-retry', partition: 'p1' }, answer('p11'), SERVER);
    assert.deepEqual(outcome, {
      kind: 'empty-lease',
      leaseId: '01a23f03-737e-7000-b3e8-9adec7a2eac8',
      queue: 'rec-1796353518618-retry',
      consumerGroup: '__QUEUE_MODE__',
      partitions: ['p1'],
    });
  });

  it('an autoAck batch (lease id "") is outside the contract: queenctl never asks for one (p17)', () => {
    assert.throws(
      () => parsePop({ queue: 'rec-1796353518618-group', group: 'audit' }, answer('p17'), SERVER),
      (error: unknown) => error instanceof BrokerError && /without a lease id/.test(error.message),
    );
  });

  it('lease_held, as the broker documents it for the partition route', () => {
    const held: RawAnswer = { status: 200, headers: {}, body: '{"error":"lease_held","messages":[],"success":false}' };
    assert.deepEqual(parsePop({ queue: 'q', partition: 'p1' }, held, SERVER), { kind: 'lease-held' });
  });

  const outside: Array<[string, string]> = [
    ['not JSON', 'oops'],
    ['an array', '[]'],
    ['success missing', '{"messages":[]}'],
    ['messages not a list', '{"success":true,"leaseId":"L","messages":{}}'],
    [
      'a message without a transactionId',
      '{"success":true,"leaseId":"L","messages":[{"partitionId":"x","partition":"p"}]}',
    ],
    [
      'a message of another lease',
      '{"success":true,"leaseId":"L","messages":' +
        '[{"transactionId":"t","partitionId":"x","partition":"p","leaseId":"M"}]}',
    ],
    [
      'a batch of another queue',
      '{"success":true,"leaseId":"L","queue":"other","messages":' +
        '[{"transactionId":"t","partitionId":"x","partition":"p"}]}',
    ],
    ['a lease id with a control character', '{"success":true,"leaseId":"L\\u001b[2J","messages":[]}'],
  ];
  for (const [name, body] of outside) {
    it(`an answer with ${name} is a broker error, never a batch`, () => {
      assert.throws(
        () => parsePop({ queue: 'q' }, { status: 200, headers: {}, body }, SERVER),
        (error: unknown) => error instanceof BrokerError && !error.transient,
      );
    });
  }

  it('401 and 403 are auth errors; a 5xx is a pop that may have taken a lease, never retried', () => {
    const refused = { status: 401, headers: {}, body: '{"error":"Authentication required"}' };
    assert.throws(() => parsePop({ queue: 'q' }, refused, SERVER), AuthError);
    const proxy = { status: 504, headers: {}, body: '' };
    assert.throws(
      () => parsePop({ queue: 'q' }, proxy, SERVER),
      (error: unknown) => error instanceof BrokerError && !error.transient && /may or may not/.test(error.message),
    );
  });
});

describe('popPath', () => {
  it('percent-encodes names, sends only what was given, never autoAck', () => {
    assert.equal(popPath({ queue: 'orders' }), '/api/v1/pop/queue/orders');
    const path = popPath({ queue: 'a b', partition: 'p?1', group: 'billing', batch: 10, partitions: 2, waitMs: 5000 });
    assert.equal(
      path,
      '/api/v1/pop/queue/a%20b/partition/p%3F1?batch=10&partitions=2&consumerGroup=billing&wait=true&timeout=5000',
    );
    assert.doesNotMatch(path, /autoAck/);
    assert.equal(popPath({ queue: 'q', group: '__QUEUE_MODE__' }), '/api/v1/pop/queue/q');
  });
});

describe('parseAckAnswer: the recorded answers', () => {
  const retry = (): BatchRecord => batchOf('p8', 'rec-1796353518618-retry');

  it('a retry of the whole batch: both acked, the lease released (b1)', () => {
    const results = parseAckAnswer(retry(), answer('b1'), SERVER);
    assert.deepEqual(
      results.map((r) => [r.success, r.dlq, r.leaseReleased]),
      [
        [true, false, true],
        [true, false, true],
      ],
    );
  });

  it('the second failed round: the last message dead-lettered, reported per message (b3)', () => {
    const results = parseAckAnswer(retry(), answer('b3'), SERVER);
    assert.deepEqual(
      results.map((r) => [r.success, r.dlq]),
      [
        [true, false],
        [true, true],
      ],
    );
  });

  it('a mixed answer: one acked, one refused for the lease, at HTTP 200 (b5)', () => {
    const results = parseAckAnswer(batchOf('p13', 'rec-1796353518618-mixed'), answer('b5'), SERVER);
    assert.deepEqual(
      results.map((r) => [r.success, r.error, refusedForLease(r)]),
      [
        [true, null, false],
        [false, LEASE_REFUSED, true],
      ],
    );
  });

  it('an ack after expiry: every message refused for the lease (b7)', () => {
    const results = parseAckAnswer(batchOf('p14', 'rec-1796353518618-expired'), answer('b7'), SERVER);
    assert.ok(results.every(refusedForLease));
  });

  it('results are matched by transactionId, not by position', () => {
    const record = batchOf('p13', 'rec-1796353518618-mixed');
    const reversed = JSON.stringify([...JSON.parse(answer('b5').body)].reverse());
    const results = parseAckAnswer(record, { status: 200, headers: {}, body: reversed }, SERVER);
    assert.deepEqual(
      results.map((r) => r.success),
      [true, false],
    );
  });

  it('Message not found is a refusal, not for the lease (a8)', () => {
    const record: BatchRecord = {
      leaseId: 'L',
      queue: 'q',
      consumerGroup: '__QUEUE_MODE__',
      partitions: ['p1'],
      expiresAt: null,
      messages: [{ transactionId: '00000000-0000-0000-0000-000000000001', partitionId: 'x', partition: 'p1' }],
    };
    const [result] = parseAckAnswer(record, answer('a8'), SERVER);
    assert.equal(result?.success, false);
    assert.equal(result?.error, 'Message not found');
    assert.equal(refusedForLease(result as never), false);
  });

  it('a 400 acked nothing and is not retried (a5)', () => {
    assert.throws(
      () => parseAckAnswer(retry(), answer('a5'), SERVER),
      (error: unknown) =>
        error instanceof BrokerError &&
        !error.transient &&
        !(error instanceof AckOutcomeUnknown) &&
        /partitionId is required/.test(error.message) &&
        /nothing was acked/.test(error.message),
    );
  });

  it('a 5xx, an answer missing a message and a body not JSON are acks of unknown outcome', () => {
    const record = retry();
    const bodies: RawAnswer[] = [
      { status: 502, headers: {}, body: '' },
      { status: 200, headers: {}, body: JSON.stringify([JSON.parse(answer('b1').body)[0]]) },
      { status: 200, headers: {}, body: '<html>' },
    ];
    for (const raw of bodies) {
      assert.throws(
        () => parseAckAnswer(record, raw, SERVER),
        (error: unknown) =>
          error instanceof AckOutcomeUnknown && !error.transient && /may or may not/.test(error.message),
      );
    }
  });
});

describe('ackBatchBody', () => {
  it('every message with the lease id, the consumer group at the top level only', () => {
    const record = batchOf('p16', 'rec-1796353518618-group', 'billing');
    const body = JSON.parse(ackBatchBody(record, ackItems(record, 'retry', 'why')));
    assert.deepEqual(Object.keys(body), ['acknowledgments', 'consumerGroup']);
    assert.equal(body.consumerGroup, 'billing');
    for (const ack of body.acknowledgments) {
      assert.deepEqual(Object.keys(ack), ['transactionId', 'partitionId', 'leaseId', 'status', 'error']);
      assert.equal(ack.leaseId, record.leaseId);
      assert.equal(ack.status, 'retry');
      assert.equal(ack.error, 'why');
    }
  });

  it('refuses to build an empty batch, which the broker never answers', () => {
    const record = { ...batchOf('p16', 'rec-1796353518618-group', 'billing'), messages: [] };
    assert.throws(() => ackBatchBody(record, []), /never sent/);
  });
});

describe('parseBatchRecord', () => {
  const good = (): BatchRecord => ({
    ...batchOf('p7', 'rec-1796353518618-ack'),
    expiresAt: '2026-12-04T03:06:20.103Z',
  });

  it('reads back what acquire writes', () => {
    const record = good();
    assert.deepEqual(parseBatchRecord(JSON.stringify(record), 'batch.json'), record);
  });

  const bad: Array<[string, (record: Record<string, unknown>) => unknown]> = [
    ['invalid JSON', () => '{"leaseId":'],
    ['an array', () => []],
    ['no lease id', (r) => ({ ...r, leaseId: undefined })],
    ['an empty lease id', (r) => ({ ...r, leaseId: '' })],
    ['a queue with a slash', (r) => ({ ...r, queue: 'a/b' })],
    ['a queue with ..', (r) => ({ ...r, queue: '..' })],
    ['a group with a control character', (r) => ({ ...r, consumerGroup: 'x\u001b[2J' })],
    ['no messages', (r) => ({ ...r, messages: [] })],
    ['a message without partitionId', (r) => ({ ...r, messages: [{ transactionId: 't', partition: 'p1' }] })],
    [
      'a message twice',
      (r) => ({ ...r, messages: [...(r.messages as unknown[]), ...(r.messages as unknown[]).slice(0, 1)] }),
    ],
  ];
  for (const [name, change] of bad) {
    it(`refuses ${name}: exit 1, nothing sent`, () => {
      const changed = change(good() as unknown as Record<string, unknown>);
      const text = typeof changed === 'string' ? changed : JSON.stringify(changed);
      assert.throws(
        () => parseBatchRecord(text, 'batch.json'),
        (error: unknown) => error instanceof UsageError && /nothing was sent/.test(error.message),
      );
    });
  }
});
