import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  heldLeases,
  parseGroupList,
  parseGroupPartitions,
  type ListFilter,
  type PartitionHolder,
} from '../../src/broker/consumer-groups.js';
import type { RawAnswer } from '../../src/broker/contract.js';
import { AuthError, BrokerError } from '../../src/exit.js';

const SERVER = 'http://broker.test:6632';
const QUEUE_MODE_ID = '01a2375f-9fc1-7000-8e29-c05fb9c710f8';
const BILLING_ID = '01a2375f-a054-7000-a320-fc18ec828e4d';
const INVOICE_X_ID = '01a2375f-a0e6-7000-ab3b-149c9412a450';
const NO_FILTER: ListFilter = { queues: [], partitions: [], all: false };

/** The real broker's answers (test/fixtures/real-broker-consumer-groups.txt), in recorded order, by path. */
function recorded(): { path: string; answer: RawAnswer }[] {
  const text = readFileSync(new URL('../../../test/fixtures/real-broker-consumer-groups.txt', import.meta.url), 'utf8');
  const answers: { path: string; answer: RawAnswer }[] = [];
  for (const block of text.split(/^\$ curl -s -i /m).slice(1)) {
    const [url = '', ...lines] = block.split('\n');
    const status = /^HTTP\/1\.1 (\d+)/.exec(lines[0] ?? '');
    if (!status) continue;
    const blank = lines.indexOf('');
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1, blank)) {
      const at = line.indexOf(':');
      headers[line.slice(0, at).toLowerCase()] = line.slice(at + 1).trim();
    }
    const body = lines
      .slice(blank + 1)
      .join('\n')
      .slice(0, Number(headers['content-length']));
    answers.push({ path: new URL(url).pathname, answer: { status: Number(status[1]), headers, body } });
  }
  return answers;
}

function ok(body: unknown): RawAnswer {
  return { status: 200, headers: {}, body: typeof body === 'string' ? body : JSON.stringify(body) };
}

function partitionsOf(rows: unknown[]): RawAnswer {
  return ok({ orders: { partitions: rows } });
}

function holder(overrides: Partial<PartitionHolder>): PartitionHolder {
  return { group: 'billing', queue: 'orders', partition: 'p1', leaseId: 'L1', leaseActive: true, ...overrides };
}

describe('consumer groups: the real broker recorded', () => {
  const answers = recorded();
  const find = (path: string, nth = 0): RawAnswer => {
    const found = answers.filter((entry) => entry.path === path)[nth];
    assert.ok(found, `a recorded answer for ${path}`);
    return found.answer;
  };

  it('the group list names every (group, queue) pair', () => {
    assert.deepEqual(parseGroupList(find('/api/v1/consumer-groups'), SERVER), [
      { group: '__QUEUE_MODE__', queue: 'invoices' },
      { group: '__QUEUE_MODE__', queue: 'orders' },
      { group: 'billing', queue: 'orders' },
    ]);
  });

  it('a multi-partition pop is one lease with its partitions gathered; an acked partition is not listed', () => {
    const holders = parseGroupPartitions('__QUEUE_MODE__', find('/api/v1/consumer-groups/__QUEUE_MODE__'), SERVER);
    assert.equal(holders.length, 4, 'x, y (acked), p1, p2');
    assert.deepEqual(heldLeases(holders, NO_FILTER), [
      { leaseId: INVOICE_X_ID, consumerGroup: '__QUEUE_MODE__', queue: 'invoices', partitions: ['x'], live: true },
      {
        leaseId: QUEUE_MODE_ID,
        consumerGroup: '__QUEUE_MODE__',
        queue: 'orders',
        partitions: ['p1', 'p2'],
        live: true,
      },
    ]);
  });

  it('an expired holder keeps its id: listed only with --all, as not live', () => {
    const later = find('/api/v1/consumer-groups/__QUEUE_MODE__', 1);
    const holders = parseGroupPartitions('__QUEUE_MODE__', later, SERVER);
    assert.deepEqual(
      heldLeases(holders, NO_FILTER).map((lease) => lease.leaseId),
      [QUEUE_MODE_ID],
    );
    const all = heldLeases(holders, { ...NO_FILTER, all: true });
    assert.deepEqual(
      all.map((lease) => [lease.leaseId, lease.live]),
      [
        [INVOICE_X_ID, false],
        [QUEUE_MODE_ID, true],
      ],
    );
  });

  it('a named group answers its own holders', () => {
    const holders = parseGroupPartitions('billing', find('/api/v1/consumer-groups/billing'), SERVER);
    assert.deepEqual(heldLeases(holders, NO_FILTER), [
      { leaseId: BILLING_ID, consumerGroup: 'billing', queue: 'orders', partitions: ['p2'], live: true },
    ]);
  });

  it('an unknown group is 200 with an empty body: nothing found, not an error', () => {
    const answer = find('/api/v1/consumer-groups/nobody');
    assert.equal(answer.body, '');
    assert.deepEqual(parseGroupPartitions('nobody', answer, SERVER), []);
  });

  it('the per-queue path the broker does not have is a 404 naming the route', () => {
    const answer = find('/api/v1/consumer-groups/__QUEUE_MODE__/queues/orders');
    assert.throws(
      () => parseGroupPartitions('x', answer, SERVER),
      (error: unknown) =>
        error instanceof BrokerError && /has no consumer-group route \(HTTP 404\)/.test(error.message),
    );
  });
});

describe('consumer groups: answers outside the contract are broker errors quoting them', () => {
  const cases: [string, RawAnswer][] = [
    ['a list that is not an array', ok({ groups: [] })],
    ['a list entry without a name', ok([{ queueName: 'orders' }])],
    ['a body that is not JSON', ok('<html>')],
  ];
  for (const [name, answer] of cases) {
    it(`list: ${name}`, () => {
      assert.throws(
        () => parseGroupList(answer, SERVER),
        (error: unknown) =>
          error instanceof BrokerError && !error.transient && /outside the consumer-group contract/.test(error.message),
      );
    });
  }
  const partitionCases: [string, RawAnswer][] = [
    ['an array instead of an object', ok([])],
    ['a queue without partitions', ok({ orders: {} })],
    ['a partition without a name', partitionsOf([{ workerId: null, leaseActive: false }])],
    ['a workerId that is a number', partitionsOf([{ partition: 'p1', workerId: 7, leaseActive: true }])],
    ['an empty workerId', partitionsOf([{ partition: 'p1', workerId: '', leaseActive: true }])],
    ['leaseActive missing', partitionsOf([{ partition: 'p1', workerId: 'L1' }])],
    ['leaseActive a string', partitionsOf([{ partition: 'p1', workerId: 'L1', leaseActive: 'true' }])],
    ['a body cut off mid-JSON', ok('{')],
  ];
  for (const [name, answer] of partitionCases) {
    it(`group: ${name}`, () => {
      assert.throws(
        () => parseGroupPartitions('billing', answer, SERVER),
        (error: unknown) => error instanceof BrokerError && /outside the consumer-group contract/.test(error.message),
      );
    });
  }

  it('401 and 403 are authentication errors; 403 says which role listing needs', () => {
    const refused = { status: 403, headers: {}, body: '{"error":"Insufficient permissions"}' };
    assert.throws(
      () => parseGroupList(refused, SERVER),
      (error: unknown) => error instanceof AuthError && /read-only role/.test(error.hint ?? ''),
    );
    const unauthenticated = { status: 401, headers: {}, body: '{"error":"Authentication required"}' };
    assert.throws(() => parseGroupPartitions('billing', unauthenticated, SERVER), AuthError);
  });

  it('503 is transient, 500 is not', () => {
    assert.throws(
      () => parseGroupList({ status: 503, headers: {}, body: '' }, SERVER),
      (error: unknown) => error instanceof BrokerError && error.transient,
    );
    assert.throws(
      () => parseGroupList({ status: 500, headers: {}, body: '{"error":"boom"}' }, SERVER),
      (error: unknown) => error instanceof BrokerError && !error.transient,
    );
  });
});

describe('heldLeases: filters, gathering and order', () => {
  const holders = [
    holder({ queue: 'orders', partition: 'p10', leaseId: 'A' }),
    holder({ queue: 'orders', partition: 'p2', leaseId: 'A' }),
    holder({ queue: 'orders', partition: 'p3', leaseId: 'B', leaseActive: false }),
    holder({ queue: 'orders', partition: 'p4', leaseId: null }),
    holder({ queue: 'invoices', partition: 'x', leaseId: 'C' }),
    holder({ group: 'analytics', queue: 'orders', partition: 'p1', leaseId: 'D' }),
  ];

  it('sorts by group, queue, then partition in natural order (p2 before p10)', () => {
    const leases = heldLeases(holders, NO_FILTER);
    assert.deepEqual(
      leases.map((lease) => [lease.consumerGroup, lease.queue, lease.partitions.join(',')]),
      [
        ['analytics', 'orders', 'p1'],
        ['billing', 'invoices', 'x'],
        ['billing', 'orders', 'p2,p10'],
      ],
    );
  });

  it('--queue keeps the leases of any named queue', () => {
    const leases = heldLeases(holders, { ...NO_FILTER, queues: ['invoices', 'nosuch'] });
    assert.deepEqual(
      leases.map((lease) => lease.leaseId),
      ['C'],
    );
  });

  it('--partition keeps a lease holding any named partition, and shows all it holds', () => {
    const leases = heldLeases(holders, { ...NO_FILTER, partitions: ['p10'] });
    assert.deepEqual(leases, [
      { leaseId: 'A', consumerGroup: 'billing', queue: 'orders', partitions: ['p2', 'p10'], live: true },
    ]);
  });

  it('--queue and --partition together: both must hold', () => {
    assert.deepEqual(heldLeases(holders, { ...NO_FILTER, queues: ['invoices'], partitions: ['p1'] }), []);
    assert.deepEqual(
      heldLeases(holders, { ...NO_FILTER, queues: ['orders'], partitions: ['p1'] }).map((lease) => lease.leaseId),
      ['D'],
    );
  });

  it('--all adds the stale holder as not live; a partition without a holder never appears', () => {
    const leases = heldLeases(holders, { ...NO_FILTER, all: true });
    assert.deepEqual(
      leases.map((lease) => [lease.leaseId, lease.live]),
      [
        ['D', true],
        ['C', true],
        ['A', true],
        ['B', false],
      ],
    );
    assert.ok(!leases.some((lease) => lease.partitions.includes('p4')));
  });

  it('5,000 partitions of one group are gathered in well under a second', () => {
    const many = Array.from({ length: 5000 }, (_, i) =>
      holder({ partition: `p${i}`, leaseId: `lease-${Math.floor(i / 2)}` }),
    );
    const body = JSON.stringify({
      orders: {
        partitions: many.map((row) => ({
          partition: row.partition,
          workerId: row.leaseId,
          leaseActive: true,
          lastConsumedAt: null,
          offsetLag: 1,
          timeLagSeconds: 1,
          totalConsumed: 0,
        })),
      },
    });
    const leases = heldLeases(parseGroupPartitions('billing', ok(body), SERVER), NO_FILTER);
    assert.equal(leases.length, 2500);
    assert.deepEqual(leases[0]?.partitions, ['p0', 'p1']);
    assert.deepEqual(leases.at(-1)?.partitions, ['p4998', 'p4999']);
  });
});
