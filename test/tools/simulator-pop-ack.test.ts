/**
 * The simulator's pop and ack routes against the real broker's recorded answers
 * (test/fixtures/real-broker-pop-ack.txt; docs/broker.md#pop-and-ack): the same bodies, keys and
 * statuses, and the same behaviour over several requests (repeats, retry, failed, the dead-letter
 * queue, acks without a lease id, the empty batch that is never answered, the long poll).
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { SimulatorControl, type Simulator } from '../../tools/simulator/index.js';
import { recordedPopAck } from '../support/recorded.js';
import { sharedSimulator } from '../support/shared.js';
import { until } from '../support/until.js';

const recorded = recordedPopAck();
const simulator = sharedSimulator();
let sim: Simulator;

let queueCount = 0;
/** A fresh queue name per test: the shared simulator keeps its queues. */
let queue = '';
beforeEach(() => {
  sim = simulator();
  queue = `q${++queueCount}`;
});

interface Message {
  transactionId: string;
  partitionId: string;
  partition: string;
  leaseId: string;
  data: unknown;
}
interface Pop {
  leaseId: string | null;
  messages: Message[];
  success: boolean;
  error?: string;
  partition?: string;
}
interface AckResult {
  success: boolean;
  error: string | null;
  dlq: boolean;
  leaseReleased: boolean;
  transactionId: string;
}

async function pop(path: string, query = ''): Promise<{ status: number; text: string; body: Pop }> {
  const response = await fetch(`${sim.url}/api/v1/pop/queue/${path}${query ? `?${query}` : ''}`);
  const text = await response.text();
  return { status: response.status, text, body: JSON.parse(text) as Pop };
}

async function post(path: string, body: unknown): Promise<{ status: number; text: string }> {
  const response = await fetch(`${sim.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, text: await response.text() };
}

/** One batch ack of `messages` with `status`, the group at the top level unless `group` is null. */
async function ack(
  messages: Message[],
  leaseId: string | null,
  status = 'completed',
  group: string | null = '__QUEUE_MODE__',
): Promise<AckResult[]> {
  const acknowledgments = messages.map((m) => ({
    transactionId: m.transactionId,
    partitionId: m.partitionId,
    ...(leaseId !== null && { leaseId }),
    status,
    error: null,
  }));
  const { status: code, text } = await post('/api/v1/ack/batch', {
    acknowledgments,
    ...(group !== null && { consumerGroup: group }),
  });
  assert.equal(code, 200, text);
  return JSON.parse(text) as AckResult[];
}

const keys = (text: string): string[] => Object.keys(JSON.parse(text)).sort();
const data = (body: Pop): unknown[] => body.messages.map((m) => (m.data as { n: number }).n);

describe('simulator pop: the recorded answers', () => {
  it('an empty queue and an unknown queue answer exactly as recorded (p1, p3)', async () => {
    sim.createQueue({ name: queue });
    assert.equal((await pop(queue)).text, recorded.get('p1')?.body);
    assert.equal((await pop(`never-${queue}`)).text, recorded.get('p3')?.body);
  });

  it('a lease has the recorded keys, on the top level and on each message (p4)', async () => {
    sim.createQueue({ name: queue, partitions: 3 });
    sim.push(queue, [{ n: 1 }, { n: 2 }], 'p1');
    sim.push(queue, [{ n: 3 }], 'p2');
    const { text, body } = await pop(queue, 'batch=10&partitions=2');
    const real = recorded.get('p4')?.body ?? '';
    assert.deepEqual(keys(text), keys(real));
    assert.deepEqual(Object.keys(body.messages[0] ?? {}), Object.keys(JSON.parse(real).messages[0]));
    assert.deepEqual(data(body), [1, 2, 3]);
    assert.ok(body.messages.every((m) => m.leaseId === body.leaseId));
  });

  it('a long poll that finds nothing answers the recorded shape at its timeout (p2)', async () => {
    sim.createQueue({ name: queue });
    const { body, text } = await pop(queue, 'wait=true&timeout=100');
    assert.deepEqual(keys(text), keys(recorded.get('p2')?.body ?? ''));
    assert.equal(body.leaseId, null);
    assert.equal(body.success, true);
  });

  it('a long poll takes a message pushed while it waits', async () => {
    sim.createQueue({ name: queue });
    const waiting = pop(queue, 'wait=true&timeout=20000');
    setTimeout(() => sim.push(queue, [{ n: 7 }]), 50);
    const { body } = await waiting;
    assert.deepEqual(data(body), [7]);
  });

  it('lease_held for a named partition another lease holds; the queue route finds nothing', async () => {
    sim.createQueue({ name: queue, partitions: 1 });
    sim.push(queue, [{ n: 1 }, { n: 2 }], 'p1');
    assert.equal((await pop(queue)).body.success, true);
    assert.equal((await pop(`${queue}/partition/p1`)).text, '{"error":"lease_held","messages":[],"success":false}');
    assert.equal((await pop(queue)).body.error, 'no_available_partition');
  });

  it("a pop's lease is the extend route's and the consumer-group routes' lease", async () => {
    sim.createQueue({ name: queue, partitions: 1, leaseTime: 30 });
    sim.push(queue, [{ n: 1 }]);
    const { body } = await pop(queue, 'consumerGroup=billing');
    const leaseId = body.leaseId as string;
    assert.equal(sim.lease(leaseId)?.rows[0]?.group, 'billing');
    const renewed = await post(`/api/v1/lease/${leaseId}/extend`, { seconds: 120 });
    assert.equal(JSON.parse(renewed.text).renewed, 1);
    const groups = (await (await fetch(`${sim.url}/api/v1/consumer-groups/billing`)).json()) as Record<
      string,
      { partitions: Array<{ workerId: string }> }
    >;
    assert.equal(groups[queue]?.partitions[0]?.workerId, leaseId);
  });

  it('autoAck delivers with an empty lease id and consumes at once (p17)', async () => {
    sim.createQueue({ name: queue });
    sim.push(queue, [{ n: 1 }]);
    const { body } = await pop(queue, 'autoAck=true');
    assert.equal(body.leaseId, '');
    assert.equal((await pop(queue)).body.error, 'no_available_partition');
  });
});

describe('simulator ack: the recorded behaviour', () => {
  it('answers one element per message with the recorded keys (a2)', async () => {
    sim.createQueue({ name: queue });
    sim.push(queue, [{ n: 1 }]);
    const { body } = await pop(queue);
    const [result] = await ack(body.messages, body.leaseId);
    assert.deepEqual(Object.keys(result ?? {}), Object.keys(JSON.parse(recorded.get('a2')?.body ?? '')[0]));
    assert.equal(result?.success, true);
  });

  it('a repeated ack counts again and releases the lease under the rest of the batch (a2, a3, a4)', async () => {
    sim.createQueue({ name: queue });
    sim.push(queue, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    const { body } = await pop(queue, 'batch=2');
    const [first, second] = body.messages as [Message, Message];
    assert.equal((await ack([first], body.leaseId))[0]?.leaseReleased, false);
    assert.equal(sim.lease(body.leaseId as string)?.rows.length, 1, 'a partial ack leaves the lease live');
    assert.equal((await ack([first], body.leaseId))[0]?.leaseReleased, true, 'the repeat released it');
    const refused = await ack([second], body.leaseId);
    assert.deepEqual([refused[0]?.success, refused[0]?.error], [false, 'Invalid or expired lease']);
    assert.deepEqual(data((await pop(queue, 'batch=5')).body), [2, 3], 'message 2 comes back');
  });

  it('retry redelivers at once and never counts toward the retry limit', async () => {
    sim.createQueue({ name: queue, retryLimit: 2 });
    sim.push(queue, [{ n: 1 }, { n: 2 }]);
    for (let round = 0; round < 4; round++) {
      const { body } = await pop(queue, 'batch=2');
      assert.deepEqual(data(body), [1, 2], `round ${round + 1}`);
      const results = await ack(body.messages, body.leaseId, 'retry');
      assert.ok(results.every((r) => r.success && r.leaseReleased && !r.dlq));
    }
    assert.equal(sim.queue(queue)?.deadLetters.length, 0);
  });

  it('failed counts per partition; at the limit the last is dead-lettered, the first skipped (b3, p11)', async () => {
    sim.createQueue({ name: queue, partitions: ['p1'], retryLimit: 2 });
    sim.push(queue, [{ n: 1 }, { n: 2 }]);
    let popped = (await pop(queue, 'batch=2')).body;
    const round1 = await ack(popped.messages, popped.leaseId, 'failed');
    assert.deepEqual(
      round1.map((r) => [r.dlq, r.leaseReleased]),
      [
        [false, true],
        [false, true],
      ],
    );
    popped = (await pop(queue, 'batch=2')).body;
    const round2 = await ack(popped.messages, popped.leaseId, 'failed');
    assert.equal(
      round2.map((r) => [r.dlq, r.leaseReleased]).join(' '),
      JSON.parse(recorded.get('b3')?.body ?? '')
        .map((r: AckResult) => [r.dlq, r.leaseReleased])
        .join(' '),
    );
    assert.equal((await pop(queue)).body.error, 'no_available_partition', 'the queue route: nothing');
    const empty = (await pop(`${queue}/partition/p1`)).body;
    assert.equal(empty.success, true, 'the partition route: a lease on no messages');
    assert.deepEqual(empty.messages, []);
    assert.equal(typeof empty.leaseId, 'string');
    assert.deepEqual(
      sim.queue(queue)?.deadLetters.map((letter) => [(letter.data as { n: number }).n, letter.retryCount]),
      [[2, 2]],
    );
  });

  it('an ack after expiry is refused, and the next pop gets the same messages (b7, p15)', async () => {
    sim.createQueue({ name: queue });
    sim.push(queue, [{ n: 1 }, { n: 2 }]);
    const first = (await pop(queue, 'batch=2')).body;
    sim.expire(first.leaseId as string);
    assert.ok((await ack(first.messages, first.leaseId)).every((r) => r.error === 'Invalid or expired lease'));
    const second = (await pop(queue, 'batch=2')).body;
    assert.deepEqual(
      second.messages.map((m) => m.transactionId),
      first.messages.map((m) => m.transactionId),
    );
    assert.notEqual(second.leaseId, first.leaseId);
  });

  it('an ack without a lease id is applied unchecked, under the worker that holds the batch (a9, e5)', async () => {
    sim.createQueue({ name: queue });
    sim.push(queue, [{ n: 1 }, { n: 2 }]);
    const first = (await pop(queue, 'batch=2')).body;
    sim.expire(first.leaseId as string);
    const second = (await pop(queue, 'batch=2')).body;
    const [moved] = await ack(first.messages.slice(0, 1), null);
    assert.equal(moved?.success, true);
    const renewed = await post(`/api/v1/lease/${second.leaseId}/extend`, { seconds: 60 });
    assert.equal(JSON.parse(renewed.text).renewed, 1, "the second worker's lease still renews");
    sim.expire(second.leaseId as string);
    assert.deepEqual(data((await pop(queue, 'batch=2')).body), [2], 'the cursor moved past message 1');
  });

  it("an ack without the pop's consumer group is refused; with it, acked (a10, a11)", async () => {
    sim.createQueue({ name: queue });
    sim.push(queue, [{ n: 1 }]);
    const { body } = await pop(queue, 'consumerGroup=billing');
    assert.equal((await ack(body.messages, body.leaseId, 'completed', null))[0]?.error, 'Invalid or expired lease');
    assert.equal((await ack(body.messages, body.leaseId, 'completed', 'billing'))[0]?.success, true);
  });

  it('a status that does not exist and a message that does not exist are refused at 200 (a7, a8)', async () => {
    sim.createQueue({ name: queue });
    sim.push(queue, [{ n: 1 }]);
    const { body } = await pop(queue);
    assert.equal((await ack(body.messages, body.leaseId, 'maybe'))[0]?.error, 'Invalid or expired lease');
    const unknown = [{ ...(body.messages[0] as Message), transactionId: '00000000-0000-0000-0000-000000000001' }];
    assert.equal((await ack(unknown, body.leaseId))[0]?.error, 'Message not found');
  });

  it('answers a missing partitionId and an empty body with the recorded 400s (a5, a6)', async () => {
    const noPartition = await post('/api/v1/ack', { transactionId: 't', leaseId: 'l', status: 'completed' });
    assert.deepEqual([noPartition.status, noPartition.text], [400, recorded.get('a5')?.body]);
    const empty = await post('/api/v1/ack', '');
    assert.deepEqual([empty.status, empty.text], [400, recorded.get('a6')?.body]);
  });

  it('never answers an empty batch: it is held until the client gives up (b6)', async () => {
    const abandoned = fetch(`${sim.url}/api/v1/ack/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"acknowledgments":[]}',
      signal: AbortSignal.timeout(200),
    });
    await assert.rejects(abandoned, (error: Error) => error.name === 'TimeoutError');
    assert.equal(sim.log.at(-1)?.status, null, 'no answer was sent');
  });

  it('lets go of a held empty batch, and of a long poll, once their client goes away', async () => {
    // What the ack and pop routes hold (pop-ack-route.ts), read from outside its interface. The
    // test above left a batch its client abandoned: let go, nothing is held when this one starts.
    const route = (sim as unknown as { popAck: { heldEmptyAcks: number; waiters: Set<unknown> } }).popAck;
    await until(() => route.heldEmptyAcks === 0 && route.waiters.size === 0, 'nothing to be held');
    const batchClient = new AbortController();
    const batch = fetch(`${sim.url}/api/v1/ack/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"acknowledgments":[]}',
      signal: batchClient.signal,
    });
    batch.catch(() => {});
    await until(() => route.heldEmptyAcks === 1, 'the empty batch to be held');
    batchClient.abort();
    await assert.rejects(batch);
    await until(() => route.heldEmptyAcks === 0, 'the held batch to be let go');

    sim.createQueue({ name: queue });
    const pollClient = new AbortController();
    const poll = fetch(`${sim.url}/api/v1/pop/queue/${queue}?wait=true&timeout=60000`, { signal: pollClient.signal });
    poll.catch(() => {});
    await until(() => route.waiters.size === 1, 'the long poll to wait');
    pollClient.abort();
    await assert.rejects(poll);
    await until(() => route.waiters.size === 0, 'the long poll to end');
  });

  it('faults can be restricted to the ack route, and held there by lease id', async () => {
    sim.createQueue({ name: queue });
    sim.push(queue, [{ n: 1 }]);
    sim.inject({ kind: 'status', status: 503, route: 'ack' });
    const { body } = await pop(queue);
    assert.equal(body.success, true, 'the pop is not the ack route');
    const answered = await post('/api/v1/ack/batch', {
      acknowledgments: body.messages.map((m) => ({ ...m, leaseId: body.leaseId, status: 'completed' })),
    });
    assert.equal(answered.status, 503);
    assert.equal(sim.stats().ackRequests >= 1, true);
    assert.equal(sim.log.at(-1)?.leaseId, body.leaseId, 'the log names the lease of the ack');
  });
});

describe('simulator control: queues', () => {
  it('creates queues, pushes and reads them through /_sim/', async () => {
    const control = new SimulatorControl(sim.url);
    const made = await control.createQueue({ name: queue, partitions: ['a', 'b'], leaseTime: 5, retryLimit: 1 });
    assert.deepEqual(
      made.partitions.map((p) => p.name),
      ['a', 'b'],
    );
    const ids = await control.push(queue, [{ n: 1 }, { n: 2 }], 'b');
    assert.equal(ids.length, 2);
    const { body } = await pop(`${queue}/partition/b`, 'batch=5');
    assert.deepEqual(
      body.messages.map((m) => m.transactionId),
      ids,
    );
    assert.equal((await control.queue(queue))?.leaseTime, 5);
    assert.equal(await control.queue(`none-${queue}`), undefined);
  });
});
