/**
 * `lease watch` at scale, end to end, sized for `npm test`: Retry-After, and a watch that cannot
 * keep up (through an outage: test/e2e/watch-outage.test.ts). The full sizes of issue 12 are in
 * test/slow/watch-scale.test.ts (as a process). Run in-process here. Real time on
 * a shared machine: leases of tens of seconds, and assertions on counts, not on timings.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runInProcess } from '../support/in-process.js';
import { count, mintMany, renewedIds, watch, withSimulator } from '../support/watching.js';

describe('lease watch at scale: Retry-After and capacity', { concurrency: true }, () => {
  it('1,500 leases needing ~500 renewals/s at --concurrency 2 against a 200 ms broker: cannot keep up, exit 2', (t) =>
    withSimulator(async (sim) => {
      sim.inject({ kind: 'latency', ms: 200 });
      const ids = mintMany(sim, 1_500, 60);
      const run = watch(
        sim.url,
        ids,
        ['--seconds', '9', '--concurrency', '2', '--for', '4s', '-o', 'ndjson'],
        2,
        40_000,
        'in-process',
      );
      const code = await run.exited;
      // Most leases never had a renewal by --for: that is not a success (issue 31).
      assert.equal(code, 2, run.stderr());
      assert.match(run.stderr(), /leases, first \S+, could not be watched: not renewed once before --for ended/);
      const warnings = run.stderr().match(/warning: cannot keep up.*/g) ?? [];
      t.diagnostic(warnings.join('\n'));
      assert.equal(warnings.length, 1, run.stderr());
      assert.match(warnings[0] as string, /1500 leases renewed every 3s need 500 renewals\/s/);
      assert.match(warnings[0] as string, /raise --concurrency \(now 2\)/);
      assert.match(warnings[0] as string, /--seconds/);
    }));

  it('extend: a 429 with Retry-After is retried when the broker asked, not at once', () =>
    withSimulator(async (sim) => {
      const leaseId = sim.mint({ seconds: 60 });
      sim.inject({ kind: 'status', status: 429, headers: { 'Retry-After': '2' }, times: 1 });
      const result = await runInProcess(['lease', 'extend', leaseId, '--server', sim.url, '-o', 'json']);
      assert.equal(result.code, 0, result.stderr);
      assert.match(
        result.stderr,
        /rate-limiting requests \(HTTP 429: Too Many Requests\); it asked to retry after 2s; retry 1 of 2 in 2s/,
      );
      const [first, second] = sim.log;
      assert.ok(
        first && second && second.at - first.at >= 1_900,
        `${second && first ? second.at - first.at : '?'} ms apart`,
      );
    }));

  it('extend: a 503 asking for longer than --timeout is not waited for, and says so', () =>
    withSimulator(async (sim) => {
      const leaseId = sim.mint({ seconds: 60 });
      sim.inject({ kind: 'status', status: 503, headers: { 'Retry-After': '30' }, times: 1 });
      const result = await runInProcess(['lease', 'extend', leaseId, '--server', sim.url, '--timeout', '2s']);
      assert.equal(result.code, 2);
      assert.match(result.stderr, /HTTP 503: Service Unavailable; it asked to retry after 30s/);
      assert.match(result.stderr, /longer than --timeout \(2s\) allows waiting/);
      assert.equal(sim.log.length, 1);
    }));

  it('watch: a 503 with Retry-After: that lease tries again when asked, the others are not held up', () =>
    withSimulator(async (sim) => {
      const ids = mintMany(sim, 3, 60);
      sim.inject({ kind: 'status', status: 503, headers: { 'Retry-After': '3' }, times: 1, leaseId: ids[0] as string });
      // Watched until the lease that was asked to wait is renewed, not for a fixed time.
      const run = watch(sim.url, ids, ['--seconds', '60', '-o', 'ndjson'], 130, 40_000, 'in-process');
      await run.until(() => run.renewed().size === 3, 'every lease renewed, the one asked to wait included', 30_000);
      run.kill('SIGINT');
      const code = await run.exited;
      assert.equal(code, 130, run.stderr());
      const events = run.events();
      const retry = events.find((e) => e.event === 'retry');
      assert.equal(retry?.retryInMs, 3_000);
      const times = sim.log.filter((entry) => entry.leaseId === ids[0]).map((entry) => entry.at);
      assert.ok(times.length === 2 && (times[1] as number) - (times[0] as number) >= 2_900, JSON.stringify(times));
      assert.equal(renewedIds(events).size, 3);
      assert.equal(count(events, 'outage'), 0);
    }));
});
