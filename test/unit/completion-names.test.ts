/**
 * `__complete groups|queues|partitions`: the broker's names for --group, --queue, --partition and
 * a verb's <queue>, each once; names a verb would refuse or a terminal would not show as they are
 * left out (docs/security.md#outside-text-is-data); nothing at all, quickly, when the broker fails.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { GroupQueue, PartitionHolder } from '../../src/broker/consumer-groups.js';
import { type BrokerNames, completeBrokerNames, isNameCandidate } from '../../src/commands/completion.js';
import type { ListClient } from '../../src/commands/lease/list.js';
import { BrokerError } from '../../src/exit.js';
import { bufferIO, instantClock } from '../support/fakes.js';

/** Names nobody can type as one word, or that a terminal would act on, or the name rules refuse. */
const UNTYPABLE = ['a b', 'tab\there', 'line\nbreak', 'x\u001b[2J', '\u202eevil', ' lead', '', '.', '..'];

interface Broker {
  groups: () => Promise<GroupQueue[]>;
  partitions?: (group: string) => Promise<PartitionHolder[]>;
}

function client(broker: Broker, calls: string[]): ListClient {
  return {
    extend: async () => {
      throw new Error('completion never renews');
    },
    consumerGroups: async () => {
      calls.push('groups');
      return broker.groups();
    },
    consumerGroup: async (group) => {
      calls.push(`group ${group}`);
      return broker.partitions ? broker.partitions(group) : [];
    },
  };
}

async function complete(what: BrokerNames, broker: Broker, budgetMs = 5_000) {
  const io = bufferIO();
  const calls: string[] = [];
  const code = await completeBrokerNames(
    what,
    { io, client: client(broker, calls), clock: instantClock, signal: new AbortController().signal },
    budgetMs,
  );
  return { code, lines: io.stdout.text.split('\n').filter(Boolean), stderr: io.stderr.text, calls };
}

const pairs = (...entries: Array<[string, string]>): GroupQueue[] =>
  entries.map(([group, queue]) => ({ group, queue }));

describe('__complete groups, queues, partitions', () => {
  it('groups and queues: each name once, in the broker order, from one request', async () => {
    const broker = {
      groups: async () => pairs(['billing', 'orders'], ['billing', 'invoices'], ['__QUEUE_MODE__', 'orders']),
    };
    const groups = await complete('groups', broker);
    assert.deepEqual(groups.lines, ['billing', '__QUEUE_MODE__']);
    assert.deepEqual(groups.calls, ['groups']);
    const queues = await complete('queues', broker);
    assert.deepEqual(queues.lines, ['orders', 'invoices']);
    assert.equal(queues.code, 0);
  });

  it('partitions: those of every group, each once', async () => {
    const holder = (group: string, partition: string): PartitionHolder => ({
      group,
      queue: 'orders',
      partition,
      leaseId: null,
      leaseActive: false,
    });
    const { lines, calls } = await complete('partitions', {
      groups: async () => pairs(['billing', 'orders'], ['audit', 'orders']),
      partitions: async (group) => [holder(group, 'eu-1'), holder(group, group === 'audit' ? 'us-2' : 'eu-1')],
    });
    assert.deepEqual(lines, ['eu-1', 'us-2']);
    assert.deepEqual(calls.sort(), ['group audit', 'group billing', 'groups']);
  });

  it('leaves out names with whitespace, controls, bidi overrides, and names the rules refuse', async () => {
    // A shell word is data to the scripts: `$(...)` is offered (quoted there), never run.
    const typable = ['billing', `$(touch\${IFS}x)`, '`id`', 'q:1'];
    for (const what of ['groups', 'queues', 'partitions'] as const) {
      const { lines, code, stderr } = await complete(what, {
        groups: async () => [...typable, ...UNTYPABLE].map((name) => ({ group: name, queue: name })),
        partitions: async () =>
          [...typable, ...UNTYPABLE].map((name) => ({
            group: 'billing',
            queue: 'orders',
            partition: name,
            leaseId: null,
            leaseActive: false,
          })),
      });
      assert.deepEqual(lines, typable, what);
      assert.equal(code, 0);
      assert.equal(stderr, '');
    }
  });

  it('a group goes into a URL path: one with / or \\ is no candidate; a queue or partition may hold them', () => {
    for (const name of ['../admin', 'a/b', 'a\\b', `$(touch\${IFS}/tmp/x)`]) {
      assert.equal(isNameCandidate(name, 'groups'), false, name);
      assert.equal(isNameCandidate(name, 'queues'), true, name);
      assert.equal(isNameCandidate(name, 'partitions'), true, name);
    }
    assert.equal(isNameCandidate('x'.repeat(1025), 'queues'), false, 'longer than any name');
  });

  it('a failing broker is asked once, never again, and completes nothing, silently', async () => {
    const failing = await complete('groups', {
      groups: async () => {
        throw new BrokerError('cannot reach the broker at http://127.0.0.1:9: connection refused', true);
      },
    });
    assert.deepEqual(failing.calls, ['groups'], 'no retry');
    assert.deepEqual(failing.lines, []);
    assert.equal(failing.code, 0);
    assert.equal(failing.stderr, '');
  });

  it('a broker that does not answer is given up once the budget is spent', async () => {
    const hanging = await complete('queues', { groups: () => new Promise<GroupQueue[]>(() => {}) }, 20);
    assert.deepEqual(hanging.lines, []);
    assert.equal(hanging.code, 0);
    assert.equal(hanging.stderr, '');
  });
});
