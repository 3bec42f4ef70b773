/**
 * `queenctl lease list`: the leases that are held, by consumer group, queue and partition, for
 * the operator who knows where the trouble is but not the lease id (docs/cli-contract.md#lease-list).
 * The broker has no route that lists leases; its consumer-group routes name each partition's
 * holder (docs/broker.md#consumer-groups), and `--expiry` asks each lease the way `inspect` does.
 */
import { Command, Option } from 'commander';
import { isPlainLeaseId, leaseIdSource, parseDuration } from '../../args.js';
import {
  QUEUE_MODE_GROUP,
  heldLeases,
  type GroupQueue,
  type HeldLease,
  type PartitionHolder,
} from '../../broker/consumer-groups.js';
import { withRetries, type RetryPolicy } from '../../broker/retry.js';
import { AuthError, ExitCode, UsageError, signalExitCode } from '../../exit.js';
import { parseMetricsAddress, type MetricsAddress } from '../../metrics/address.js';
import { checkName } from '../../names.js';
import { write } from '../../io.js';
import { formatDuration } from '../../output/duration.js';
import { isMachineFormat, type OutputFormat } from '../../output/format.js';
import { recordSink } from '../../output/records.js';
import { nameLines, refusedLeaseIdMessage } from '../../output/names.js';
import { escapeText } from '../../output/sanitise.js';
import { loadStyle } from '../../output/style.js';
import type { ColumnSpec } from '../../output/fit.js';
import { bad, ok, tableFor, type Cell } from '../../output/table.js';
import { renewAll, type RenewAllContext } from '../../renewal/renew-all.js';
import { flagParser, type GlobalContext } from '../globals.js';
import type { Runtime } from '../runtime.js';
import { INSPECT_SECONDS, inspectRecord } from './inspect.js';
import { durationOption, exitCodesHelp, retriesOption } from './options.js';

/**
 * Repeatable flags: every value given, in order. They are checked in the action (checkNames), so
 * a refused name is shown escaped on one line of queenctl's, never echoed raw by commander.
 */
const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/**
 * The filters are names (names.ts), checked before anything is sent: a group goes into the URL
 * path of GET /api/v1/consumer-groups/<group>; queues and partitions are matched here only.
 */
function checkNames(options: ListFlags): void {
  for (const group of options.group ?? []) checkName(group, 'group', '--group', true);
  for (const queue of options.queue ?? []) checkName(queue, 'queue', '--queue', false);
  for (const partition of options.partition ?? []) checkName(partition, 'partition', '--partition', false);
}

export function listCommand(globals: GlobalContext): Command {
  return new Command('list')
    .description('find the leases that are held, by consumer group, queue and partition')
    .addOption(
      new Option('--group <name>', 'only this consumer group (repeatable; __QUEUE_MODE__ for queue mode)').argParser(
        collect,
      ),
    )
    .addOption(new Option('--queue <name>', 'only this queue (repeatable)').argParser(collect))
    .addOption(new Option('--partition <name>', 'only leases holding this partition (repeatable)').argParser(collect))
    .option('--all', 'also holders whose lease expired but whose id the broker still records (live: false)')
    .option('--expiry', 'add expiresAt, remainingMs and held, probed as inspect does (needs the read-write role)')
    .addOption(
      durationOption('--expiring-within <duration>', 'only leases that expire within this long (implies --expiry)'),
    )
    .addOption(retriesOption())
    .option('-w, --watch', 'keep listing, and print what changed: added, changed, removed (SIGINT stops)')
    .addOption(
      new Option(
        '--interval <duration>',
        'with --watch: how often to list again (default 2s, at least 100ms)',
      ).argParser(flagParser((text) => parseInterval(text))),
    )
    .addOption(
      new Option(
        '--metrics-address <[host]:port>',
        'with --watch: serve Prometheus metrics there (:9464 every interface, 127.0.0.1:9464 loopback, :0 a free port)',
      ).argParser(flagParser(parseMetricsAddress)),
    )
    .addHelpText(
      'after',
      `
How it works: the broker has no route that lists leases, but its consumer-group routes name the
lease id holding each partition. list reads GET /api/v1/consumer-groups (unless --group names the
groups) and GET /api/v1/consumer-groups/<group> for each, which a read-only token may do. One row
per lease id, its partitions gathered; filters of one kind match any value, different kinds all.
A partition released by an ack, or never leased, has no holder and is never listed.

--expiry asks the extend route for one second per lease, as inspect does: a live lease keeps its
deadline. That needs the read-write role; a read-only token exits 3.

--watch lists again every --interval and prints only what changed, as kubectl get -w does: first
every current holder as added, then added, changed (its partitions or liveness differ) and
removed; -o json/ndjson one event a line, the record plus "event"; -o name the ids as they are
added. On a terminal, as a table, it is a live view instead: redrawn in place at each poll, least
time left first (each lease probed as --expiry does, which needs the read-write role: once, then
again only near its known deadline), its time left as a bar, then its partitions, leases lost or
released marked until the next change; a pipe gets the lines.
A broker that cannot be reached is one line on stderr, and one when it is back. It stops
on SIGINT or SIGTERM (exit 130, 143); a refused token stops it with exit 3. --metrics-address
<[host]:port> serves Prometheus metrics meanwhile: held leases by group and queue, changes
seen, polls failing (docs/metrics.md).

${exitCodesHelp({
  ok: 'the listing worked (also when it found nothing)',
  broker: 'broker error: unreachable, timed out, 5xx, an answer outside the contract, or a probe failed',
  notHeld: 'not used: a lease found gone is listed with live: false',
})}

Examples:
  queenctl lease list --queue orders --partition p7
  queenctl lease list --group billing --expiry
  queenctl lease list --expiring-within 10m -o json
  queenctl lease list --queue orders -o name | queenctl lease extend - --allow-empty --seconds 600
  queenctl lease list --group billing -o name | queenctl lease watch - --allow-empty -- ./nightly-reprocess.sh
  queenctl lease list --queue orders --watch
  queenctl lease list --watch --interval 10s -o ndjson | jq -c 'select(.event == "removed")'`,
    )
    .action(async (options: ListFlags, command: Command) => {
      checkNames(options);
      checkWatchFlags(options);
      const expiry = Boolean(options.expiry) || options.expiringWithin !== undefined;
      await globals.run(
        command,
        async (runtime, settings, proc) => {
          const listOptions: ListOptions = {
            groups: options.group ?? [],
            queues: options.queue ?? [],
            partitions: options.partition ?? [],
            all: Boolean(options.all),
            expiry,
            expiringWithinMs: options.expiringWithin,
            retry: { ...settings.retry, retries: options.retries },
            concurrency: settings.concurrency,
            format: settings.format,
            noHeaders: settings.noHeaders,
          };
          if (!options.watch) return runList(listOptions, runtime);
          const { runListWatch } = await import('./list-watch.js');
          return runListWatch(
            {
              ...listOptions,
              intervalMs: options.interval ?? DEFAULT_INTERVAL_MS,
              metricsAddress: options.metricsAddress,
            },
            runtime,
            proc.env,
          );
        },
        // A listing is a few requests; --watch lists again and again, an expiry asks each lease.
        { requests: options.watch || expiry ? 'many' : 'few' },
      );
    });
}

const DEFAULT_INTERVAL_MS = 2_000;
/** A listing reads every group: polling faster than this only loads the broker. */
const MIN_INTERVAL_MS = 100;

function parseInterval(text: string): number {
  const ms = parseDuration(text, '--interval');
  if (ms < MIN_INTERVAL_MS) {
    throw new UsageError(`--interval must be at least ${MIN_INTERVAL_MS}ms, not ${JSON.stringify(text)}`);
  }
  return ms;
}

/** --watch's flags, checked before anything is sent. */
function checkWatchFlags(options: ListFlags): void {
  if (options.metricsAddress !== undefined && !options.watch) {
    throw new UsageError('--metrics-address serves what --watch finds', 'add --watch, or drop --metrics-address');
  }
  if (options.interval !== undefined && !options.watch) {
    throw new UsageError('--interval is how often --watch lists again', 'add --watch, or drop --interval');
  }
  if (options.watch && (options.expiry || options.expiringWithin !== undefined)) {
    throw new UsageError(
      '--watch prints changes of holders; --expiry and --expiring-within probe each lease and cannot be watched',
      'drop --expiry, or run lease list --expiry on its own',
    );
  }
}

interface ListFlags {
  group?: string[];
  queue?: string[];
  partition?: string[];
  all?: boolean;
  expiry?: boolean;
  expiringWithin?: number;
  retries: number;
  watch?: boolean;
  interval?: number;
  metricsAddress?: MetricsAddress;
}

export interface ListOptions {
  /** --group: read these groups only; empty: every group the broker lists. */
  groups: readonly string[];
  queues: readonly string[];
  partitions: readonly string[];
  all: boolean;
  /** --expiry, or implied by --expiring-within. */
  expiry: boolean;
  expiringWithinMs: number | undefined;
  retry: RetryPolicy;
  concurrency: number;
  /** null: print no results (-q without -o). */
  format: OutputFormat | null;
  noHeaders: boolean;
}

export interface ListClient extends Pick<RenewAllContext['client'], 'extend'> {
  consumerGroups(options: { signal: AbortSignal }): Promise<GroupQueue[]>;
  consumerGroup(group: string, options: { signal: AbortSignal }): Promise<PartitionHolder[]>;
}

export type ListRuntime = Runtime<ListClient>;

/** One record of `lease list -o json`; the expiry keys only with --expiry. */
export interface ListRecord extends HeldLease {
  expiresAt?: string | null;
  remainingMs?: number | null;
  held?: number | null;
  /** Why the expiry is unknown: the probe of this lease failed. */
  error?: string;
}

/** The table's PARTITIONS column: a long list shortened, so one lease stays one line. */
export function partitionSummary(partitions: readonly string[], shown = 3): string {
  if (partitions.length <= shown + 1) return partitions.join(', ');
  return `${partitions.slice(0, shown).join(', ')}, +${partitions.length - shown} more`;
}

export function groupLabel(group: string): string {
  return group === QUEUE_MODE_GROUP ? '(queue mode)' : group;
}

/** Runs `fetch` over `items` with at most `limit` at once, results in input order. */
async function mapBounded<T, R>(items: readonly T[], limit: number, fetch: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fetch(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** Every holder the filters can select: the groups' partitions, fetched as few as the filters allow. */
export async function readHolders(
  options: Pick<ListOptions, 'groups' | 'queues' | 'retry' | 'concurrency'>,
  runtime: ListRuntime,
): Promise<PartitionHolder[]> {
  const { client, clock, signal } = runtime;
  const retrying = <T>(request: () => Promise<T>): Promise<T> => withRetries(request, options.retry, { clock, signal });
  let groups = [...new Set(options.groups)];
  if (groups.length === 0) {
    const known = await retrying(() => client.consumerGroups({ signal }));
    // A group none of whose queues is asked for need not be read.
    const wanted = (entry: GroupQueue): boolean => options.queues.length === 0 || options.queues.includes(entry.queue);
    groups = [...new Set(known.filter(wanted).map((entry) => entry.group))];
  }
  const perGroup = await mapBounded(groups, options.concurrency, (group) =>
    retrying(() => client.consumerGroup(group, { signal })),
  );
  return perGroup.flat();
}

/** What a read-only token cannot do: the probe is a renewal of one second. */
function probeRefused(error: AuthError): AuthError {
  return new AuthError(
    `--expiry could not probe the leases: ${error.message}`,
    error.status,
    error.status === 403
      ? 'listing needs the read-only role, but --expiry asks the extend route for one second, which needs the ' +
          'read-write role: drop --expiry, or use a token with the read-write role'
      : error.hint,
  );
}

/**
 * Adds expiresAt, remainingMs and held, exactly as `inspect` gets them (the one-second probe,
 * through the same bulk engine, so thousands of leases are probed concurrently).
 */
export async function probeExpiry(
  records: ListRecord[],
  options: ListOptions,
  runtime: ListRuntime,
): Promise<'probed' | 'failed' | 'interrupted'> {
  const byId = new Map<string, ListRecord[]>();
  let failed = false;
  for (const record of records) {
    // An id no lease id can be (args.ts) is an answer outside the contract: it is not sent, and its
    // expiry stays unknown, instead of the whole listing ending as a usage error.
    if (!isPlainLeaseId(record.leaseId)) {
      record.expiresAt = null;
      record.remainingMs = null;
      record.held = null;
      record.error = 'not probed: the broker listed an id that is no lease id (an answer outside the contract)';
      failed = true;
      continue;
    }
    byId.set(record.leaseId, [...(byId.get(record.leaseId) ?? []), record]);
  }
  if (byId.size === 0) return 'failed';
  const source = leaseIdSource([...byId.keys()], () => runtime.io.stdin);
  let refused: AuthError | null = null;
  const summary = await renewAll(
    source,
    { seconds: INSPECT_SECONDS, retry: options.retry, concurrency: options.concurrency },
    runtime,
    async (outcome) => {
      const probed = inspectRecord(outcome, runtime.clock.now());
      if ('error' in outcome) {
        if (outcome.error instanceof AuthError) refused ??= outcome.error;
        failed = true;
      }
      for (const record of byId.get(outcome.leaseId) ?? []) {
        // Found gone by the probe: not live, whatever the listing said a moment before.
        if (probed.live !== null) record.live = probed.live;
        record.expiresAt = probed.expiresAt;
        record.remainingMs = probed.remainingMs;
        record.held = probed.held;
        if (probed.error !== undefined) record.error = probed.error;
      }
    },
  );
  if (refused) throw probeRefused(refused);
  // With every id sent, renewAll does not call a signal a stop: the answers it cut short say so.
  if (runtime.signal.aborted) return 'interrupted';
  return failed || summary.stoppedBy !== null ? 'failed' : 'probed';
}

function describeFilters(options: ListOptions): string {
  const parts: string[] = [];
  const named = (what: string, values: readonly string[]): void => {
    if (values.length > 0) parts.push(`${what} ${values.join(' or ')}`);
  };
  named('group', options.groups.map(groupLabel));
  named('queue', options.queues);
  named('partition', options.partitions);
  if (options.expiringWithinMs !== undefined) parts.push(`expiring within ${formatDuration(options.expiringWithinMs)}`);
  return parts.length > 0 ? ` (${parts.join(', ')})` : '';
}

export function tableRow(record: ListRecord, options: ListOptions, wide: boolean): Cell[] {
  const live = record.live ? ok('yes') : bad('NO');
  const row: Cell[] = [
    record.leaseId,
    groupLabel(record.consumerGroup),
    record.queue,
    wide ? record.partitions.join(', ') : partitionSummary(record.partitions),
    live,
  ];
  if (!options.expiry) return row;
  const remaining =
    record.remainingMs === null || record.remainingMs === undefined
      ? record.error
        ? bad('error')
        : '-'
      : formatDuration(record.remainingMs);
  return [...row, record.expiresAt ?? '-', remaining];
}

/**
 * The columns, and what each is worth on a narrow terminal (output/fit.ts): names are cut with
 * `…` before anything is dropped. PARTITIONS is kept longest (issue 39): which partitions a lease
 * holds is what the operator came for when a partition is stuck. A GROUP or QUEUE that a filter
 * names one value of says the same on every row, and goes first; then the expiry's time of day,
 * then the queue, the group, and the time left.
 */
function headers(options: ListOptions): ColumnSpec[] {
  const single = (values: readonly string[]): boolean => new Set(values).size === 1;
  const base: ColumnSpec[] = [
    { header: 'LEASE ID', keep: 'always' },
    { header: 'GROUP', keep: single(options.groups) ? 1 : 4, shrink: 'cut' },
    { header: 'QUEUE', keep: single(options.queues) ? 1 : 3, shrink: 'cut' },
    { header: 'PARTITIONS', keep: 6, shrink: 'cut' },
    { header: 'LIVE', keep: 'always' },
  ];
  if (!options.expiry) return base;
  return [...base, { header: 'EXPIRES AT', keep: 2, shrink: 'time' }, { header: 'REMAINING', keep: 5 }];
}

/**
 * A signal (SIGINT, SIGTERM, SIGHUP) ends a listing before it is printed: a listing is never
 * printed in part (docs/cli-contract.md#lease-list), and stdout stays empty.
 */
async function interrupted(runtime: ListRuntime): Promise<ExitCode> {
  await write(runtime.io.stderr, 'queenctl: interrupted before the listing was complete; nothing was listed\n');
  return signalExitCode(runtime.signal.reason);
}

export async function runList(options: ListOptions, runtime: ListRuntime): Promise<ExitCode> {
  const { io, signal } = runtime;
  let holders: PartitionHolder[];
  try {
    holders = await readHolders(options, runtime);
  } catch (error) {
    // A request cut short by the signal rejects with the signal's name, not an error to report.
    if (signal.aborted) return interrupted(runtime);
    throw error;
  }
  let records: ListRecord[] = heldLeases(holders, options);
  let code: ExitCode = ExitCode.Ok;
  if (options.expiry && records.length > 0) {
    const probe = await probeExpiry(records, options, runtime);
    if (probe === 'interrupted') return interrupted(runtime);
    if (probe === 'failed') code = ExitCode.Broker;
  }
  const within = options.expiringWithinMs;
  if (within !== undefined) {
    // A lease whose probe failed stays: its expiry is unknown, and dropping it would hide it.
    records = records.filter((record) =>
      record.error !== undefined ? true : record.live && record.remainingMs != null && record.remainingMs <= within,
    );
  }
  const { format } = options;
  if (format === 'name') {
    const { text, refused } = nameLines(records.map((record) => record.leaseId));
    if (text) await write(io.stdout, text);
    for (const leaseId of refused) await write(io.stderr, refusedLeaseIdMessage(leaseId));
    if (refused.length > 0) code = ExitCode.Broker;
  } else if (isMachineFormat(format)) {
    const sink = await recordSink<ListRecord>(io.stdout, format, false);
    for (const record of records) await sink.add(record);
    await sink.end();
  } else if (format && records.length > 0) {
    const wide = format === 'wide';
    const style = await loadStyle(io.color);
    const rows = records.map((record) => tableRow(record, options, wide));
    const table = { headers: headers(options), rows, noHeaders: options.noHeaders, style };
    const printed = await tableFor(table, { width: io.width, stderrWidth: io.stderrWidth, wide, quiet: io.quiet });
    await write(io.stdout, printed.text);
    if (printed.note) await write(io.stderr, printed.note);
  }
  if (records.length === 0 && !io.quiet) {
    const which = options.all ? 'no leases, held or stale, were found' : 'no held leases were found';
    await write(io.stderr, `queenctl: ${which}${escapeText(describeFilters(options))}\n`);
  }
  const failed = records.filter((record) => record.error !== undefined);
  if (failed.length > 0) {
    const first = failed[0] as ListRecord;
    await write(
      io.stderr,
      `queenctl: the expiry of ${failed.length} of ${records.length} leases is unknown: ` +
        `the probe failed (${escapeText(`${first.leaseId}: ${first.error}`)}); rerun once the broker answers\n`,
    );
  }
  return code;
}
