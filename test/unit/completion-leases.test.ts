import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PartitionHolder } from '../../src/broker/consumer-groups.js';
import { COMPLETION_BUDGET_MS, completeLeaseIds, completionBudgetMs } from '../../src/commands/completion.js';
import { commandTree } from '../../src/commands/completion-scripts.js';
import type { ListClient } from '../../src/commands/lease/list.js';
import { AuthError, BrokerError } from '../../src/exit.js';
import { Command } from 'commander';
import { bufferIO, instantClock } from '../support/fakes.js';

const holder = (leaseId: string | null, partition: string, leaseActive = true): PartitionHolder => ({
  group: 'billing',
  queue: 'orders',
  partition,
  leaseId,
  leaseActive,
});

function client(groups: () => Promise<PartitionHolder[]>): ListClient {
  return {
    extend: async () => {
      throw new Error('completion never renews');
    },
    consumerGroups: async () => [{ group: 'billing', queue: 'orders' }],
    consumerGroup: groups,
  };
}

async function complete(groups: () => Promise<PartitionHolder[]>, budgetMs = 5_000) {
  const io = bufferIO();
  const code = await completeLeaseIds(
    { io, client: client(groups), clock: instantClock, signal: new AbortController().signal },
    budgetMs,
  );
  return { code, io };
}

describe('__complete leases', () => {
  it('prints each held lease id once, not a stale holder nor a released partition', async () => {
    const { code, io } = await complete(async () => [
      holder('A', 'p1'),
      holder('A', 'p2'),
      holder('B', 'p3'),
      holder('C', 'p4', false),
      holder(null, 'p5'),
    ]);
    assert.equal(code, 0);
    assert.equal(io.stdout.text, 'A\nB\n');
  });

  it('prints nothing, and exits 0, when the broker fails, refuses, or does not answer in time', async () => {
    const failures: Array<() => Promise<PartitionHolder[]>> = [
      async () => {
        throw new BrokerError('cannot reach the broker at http://127.0.0.1:9: connection refused', true);
      },
      async () => {
        throw new AuthError('the broker refused the credentials (HTTP 401)', 401);
      },
    ];
    for (const failing of failures) {
      const { code, io } = await complete(failing);
      assert.equal(code, 0);
      assert.equal(io.stdout.text + io.stderr.text, '');
    }
    // A broker that hangs: the listing is given up once the budget is spent, and nothing is said.
    const hanging = await complete(() => new Promise<PartitionHolder[]>(() => {}), 20);
    assert.equal(hanging.code, 0);
    assert.equal(hanging.io.stdout.text + hanging.io.stderr.text, '');
  });

  it('the scripts offer lease ids for the operands of extend, inspect and watch, and of no other verb', () => {
    const program = new Command('queenctl');
    const lease = program.command('lease');
    for (const verb of ['extend', 'inspect', 'watch', 'list']) {
      const command = lease.command(verb);
      if (verb !== 'list') command.argument('<leaseId...>');
    }
    const tree = commandTree(program);
    const kinds = Object.fromEntries((tree.children[0]?.children ?? []).map((child) => [child.name, child.argument]));
    assert.deepEqual(kinds, { extend: 'lease', inspect: 'lease', watch: 'lease', list: null, help: null });
  });
});

it('QUEENCTL_COMPLETION_TIMEOUT sets the budget; unset or not a duration, it is 500 ms', () => {
  assert.equal(completionBudgetMs({}), COMPLETION_BUDGET_MS);
  assert.equal(COMPLETION_BUDGET_MS, 500);
  assert.equal(completionBudgetMs({ QUEENCTL_COMPLETION_TIMEOUT: '20s' }), 20_000);
  assert.equal(completionBudgetMs({ QUEENCTL_COMPLETION_TIMEOUT: '750ms' }), 750);
  assert.equal(completionBudgetMs({ QUEENCTL_COMPLETION_TIMEOUT: 'soon' }), COMPLETION_BUDGET_MS);
});
