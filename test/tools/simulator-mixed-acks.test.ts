/**
 * One batch acked with several statuses: the simulator against the real broker's recording
 * (test/fixtures/real-broker-mixed-acks.txt; docs/broker.md, "One batch, several outcomes").
 * Every scenario m1..m6 is replayed over HTTP with the recorded queue names, payloads and
 * transaction ids (pushed through the control interface), so the ack answers must match the
 * recording byte for byte; pops match once their lease ids, partition ids, message ids and
 * times are set aside; the final state of every message must match the database's.
 *
 * The recording does not say which route its "next pop" used; m6's `lease_held` is an answer
 * only the partition route gives, so every next pop here is the partition route's.
 */
import assert from 'node:assert/strict';
import { before, beforeEach, describe, it } from 'node:test';
import { type MessageState, type Simulator, SimulatorControl } from '../../tools/simulator/index.js';
import { recordedAnswers, recordedStates } from '../support/recorded.js';
import { sharedSimulator } from '../support/shared.js';

const FIXTURE = 'real-broker-mixed-acks.txt';
/** Keyed by the case's title without its parenthesis: `m1 ack, in one request: 1:completed …`. */
const recorded = recordedAnswers(FIXTURE, (title) => title.replace(/ \(.*$/, '').trim());
const states = recordedStates(FIXTURE);
const GROUP = '__QUEUE_MODE__';
/** No request of these tests may take long: the simulator answers at once. */
const DEADLINE_MS = 5_000;

const simulator = sharedSimulator();
let sim: Simulator;
let control: SimulatorControl;
beforeEach(async () => {
  sim = simulator();
  control = new SimulatorControl(sim.url);
  // The recording's extend answers are the array shape of the open-source broker.
  await control.configure({ shape: 'array' });
});

interface Message {
  transactionId: string;
  partitionId: string;
  partition: string;
  leaseId: string;
  data: { n: number };
}
interface Pop {
  leaseId: string | null;
  messages: Message[];
  queue?: string;
  success: boolean;
  error?: string;
}

function answer(key: string): string {
  const body = recorded.get(key)?.body;
  assert.ok(body !== undefined, `the recording has "${key}"`);
  return body;
}

/** The titles of the recording that start with `prefix`, in the order they were recorded. */
function titles(prefix: string): string[] {
  return [...recorded.keys()].filter((key) => key.startsWith(prefix));
}

async function http(method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const response = await fetch(`${sim.url}${path}`, {
    method,
    signal: AbortSignal.timeout(DEADLINE_MS),
    ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  return { status: response.status, text: await response.text() };
}

async function pop(queue: string, partition: string | null, query = 'batch=4'): Promise<{ text: string; body: Pop }> {
  const where = partition === null ? '' : `/partition/${encodeURIComponent(partition)}`;
  const { status, text } = await http('GET', `/api/v1/pop/queue/${encodeURIComponent(queue)}${where}?${query}`);
  assert.equal(status, 200, text);
  return { text, body: JSON.parse(text) as Pop };
}

/** A pop's answer with what differs on every run (ids and times) set aside; key order kept. */
function comparable(text: string): string {
  const varying = new Set(['leaseId', 'partitionId', 'id', 'createdAt']);
  return JSON.stringify(JSON.parse(text), (key, value: unknown) =>
    varying.has(key) && typeof value === 'string' && value !== '' ? `<${key}>` : value,
  );
}

/** `1:completed 2:retry` in a case's title → [[1, 'completed'], [2, 'retry']]. */
function statusesOf(title: string): Array<[number, string]> {
  return [...title.matchAll(/(\d+):(\w+)/g)].map((m) => [Number(m[1]), m[2] as string]);
}

/** One batch ack of the popped messages named by n, each with its status, as the recording sent it. */
async function ackBatch(popped: Pop, statuses: Array<[number, string]>): Promise<string> {
  const acknowledgments = statuses.map(([n, status]) => {
    const message = popped.messages.find((m) => m.data.n === n);
    assert.ok(message, `message n=${n} was popped`);
    return {
      transactionId: message.transactionId,
      partitionId: message.partitionId,
      leaseId: popped.leaseId,
      status,
      error: status === 'failed' ? `handler failed on n=${n}` : null,
    };
  });
  const { status, text } = await http('POST', '/api/v1/ack/batch', { acknowledgments, consumerGroup: GROUP });
  assert.equal(status, 200, text);
  return text;
}

/** A fresh queue named as recorded, holding the recorded payloads under their recorded transaction ids. */
async function replayQueue(firstPop: string, retryLimit: number): Promise<{ queue: string; byN: Map<number, string> }> {
  const recordedPop = JSON.parse(firstPop) as Required<Pop>;
  const queue = recordedPop.queue;
  await control.createQueue({ name: queue, partitions: ['p1'], leaseTime: 30, retryLimit });
  const items = recordedPop.messages.map((m) => ({ data: m.data, transactionId: m.transactionId }));
  assert.deepEqual(
    await control.pushItems(queue, items, 'p1'),
    items.map((item) => item.transactionId),
  );
  return { queue, byN: new Map(recordedPop.messages.map((m) => [m.data.n, m.transactionId])) };
}

/** Each message's state by n, as the control interface reads it over HTTP. */
async function statesByN(queue: string, byN: Map<number, string>): Promise<Map<number, MessageState>> {
  const view = await control.messageStates(queue, GROUP);
  assert.ok(view, `the simulator has ${queue}`);
  const result = new Map<number, MessageState>();
  for (const [n, transactionId] of byN) {
    const state = view.messages.find((m) => m.transactionId === transactionId);
    assert.ok(state, `a state for n=${n}`);
    result.set(n, state);
  }
  return result;
}

describe('simulator: one batch, several outcomes (m1..m5 as recorded)', () => {
  before(() => {
    assert.deepEqual(
      ['m1', 'm2', 'm3', 'm4', 'm5'].map((m) => titles(`${m} `).length),
      [4, 4, 4, 4, 4],
      'each scenario has its pop, ack, extend and next pop',
    );
  });

  for (const scenario of ['m1', 'm2', 'm3', 'm4', 'm5']) {
    const ackTitle = titles(`${scenario} ack`)[0] ?? '';
    it(`${ackTitle}: the same answers and the same final states`, async () => {
      const firstPop = answer(`${scenario} pop of all four`);
      const { queue, byN } = await replayQueue(firstPop, 3);

      const popped = await pop(queue, 'p1');
      assert.equal(comparable(popped.text), comparable(firstPop), 'the pop of all four');

      const statuses = statusesOf(ackTitle);
      assert.equal(await ackBatch(popped.body, statuses), answer(ackTitle), 'every element of the ack answer');

      const leaseId = popped.body.leaseId as string;
      const extended = await http('POST', `/api/v1/lease/${leaseId}/extend`, { seconds: 30 });
      const recordedExtend = answer(`${scenario} extend after the ack`);
      const recordedLeaseId = (JSON.parse(firstPop) as Pop).leaseId as string;
      assert.equal(extended.text, recordedExtend.replace(recordedLeaseId, leaseId), 'the lease is gone');

      const next = await pop(queue, 'p1');
      assert.equal(comparable(next.text), comparable(answer(`${scenario} the next pop`)), 'the next pop');

      const expected = states.get(queue);
      assert.ok(expected, `the recording has the state of ${queue}`);
      const actual = await statesByN(queue, byN);
      assert.deepEqual(
        new Map([...actual].map(([n, state]) => [n, state.state])),
        expected,
        'consumed, pending and dead-lettered as in the database',
      );
      // A consumed message whose own ack was not `completed` was lost: the cursor passed it.
      for (const [n, status] of statuses) {
        const state = actual.get(n) as MessageState;
        const lost = state.state === 'consumed' && status !== 'completed';
        assert.equal(state.settledBy, lost ? 'cursor' : state.state === 'pending' ? null : 'completed', `n=${n}`);
      }
    });
  }
});

describe('simulator: m6, failed at the retry limit leaves the rest of the batch under the lease', () => {
  it('answers every round as recorded, dead-letters n=2, and holds n=3 and n=4 (m6)', async () => {
    const rounds = titles('m6 round').filter((title) => title.endsWith(': pop'));
    assert.equal(rounds.length, 3, 'three rounds recorded');
    const { queue, byN } = await replayQueue(answer('m6 round 1: pop'), 2);
    let leaseId = '';
    for (const [index, popTitle] of rounds.entries()) {
      const round = `m6 round ${index + 1}`;
      const popped = await pop(queue, 'p1');
      assert.equal(comparable(popped.text), comparable(answer(popTitle)), `${round}: the pop`);
      const ackTitle = titles(`${round}: ack`)[0] ?? '';
      assert.equal(await ackBatch(popped.body, statusesOf(ackTitle)), answer(ackTitle), `${round}: the ack`);
      leaseId = popped.body.leaseId as string;
    }
    const next = await pop(queue, 'p1');
    assert.equal(next.text, answer('m6 the next pop'), 'lease_held: the lease of round 3 holds n=3 and n=4');
    assert.equal(sim.lease(leaseId)?.rows.length, 1, 'the lease of round 3 is still live');

    const actual = await statesByN(queue, byN);
    assert.deepEqual(new Map([...actual].map(([n, state]) => [n, state.state])), states.get(queue));
    assert.equal(actual.get(2)?.settledBy, 'dead-letter');

    const dlq = JSON.parse(answer('m6 the dead-letter queue')).messages as Array<Record<string, unknown>>;
    const letters = (await control.queue(queue))?.deadLetters ?? [];
    const pick = (letter: Record<string, unknown>): unknown[] =>
      ['transactionId', 'partition', 'consumerGroup', 'data', 'errorMessage', 'retryCount'].map((key) => letter[key]);
    assert.deepEqual(
      letters.map((letter) => pick(letter as unknown as Record<string, unknown>)),
      dlq.map(pick),
      'the dead letter as the broker listed it',
    );

    assert.equal(await control.expire(leaseId), true);
    assert.deepEqual(
      (await pop(queue, 'p1')).body.messages.map((m) => m.data.n),
      [3, 4],
      'once that lease runs out, n=3 and n=4 are taken again',
    );
  });

  /** m6 up to round 3's dead-lettering, on a queue of its own; resolves to round 3's lease. */
  async function m6UntilDeadLettered(suffix: string): Promise<{ queue: string; round3: Pop }> {
    const queue = `m6-${suffix}`;
    await control.createQueue({ name: queue, partitions: ['p1'], leaseTime: 30, retryLimit: 2 });
    await control.push(queue, [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }], 'p1');
    let popped = (await pop(queue, 'p1')).body;
    await ackBatch(popped, [
      [1, 'completed'],
      [2, 'failed'],
    ]);
    popped = (await pop(queue, 'p1')).body;
    await ackBatch(popped, [[2, 'failed']]);
    popped = (await pop(queue, 'p1')).body;
    const last = JSON.parse(await ackBatch(popped, [[2, 'failed']])) as Array<{ dlq: boolean; leaseReleased: boolean }>;
    assert.deepEqual([last[0]?.dlq, last[0]?.leaseReleased], [true, false]);
    return { queue, round3: popped };
  }

  it('a retry of n=3 under that lease releases it and redelivers n=3 and n=4, as in m3', async () => {
    const { queue, round3 } = await m6UntilDeadLettered('retry');
    const [answerOf] = JSON.parse(await ackBatch(round3, [[3, 'retry']])) as Array<{ leaseReleased: boolean }>;
    assert.equal(answerOf?.leaseReleased, true);
    const next = (await pop(queue, 'p1')).body;
    assert.deepEqual(
      next.messages.map((m) => m.data.n),
      [3, 4],
    );
    assert.notEqual(next.leaseId, round3.leaseId);
  });

  it('completed for n=3 and n=4 under that lease releases it: the dead-lettering counted as an ack', async () => {
    const { queue, round3 } = await m6UntilDeadLettered('completed');
    const answers = JSON.parse(
      await ackBatch(round3, [
        [3, 'completed'],
        [4, 'completed'],
      ]),
    ) as Array<{ leaseReleased: boolean }>;
    assert.deepEqual(
      answers.map((a) => a.leaseReleased),
      [false, true],
    );
    const view = await control.messageStates(queue);
    assert.deepEqual(
      view?.messages.map((m) => m.settledBy),
      ['completed', 'dead-letter', 'completed', 'completed'],
    );
  });
});

describe('simulator: what was observed after the recording (docs/broker.md)', () => {
  it('a one-message batch failed at the limit answers leaseReleased false, yet its lease is gone', async () => {
    await control.createQueue({ name: 'one-at-limit', partitions: ['p1'], leaseTime: 30, retryLimit: 1 });
    await control.push('one-at-limit', [{ n: 1 }, { n: 2 }], 'p1');
    let popped = (await pop('one-at-limit', 'p1', 'batch=1')).body;
    await ackBatch(popped, [[1, 'failed']]);
    popped = (await pop('one-at-limit', 'p1', 'batch=1')).body;
    assert.deepEqual(
      popped.messages.map((m) => m.data.n),
      [1],
    );
    const [result] = JSON.parse(await ackBatch(popped, [[1, 'failed']])) as Array<{
      dlq: boolean;
      leaseReleased: boolean;
    }>;
    assert.deepEqual([result?.dlq, result?.leaseReleased], [true, false]);
    const extended = await http('POST', `/api/v1/lease/${popped.leaseId}/extend`, { seconds: 30 });
    assert.equal(JSON.parse(extended.text)[0]?.error, 'Lease not found');
    assert.deepEqual(
      (await pop('one-at-limit', 'p1', 'batch=1')).body.messages.map((m) => m.data.n),
      [2],
      'the next pop of the partition takes the next message',
    );
  });

  it('the partition route does not decode its segment; the queue route hands such partitions out', async () => {
    await control.createQueue({ name: 'odd-names', partitions: ['a b', 'x/y'] });
    await control.push('odd-names', [{ n: 1 }], 'a b');
    await control.push('odd-names', [{ n: 2 }], 'x/y');
    for (const encoded of ['a%20b', 'x%2Fy']) {
      const { text } = await http('GET', `/api/v1/pop/queue/odd-names/partition/${encoded}?batch=5`);
      assert.equal(text, '{"error":"partition_not_found","messages":[],"success":false}', encoded);
    }
    const taken = (await pop('odd-names', null, 'batch=5&partitions=2')).body;
    assert.deepEqual(
      taken.messages.map((m) => [m.partition, m.data.n]),
      [
        ['a b', 1],
        ['x/y', 2],
      ],
    );
  });
});

describe('simulator control: pushes and message states for tests of a consumer', () => {
  it('stores producer-chosen transaction ids and any partition name, and pops them unchanged', async () => {
    const names = ['with space', 'quote"and\'apostrophe', 'star*', 'tab\tnewline\nbell\u0007', 'nul\u0000end'];
    await control.createQueue({ name: 'any-names', partitions: names });
    for (const [i, name] of names.entries()) {
      await control.pushItems('any-names', [{ data: { i }, transactionId: `tx-${i}-${name}` }], name);
    }
    const taken = (await pop('any-names', null, `batch=10&partitions=${names.length}`)).body;
    assert.deepEqual(
      taken.messages.map((m) => [m.partition, m.transactionId, m.data]).sort(),
      names.map((name, i) => [name, `tx-${i}-${name}`, { i }]).sort(),
    );
    const view = await control.messageStates('any-names');
    assert.deepEqual(view?.messages.map((m) => m.partition).sort(), [...names].sort());
  });

  it('refuses a transaction id already in the partition, storing nothing of that push (409)', async () => {
    await control.createQueue({ name: 'dupes', partitions: ['p1'] });
    await control.pushItems('dupes', [{ data: 1, transactionId: 'same' }], 'p1');
    await assert.rejects(
      control.pushItems(
        'dupes',
        [
          { data: 2, transactionId: 'other' },
          { data: 3, transactionId: 'same' },
        ],
        'p1',
      ),
      (error: Error & { status?: number }) => error.status === 409,
    );
    assert.equal((await control.messageStates('dupes'))?.messages.length, 1);
  });

  it('stores data nested 4,500 levels deep and pops its text unchanged', async () => {
    const depth = 4_500;
    const deep = `${'{"a":['.repeat(depth)}"leaf"${']}'.repeat(depth)}`;
    // (Deeper than JSON.stringify reaches on Node 20 to 24, not on Node 26: the text must be kept
    // as pushed either way.)
    await control.createQueue({ name: 'deep', partitions: ['p1'] });
    const body = `{"partition":"p1","items":[{"transactionId":"deep-1","data":${deep}}]}`;
    const response = await fetch(`${sim.url}/_sim/queues/deep/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(DEADLINE_MS),
    });
    assert.equal(response.status, 201, await response.clone().text());
    const { text } = await pop('deep', 'p1', 'batch=1');
    assert.ok(text.includes(`"data":${deep},"id":`), 'the data is spliced in as pushed');
    assert.equal(JSON.parse(text).messages[0].transactionId, 'deep-1');
    // The client pushes such data too (the first message's lease holds p1: another partition).
    await control.pushItems('deep', [{ data: JSON.parse(deep), transactionId: 'deep-2' }], 'p2');
    assert.ok((await pop('deep', 'p2', 'batch=1')).text.includes(`"data":${deep},"id":`));
  });

  it('logs every delivery with its lease id and time, per consumer group', async () => {
    await control.createQueue({ name: 'deliveries', partitions: ['p1'], leaseTime: 30 });
    const [first, second] = await control.push('deliveries', [{ n: 1 }, { n: 2 }], 'p1');
    const query = 'batch=2&consumerGroup=billing';
    const taken = (await pop('deliveries', 'p1', query)).body;
    const acked = await http('POST', '/api/v1/ack/batch', {
      consumerGroup: 'billing',
      acknowledgments: [
        { transactionId: first, partitionId: taken.messages[0]?.partitionId, leaseId: taken.leaseId, status: 'retry' },
      ],
    });
    assert.equal(JSON.parse(acked.text)[0]?.leaseReleased, true);
    const again = (await pop('deliveries', 'p1', query)).body;
    const view = await control.messageStates('deliveries', 'billing');
    const byId = new Map(view?.messages.map((m) => [m.transactionId, m]));
    assert.deepEqual(
      byId.get(first as string)?.deliveries.map((d) => d.leaseId),
      [taken.leaseId, again.leaseId],
    );
    assert.equal(byId.get(first as string)?.acks.retry, 1);
    assert.equal(byId.get(second as string)?.deliveries.length, 2);
    assert.ok(byId.get(first as string)?.deliveries.every((d) => Math.abs(d.at - sim.brokerNow()) < 60_000));
    const queueMode = await control.messageStates('deliveries');
    assert.ok(
      queueMode?.messages.every((m) => m.state === 'pending' && m.deliveries.length === 0),
      'another group saw nothing',
    );
  });
});
