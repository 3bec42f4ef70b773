/**
 * `queenctl lease list --watch [--interval 2s]` (docs/cli-contract.md#lease-list-watch): lists
 * again every interval and prints only what changed, as `kubectl get -w` does: first every
 * current holder as `added`, then `added`, `changed` (its partitions, group or liveness differ)
 * and `removed`. A broker fault is one line when it starts and one when it ends, never a line a
 * poll; a refused token ends the watch (exit 3); a signal ends it with its own status.
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
import { readHolders, tableRow, type ListOptions, type ListRecord, type ListRuntime } from './list.js';
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

export async function runListWatch(options: ListWatchOptions, runtime: ListRuntime): Promise<ExitCode> {
  // Listening before anything is sent: a bad or busy address ends the run as a usage error.
  let metrics: ListMetrics | null = null;
  if (options.metricsAddress) {
    const { serveListMetrics } = await import('../../metrics/list.js');
    metrics = await serveListMetrics(options.metricsAddress, runtime.clock);
    await write(runtime.io.stderr, metricsServedNote(metrics.address, false));
  }
  try {
    return await pollListings(options, runtime, metrics);
  } finally {
    await metrics?.close();
  }
}

async function pollListings(options: ListWatchOptions, runtime: ListRuntime, metrics: ListMetrics | null) {
  const { io, clock, signal } = runtime;
  const printer = options.format === null ? null : await eventPrinter(options.format, io, options, io.color);
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
      if (downSince === null) {
        downSince = clock.now();
        await note(
          `the broker cannot be listed: ${error.message}; trying again every ${formatDuration(options.intervalMs)}`,
        );
      }
    }
    if (records) {
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
