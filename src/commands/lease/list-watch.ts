/**
 * `queenctl lease list --watch [--interval 2s]` (docs/cli-contract.md#lease-list-watch): lists
 * again every interval and prints only what changed, as `kubectl get -w` does: first every
 * current holder as `added`, then `added`, `changed` (its partitions, group or liveness differ)
 * and `removed`. A broker fault is one line when it starts and one when it ends, never a line a
 * poll; a refused token ends the watch (exit 3); a signal ends it with its own status.
 *
 * On a terminal, as a table, it is a live view instead (docs/cli-contract.md#live-views): the
 * leases redrawn in place at each poll, least time left first (output/list-live.ts), each lease's
 * time left probed as `inspect` does, once, then again only near its known deadline
 * (list-expiry.ts).
 */
import { AuthError, BrokerError, type ExitCode, signalExitCode } from '../../exit.js';
import { write, type OutputStream } from '../../io.js';
import { formatDuration } from '../../output/duration.js';
import { isJsonPath, type OutputFormat } from '../../output/format.js';
import { nameLines, refusedLeaseIdMessage } from '../../output/names.js';
import { escapeText } from '../../output/sanitise.js';
import { loadStyle, type Style } from '../../output/style.js';
import { showCell } from '../../output/table.js';
import { heldLeases } from '../../broker/consumer-groups.js';
import type { MetricsAddress } from '../../metrics/address.js';
import type { ListMetrics } from '../../metrics/list.js';
import { metricsServedNote } from '../../output/watch.js';
import { canRedraw, openLiveScreen, type LiveScreen } from '../../output/live.js';
import { ListLiveState, listFrame } from '../../output/list-live.js';
import { KnownExpiries } from './list-expiry.js';
import { probeExpiry, readHolders, tableRow, type ListOptions, type ListRecord, type ListRuntime } from './list.js';
import { yamlStringify } from '../../output/yaml.js';

export type ListEventKind = 'added' | 'changed' | 'removed';

/** One change: `event` and the record as `lease list -o json` prints it. */
export type ListEvent = { event: ListEventKind } & ListRecord;

const keyOf = (record: ListRecord): string => JSON.stringify([record.leaseId, record.consumerGroup, record.queue]);

function sameHolding(a: ListRecord, b: ListRecord): boolean {
  return (
    a.live === b.live &&
    a.partitions.length === b.partitions.length &&
    a.partitions.every((p, i) => p === b.partitions[i])
  );
}

/**
 * What changed from one listing to the next, in the listing's order (removed ones last, in the
 * order they were listed before). A record is one lease id in one group and queue.
 */
export function listChanges(before: ReadonlyMap<string, ListRecord>, now: readonly ListRecord[]): ListEvent[] {
  const events: ListEvent[] = [];
  const seen = new Set<string>();
  for (const record of now) {
    const key = keyOf(record);
    seen.add(key);
    const previous = before.get(key);
    if (!previous) events.push({ event: 'added', ...record });
    else if (!sameHolding(previous, record)) events.push({ event: 'changed', ...record });
  }
  // Gone from the listing is no longer held there: `live` says so, not what it was before.
  for (const [key, record] of before) if (!seen.has(key)) events.push({ event: 'removed', ...record, live: false });
  return events;
}

export interface ListWatchOptions extends ListOptions {
  intervalMs: number;
  /** --metrics-address: serve what the polls find (docs/metrics.md). */
  metricsAddress?: MetricsAddress | undefined;
}

/** How the events are printed: one line each, or rows of a table that grows. */
interface EventPrinter {
  print(events: readonly ListEvent[]): Promise<void>;
}

async function eventPrinter(
  format: OutputFormat,
  { stdout, stderr }: { stdout: OutputStream; stderr: OutputStream },
  options: ListOptions,
  color: boolean,
): Promise<EventPrinter> {
  if (format === 'json' || format === 'ndjson') {
    return { print: (events) => write(stdout, events.map((event) => `${JSON.stringify(event)}\n`).join('')) };
  }
  if (isJsonPath(format)) {
    const { template } = format;
    return { print: (events) => write(stdout, events.map((event) => template.renderLine(event)).join('')) };
  }
  if (format === 'yaml') {
    const stringify = await yamlStringify();
    let first = true;
    const document = (event: ListEvent): string => {
      const text = stringify(event);
      if (first) {
        first = false;
        return text;
      }
      return `---\n${text}`;
    };
    return { print: (events) => write(stdout, events.map(document).join('')) };
  }
  if (format === 'name') {
    // The ids of leases as they appear: what `extend -` or `watch -` would take next. An id
    // no reader could take is said once on stderr, and the watch goes on (names.ts).
    const refusedBefore = new Set<string>();
    return {
      async print(events) {
        const added = events.filter((event) => event.event === 'added').map((event) => event.leaseId);
        const { text, refused } = nameLines(added);
        if (text) await write(stdout, text);
        for (const leaseId of refused) {
          if (refusedBefore.has(leaseId)) continue;
          refusedBefore.add(leaseId);
          await write(stderr, refusedLeaseIdMessage(leaseId));
        }
      },
    };
  }
  return growingTable(stdout, options, format === 'wide', await loadStyle(color));
}

/** Room for what later rows usually hold: `removed`, a lease id, `(queue mode)`. */
const MIN_WIDTHS = [7, 36, 12, 8, 10];

/**
 * `kubectl get -w`: the header and the first rows set the columns' widths, and each later change
 * is one more row under them.
 */
function growingTable(stdout: OutputStream, options: ListOptions, wide: boolean, style: Style): EventPrinter {
  const headers = ['EVENT', 'LEASE ID', 'GROUP', 'QUEUE', 'PARTITIONS', 'LIVE'];
  let widths: number[] | null = null;
  // Widths count what shows, not colour codes.
  const visible = (cell: string): number => cell.replace(/\u001b\[[0-9;]*m/g, '').length;
  const line = (cells: string[]): string =>
    `${cells
      .map((cell, i) =>
        i === cells.length - 1 ? cell : cell + ' '.repeat(Math.max(0, (widths?.[i] ?? 0) - visible(cell))),
      )
      .join('   ')
      .trimEnd()}\n`;
  return {
    async print(events) {
      const rows = events.map((event) =>
        [event.event, ...tableRow(event, options, wide)].map((cell) => showCell(cell, style)),
      );
      if (rows.length === 0) return;
      let text = '';
      if (widths === null) {
        const all = options.noHeaders ? rows : [headers, ...rows];
        widths = headers.map((_, i) => Math.max(MIN_WIDTHS[i] ?? 0, ...all.map((row) => visible(row[i] ?? ''))));
        if (!options.noHeaders) text += line(headers);
      }
      for (const row of rows) text += line(row);
      await write(stdout, text);
    },
  };
}

const timeOf = (ms: number): string => new Date(ms).toISOString().slice(11, 19);

/**
 * The live view's work at each poll: the time left of each live lease, probed as inspect does (a
 * one-second renewal, which needs the read-write role) when it is not known or its known deadline
 * is near, and the frame drawn.
 */
class LiveList {
  private readonly state = new ListLiveState();
  /** What each lease's last probe found, so a lease is probed again only near its deadline. */
  private readonly expiries: KnownExpiries;
  /** Why time left is not shown, once the probe was refused; null while it is probed. */
  private probeRefused: string | null = null;
  private listing: ListRecord[] = [];
  constructor(
    private readonly screen: LiveScreen,
    private readonly style: Style,
    private readonly options: ListWatchOptions,
    private readonly runtime: ListRuntime,
  ) {
    this.expiries = new KnownExpiries(options.intervalMs);
  }

  /**
   * The live records' time left, in place: probed for the leases whose expiry is not known or
   * whose known deadline is near, counted down from the last probe for the others
   * (list-expiry.ts). False when a signal cut the probe short.
   */
  async probe(records: ListRecord[], once: ListOptions): Promise<boolean> {
    const live = records.filter((record) => record.live);
    if (this.probeRefused !== null || live.length === 0) return true;
    const sentAt = this.runtime.clock.now();
    const due = this.expiries.due(live, sentAt);
    if (due.length === 0) return true;
    try {
      const probed = await probeExpiry(due, once, this.runtime);
      this.expiries.learn(due, sentAt);
      return probed !== 'interrupted';
    } catch (error) {
      if (!(error instanceof AuthError)) throw error;
      // The listing needs the read-only role, the probe the read-write one: the view goes on
      // without time left, and says why.
      this.probeRefused = `time left unknown: ${error.message}`;
      for (const record of live) {
        delete record.remainingMs;
        delete record.expiresAt;
        delete record.held;
        delete record.error;
      }
      return true;
    }
  }

  /** A poll's listing and its changes. */
  listed(records: ListRecord[], events: readonly ListEvent[], outage: string | null): void {
    const changes = events.map((event) => ({ event: event.event, record: event }));
    this.listing = records;
    this.draw(this.state.update(records, changes, this.runtime.clock.now()), outage);
  }

  /** A poll that could not list: the last listing stays, under a line that says why. */
  failed(outage: string): void {
    this.draw(this.state.update(this.listing, [], this.runtime.clock.now()), outage);
  }

  private draw(rows: ReturnType<ListLiveState['update']>, outage: string | null): void {
    const { columns, rows: height } = this.screen.size();
    const status =
      outage ?? this.probeRefused ?? (rows.length === 0 ? 'no held leases yet; they show here as they come' : null);
    const frame = listFrame(
      {
        rows,
        columns,
        rows_: height,
        intervalMs: this.options.intervalMs,
        now: this.runtime.clock.now(),
        status,
        noHeaders: this.options.noHeaders,
        single: {
          group: new Set(this.options.groups).size === 1,
          queue: new Set(this.options.queues).size === 1,
        },
      },
      this.screen.fit,
      this.style,
    );
    this.screen.draw(frame);
  }

  close(): void {
    this.screen.close();
  }
}

export async function runListWatch(
  options: ListWatchOptions,
  runtime: ListRuntime,
  env: NodeJS.ProcessEnv = {},
): Promise<ExitCode> {
  // Listening before anything is sent: a bad or busy address ends the run as a usage error.
  let metrics: ListMetrics | null = null;
  if (options.metricsAddress) {
    const { serveListMetrics } = await import('../../metrics/list.js');
    metrics = await serveListMetrics(options.metricsAddress, runtime.clock);
    await write(runtime.io.stderr, metricsServedNote(metrics.address, false));
  }
  try {
    return await pollListings(options, runtime, metrics, env);
  } finally {
    await metrics?.close();
  }
}

async function pollListings(
  options: ListWatchOptions,
  runtime: ListRuntime,
  metrics: ListMetrics | null,
  env: NodeJS.ProcessEnv,
) {
  const { io } = runtime;
  const table = options.format === 'table' || options.format === 'wide';
  if (!table || !canRedraw(io.stdout, env)) return poll(options, runtime, metrics, null);
  const live = new LiveList(await openLiveScreen(io.stdout, env), await loadStyle(io.color), options, runtime);
  try {
    return await poll(options, runtime, metrics, live);
  } finally {
    // The last frame stays on the screen, the cursor below it, whatever ended the watch.
    live.close();
  }
}

async function poll(
  options: ListWatchOptions,
  runtime: ListRuntime,
  metrics: ListMetrics | null,
  live: LiveList | null,
) {
  const { io, clock, signal } = runtime;
  const printer = options.format === null || live ? null : await eventPrinter(options.format, io, options, io.color);
  // Each poll asks once: the next poll is the retry.
  const once: ListOptions = { ...options, retry: { ...options.retry, retries: 0 } };
  const note = (text: string): Promise<void> =>
    io.quiet ? Promise.resolve() : write(io.stderr, `queenctl: ${timeOf(clock.now())} ${escapeText(text)}\n`);
  let known = new Map<string, ListRecord>();
  let downSince: number | null = null;
  let listedOnce = false;
  while (!signal.aborted) {
    let records: ListRecord[] | null = null;
    try {
      records = heldLeases(await readHolders(once, runtime), options);
    } catch (error) {
      if (signal.aborted) break;
      // A refused token will not be accepted on the next poll.
      if (error instanceof AuthError || !(error instanceof BrokerError)) throw error;
      metrics?.pollFailed();
      if (live) {
        downSince ??= clock.now();
        live.failed(
          `the broker cannot be listed for ${formatDuration(clock.now() - downSince)}: ${error.message}; ` +
            `trying again every ${formatDuration(options.intervalMs)}`,
        );
      } else if (downSince === null) {
        downSince = clock.now();
        await note(
          `the broker cannot be listed: ${error.message}; trying again every ${formatDuration(options.intervalMs)}`,
        );
      }
    }
    if (records && live) {
      downSince = null;
      if (!(await live.probe(records, once))) break;
      const events = listChanges(known, records);
      known = new Map(records.map((record) => [keyOf(record), record]));
      metrics?.listed(records, events.length);
      live.listed(records, events, null);
    } else if (records) {
      if (downSince !== null) {
        await note(`the broker answers again after ${formatDuration(clock.now() - downSince)}`);
        downSince = null;
      }
      const events = listChanges(known, records);
      known = new Map(records.map((record) => [keyOf(record), record]));
      metrics?.listed(records, events.length);
      if (printer) await printer.print(events);
      if (!listedOnce && records.length === 0)
        await note('no held leases yet; printing changes as they come (Ctrl+C stops)');
      listedOnce = true;
    }
    try {
      await clock.sleep(options.intervalMs, signal);
    } catch {
      break;
    }
  }
  return signalExitCode(signal.reason);
}
