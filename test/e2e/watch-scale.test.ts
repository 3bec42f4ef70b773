/**
 * `lease watch` at scale, end to end: the built binary against the simulator over loopback, with
 * thousands of leases on a slow broker, a broker that refuses connections for seconds (at the
 * start, and while renewals fall due), Retry-After, and a watch that cannot keep up. Real time on
 * a shared machine: leases of tens of seconds, and assertions on counts, not on timings. The
 * heavy cases run one after the other; the light ones side by side.
 */
import assert from 'node:assert/strict';
import { setMaxListeners } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { startSimulator, startTcpFront, type Simulator } from '../../tools/simulator/index.js';
import { runCli, startCli } from '../support/cli.js';

// The simulator's latency fault listens on one signal per request held: thousands at once.
setMaxListeners(0);

interface WatchEventLine {
  event: string;
  leaseId?: string;
  at: string;
  [key: string]: unknown;
}

interface Watching {
  events(): WatchEventLine[];
  stderr(): string;
  /** Resolves once `check` holds for the output so far. */
  until(check: () => boolean, what: string, timeoutMs?: number): Promise<void>;
  kill(signal: NodeJS.Signals): void;
  exited: Promise<number | null>;
}

function watch(server: string, leaseIds: string[], args: string[], guardMs = 40_000): Watching {
  const run = startCli(['lease', 'watch', '-', '--server', server, ...args], {
    stdin: `${leaseIds.join('\n')}\n`,
    timeoutMs: guardMs,
  });
  let parsed = 0;
  const events: WatchEventLine[] = [];
  return {
    events() {
      // Parsed as it comes: the output of thousands of leases is re-read many times.
      const stdout = run.stdout();
      const end = stdout.lastIndexOf('\n') + 1;
      for (const line of stdout.slice(parsed, end).split('\n')) if (line) events.push(JSON.parse(line));
      parsed = end;
      return events;
    },
    stderr: () => run.stderr(),
    async until(check, what, timeoutMs = 20_000) {
      await run.until(() => (check() ? true : undefined), what, timeoutMs);
    },
    kill: (signal) => run.kill(signal),
    exited: run.exited.then((result) => result.code),
  };
}

function mintMany(sim: Simulator, count: number, seconds: number): string[] {
  return Array.from({ length: count }, () => sim.mint({ seconds }));
}

const count = (events: WatchEventLine[], kind: string): number => events.filter((e) => e.event === kind).length;
const renewedIds = (events: WatchEventLine[]): Set<string> =>
  new Set(events.filter((e) => e.event === 'renewed').map((e) => e.leaseId as string));
/** Connection attempts the broker refused, as the client's -v trace tells them. */
const refusedAttempts = (stderr: string): number => stderr.match(/ECONNREFUSED/g)?.length ?? 0;

async function withSimulator(scenario: (sim: Simulator) => Promise<void>): Promise<void> {
  const sim = await startSimulator({ tokens: null, logLimit: 100 });
  try {
    await scenario(sim);
  } finally {
    await sim.close();
  }
}

describe('lease watch at scale (heavy: one at a time)', () => {
  it('3,000 leases with 20 s left, a broker answering in 150 ms, default flags: none lost or lapsed', (t) =>
    withSimulator(async (sim) => {
      sim.inject({ kind: 'latency', ms: 150 });
      // 16 requests in flight would give 107 renewals/s; these leases need 200/s to stay held.
      const ids = mintMany(sim, 3_000, 20);
      const run = watch(sim.url, ids, ['--seconds', '20', '--for', '22s', '-o', 'ndjson']);
      const code = await run.exited;
      const events = run.events();
      assert.equal(code, 0, run.stderr());
      assert.equal(renewedIds(events).size, 3_000, 'every lease renewed');
      assert.equal(count(events, 'lost'), 0);
      assert.equal(sim.stats().lapses, 0, 'none lapsed on the broker');
      assert.doesNotMatch(run.stderr(), /cannot keep up/);
      const stats = sim.stats();
      t.diagnostic(
        `${renewedIds(events).size} renewed, ${count(events, 'lost')} lost, ${stats.lapses} lapsed, ` +
          `${stats.extendRequests} renewals, least margin ${stats.minMarginMs} ms`,
      );
    }));

  it('2,000 leases, the broker refusing connections for 6 s from the start: a few dozen attempts and events', (t) =>
    withSimulator(async (sim) => {
      const front = await startTcpFront({ host: '127.0.0.1', port: sim.port });
      try {
        const ids = mintMany(sim, 2_000, 30);
        const refusing = front.refuse(6_000);
        // No --for: the renewals after the outage are waited for, however busy the machine.
        const run = watch(front.url, ids, ['--seconds', '30', '-o', 'ndjson', '-v'], 90_000);
        await refusing;
        const during = run.events().length;
        const attempts = refusedAttempts(run.stderr());
        await run.until(() => renewedIds(run.events()).size === 2_000, 'every lease renewed after the outage', 45_000);
        run.kill('SIGINT');
        const code = await run.exited;
        const events = run.events();
        assert.equal(code, 130, run.stderr().slice(-3000));
        t.diagnostic(
          `${attempts} connection attempts and ${during} event lines during the outage; ` +
            `${renewedIds(events).size} renewed, ${count(events, 'lost')} lost, ${sim.stats().lapses} lapsed`,
        );
        assert.ok(attempts <= 40, `${attempts} connection attempts during the outage`);
        assert.ok(during <= 10, `${during} event lines during the outage: ${JSON.stringify(events.slice(0, during))}`);
        assert.equal(count(events, 'outage'), 1);
        assert.equal(count(events, 'recovered'), 1);
        assert.equal(events.find((e) => e.event === 'outage')?.leases, 2_000);
        assert.equal(renewedIds(events).size, 2_000);
        assert.equal(count(events, 'lost'), 0);
        assert.equal(sim.stats().lapses, 0);
      } finally {
        await front.close();
      }
    }));

  it('2,000 leases, the broker refusing for 6 s while renewals fall due: the same, then all renewed again', (t) =>
    withSimulator(async (sim) => {
      const front = await startTcpFront({ host: '127.0.0.1', port: sim.port });
      try {
        const ids = mintMany(sim, 2_000, 24);
        // --every is 8 s: the second renewals fall due from 8 s after the first ones.
        // No --for: on a busy machine the renewals after the outage may take a while; the test
        // waits for them (the deadline that matters is the leases', checked by lost and lapses).
        const run = watch(front.url, ids, ['--seconds', '24', '-o', 'ndjson', '-v'], 90_000);
        await run.until(() => renewedIds(run.events()).size === 2_000, 'every lease renewed once');
        const firstRenewals = run.events().length;
        const refusedBefore = refusedAttempts(run.stderr());
        await delay(6_500);
        const before = run.events().length;
        await front.refuse(6_000);
        const during = run.events().slice(before);
        const attempts = refusedAttempts(run.stderr()) - refusedBefore;
        const renewedSinceRecovery = (): number => {
          const all = run.events();
          return renewedIds(all.slice(all.findIndex((e) => e.event === 'recovered'))).size;
        };
        await run.until(() => renewedSinceRecovery() === 2_000, 'every lease renewed after the outage', 45_000);
        run.kill('SIGINT');
        const code = await run.exited;
        const events = run.events();
        assert.equal(code, 130, run.stderr().slice(-3000));
        assert.ok(events.length - firstRenewals > 2_000, 'renewals fell due around the outage');
        assert.ok(attempts <= 40, `${attempts} connection attempts during the outage`);
        const lines = during.filter((e) => e.event !== 'renewed');
        t.diagnostic(
          `${attempts} connection attempts and ${lines.length} event lines (not renewals) during the outage`,
        );
        assert.ok(lines.length <= 10, `event lines during the outage: ${JSON.stringify(lines)}`);
        assert.equal(count(events, 'outage'), 1);
        assert.equal(count(events, 'recovered'), 1);
        const recovered = events.findIndex((e) => e.event === 'recovered');
        assert.equal(renewedIds(events.slice(recovered)).size, 2_000, 'every lease renewed after it');
        assert.equal(count(events, 'lost'), 0);
        assert.equal(sim.stats().lapses, 0);
      } finally {
        await front.close();
      }
    }));
});

describe('lease watch at scale: Retry-After and capacity', { concurrency: true }, () => {
  it('1,500 leases needing ~500 renewals/s at --concurrency 2 against a 200 ms broker: says it cannot keep up', (t) =>
    withSimulator(async (sim) => {
      sim.inject({ kind: 'latency', ms: 200 });
      const ids = mintMany(sim, 1_500, 60);
      const run = watch(sim.url, ids, ['--seconds', '9', '--concurrency', '2', '--for', '4s', '-o', 'ndjson']);
      const code = await run.exited;
      assert.equal(code, 0, run.stderr());
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
      const result = await runCli(['lease', 'extend', leaseId, '--server', sim.url, '-o', 'json']);
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
      const result = await runCli(['lease', 'extend', leaseId, '--server', sim.url, '--timeout', '2s']);
      assert.equal(result.code, 2);
      assert.match(result.stderr, /HTTP 503: Service Unavailable; it asked to retry after 30s/);
      assert.match(result.stderr, /longer than --timeout \(2s\) allows waiting/);
      assert.equal(sim.log.length, 1);
    }));

  it('watch: a 503 with Retry-After: that lease tries again when asked, the others are not held up', () =>
    withSimulator(async (sim) => {
      const ids = mintMany(sim, 3, 60);
      sim.inject({ kind: 'status', status: 503, headers: { 'Retry-After': '3' }, times: 1, leaseId: ids[0] as string });
      const run = watch(sim.url, ids, ['--seconds', '60', '--for', '10s', '-o', 'ndjson']);
      const code = await run.exited;
      assert.equal(code, 0, run.stderr());
      const events = run.events();
      const retry = events.find((e) => e.event === 'retry');
      assert.equal(retry?.retryInMs, 3_000);
      const times = sim.log.filter((entry) => entry.leaseId === ids[0]).map((entry) => entry.at);
      assert.ok(times.length === 2 && (times[1] as number) - (times[0] as number) >= 2_900, JSON.stringify(times));
      assert.equal(renewedIds(events).size, 3);
      assert.equal(count(events, 'outage'), 0);
    }));
});
