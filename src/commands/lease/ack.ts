/**
 * `queenctl lease ack <batch-file|->`: acks every message of a batch record (what `lease acquire
 * -o json` wrote) in one batch request, always with the record's lease id and consumer group
 * (docs/cli-contract.md#lease-ack). Exit 4 when the broker refused any for the lease, even at
 * HTTP 200. There is no way to ack without the lease id (docs/runbooks.md says why), and an ack
 * is sent once: one whose outcome is unknown exits 2 and is never resent (broker/ack.ts).
 */
import { createReadStream, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { Command, Option } from 'commander';
import type { StdinLike } from '../../args.js';
import {
  ACK_STATUSES,
  ackItems,
  refusedForLease,
  type AckItem,
  type AckResult,
  type AckStatus,
} from '../../broker/ack.js';
import { MAX_BATCH_RECORD_BYTES, parseBatchRecord, type BatchRecord } from '../../broker/batch.js';
import type { BrokerClient } from '../../broker/client.js';
import { withRetries, type RetryPolicy } from '../../broker/retry.js';
import { ExitCode, UsageError, signalExitCode } from '../../exit.js';
import { write } from '../../io.js';
import { formatDuration } from '../../output/duration.js';
import { isMachineFormat, type OutputFormat } from '../../output/format.js';
import { escapeText, shortened } from '../../output/sanitise.js';
import { recordSink } from '../../output/records.js';
import { loadStyle } from '../../output/style.js';
import { tableFor, type TonedCell } from '../../output/table.js';
import { writeMessage } from '../../output/width.js';
import { readFailureWords } from '../../output/words.js';
import { flagParser, type GlobalContext } from '../globals.js';
import type { Runtime } from '../runtime.js';
import { KEPT_BATCH } from './acquire.js';
import { exitCodesHelp, retriesOption } from './options.js';

/** `--error` travels in the request and is stored by the broker: a reason, not a document. */
export const MAX_ERROR_TEXT = 4096;

export interface AckOptions {
  /** A file, or `-` for standard input. */
  batchFile: string;
  status: AckStatus;
  error: string | null;
  /** Retries of a request that never reached the broker (refused, host not found) only. */
  retry: RetryPolicy;
  /** null: print no results (-q without -o). */
  format: OutputFormat | null;
  noHeaders: boolean;
}

export type AckRuntime = Runtime<Pick<BrokerClient, 'ackBatch' | 'server'>>;

/** The ack record of docs/cli-contract.md#ack-record. */
export interface AckRecord {
  leaseId: string;
  status: AckStatus;
  acked: number;
  refused: number;
  results: AckResult[];
}

export function ackCommand(globals: GlobalContext): Command {
  return new Command('ack')
    .description('ack every message of a batch that lease acquire wrote, with its lease id; exit 4 if refused')
    .argument('<batch>', 'the batch record lease acquire -o json wrote: a file, or - for standard input')
    .addOption(
      new Option('--status <status>', 'completed; retry: redeliver now; failed: count against the retry limit')
        .choices(ACK_STATUSES)
        .default('completed'),
    )
    .addOption(
      new Option('--error <text>', `why, recorded with the ack (at most ${MAX_ERROR_TEXT} characters)`).argParser(
        flagParser(parseErrorText),
      ),
    )
    .addOption(
      retriesOption('retries of an ack that never reached the broker (connection refused, host not found), none other'),
    )
    .addHelpText(
      'after',
      `
How it works: one POST /api/v1/ack/batch with every message of the batch, each with the batch's
leaseId, and its consumerGroup at the top level, where the route reads it. The broker checks
the lease: an ack of a lease that expired, was released (by an ack or a retry) or belongs to
another consumer group is refused with "Invalid or expired lease", at HTTP 200; the cursor did
not move and the batch belongs to whoever claims it next. There is no way to ack without the
lease id: the broker would not check it, and could move the cursor under another worker.

An ack is sent once. The broker counts a repeated ack again, and enough of them release the
lease under the rest of the batch; so an ack that got no answer after it was sent (a timeout,
a reset, a 5xx) exits 2, says it may or may not have landed, and is not sent again. Only a
request that never reached the broker (connection refused, host not found) is retried
(--retries). A batch acked twice is refused the second time (exit 4) once the first released
the lease; queenctl cannot tell a repeat by itself. An empty batch is never sent: the broker
never answers one.

--status retry gives the batch back at once and never counts toward the queue's retry limit;
failed counts against it, per partition, and past it the message goes to the dead-letter queue.

${exitCodesHelp({
  ok: 'every message was acked',
  broker: 'broker error, or an ack whose outcome is unknown (stderr says how to find out)',
  notHeld: 'the broker refused a message (Invalid or expired lease), even at HTTP 200',
})}
Exit 1 also for a file that is not a batch record (nothing is sent).

Examples:
  queenctl lease acquire orders --batch 10 -o json > batch.json
  queenctl lease ack batch.json
  queenctl lease ack batch.json --status retry --error "downstream timed out"
  queenctl lease acquire orders -o json | queenctl lease ack - --status failed`,
    )
    .action(
      async (batchFile: string, flags: { status: AckStatus; error?: string; retries: number }, command: Command) => {
        await globals.run(
          command,
          (runtime, settings) =>
            runAck(
              {
                batchFile,
                status: flags.status,
                error: flags.error ?? null,
                retry: { ...settings.retry, retries: flags.retries },
                format: settings.format,
                noHeaders: settings.noHeaders,
              },
              runtime,
            ),
          { requests: 'few' },
        );
      },
    );
}

function parseErrorText(text: string): string {
  if (text.length > MAX_ERROR_TEXT) {
    throw new UsageError(`--error is ${text.length} characters long; at most ${MAX_ERROR_TEXT}`);
  }
  return text;
}

/** The bytes of a stream up to `cap`; past it a UsageError, before the rest is read. */
async function readCapped(stream: AsyncIterable<Buffer | string>, source: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    size += bytes.length;
    if (size > MAX_BATCH_RECORD_BYTES) throw tooLarge(source);
    chunks.push(bytes);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function tooLarge(source: string): UsageError {
  return new UsageError(
    `${source} is larger than ${MAX_BATCH_RECORD_BYTES / 1024 / 1024} MiB: not a batch record of lease acquire; ` +
      `nothing was sent`,
  );
}

/** The batch record's text: standard input for `-`, else the file (a FIFO too), at most the cap. */
export async function readBatchText(
  batchFile: string,
  stdin: () => StdinLike,
): Promise<{ text: string; source: string }> {
  if (batchFile === '-') {
    const input = stdin();
    if (input.isTTY) {
      throw new UsageError(
        '- reads the batch record from standard input, but it is a terminal',
        'pipe it in: queenctl lease acquire orders -o json | queenctl lease ack -',
      );
    }
    return { text: await readCapped(input, 'standard input'), source: 'standard input' };
  }
  const source = escapeText(batchFile);
  try {
    const stat = statSync(batchFile);
    if (stat.isDirectory()) throw Object.assign(new Error('EISDIR'), { code: 'EISDIR' });
    if (stat.isFile() && stat.size > MAX_BATCH_RECORD_BYTES) throw tooLarge(source);
    return { text: await readCapped(createReadStream(batchFile), source), source };
  } catch (error) {
    if (error instanceof UsageError) throw error;
    // The common failures in words, as ls and cat say them (`no such file: missing.json`); the
    // rest by their errno.
    const words = readFailureWords(error);
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new UsageError(
      `${words ? `${words}: ${source}` : `cannot read the batch record ${source}: ${code}`}; nothing was sent`,
      'lease ack reads the batch record lease acquire -o json wrote: give its path, or - to read it from ' +
        'standard input',
    );
  }
}

/** The ack record and its exit code: 0 every message acked, 4 any refused. */
export function ackRecord(record: BatchRecord, status: AckStatus, results: AckResult[]): AckRecord {
  const acked = results.filter((result) => result.success).length;
  return { leaseId: record.leaseId, status, acked, refused: results.length - acked, results };
}

/** What the broker said of one message, in words. */
function resultWords(result: AckResult, status: AckStatus): string {
  if (!result.success) return 'REFUSED';
  if (result.dlq) return 'dead-lettered';
  return status === 'completed' ? 'acked' : status === 'retry' ? 'acked (redelivered)' : 'acked (failed)';
}

/** How an ack is sent: retries of a request that never reached the broker, within a deadline. */
export interface AckSending {
  retry: RetryPolicy;
  deadline?: number;
  stopRetries?: AbortSignal;
}

/**
 * Sends the ack of a parsed record, every message alike, and says what the broker did.
 * Retries only a request that never reached the broker; anything else propagates.
 */
export async function ackBatch(
  record: BatchRecord,
  options: Pick<AckOptions, 'status' | 'error'> & AckSending,
  runtime: AckRuntime,
  onRetry?: (message: string) => void,
): Promise<AckRecord> {
  const results = await ackMessages(record, ackItems(record, options.status, options.error), options, runtime, onRetry);
  return ackRecord(record, options.status, results);
}

/**
 * Sends one ack of some messages of a batch, each with its own status (`lease run` acks through
 * this), and returns what the broker said of each, in the items' order. Sent once; only a request
 * that never reached the broker is tried again.
 */
export async function ackMessages(
  record: Pick<BatchRecord, 'leaseId' | 'consumerGroup'>,
  items: readonly AckItem[],
  options: AckSending,
  runtime: AckRuntime,
  onRetry?: (message: string) => void,
): Promise<AckResult[]> {
  const { client, clock, signal } = runtime;
  const of = Number.isFinite(options.retry.retries) ? ` of ${options.retry.retries}` : '';
  return withRetries(() => client.ackBatch(record, items, { signal }), options.retry, {
    clock,
    signal,
    ...(options.deadline !== undefined && { deadline: options.deadline }),
    ...(options.stopRetries && { stopRetries: options.stopRetries }),
    onRetry: (error, attempt, delayMs) =>
      onRetry?.(
        `${error.message}; the ack never reached the broker: retry ${attempt}${of} in ${formatDuration(delayMs)}`,
      ),
  });
}

export async function runAck(options: AckOptions, runtime: AckRuntime): Promise<ExitCode> {
  const { io, signal } = runtime;
  const { text, source } = await readBatchText(options.batchFile, () => io.stdin);
  const record = parseBatchRecord(text, source);
  let acked: AckRecord;
  try {
    acked = await ackBatch(record, options, runtime, (line) => {
      if (!io.quiet) void writeMessage(io, `queenctl: ${line}\n`);
    });
  } catch (error) {
    if (!signal.aborted) throw error;
    await writeMessage(
      io,
      `queenctl: interrupted: the ack of lease ${escapeText(record.leaseId)} may or may not have landed; it was ` +
        `not sent again: queenctl lease inspect ${escapeText(record.leaseId)} exits 0 while the lease is held\n`,
    );
    return signalExitCode(signal.reason);
  }
  await printAck(acked, options, runtime);
  const refusal = ackRefusal(acked);
  if (refusal === null) {
    // The record acquire kept of a batch it printed as tables: every message acked, it is done.
    if (KEPT_BATCH.test(options.batchFile)) rmSync(dirname(options.batchFile), { recursive: true, force: true });
    return ExitCode.Ok;
  }
  await writeMessage(io, `queenctl: ${refusal}\n`);
  return ExitCode.NotHeld;
}

/** What the broker refused of an ack, in one line without its `queenctl: `; null: nothing refused. */
export function ackRefusal(acked: AckRecord): string | null {
  const refused = acked.results.filter((result) => !result.success);
  if (refused.length === 0) return null;
  const forLease = refused.filter(refusedForLease).length;
  const why =
    forLease > 0
      ? `Invalid or expired lease: it expired, was released (by an ack or a retry) or is another consumer ` +
        `group's; the cursor did not move, and the batch belongs to whoever claims it next: do not ack it again`
      : `${shortened(refused[0]?.error ?? 'no reason given', 120)}`;
  return (
    `${refused.length} of ${acked.results.length} messages of lease ${escapeText(acked.leaseId)} were ` +
    `not acked: ${why}`
  );
}

async function printAck(acked: AckRecord, options: AckOptions, runtime: Pick<AckRuntime, 'io'>): Promise<void> {
  const { io } = runtime;
  const { format } = options;
  if (format === null) return;
  if (format === 'name') {
    const ids = acked.results.filter((result) => result.success).map((result) => result.transactionId);
    if (ids.length > 0) await write(io.stdout, `${ids.join('\n')}\n`);
    return;
  }
  if (isMachineFormat(format)) {
    const sink = await recordSink<AckRecord>(io.stdout, format, true);
    await sink.add(acked);
    await sink.end();
    return;
  }
  const style = await loadStyle(io.color);
  const rows = acked.results.map((result) => {
    const text = resultWords(result, acked.status);
    return [
      result.transactionId,
      // A toned cell: coloured by the table after it is escaped and measured (output/table.ts).
      { text, tone: result.success ? (result.dlq ? 'warn' : 'ok') : 'bad' } as TonedCell,
      // The broker's reason apart from the verdict: it may be cut or dropped to fit a terminal.
      result.success ? '-' : shortened(result.error ?? 'no reason given', 80),
      result.leaseReleased ? 'released' : '-',
    ];
  });
  const table = await tableFor(
    {
      headers: [
        { header: 'TRANSACTION ID', keep: 'always' },
        { header: 'RESULT', keep: 'always' },
        { header: 'REASON', keep: 1, shrink: 'cut' },
        { header: 'LEASE', keep: 2 },
      ],
      rows,
      noHeaders: options.noHeaders,
      style,
    },
    { width: io.width, stderrWidth: io.stderrWidth, wide: format === 'wide', quiet: io.quiet },
  );
  await write(io.stdout, table.text);
  if (table.note) await write(io.stderr, table.note);
}
