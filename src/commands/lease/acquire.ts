/**
 * `queenctl lease acquire <queue>`: one pop that takes a lease, printed as the batch record
 * `lease ack` reads (docs/cli-contract.md#lease-acquire). Never autoAck. Right after the pop the
 * lease is renewed once: to `--seconds` when given, else by the one-second probe of `inspect`,
 * which by the later-of rule leaves the queue's lease time in place (docs/broker.md#later-of-rule);
 * either way the answer gives the expiry, which a pop's answer does not.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, Option } from 'commander';
import { parseCount, parseSeconds } from '../../args.js';
import { batchRecordText, jsonDepth, jsonText, type BatchMessage, type BatchRecord } from '../../broker/batch.js';
import { estimateBrokerClock, remainingMs, type BrokerClockEstimate } from '../../broker/broker-clock.js';
import type { BrokerClient } from '../../broker/client.js';
import { isHeld, type Renewal } from '../../broker/contract.js';
import { MAX_POP_BATCH, type PopOutcome, type PopRequest } from '../../broker/pop.js';
import { withRetries, type RetryPolicy } from '../../broker/retry.js';
import { ExitCode, QueenctlError, signalExitCode } from '../../exit.js';
import { write } from '../../io.js';
import { checkName } from '../../names.js';
import { formatDuration } from '../../output/duration.js';
import { isMachineFormat, type OutputFormat } from '../../output/format.js';
import { escapeText, shortened } from '../../output/sanitise.js';
import { recordSink } from '../../output/records.js';
import { tableFor } from '../../output/table.js';
import { writeMessage } from '../../output/width.js';
import { errorMessage, shellWord, warningMessage } from '../../output/words.js';
import { flagParser, type GlobalContext } from '../globals.js';
import type { Runtime } from '../runtime.js';
import { groupLabel, partitionSummary } from './list.js';
import { durationOption, exitCodesHelp, retriesOption } from './options.js';

/** The most messages one pop may ask for, and partitions one lease may claim. */
export const MAX_BATCH = MAX_POP_BATCH;
export const MAX_PARTITIONS = 1_000;

/** The flags of a pop, which `lease run` takes too. */
export interface AcquireOptions {
  queue: string;
  group: string | undefined;
  partition: string | undefined;
  batch: number | undefined;
  partitions: number | undefined;
  waitMs: number | undefined;
  /** Renew at once to last at least this long; undefined: the one-second probe only. */
  seconds: number | undefined;
  retry: RetryPolicy;
  /** null: print no results (-q without -o). */
  format: OutputFormat | null;
  noHeaders: boolean;
}

export type AcquireRuntime = Runtime<Pick<BrokerClient, 'pop' | 'extend' | 'server'>>;

/** The acquire flags, added to a command: `lease acquire`, and later `lease run`. */
export function addAcquireOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--group <name>', 'consumer group to pop for (default: queue mode, __QUEUE_MODE__)').argParser(
        flagParser((text) => checkName(text, 'group', '--group', true)),
      ),
    )
    .addOption(
      new Option('--partition <name>', 'pop this partition only (exit 4 if another lease holds it)').argParser(
        flagParser((text) => checkName(text, 'partition', '--partition', true)),
      ),
    )
    .addOption(
      new Option('--batch <n>', `the most messages to take, 1 to ${MAX_BATCH} (default: the broker's)`).argParser(
        flagParser((text) => parseCount(text, '--batch', 1, MAX_BATCH)),
      ),
    )
    .addOption(
      new Option(
        '--partitions <n>',
        `the most partitions one lease may claim, 1 to ${MAX_PARTITIONS} (default: the broker's, 1)`,
      ).argParser(flagParser((text) => parseCount(text, '--partitions', 1, MAX_PARTITIONS))),
    )
    .addOption(durationOption('--wait <duration>', 'long poll: wait up to this long for something to take'));
}

export interface AcquireFlags {
  group?: string;
  partition?: string;
  batch?: number;
  partitions?: number;
  wait?: number;
  seconds?: number;
  retries: number;
}

/** The pop the acquire flags ask for (`lease acquire`, and each batch of `lease run`). */
export function acquireRequest(
  queue: string,
  flags: AcquireFlags,
  retry: RetryPolicy,
): Omit<AcquireOptions, 'format' | 'noHeaders'> {
  return {
    queue,
    group: flags.group,
    partition: flags.partition,
    batch: flags.batch,
    partitions: flags.partitions,
    waitMs: flags.wait,
    seconds: flags.seconds,
    retry: { ...retry, retries: flags.retries },
  };
}

export function acquireCommand(globals: GlobalContext): Command {
  const command = new Command('acquire')
    .description('take a batch: one pop that leases messages, printed as the record lease ack reads')
    .argument('<queue>', 'the queue to pop from');
  return addAcquireOptions(command)
    .addOption(
      new Option(
        '--seconds <n>',
        "renew at once to last at least n seconds (default: the queue's lease time, left as the pop made it)",
      ).argParser(flagParser((text) => parseSeconds(text))),
    )
    .addOption(
      retriesOption(
        'retries of the renewal after the pop (refused, reset, timeout, 429, 502/503/504), and of a pop that ' +
          'never reached the broker',
      ),
    )
    .addHelpText(
      'after',
      `
How it works: one GET /api/v1/pop/queue/<queue> (.../partition/<name> with --partition), never
with autoAck. A pop's lease lasts the queue's lease time; right after it, acquire renews the
lease once, to --seconds when given, else for one second, which by the later-of rule leaves it
as it was. That renewal reports the expiry (expiresAt, LEFT), which the pop does not.

-o json prints the batch record: leaseId, queue, consumerGroup, partitions, expiresAt and the
messages, every key as the broker sent it. lease ack reads it. -o name prints the lease id,
and keeps the record as a table does: stderr says how to ack the batch from it.

The pop is sent once: one that may have been read but got no answer may have taken a lease,
and a second would take another. Its messages come back after the queue's lease time.

${exitCodesHelp({
  ok: 'a lease on at least one message was taken',
  broker: 'broker error: unreachable, timed out, 5xx, or an answer outside the contract',
  notHeld:
    'nothing to take: an empty queue, every partition leased, a queue the broker does not know\n' +
    '     (it answers all three alike), nothing by the end of --wait, --partition held by another\n' +
    '     lease, or a lease on no messages',
})}
With --seconds, a lease that was taken but not renewed prints its record and exits 2 (3 if the
token may not renew): it lasts the queue's lease time.

Examples:
  queenctl lease acquire orders --batch 10 -o json > batch.json
  queenctl lease acquire orders --group billing --partition p7 --seconds 600
  queenctl lease acquire orders --wait 30s -o name`,
    )
    .action(async (queue: string, flags: AcquireFlags, command: Command) => {
      checkName(queue, 'queue', 'queue', true);
      await globals.run(
        command,
        (runtime, settings) =>
          runAcquire(
            {
              ...acquireRequest(queue, flags, settings.retry),
              format: settings.format,
              noHeaders: settings.noHeaders,
            },
            runtime,
          ),
        { requests: 'few' },
      );
    });
}

/** The pop an AcquireOptions asks for. */
export function popRequest(options: Omit<AcquireOptions, 'retry' | 'format' | 'noHeaders' | 'seconds'>): PopRequest {
  return {
    queue: options.queue,
    partition: options.partition,
    group: options.group,
    batch: options.batch,
    partitions: options.partitions,
    waitMs: options.waitMs,
  };
}

/** What one acquire came to: a batch (its record and time left) or why there is none. */
export type Acquired =
  | { kind: 'batch'; record: BatchRecord; remainingMs: number | null; renewal: RenewalOutcome }
  | { kind: 'none'; code: ExitCode; message: string };

/** How the renewal right after the pop went: fine, or why the lease lasts less than asked. */
export type RenewalOutcome = { ok: true } | { ok: false; error: QueenctlError } | { ok: false; lost: true };

/** Why nothing was taken, in one line (`queue` as given). */
export function nothingMessage(outcome: Exclude<PopOutcome, { kind: 'lease' }>, options: AcquireOptions): string {
  const queue = escapeText(options.queue);
  const where =
    options.partition === undefined ? `queue ${queue}` : `partition ${escapeText(options.partition)} of queue ${queue}`;
  const group = options.group === undefined ? '' : ` for consumer group ${escapeText(options.group)}`;
  switch (outcome.kind) {
    case 'nothing':
      return outcome.waited
        ? `nothing to take from ${where}${group} by the end of --wait ${formatDuration(options.waitMs ?? 0)}`
        : `nothing to take from ${where}${group}: it is empty, every partition is leased, or the broker does not ` +
            `know the queue (it answers all three the same way: no_available_partition)`;
    case 'lease-held':
      return (
        `${where} is held by another lease${group} (lease_held): queenctl lease list --queue ${queue} ` +
        `--partition ${escapeText(options.partition ?? '')} names it`
      );
    case 'empty-lease':
      return (
        `the broker handed out lease ${escapeText(outcome.leaseId)} on no messages of ${where}${group}: nothing ` +
        `to process or ack; it holds ${listPartitions(outcome.partitions)} for the queue's lease time`
      );
  }
}

function listPartitions(partitions: readonly string[]): string {
  if (partitions.length === 0) return 'its partition';
  return `partition${partitions.length > 1 ? 's' : ''} ${partitions.map(escapeText).join(', ')}`;
}

/**
 * The work of acquire without its printing: the pop, then the renewal that reads the expiry.
 * `lease run` takes its batches through this.
 */
export async function acquireBatch(options: AcquireOptions, runtime: AcquireRuntime): Promise<Acquired> {
  const { client, clock, signal } = runtime;
  // Only a pop that never reached the broker is retried: the client makes any other failure
  // final (client.ts, `once`), since a pop that was read may have taken a lease.
  const outcome = await withRetries(() => client.pop(popRequest(options), { signal }), options.retry, {
    clock,
    signal,
  });
  if (outcome.kind !== 'lease') {
    return { kind: 'none', code: ExitCode.NotHeld, message: nothingMessage(outcome, options) };
  }
  const { batch } = outcome;
  const seconds = options.seconds ?? 1;
  let renewal: Renewal;
  let brokerClock: BrokerClockEstimate;
  const sentAt = clock.now();
  try {
    renewal = await withRetries(() => client.extend(batch.leaseId, seconds, { signal }), options.retry, {
      clock,
      signal,
    });
    brokerClock = estimateBrokerClock(renewal, seconds, sentAt, clock.now());
  } catch (error) {
    if (signal.aborted || !(error instanceof QueenctlError)) throw error;
    const record: BatchRecord = { ...batch, expiresAt: null, messages: batch.messages };
    return { kind: 'batch', record: ordered(record), remainingMs: null, renewal: { ok: false, error } };
  }
  if (!isHeld(renewal)) {
    const record: BatchRecord = { ...batch, expiresAt: null };
    return { kind: 'batch', record: ordered(record), remainingMs: null, renewal: { ok: false, lost: true } };
  }
  const expiresAt = renewal.result.expiresAt;
  const left = renewal.expiresAtMs === null ? null : remainingMs(renewal.expiresAtMs, clock.now(), brokerClock);
  return { kind: 'batch', record: ordered({ ...batch, expiresAt }), remainingMs: left, renewal: { ok: true } };
}

/** The record's keys in the contract's order. */
function ordered(record: BatchRecord): BatchRecord {
  const { leaseId, queue, consumerGroup, partitions, expiresAt, messages } = record;
  return { leaseId, queue, consumerGroup, partitions, expiresAt, messages };
}

export async function runAcquire(options: AcquireOptions, runtime: AcquireRuntime): Promise<ExitCode> {
  const { io, signal } = runtime;
  let acquired: Acquired;
  try {
    acquired = await acquireBatch(options, runtime);
  } catch (error) {
    if (!signal.aborted) throw error;
    await writeMessage(
      io,
      `queenctl: interrupted during the pop of queue ${escapeText(options.queue)}: a lease it may have taken ` +
        `holds its messages for the queue's lease time\n`,
    );
    return signalExitCode(signal.reason);
  }
  if (acquired.kind === 'none') {
    if (!io.quiet || acquired.code !== ExitCode.NotHeld) await writeMessage(io, `queenctl: ${acquired.message}\n`);
    return acquired.code;
  }
  const { record, renewal } = acquired;
  if (!renewal.ok && 'lost' in renewal) {
    // Nothing on stdout: a record of a lease already gone would be acked in vain.
    await writeMessage(
      io,
      `queenctl: lease ${escapeText(record.leaseId)} was taken, but the renewal right after the pop renewed ` +
        `nothing: it is gone already (its lease time is over, or it was released); its messages go to the next ` +
        `pop\n`,
    );
    return ExitCode.NotHeld;
  }
  await printBatch(record, acquired.remainingMs, options, runtime);
  await keepWhenUnwritten(record, options, runtime);
  if (renewal.ok) return ExitCode.Ok;
  const { error } = renewal;
  if (options.seconds === undefined) {
    // Only the probe failed: the lease is held as the pop made it, its expiry unknown.
    if (!io.quiet) {
      await writeMessage(
        io,
        warningMessage(
          `lease ${escapeText(record.leaseId)} was taken; its expiry is unknown (the renewal that reads it ` +
            `failed: ${error.message})`,
        ),
      );
    }
    return ExitCode.Ok;
  }
  await writeMessage(
    io,
    errorMessage(
      new QueenctlError(
        `lease ${escapeText(record.leaseId)} was taken but not renewed to ${options.seconds}s: ${error.message}; ` +
          `it lasts the queue's lease time, and its record is printed so it can be acked`,
        error.exitCode,
        error.hint,
      ),
    ),
  );
  return error.exitCode;
}

/** The record as the format asks: JSON/YAML/NDJSON/jsonpath, the lease id, or tables for people. */
async function printBatch(
  record: BatchRecord,
  left: number | null,
  options: Pick<AcquireOptions, 'format' | 'noHeaders'>,
  runtime: Pick<AcquireRuntime, 'io'>,
): Promise<void> {
  const { io } = runtime;
  const { format } = options;
  if (format === null) return;
  if (format === 'name') {
    await write(io.stdout, `${record.leaseId}\n`);
    // The id alone is no record lease ack can read: keep the record, as a table's is.
    await keepAndSayAckLine(record, io);
    return;
  }
  if (isMachineFormat(format)) {
    if (format === 'json' || format === 'ndjson') {
      // Each message as the broker sent it, whatever the depth of its data (batch.ts).
      const sink = await recordSink<BatchRecord>(io.stdout, format, true, batchRecordText);
      await sink.add(record);
      await sink.end();
      return;
    }
    const sink = await recordSink<BatchRecord>(io.stdout, format, true);
    await sink.add(await shallowRecord(record, runtime));
    await sink.end();
    return;
  }
  const wide = format === 'wide';
  const target = { width: io.width, stderrWidth: io.stderrWidth, wide, quiet: io.quiet };
  // On a narrow terminal (output/fit.ts): names are cut before anything is dropped.
  const summary = await tableFor(
    {
      headers: [
        { header: 'LEASE ID', keep: 'always' },
        { header: 'GROUP', keep: 4, shrink: 'cut' },
        { header: 'QUEUE', keep: 3, shrink: 'cut' },
        { header: 'PARTITIONS', keep: 2, shrink: 'cut' },
        { header: 'MESSAGES', keep: 1 },
        { header: 'LEFT', keep: 5 },
      ],
      rows: [
        [
          escapeText(record.leaseId),
          escapeText(groupLabel(record.consumerGroup)),
          escapeText(record.queue),
          escapeText(wide ? record.partitions.join(', ') : partitionSummary(record.partitions)),
          String(record.messages.length),
          left === null ? '?' : formatDuration(left),
        ],
      ],
      noHeaders: options.noHeaders,
    },
    target,
  );
  const messages = await tableFor(
    {
      headers: [
        { header: 'TRANSACTION ID', keep: 'always' },
        { header: 'PARTITION', keep: 2, shrink: 'cut' },
        { header: 'CREATED', keep: 1, shrink: 'time' },
        { header: 'DATA', keep: 3, shrink: 'cut', minWidth: 10 },
      ],
      rows: record.messages.map((message) => [
        escapeText(message.transactionId),
        escapeText(message.partition),
        typeof message.createdAt === 'string' ? escapeText(message.createdAt) : '-',
        // Shortened as it is made: data of any depth or size costs no more than the column.
        shortened(jsonText(message.data, (wide ? 4096 : 60) + 1) ?? 'null', wide ? 4096 : 60),
      ]),
      noHeaders: options.noHeaders,
    },
    target,
  );
  await write(io.stdout, `${summary.text}\n${messages.text}`);
  // One note for both tables: the first says it, with the most columns hidden.
  const note = [summary.note, messages.note].sort((a, b) => b.length - a.length)[0];
  if (note) await write(io.stderr, note);
  // A table is no record lease ack can read: keep the record, and say how to ack this batch.
  await keepAndSayAckLine(record, io);
}

/**
 * Keeps the batch's record (ackLine) and says on stderr how to ack it. The command is written as
 * one line, never wrapped: copied from the terminal, it runs as shown.
 */
async function keepAndSayAckLine(record: BatchRecord, io: AcquireRuntime['io']): Promise<void> {
  const [said = '', command] = ackLine(record).split('\n');
  await writeMessage(io, `queenctl: ${said}\n`);
  if (command) await write(io.stderr, `${command}\n`);
}

/**
 * A record printed on a stdout that could not take it (a full disk: docs/cli-contract.md, "Output
 * that cannot be written") is kept as a table's is, and the ack line said: without it, nothing
 * could ack the batch, which would hold its messages for the queue's lease time. A stream reports
 * its failure on a later turn of the event loop: that turn is waited for.
 */
async function keepWhenUnwritten(
  record: BatchRecord,
  options: Pick<AcquireOptions, 'format'>,
  runtime: Pick<AcquireRuntime, 'io'>,
): Promise<void> {
  const { io } = runtime;
  const { format } = options;
  // Only a machine format's record is kept here: a table's and the one behind -o name are kept
  // always (printBatch); -q prints none.
  if (!isMachineFormat(format) || !io.stdoutFailed) return;
  await new Promise((resolve) => setImmediate(resolve));
  if (io.stdoutFailed()) await keepAndSayAckLine(record, io);
}

/** The prefix of the private directory that keeps the record of a batch taken as a table. */
export const KEPT_BATCH_PREFIX = 'queenctl-batch-';
/** The kept record's path, as `lease ack` recognises it (and removes it once all is acked). */
export const KEPT_BATCH = /[/]queenctl-batch-[A-Za-z0-9]{6}[/]batch\.json$/;

/**
 * Keeps the record of a batch printed as tables in a directory made new for it (mode 0700, the
 * file 0600, created new: no link followed), and says how to ack the batch from it; or, when it
 * cannot be kept, how to take a batch so that it can be acked.
 */
function ackLine(record: BatchRecord): string {
  try {
    const dir = mkdtempSync(join(tmpdir(), KEPT_BATCH_PREFIX));
    const file = join(dir, 'batch.json');
    writeFileSync(file, `${batchRecordText(record)}\n`, { mode: 0o600, flag: 'wx' });
    // The command on a line of its own: copied whole from a narrow terminal.
    const kept = 'to ack this batch (its record is kept where only you can read it)';
    return `${kept}:\n  queenctl lease ack ${shellWord(file)}`;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    return (
      `its record could not be kept (${escapeText(code)}), and a table is nothing lease ack can read: it holds ` +
      `its messages for the queue's lease time; next time take a batch with -o json > batch.json, then ` +
      `queenctl lease ack batch.json`
    );
  }
}

/**
 * The deepest `data` YAML and jsonpath output show as a structure: the yaml library (and the
 * jsonpath copy) recurse, and past about 1,500 levels overflow the stack.
 */
export const MAX_SHOWN_DEPTH = 500;

/**
 * The record for -o yaml and -o jsonpath=: a message whose data nests deeper than MAX_SHOWN_DEPTH
 * has it as its compact JSON text (a string), said once on stderr; -o json prints it unchanged.
 */
async function shallowRecord(record: BatchRecord, runtime: Pick<AcquireRuntime, 'io'>): Promise<BatchRecord> {
  const deep: number[] = [];
  const messages = record.messages.map((message, index): BatchMessage => {
    if (jsonDepth(message.data, MAX_SHOWN_DEPTH + 1) <= MAX_SHOWN_DEPTH) return message;
    deep.push(index + 1);
    return { ...message, data: jsonText(message.data) ?? 'null' };
  });
  if (deep.length === 0) return record;
  const which =
    deep.length === 1
      ? `message ${deep[0]}`
      : `messages ${deep.slice(0, 10).join(', ')}${deep.length > 10 ? ', …' : ''}`;
  await writeMessage(
    runtime.io,
    warningMessage(
      `the data of ${which} nests deeper than ${MAX_SHOWN_DEPTH} levels: shown as its JSON text, a string; ` +
        `-o json prints it unchanged`,
    ),
  );
  return { ...record, messages };
}
