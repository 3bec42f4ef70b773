/**
 * Terminal snapshots (issue 33; docs/development.md#terminal-snapshots): queenctl run in a real
 * pty (tmux) at 60, 80 and 200 columns, against the simulator, each screen compared with its
 * committed snapshot, test/snapshots/<case>.<columns>.txt. A changed screen fails with a unified
 * diff; `npm run test:snapshots -- --update` rewrites the files after a change meant to be seen.
 *
 * Each screen gets a simulator of its own, set up the same way: fixed lease ids, a fixed broker
 * clock (so every timestamp is the same on every run), leases that last hours (a time left is
 * shown in whole minutes then, and a slow machine cannot move it), and the masks of
 * test/support/pty.ts for what cannot be fixed (ports, the ids a pop draws).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { runInProcess } from '../support/in-process.js';
import { hasTmux, maskedRows, masks, runOnScreen, type ScreenRun, widestLine } from '../support/pty.js';
import { matchSnapshot, SNAPSHOTS } from '../support/snapshot.js';

/** The broker clock of every case: 2026-01-15 09:30:00 UTC, a whole second. */
const BROKER_NOW = Date.UTC(2026, 0, 15, 9, 30, 0);
const WIDTHS = [60, 80, 200] as const;
/** Two hours: a time left rounds to whole minutes (docs/cli-contract.md#durations-for-people). */
const HOURS = 7200;
/**
 * A watch's: leases of ten hours renewed every three, so both its times (the expiry, the next
 * renewal) stay in whole minutes while the case runs, and each lease is renewed once.
 */
const WATCH = ['--seconds', '36000', '--every', '3h'];

/** The fixed lease ids of the cases (UUIDv7-shaped, as the broker's are). */
const ID = {
  held: '0190f3a2-5c1e-7b44-9a10-3d2e8f6b7c01',
  lost: '0190f3a2-5c1e-7b44-9a10-3d2e8f6b7c02',
  billing: '0190f3a2-5c1e-7b44-9a10-3d2e8f6b7c03',
  invoices: '0190f3a2-5c1e-7b44-9a10-3d2e8f6b7c04',
} as const;
const FIXED_IDS = Object.values(ID);

/** The leases most cases share: one held on two partitions, one lost, two more for the listing. */
function leases(sim: Simulator): void {
  sim.mint({
    leaseId: ID.held,
    queue: 'orders',
    partitions: [{ partition: 'p1' }, { partition: 'p2' }],
    seconds: HOURS,
  });
  sim.mint({ leaseId: ID.lost, queue: 'orders', partitions: [{ partition: 'p3' }], seconds: HOURS });
  sim.expire(ID.lost);
  sim.mint({
    leaseId: ID.billing,
    queue: 'orders',
    group: 'billing',
    partitions: [{ partition: 'p2' }],
    seconds: HOURS,
  });
  sim.mint({ leaseId: ID.invoices, queue: 'invoices', partitions: [{ partition: 'x' }], seconds: HOURS });
}

/** A queue `payments` with three messages in p1, a lease time of two hours. */
function payments(sim: Simulator): void {
  sim.createQueue({ name: 'payments', partitions: ['p1', 'p2'], leaseTime: HOURS });
  sim.push('payments', [{ n: 1 }, { n: 2 }, { n: 3 }], 'p1');
}

interface Case {
  name: string;
  args: string[];
  exit: number;
  /** The simulator's state before the run. */
  scene?: (sim: Simulator) => void;
  /** Files for the directory queenctl runs in, made after the scene. */
  files?: (sim: Simulator) => Promise<Record<string, string>>;
  /** When to type ^C: a live view runs until stopped. */
  interrupt?: (sim: Simulator) => (screen: string) => boolean;
  /** The widths it is shown at (default WIDTHS). */
  widths?: readonly number[];
}

const CASES: Case[] = [
  {
    name: 'lease-extend',
    args: ['lease', 'extend', ID.held, ID.lost, '--seconds', String(HOURS)],
    exit: 4,
    scene: leases,
  },
  {
    name: 'lease-extend-renewed',
    args: ['lease', 'extend', ID.held, '--seconds', String(HOURS)],
    exit: 0,
    scene: leases,
  },
  { name: 'lease-inspect', args: ['lease', 'inspect', ID.held, ID.lost], exit: 4, scene: leases },
  { name: 'lease-list', args: ['lease', 'list'], exit: 0, scene: leases },
  // The stuck-partition runbook (issue 39): PARTITIONS kept at 80 and 60 columns, and a column a
  // filter names one value of (QUEUE here) the first to go.
  {
    name: 'lease-list-queue',
    args: ['lease', 'list', '--queue', 'orders'],
    exit: 0,
    scene: leases,
    widths: [60, 80],
  },
  {
    name: 'lease-list-partition-expiry',
    args: ['lease', 'list', '--queue', 'orders', '--partition', 'p2', '--expiry'],
    exit: 0,
    scene: leases,
    widths: [60, 80],
  },
  { name: 'lease-acquire', args: ['lease', 'acquire', 'payments', '--batch', '3'], exit: 0, scene: payments },
  {
    name: 'lease-ack',
    args: ['lease', 'ack', 'batch.json'],
    exit: 0,
    scene: payments,
    files: async (sim) => {
      const popped = await runInProcess(['lease', 'acquire', 'payments', '--batch', '3', '-o', 'json'], {
        env: { QUEEN_SERVER: sim.url },
      });
      assert.equal(popped.code, 0, popped.stderr);
      return { 'batch.json': popped.stdout };
    },
  },
  // The refusal of a lease that is gone, with its hint, and a usage error.
  { name: 'error-not-renewed', args: ['lease', 'extend', ID.lost], exit: 4, scene: leases },
  { name: 'error-unknown-option', args: ['lease', 'extend', '--bogus', ID.held], exit: 1 },
  { name: 'help-lease', args: ['lease', '--help'], exit: 0 },
  { name: 'help-lease-extend', args: ['lease', 'extend', '--help'], exit: 0 },
  // The live views, stopped by ^C as a person would: list --watch once its first frame shows
  // every lease, a watch once the broker has renewed each of its leases and the screen counts the
  // renewals (a change of those words must change these conditions too). The snapshot holds the
  // screen just before ^C and the one after the end.
  {
    name: 'lease-list-watch',
    args: ['lease', 'list', '--watch'],
    exit: 130,
    scene: leases,
    interrupt: () => (screen) => [ID.held, ID.billing, ID.invoices].every((id) => screen.includes(id)),
  },
  {
    name: 'lease-list-watch-queue',
    args: ['lease', 'list', '--watch', '--queue', 'orders'],
    exit: 130,
    scene: leases,
    widths: [60, 80],
    interrupt: () => (screen) => [ID.held, ID.billing].every((id) => screen.includes(id)),
  },
  {
    name: 'lease-watch',
    args: ['lease', 'watch', ID.held, ID.billing, ID.invoices, ...WATCH],
    exit: 130,
    scene: leases,
    interrupt: (sim) => (screen) =>
      renewedAll(sim, [ID.held, ID.billing, ID.invoices]) && /\b3 renewals\b/.test(screen),
  },
  {
    name: 'lease-watch-one',
    args: ['lease', 'watch', ID.held, ...WATCH],
    exit: 130,
    scene: leases,
    interrupt: (sim) => (screen) => renewedAll(sim, [ID.held]) && /\b1 renewal\b/.test(screen),
  },
];

/** Whether the simulator has answered a renewal of each of `ids` (a 200 of its extend route). */
function renewedAll(sim: Simulator, ids: readonly string[]): boolean {
  return ids.every((id) => sim.log.some((entry) => entry.leaseId === id && entry.status === 200));
}

/**
 * What a screen's snapshot file holds: the command, its exit code, then the screen's rows; for a
 * live view, first the screen it showed before ^C.
 */
function snapshotText(args: string[], run: ScreenRun, cols: number): string {
  const rules = masks(FIXED_IDS);
  const head = `$ queenctl ${args.join(' ')}\n# ${cols} columns, exit ${run.code}\n`;
  const end = `${maskedRows(run, rules).join('\n')}\n`;
  if (!run.live) return head + end;
  return `${head}# the screen before ^C:\n${maskedRows(run.live, rules).join('\n')}\n# the screen at the end:\n${end}`;
}

describe('terminal snapshots', {
  concurrency: 4,
  skip: hasTmux ? false : 'needs tmux (.ci/packages installs it)',
}, () => {
  const widest: string[] = [];
  // Under /tmp itself, not this process's temporary root: /tmp/queenctl-snap-XXXXXX is as long
  // everywhere.
  const scratch = mkdtempSync('/tmp/queenctl-snap-');
  after(() => {
    rmSync(scratch, { recursive: true, force: true });
    const out = process.env.QUEENCTL_SNAPSHOT_WIDTHS;
    if (out) writeFileSync(out, `${widest.join('\n')}\n`);
  });
  for (const { name, args, exit, scene, files, interrupt, widths = WIDTHS } of CASES) {
    for (const cols of widths) {
      it(`${name} at ${cols} columns`, async (t) => {
        const sim = await startSimulator({ now: () => BROKER_NOW });
        try {
          scene?.(sim);
          const screen = await runOnScreen({
            args,
            cols,
            exit,
            // A temporary directory of the same length on every machine: a path on the screen
            // (lease acquire's kept record) wraps alike; its random part is masked (pty.ts).
            env: { QUEEN_SERVER: sim.url, TMPDIR: scratch },
            files: (await files?.(sim)) ?? {},
            ...(interrupt && { interrupt: { when: interrupt(sim), keys: 'C-c' } }),
          });
          const { width } = widestLine(screen);
          widest.push(`${name}.${cols}: ${width}`);
          t.diagnostic(`widest line: ${width} characters on ${cols} columns`);
          matchSnapshot(`${name}.${cols}`, snapshotText(args, screen, cols));
        } finally {
          await sim.close();
        }
      });
    }
  }
  it('every file of test/snapshots is the screen of a case (--update removes the others)', () => {
    const names = new Set(CASES.flatMap(({ name, widths = WIDTHS }) => widths.map((cols) => `${name}.${cols}.txt`)));
    const stale = readdirSync(SNAPSHOTS).filter((file) => !names.has(file));
    assert.deepEqual(stale, [], 'snapshots of no case: npm run test:snapshots -- --update removes them');
  });
});
