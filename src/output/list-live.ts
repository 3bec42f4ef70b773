/**
 * `lease list --watch` on a terminal: a live view, redrawn in place at each poll
 * (docs/cli-contract.md#live-views). One row per lease, least time left first, its time left
 * drawn as a bar against its lease time; a lease lost or released stays on the screen, marked,
 * until the next change. In a pipe or a file the watch prints appended lines instead
 * (commands/lease/list-watch.ts), and machine formats never come here.
 *
 * The lease time of a lease is not in any answer of the broker: it is the most time left seen for
 * it since the view started, which is its lease time as soon as it has been renewed once while
 * watched (a lease first seen half spent shows a full bar until then).
 */
import type { ListRecord } from '../commands/lease/list.js';
import { formatDuration, shownDurationMs } from './duration.js';
import { bar, type Fit } from './live.js';
import { escapeText } from './sanitise.js';
import type { Style } from './style.js';

export type LeaseMark = 'LOST' | 'RELEASED' | 'GONE';

/** What one change did to a row of the view: the listing's events (list-watch.ts). */
export interface LiveChange {
  event: 'added' | 'changed' | 'removed';
  record: ListRecord;
}

/** One row: a lease held now, or one gone at the last change, with its mark. */
export interface LiveRow {
  record: ListRecord;
  /** Time left as probed at this poll; null when unknown. */
  remainingMs: number | null;
  /** The most time left seen for the lease: the whole its bar is drawn against. */
  leaseMs: number | null;
  mark: LeaseMark | null;
}

const keyOf = (record: ListRecord): string => JSON.stringify([record.leaseId, record.consumerGroup, record.queue]);

const MARK_ORDER: Record<LeaseMark, number> = { LOST: 0, GONE: 1, RELEASED: 2 };

/** Marked rows first (what the operator must see), then not live, then least time left, unknown last. */
function rank(row: LiveRow): [number, number] {
  if (row.mark) return [0, MARK_ORDER[row.mark]];
  if (!row.record.live) return [1, 0];
  if (row.remainingMs === null) return [3, 0];
  // As shown (minutes from an hour up): leases that show the same time left keep the listing's
  // order, and leases probed a few milliseconds apart never swap places at a redraw.
  return [2, shownDurationMs(row.remainingMs)];
}

export function sortRows(rows: LiveRow[]): LiveRow[] {
  // Stable: ties keep the listing's order (group, queue, first partition).
  return rows.sort((a, b) => {
    const [ra, va] = rank(a);
    const [rb, vb] = rank(b);
    return ra - rb || va - vb;
  });
}

/** The state of the view between polls: lease times seen, and the marks of the last change. */
export class ListLiveState {
  private readonly leaseMs = new Map<string, number>();
  /** Where each lease's time left was probed: what a lease gone since had left then. */
  private readonly probedAt = new Map<string, { remainingMs: number; at: number }>();
  /** Rows of leases gone at the last change, and the keys of those listed no longer live then. */
  private gone: LiveRow[] = [];
  private lost = new Set<string>();

  /**
   * A poll's listing and the changes since the last one. A lease that is gone is RELEASED when
   * the time it had left at the last probe had not run out (an ack ends a lease early), LOST when
   * it had (its lease expired), GONE when its time left was never known; a lease listed no longer
   * live (--all) is LOST. The marks of the last change stay until the next change.
   */
  update(records: readonly ListRecord[], changes: readonly LiveChange[], now: number): LiveRow[] {
    if (changes.length > 0) {
      this.gone = [];
      this.lost = new Set();
      for (const { event, record } of changes) {
        const key = keyOf(record);
        if (event === 'changed' && !record.live) this.lost.add(key);
        if (event !== 'removed') continue;
        const probe = this.probedAt.get(key);
        const mark: LeaseMark =
          probe === undefined ? 'GONE' : probe.remainingMs - (now - probe.at) > 0 ? 'RELEASED' : 'LOST';
        this.gone.push({ record, remainingMs: null, leaseMs: this.leaseMs.get(key) ?? null, mark });
        this.leaseMs.delete(key);
        this.probedAt.delete(key);
      }
    }
    const rows: LiveRow[] = records.map((record) => {
      const key = keyOf(record);
      const remainingMs = record.live && typeof record.remainingMs === 'number' ? record.remainingMs : null;
      if (remainingMs !== null) {
        this.leaseMs.set(key, Math.max(this.leaseMs.get(key) ?? 0, remainingMs));
        this.probedAt.set(key, { remainingMs, at: now });
      }
      const mark: LeaseMark | null = this.lost.has(key) && !record.live ? 'LOST' : null;
      return { record, remainingMs, leaseMs: this.leaseMs.get(key) ?? null, mark };
    });
    // A lease gone and back (a new pop under the same id is not possible, but a listing may blink)
    // is shown once, as it is listed now.
    const listed = new Set(rows.map((row) => keyOf(row.record)));
    return sortRows([...rows, ...this.gone.filter((row) => !listed.has(keyOf(row.record)))]);
  }
}

export interface ListFrameInput {
  rows: readonly LiveRow[];
  columns: number;
  rows_: number;
  intervalMs: number;
  now: number;
  /** A line that says what is wrong (the broker cannot be listed, time left unknown); null: none. */
  status: string | null;
  noHeaders: boolean;
  /**
   * The group and the queue that a filter names one value of (--group, --queue): every row says
   * the same there, so the frame leaves them out and gives their room to the partitions.
   */
  single?: { group: boolean; queue: boolean };
}

const groupLabel = (group: string): string => (group === '__QUEUE_MODE__' ? '(queue mode)' : group);
const timeOf = (ms: number): string => new Date(ms).toISOString().slice(11, 19);

/** Width of the bar by the terminal's: what is left once the lease id and time left are drawn. */
function barWidth(columns: number): number {
  if (columns >= 100) return 20;
  if (columns >= 80) return 14;
  return 8;
}

const LEFT_WIDTH = 8;
const GAP = '  ';
const PARTITIONS = 'PARTITIONS';
/** Narrower than this, the group and queue say nothing: they are left out. */
const MIN_WHERE_WIDTH = 8;

/**
 * The frame: a title, a status line when something is wrong, the header, then a row per lease
 * as many as fit, and a line saying how many more. Every word from the broker is escaped
 * (docs/security.md#outside-text-is-data); lines are cut to the width by the screen.
 *
 * A row is the lease id, its time left, its bar, its partitions, then its group and queue. The
 * partitions are what the operator came for (issue 39): on a narrow terminal the bar goes before
 * they would, and the group and queue go first (as do those a filter names one value of).
 */
export function listFrame(input: ListFrameInput, fit: Fit, style: Style): string[] {
  const { rows, columns } = input;
  const held = rows.filter((row) => row.mark === null && row.record.live).length;
  const count = (mark: LeaseMark): number => rows.filter((row) => row.mark === mark).length;
  const marks = (['LOST', 'RELEASED', 'GONE'] as const)
    .filter((mark) => count(mark) > 0)
    .map((mark) => `${count(mark)} ${mark.toLowerCase()}`);
  const lines: string[] = [
    `${[`${held} held`, ...marks].join(', ')} · every ${formatDuration(input.intervalMs)} · ` +
      `${timeOf(input.now)} · least time left first (Ctrl+C stops)`,
  ];
  if (input.status) lines.push(style.warn(escapeText(input.status)));
  const single = input.single ?? { group: false, queue: false };
  const whereOf = (record: ListRecord): string =>
    [
      ...(single.group ? [] : [escapeText(groupLabel(record.consumerGroup))]),
      ...(single.queue ? [] : [escapeText(record.queue)]),
    ].join('/');
  const whereHeader = [...(single.group ? [] : ['GROUP']), ...(single.queue ? [] : ['QUEUE'])].join('/');
  const partitionsOf = (record: ListRecord): string => escapeText(record.partitions.join(','));

  const idWidth = Math.min(40, Math.max(8, ...rows.map((row) => fit.width(escapeText(row.record.leaseId)))));
  let barCells = barWidth(columns);
  const restOf = (bar: number): number =>
    columns - idWidth - LEFT_WIDTH - (bar > 0 ? bar + GAP.length : 0) - 2 * GAP.length;
  // The partitions before the bar: a terminal too narrow for both keeps the partitions.
  if (restOf(barCells) < PARTITIONS.length) barCells = 0;
  const rest = restOf(barCells);
  const widestPartitions = Math.max(PARTITIONS.length, ...rows.map((row) => fit.width(partitionsOf(row.record))));
  const partitionsWidth = Math.max(0, Math.min(rest, widestPartitions));
  const whereWidth = whereHeader === '' ? 0 : rest - partitionsWidth - GAP.length;
  const withWhere = whereWidth >= MIN_WHERE_WIDTH;
  const cells = (id: string, left: string, drawn: string, partitions: string, where: string): string =>
    [
      fit.pad(id, idWidth),
      fit.pad(left, LEFT_WIDTH),
      ...(barCells > 0 ? [drawn] : []),
      ...(partitionsWidth > 0 ? [fit.pad(partitions, partitionsWidth)] : []),
      ...(withWhere ? [fit.cut(where, whereWidth)] : []),
    ]
      .join(GAP)
      .trimEnd();
  if (!input.noHeaders)
    lines.push(
      cells(
        'LEASE ID',
        'LEFT',
        fit.pad(barCells >= 13 ? 'OF LEASE TIME' : 'OF LEASE', barCells),
        PARTITIONS,
        whereHeader,
      ),
    );
  const room = Math.max(1, input.rows_ - 1 - lines.length);
  const shown = rows.length > room ? rows.slice(0, Math.max(0, room - 1)) : rows;
  for (const row of shown) {
    const { record } = row;
    let left: string;
    let drawn: string;
    if (row.mark) {
      const paint = row.mark === 'LOST' ? style.bad : style.dim;
      left = paint(row.mark);
      drawn = ' '.repeat(barCells);
    } else if (!record.live) {
      left = style.bad('expired');
      drawn = bar(0, 1, barCells);
    } else if (row.remainingMs === null) {
      left = '?';
      drawn = bar(null, null, barCells);
    } else {
      left = formatDuration(row.remainingMs);
      const share = row.leaseMs ? row.remainingMs / row.leaseMs : 1;
      const paint = share < 0.1 ? style.bad : share < 0.34 ? style.warn : style.ok;
      drawn = paint(bar(row.remainingMs, row.leaseMs, barCells));
    }
    lines.push(cells(escapeText(record.leaseId), left, drawn, partitionsOf(record), whereOf(record)));
  }
  if (shown.length < rows.length) {
    lines.push(
      style.dim(`… ${rows.length - shown.length} more below (a taller terminal shows them; -o json lists every one)`),
    );
  }
  return lines;
}
