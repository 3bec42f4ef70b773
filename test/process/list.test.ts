/**
 * `queenctl lease list` as a process: its names piped into another queenctl, and a signal
 * while it waits for the broker.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { Simulator } from '../../tools/simulator/index.js';
import { withSimulator } from '../support/shared.js';
import { cliCommandLine, runShell, startCli } from '../support/cli.js';

/** Orders p1, p2 (queue mode, one pop), billing on p2, analytics on 12 partitions, invoices x. */
function scene(sim: Simulator): { queueMode: string; billing: string; analytics: string; invoices: string } {
  return {
    queueMode: sim.mint({ queue: 'orders', partitions: [{ partition: 'p1' }, { partition: 'p2' }], seconds: 120 }),
    billing: sim.mint({ queue: 'orders', group: 'billing', partitions: [{ partition: 'p2' }], seconds: 300 }),
    analytics: sim.mint({ queue: 'orders', group: 'analytics', partitions: 12, seconds: 600 }),
    invoices: sim.mint({ queue: 'invoices', partitions: [{ partition: 'x' }], seconds: 60 }),
  };
}

describe('lease list', { concurrency: true }, () => {
  it('-o name piped into extend - renews exactly the leases listed', () =>
    withSimulator(async (sim) => {
      const ids = scene(sim);
      const queenctl = cliCommandLine();
      const script =
        `${queenctl} lease list --queue orders --server ${sim.url} -o name | ` +
        `${queenctl} lease extend - --seconds 900 --server ${sim.url} -o ndjson`;
      const result = await runShell(`set -o pipefail; ${script}`, { exit: 0 });
      assert.equal(result.code, 0, result.stderr);
      const renewed = result.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { leaseId: string; renewed: number });
      assert.deepEqual(
        renewed.map((record) => record.leaseId),
        [ids.queueMode, ids.analytics, ids.billing],
      );
      assert.ok(renewed.every((record) => record.renewed > 0));
      const invoices = sim.lease(ids.invoices)?.rows[0]?.expiresAt ?? 0;
      assert.ok(invoices - sim.brokerNow() < 61_000, 'a lease of another queue was not touched');
      const billing = sim.lease(ids.billing)?.rows[0]?.expiresAt ?? 0;
      assert.ok(billing - sim.brokerNow() > 800_000, 'the listed lease was extended to 900 s');
    }));

  it('a signal while the listing or its --expiry probe waits for the broker: nothing listed, 129 on SIGHUP', () =>
    withSimulator(async (sim) => {
      const leaseId = sim.mint({ queue: 'orders', seconds: 120 });
      const cases = [
        // The consumer-group routes hang: the listing itself waits.
        { args: [], fault: { kind: 'hang' } as const, signal: 'SIGHUP', code: 129 },
        // Only the lease's extend route hangs: the listing is read, the probe waits.
        { args: ['--expiry'], fault: { kind: 'hang', leaseId } as const, signal: 'SIGINT', code: 130 },
      ] as const;
      for (const { args, fault, signal, code } of cases) {
        sim.clearFaults();
        sim.resetLog();
        sim.inject(fault);
        const run = startCli(['lease', 'list', '--server', sim.url, '-o', 'json', ...args], { exit: code });
        // The simulator logs a request as it arrives: the one that hangs is the last.
        const hanging = args.length > 0 ? 2 : 1;
        for (const deadline = Date.now() + 30_000; sim.log.length < hanging; await delay(20))
          assert.ok(Date.now() < deadline, `the request that hangs never came\n${run.stderr()}`);
        run.kill(signal);
        const result = await run.exited;
        const what = `${signal} ${args.join(' ')}: ${result.stderr}`;
        assert.equal(result.code, code, what);
        assert.equal(result.stdout, '', what);
        assert.match(
          result.stderr,
          /^queenctl: interrupted before the listing was complete; nothing was listed$/m,
          what,
        );
        assert.doesNotMatch(result.stderr, /internal error/, what);
      }
    }));
});
