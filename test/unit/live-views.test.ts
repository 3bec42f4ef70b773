/** The pieces of the live views (src/output/live.ts, list-live.ts, watch.ts's summary), alone. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ListRecord } from '../../src/commands/lease/list.js';
import { ListLiveState, type LiveRow, sortRows } from '../../src/output/list-live.js';
import { bar, canRedraw, loadFit, terminalSize } from '../../src/output/live.js';
import { RenewalRate, summaryLines } from '../../src/output/watch.js';
import type { WatchStatus } from '../../src/renewal/scheduler.js';

const tty = (columns?: number, rows?: number) => ({ write: () => true, isTTY: true, columns, rows });

describe('live views: the terminal', () => {
  it('COLUMNS and LINES when set win over the terminal, which wins over 80x24', () => {
    assert.deepEqual(terminalSize(tty(100, 40), {}), { columns: 100, rows: 40 });
    assert.deepEqual(terminalSize(tty(100, 40), { COLUMNS: '60', LINES: '20' }), { columns: 60, rows: 20 });
    assert.deepEqual(terminalSize(tty(), {}), { columns: 80, rows: 24 });
    assert.deepEqual(terminalSize(tty(100, 40), { COLUMNS: '0', LINES: 'x' }), { columns: 100, rows: 40 });
  });

  it('redraws only on a terminal that moves its cursor', () => {
    assert.equal(canRedraw(tty(80), {}), true);
    assert.equal(canRedraw(tty(80), { TERM: 'dumb' }), false);
    assert.equal(canRedraw({ write: () => true, isTTY: false }, {}), false);
    assert.equal(canRedraw(tty(0), {}), false, 'a pty nobody sized');
    assert.equal(canRedraw(tty(0), { COLUMNS: '80' }), true);
  });

  it('measures and cuts as a terminal counts columns', async () => {
    const fit = await loadFit();
    assert.equal(fit.width('漢字'), 4);
    assert.equal(fit.width('\u001b[31mred\u001b[39m'), 3);
    assert.equal(fit.width(fit.cut('漢字漢字漢字', 5)), 5);
    assert.equal(fit.pad('ab', 4), 'ab  ');
  });

  it('a bar: full for all the time, one cell for any, dots when unknown', () => {
    assert.equal(bar(300, 300, 8), '████████');
    assert.equal(bar(150, 300, 8), '████░░░░');
    assert.equal(bar(1, 300, 8), '█░░░░░░░');
    assert.equal(bar(0, 300, 8), '░░░░░░░░');
    assert.equal(bar(null, 300, 4), '····');
  });
});

describe('live views: lease list --watch marks', () => {
  const record = (leaseId: string, live = true, remainingMs?: number): ListRecord => ({
    leaseId,
    consumerGroup: 'g',
    queue: 'q',
    partitions: ['p1'],
    live,
    ...(remainingMs === undefined ? {} : { remainingMs }),
  });
  it('released while time was left, lost once it ran out, gone when never known; kept until the next change', () => {
    const state = new ListLiveState();
    state.update([record('A', true, 10_000), record('B', true, 60_000), record('C')], [], 0);
    const rows = state.update(
      [],
      [
        { event: 'removed', record: record('A', false) },
        { event: 'removed', record: record('B', false) },
        { event: 'removed', record: record('C', false) },
      ],
      20_000,
    );
    assert.deepEqual(
      rows.map((row) => [row.record.leaseId, row.mark]),
      [
        ['A', 'LOST'],
        ['C', 'GONE'],
        ['B', 'RELEASED'],
      ],
    );
    assert.equal(state.update([], [], 22_000).length, 3, 'no change: the marks stay');
    const next = state.update([record('D', true, 5_000)], [{ event: 'added', record: record('D') }], 24_000);
    assert.deepEqual(
      next.map((row) => [row.record.leaseId, row.mark]),
      [['D', null]],
    );
  });
});

describe('live views: lease list --watch order', () => {
  const row = (leaseId: string, remainingMs: number): LiveRow => ({
    record: { leaseId, consumerGroup: 'g', queue: 'q', partitions: ['p1'], live: true, remainingMs },
    remainingMs,
    leaseMs: remainingMs,
    mark: null,
  });
  const order = (rows: LiveRow[]): string[] => sortRows(rows).map((each) => each.record.leaseId);

  it('least time left first, as shown: leases that show the same time keep the listing order', () => {
    // Both show 2h00m: a second boundary between their probes (7200.1 s and 7199.9 s) swapped them
    // (a snapshot of lease list --watch was seen to fail so).
    assert.deepEqual(order([row('A', 7_200_100), row('B', 7_199_900)]), ['A', 'B']);
    assert.deepEqual(order([row('A', 7_199_900), row('B', 7_200_100)]), ['A', 'B']);
    // Shown apart, they are ordered: 2h00m after 1h59m, 59m59s after 59m58s, 9.9s after 9.8s.
    assert.deepEqual(order([row('A', 7_200_000), row('B', 7_140_000)]), ['B', 'A']);
    assert.deepEqual(order([row('A', 3_599_000), row('B', 3_598_000)]), ['B', 'A']);
    assert.deepEqual(order([row('A', 9_900), row('B', 9_800)]), ['B', 'A']);
    assert.deepEqual(order([row('A', 9_940), row('B', 9_860)]), ['A', 'B'], 'both 9.9s');
  });
});

describe('live views: the summary of a watch', () => {
  it('renewals per second over the last 10 s of the clock', () => {
    const rate = new RenewalRate();
    assert.equal(rate.sample(0, 0), null);
    assert.equal(rate.sample(0, 200), null, 'the same instant: no rate yet');
    assert.equal(rate.sample(10_000, 400), 20);
    assert.equal(rate.sample(15_000, 450), 10, 'the sample of 0 s is out of the window: (450 - 400) / 5 s');
    assert.equal(rate.sample(20_000, 600), 20, 'from the oldest sample in the window: (600 - 400) / 10 s');
  });

  it('says held, lost, in outage, least time left and the rate', () => {
    const status: WatchStatus = {
      watching: 200,
      held: 190,
      lost: 10,
      renewals: 1000,
      earliestDeadline: 12_000,
      nextRenewalAt: 1_500,
      lastError: null,
      lastErrorAt: null,
      outage: { since: 0, error: 'connection refused', leases: 190, nextProbeAt: 2_000 },
    };
    const [first, second] = summaryLines(status, 1_000, 200, 4.25);
    assert.equal(first, '200 leases: 190 held, 10 lost, 190 in outage · least time left 11s · 4.3 renewals/s');
    assert.match(second as string, /^BROKER DOWN for 1s, next probe in 1s/);
  });
});
