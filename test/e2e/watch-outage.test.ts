/**
 * `lease watch` through an outage, end to end, sized for `npm test`: a broker that refuses
 * connections for seconds under hundreds of leases. The full sizes of issue 12 are in
 * test/slow/watch-scale.test.ts (as a process). Run in-process here; a file of its own, so it runs
 * beside test/e2e/watch-scale.test.ts rather than after it. Real time on a shared machine: leases
 * of tens of seconds, and assertions on counts, not on timings.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startTcpFront } from '../../tools/simulator/index.js';
import { count, mintMany, refusedAttempts, renewedIds, watch, withSimulator } from '../support/watching.js';

describe('lease watch through an outage, scaled down', () => {
  it('400 leases, the broker refusing connections for 3 s from the start: few attempts, one outage', (t) =>
    withSimulator(async (sim) => {
      const front = await startTcpFront({ host: '127.0.0.1', port: sim.port });
      try {
        const ids = mintMany(sim, 400, 40);
        const refusing = front.refuse(3_000);
        const run = watch(front.url, ids, ['--seconds', '40', '-o', 'ndjson', '-v'], 130, 90_000, 'in-process');
        await refusing;
        const during = run.events().length;
        const attempts = refusedAttempts(run.stderr());
        await run.until(() => run.renewed().size === 400, 'every lease renewed after the outage', 45_000);
        run.kill('SIGINT');
        const code = await run.exited;
        const events = run.events();
        assert.equal(code, 130, run.stderr().slice(-3000));
        t.diagnostic(`${attempts} connection attempts and ${during} event lines during the outage`);
        assert.ok(attempts <= 40, `${attempts} connection attempts during the outage`);
        assert.ok(during <= 10, `${during} event lines during the outage: ${JSON.stringify(events.slice(0, during))}`);
        assert.equal(count(events, 'outage'), 1);
        assert.equal(events.find((e) => e.event === 'outage')?.leases, 400);
        assert.equal(count(events, 'recovered'), 1);
        assert.equal(count(events, 'lost'), 0);
        assert.equal(renewedIds(events).size, 400, 'every lease renewed, counted again from the events');
        assert.equal(sim.stats().lapses, 0);
      } finally {
        await front.close();
      }
    }));
});
