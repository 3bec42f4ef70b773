/**
 * The live views on a terminal (docs/cli-contract.md#live-views), in-process against the
 * simulator, on a fake clock shared by both: `lease list --watch` redrawn in place, least time
 * left first, bars and marks; `lease watch` of more leases than the screen holds as a summary.
 * What a terminal shows is read through test/support/screen.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { FakeClock } from '../support/fakes.js';
import { type RunningInProcess, startInProcess } from '../support/in-process.js';
import { followScreen, screenOf } from '../support/screen.js';

/** Runs started by `start` are stopped (SIGINT) at the end, passed or failed: none outlives its test. */
async function withClockedSimulator(
  scenario: (sim: Simulator, clock: FakeClock, start: typeof startInProcess) => Promise<void>,
): Promise<void> {
  const clock = new FakeClock();
  const sim = await startSimulator({ now: () => clock.now() });
  const runs: RunningInProcess[] = [];
  const start: typeof startInProcess = (args, options) => {
    const run = startInProcess(args, options);
    runs.push(run);
    return run;
  };
  try {
    await scenario(sim, clock, start);
  } finally {
    for (const run of runs) run.kill('SIGINT');
    await Promise.all(runs.map((run) => run.exited.catch(() => {})));
    await sim.close();
  }
}

/** The screen once `check` holds for it. */
async function screenWhen(
  run: RunningInProcess,
  columns: number,
  check: (lines: string[]) => boolean,
  what: string,
): Promise<string[]> {
  const screen = followScreen(run.stdout, columns);
  return run.until(() => {
    const lines = screen().text();
    return check(lines) ? lines : undefined;
  }, what);
}

const rowOf = (lines: string[], leaseId: string): string => lines.find((line) => line.startsWith(leaseId)) ?? '';
const order = (lines: string[], ids: string[]): string[] =>
  lines.filter((line) => ids.some((id) => line.startsWith(id))).map((line) => line.slice(0, 36));

describe('lease list --watch on a terminal: a live view', () => {
  it('redraws in place at each poll, least time left first, bars, lost and released marked until the next change', () =>
    withClockedSimulator(async (sim, clock, startInProcess) => {
      const long = sim.mint({ queue: 'orders', group: 'billing', partitions: [{ partition: 'p1' }], seconds: 300 });
      const short = sim.mint({ queue: 'orders', group: 'analytics', partitions: [{ partition: 'p1' }], seconds: 60 });
      const middle = sim.mint({ queue: 'invoices', partitions: [{ partition: 'x' }], seconds: 120 });
      const ids = [long, short, middle];
      const columns = 80;
      const run = startInProcess(['lease', 'list', '--watch', '--server', sim.url, '--interval', '2s'], {
        stdoutIsTTY: true,
        columns,
        rows: 24,
        clock,
      });
      let lines = await screenWhen(run, columns, (shown) => order(shown, ids).length === 3, 'the first frame');
      assert.deepEqual(order(lines, ids), [short, middle, long], 'least time left first');
      assert.match(rowOf(lines, short), /^\S+ +(59s|1m00s) +█{14} +p1$/, 'a full bar: all its lease time left');
      assert.match(lines[0] as string, /^3 held · every 2s · 10:00:00/);

      // 61 s on: the short lease ran out (lost), the middle one was acked (released).
      sim.release(middle);
      clock.advance(61_000);
      lines = await screenWhen(run, columns, (shown) => /LOST/.test(rowOf(shown, short)), 'the lost lease marked');
      assert.deepEqual(order(lines, ids), [short, middle, long], 'marked first, then least time left');
      assert.match(rowOf(lines, short), /^\S+ +LOST\b/);
      assert.match(rowOf(lines, middle), /^\S+ +RELEASED\b/);
      assert.match(
        rowOf(lines, long),
        /^\S+ +3m5[89]s +█{11}░{3} +p1$/,
        'the bar against the lease time: 239 s of 300',
      );
      assert.match(lines[0] as string, /^1 held, 1 lost, 1 released · every 2s · 10:01:01/);

      // No change: the marks stay.
      clock.advance(2_000);
      lines = await screenWhen(run, columns, (shown) => /10:01:03/.test(shown[0] ?? ''), 'the next poll');
      assert.match(rowOf(lines, short), /LOST/);
      assert.match(rowOf(lines, middle), /RELEASED/);

      // The next change: the marks of the last one go.
      const added = sim.mint({ queue: 'orders', group: 'billing', partitions: [{ partition: 'p2' }], seconds: 30 });
      clock.advance(2_000);
      lines = await screenWhen(run, columns, (shown) => rowOf(shown, added) !== '', 'the added lease');
      assert.deepEqual(order(lines, [...ids, added]), [added, long], 'the marks went with the next change');

      run.kill('SIGINT');
      const result = await run.exited;
      assert.equal(result.code, 130);
      const screen = screenOf(result.stdout, columns);
      assert.deepEqual(screen.overflows, [], 'no line wider than the terminal, ever');
      assert.deepEqual(screen.unknown, []);
      assert.equal(screen.cursorShown, true, 'the cursor shown again on exit');
      assert.deepEqual(order(screen.text(), [...ids, added]), [added, long], 'the last frame stays on the screen');
      assert.ok(result.stdout.includes('\u001b[1A'), 'redrawn in place: the cursor moved up over the last frame');
      assert.equal(result.stderr, '');
    }));

  it('fits 60 columns with long names, shows as many leases as the screen holds and says how many more', () =>
    withClockedSimulator(async (sim, clock, startInProcess) => {
      const ids = sim.mintMany(
        Array.from({ length: 40 }, (_, i) => ({
          queue: `a-queue-whose-name-is-much-longer-than-the-terminal-is-wide-${i}`,
          group: '漢字のグループ名',
          partitions: [{ partition: `p${i}` }],
          seconds: 100 + i,
        })),
      );
      const run = startInProcess(['lease', 'list', '--watch', '--server', sim.url], {
        stdoutIsTTY: true,
        columns: 60,
        rows: 12,
        clock,
      });
      const lines = await screenWhen(run, 60, (shown) => shown.some((line) => /more below/.test(line)), 'a frame');
      assert.ok(lines.length <= 11, `one line less than the rows, so it never scrolls: ${lines.length}`);
      assert.deepEqual(order(lines, ids), ids.slice(0, 8), 'the least time left first, as many as fit');
      ids.slice(0, 8).forEach((id, i) => {
        assert.match(rowOf(lines, id), new RegExp(` p${i}$`), 'the partition shows at 60 columns (issue 39)');
      });
      assert.match(lines.at(-1) as string, /^… 32 more below/);
      run.kill('SIGINT');
      const result = await run.exited;
      assert.deepEqual(screenOf(result.stdout, 60).overflows, []);
    }));

  it('COLUMNS is honoured', () =>
    withClockedSimulator(async (sim, clock, startInProcess) => {
      sim.mint({ queue: 'orders', group: 'billing', partitions: [{ partition: 'p1' }], seconds: 300 });
      const run = startInProcess(['lease', 'list', '--watch', '--server', sim.url], {
        stdoutIsTTY: true,
        columns: 200,
        env: { COLUMNS: '64' },
        clock,
      });
      await run.waitForStdout(/LEASE ID/);
      run.kill('SIGINT');
      const result = await run.exited;
      const screen = screenOf(result.stdout, 64);
      assert.deepEqual(screen.overflows, []);
      assert.ok(screen.text().some((line) => line.length > 60));
    }));
});

describe('lease watch of more leases than the screen holds: a live summary', () => {
  it('200 leases at 24 rows: held, lost, in outage, least time left, renewals/s; a line only for changes', () =>
    withClockedSimulator(async (sim, clock, startInProcess) => {
      const ids = sim.mintMany(
        Array.from({ length: 200 }, (_, i) => ({ queue: 'orders', partitions: [{ partition: `p${i}` }], seconds: 30 })),
      );
      const columns = 80;
      const run = startInProcess(['lease', 'watch', ...ids, '--server', sim.url, '--seconds', '30'], {
        stdoutIsTTY: true,
        stderrIsTTY: true,
        columns,
        rows: 24,
        clock,
      });
      const shown = followScreen(run.stderr, columns);
      const summary = (check: RegExp, what: string): Promise<string[]> =>
        run.until(() => {
          const lines = shown().text();
          return lines.some((line) => check.test(line)) ? lines : undefined;
        }, what);
      await summary(/^200 leases: 200 held, 0 lost, 0 in outage · least time left 30s · - renewals\/s$/, 'all renewed');

      // Two leases end under the watch; the others are renewed on time, 10 s on.
      const [gone1, gone2] = ids as [string, string];
      sim.expire(gone1);
      sim.release(gone2);
      clock.advance(10_000);
      const lines = await summary(
        /^200 leases: 198 held, 2 lost, 0 in outage · least time left 30s/,
        'the losses counted, the others renewed',
      );
      const frame = lines.find((line) => line.startsWith('200 leases')) as string;
      // 198 renewals in 10 s of the watch's clock: 19.8 a second, shown whole from 10 up.
      assert.match(frame, /least time left 30s · 20 renewals\/s$/);
      const perLease = lines.filter((line) => /^queenctl: \S+ lease /.test(line));
      assert.deepEqual(
        perLease.map((line) => line.split(' ')[3]).sort(),
        [gone1, gone2].sort(),
        'a line for each change of state, none for a renewal on time',
      );
      assert.ok(lines.length < 24, 'the screen was never scrolled by renewals');

      run.kill('SIGINT');
      const result = await run.exited;
      assert.equal(result.code, 130);
      const screen = screenOf(result.stderr, columns);
      assert.deepEqual(screen.overflows, [], 'no line of the summary wider than the terminal');
      assert.deepEqual(screen.unknown, []);
      assert.equal(screen.cursorShown, true);
      const end = screen.text();
      assert.equal(end.filter((line) => /interrupted/.test(line)).length, 1, 'one line for all the leases stopped');
      assert.match(end.at(-3) as string, /^queenctl: 198 leases: interrupted; no longer renewed$/);
      assert.match(end.at(-2) as string, /^200 leases: 198 held, 2 lost/, 'the last summary stays, as it was');
      assert.equal(result.stdout, '');
    }));

  it('as many leases as the screen holds keep the line per event', () =>
    withClockedSimulator(async (sim, clock, startInProcess) => {
      const ids = sim.mintMany(
        Array.from({ length: 5 }, (_, i) => ({ queue: 'orders', partitions: [{ partition: `p${i}` }], seconds: 30 })),
      );
      const run = startInProcess(['lease', 'watch', ...ids, '--server', sim.url, '--seconds', '30'], {
        stdoutIsTTY: true,
        stderrIsTTY: true,
        rows: 24,
        clock,
      });
      await run.waitForStderr(new RegExp(`${ids[4]} renewed`));
      assert.doesNotMatch(run.stderr(), /renewals\/s/);
    }));
});

describe('the live views and outside text', () => {
  it('a group and queue holding terminal controls are drawn escaped in the frame', () =>
    withClockedSimulator(async (sim, clock, startInProcess) => {
      sim.mint({
        queue: 'q\u001b[2J\u001b]0;owned\u0007',
        group: 'g\r\u001b[1A\u202e',
        partitions: [{ partition: 'p1' }],
        seconds: 60,
      });
      const run = startInProcess(['lease', 'list', '--watch', '--server', sim.url], {
        stdoutIsTTY: true,
        columns: 120,
        clock,
      });
      await run.waitForStdout(/held/);
      await run.waitForStdout(/\\x1b\[2J/);
      run.kill('SIGINT');
      const { stdout } = await run.exited;
      assert.doesNotMatch(
        stdout,
        /\u001b\[2J|\u001b\]0;|\u0007|\r|\u202e/,
        'no control of the broker reaches the terminal',
      );
      const screen = screenOf(stdout, 120);
      assert.deepEqual(screen.unknown, []);
    }));
});

/**
 * The probes a live view of `lease list --watch` sends (issue 39): the extend route's one-second
 * probe is a write on the broker's database, so the view learns each lease's expiry once and asks
 * again only when the known deadline comes near; a release shows from the listing, a read. Counts
 * on the fake clock shared with the simulator: they do not depend on the machine's speed.
 */
interface ProbeCount {
  /** Extend requests answered in the first 10 s of the view: the polls at 0 s and every interval before 10 s. */
  extends: number;
  polls: number;
}

/** A view of `leases` leases of `seconds` each, for the polls of 10 s at `intervalMs`; its extends counted. */
async function probesIn10s(
  sim: Simulator,
  clock: FakeClock,
  startInProcess: typeof import('../support/in-process.js').startInProcess,
  leases: number,
  seconds: number,
  intervalMs: number,
): Promise<ProbeCount> {
  sim.mintMany(
    Array.from({ length: leases }, (_, i) => ({ queue: 'orders', partitions: [{ partition: `p${i}` }], seconds })),
  );
  const before = sim.stats().extendRequests;
  const start = clock.now();
  const run = startInProcess(
    ['lease', 'list', '--watch', '--server', sim.url, '--interval', `${intervalMs}ms`, '--concurrency', '64'],
    { stdoutIsTTY: true, columns: 120, rows: 24, clock },
  );
  const polls = Math.ceil(10_000 / intervalMs);
  for (let poll = 0; poll < polls; poll++) {
    if (poll > 0) clock.advance(intervalMs);
    const at = new Date(start + poll * intervalMs).toISOString().slice(11, 19);
    // The frame of a poll is drawn once its probes are answered.
    await run.waitForStdout(new RegExp(`${leases} held · every [^·]+ · ${at} `), 30_000);
  }
  const extendsSent = sim.stats().extendRequests - before;
  run.kill('SIGINT');
  await run.exited;
  return { extends: extendsSent, polls };
}

describe('lease list --watch on a terminal: probes', () => {
  for (const intervalMs of [2_000, 1_000]) {
    it(`200 leases with 5 minutes left, 10 s at ${intervalMs / 1000}s: a probe per lease, a few more`, (t) =>
      withClockedSimulator(async (sim, clock, startInProcess) => {
        const { extends: sent, polls } = await probesIn10s(sim, clock, startInProcess, 200, 300, intervalMs);
        t.diagnostic(`${sent} extends in ${polls} polls of 200 leases`);
        assert.ok(sent >= 200, `each lease probed once: ${sent}`);
        assert.ok(sent <= 210, `at most one probe per lease plus a few in 10 s, not one per poll: ${sent}`);
      }));
  }
  it('a release shows at the next poll, no probe; a renewal by the holder is learned near the known deadline', () =>
    withClockedSimulator(async (sim, clock, startInProcess) => {
      // More leases than the screen's rows (a probe per lease is counted at 200 by the tests above).
      const ids = sim.mintMany(
        Array.from({ length: 50 }, (_, i) => ({
          queue: 'orders',
          partitions: [{ partition: `p${i}` }],
          seconds: 300,
        })),
      );
      const renewed = sim.mint({ queue: 'invoices', partitions: [{ partition: 'x' }], seconds: 30 });
      const columns = 120;
      const run = startInProcess(['lease', 'list', '--watch', '--server', sim.url, '--interval', '2s'], {
        stdoutIsTTY: true,
        columns,
        rows: 24,
        clock,
      });
      const frameAt = (at: string): Promise<string[]> =>
        screenWhen(run, columns, (shown) => new RegExp(` · ${at} · `).test(shown[0] ?? ''), `the frame of ${at}`);
      const probesOf = (leaseId: string): number =>
        sim.log.filter((entry) => entry.leaseId === leaseId && entry.body === '{"seconds":1}').length;
      let lines = await frameAt('10:00:00');
      assert.match(rowOf(lines, renewed), /^\S+ +(29s|30s) /);

      // Its holder renews it to a minute: nothing the view knows of until the known deadline nears.
      const answer = await fetch(`${sim.url}/api/v1/lease/${renewed}/extend`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"seconds":60}',
      });
      assert.equal(answer.status, 200);
      await answer.arrayBuffer();
      const released = ids[7] as string;
      sim.release(released);
      clock.advance(2_000);
      lines = await frameAt('10:00:02');
      assert.match(rowOf(lines, released), /^\S+ +RELEASED\b/, 'the release, from the listing, at the next poll');
      assert.match(rowOf(lines, renewed), /^\S+ +(27s|28s) /, 'counted down from what the probe found');
      assert.equal(probesOf(released), 1, 'a release needs no probe');
      assert.equal(probesOf(renewed), 1);

      // 20 s on, 10 s of the known 30 left (a third of its lease time): probed again, the renewal learned.
      for (let at = 4; at <= 20; at += 2) {
        clock.advance(2_000);
        lines = await frameAt(`10:00:${String(at).padStart(2, '0')}`);
      }
      assert.match(rowOf(lines, renewed), /^\S+ +(39s|40s) /, 'the renewal to 10:01:00, seen at 10:00:20');
      assert.equal(probesOf(renewed), 2);
      assert.equal(probesOf(ids[0] as string), 1, 'a lease of 5 minutes: probed once');
      assert.equal(
        sim.log.filter((entry) => entry.body === '{"seconds":1}').length,
        52,
        'one probe per lease, and one for the lease near its deadline',
      );
    }));
});

/**
 * The figures of docs/performance.md (issue 39), measured only when asked for:
 * QUEENCTL_LIST_PROBE_FIGURES=1 node --test dist/test/e2e/live-views.test.js
 */
describe('lease list --watch on a terminal: probes per 10 s, the figures', {
  skip: process.env.QUEENCTL_LIST_PROBE_FIGURES === '1' ? false : 'QUEENCTL_LIST_PROBE_FIGURES=1 measures them',
}, () => {
  for (const leases of [200, 2_000]) {
    for (const intervalMs of [2_000, 1_000]) {
      it(`${leases} leases with 5 minutes left, --interval ${intervalMs / 1000}s`, (t) =>
        withClockedSimulator(async (sim, clock, startInProcess) => {
          const { extends: sent, polls } = await probesIn10s(sim, clock, startInProcess, leases, 300, intervalMs);
          t.diagnostic(
            `figure: ${leases} leases, --interval ${intervalMs / 1000}s: ${sent} extends in 10 s (${polls} polls)`,
          );
        }));
    }
  }
});
