/**
 * `queenctl lease extend <leaseId...> [--seconds n]`: renew, print the broker's six keys, and
 * exit 4 when nothing was renewed, whatever the HTTP status said (contract, "The renewal
 * result").
 */
import { leaseIdSource } from '../../args.js';
import { remainingMs, timeZoneSuspicion } from '../../broker/brokerClock.js';
import type { RenewalResult } from '../../broker/contract.js';
import type { RetryPolicy } from '../../broker/retry.js';
import { combineExitCodes, ExitCode } from '../../exit.js';
import { write } from '../../io.js';
import { formatDuration } from '../../args.js';
import type { OutputFormat } from '../../output/format.js';
import { recordSink } from '../../output/records.js';
import { RunReport } from '../../output/report.js';
import { loadStyle } from '../../output/style.js';
import { renderTable } from '../../output/table.js';
import { renewAll, type LeaseOutcome } from './renewAll.js';
import type { Runtime } from '../runtime.js';

export interface ExtendOptions {
  leaseIds: string[];
  seconds: number;
  retry: RetryPolicy;
  concurrency: number;
  /** null: print no results (-q without -o). */
  format: OutputFormat | null;
  noHeaders: boolean;
}

/** The JSON record of one lease: the six keys as the broker sent them, plus what went wrong. */
export type ExtendRecord = RenewalResult & { reason?: string; error?: string };

export function extendRecord(outcome: LeaseOutcome): ExtendRecord {
  if ('error' in outcome) {
    // No key of a failed request may read as a renewal: renewed is null, not a count.
    return {
      leaseId: outcome.leaseId,
      success: false,
      renewed: null as unknown as number,
      newExpiresAt: null,
      expiresAt: null,
      lease_expires_at: null,
      error: outcome.error.message,
    };
  }
  const { result, reason } = outcome.renewal;
  return reason ? { ...result, reason } : { ...result };
}

export async function runExtend(options: ExtendOptions, runtime: Runtime): Promise<ExitCode> {
  const { io } = runtime;
  const source = leaseIdSource(options.leaseIds, io.stdin);
  const report = new RunReport('renewed');
  const codes = new Set<ExitCode>();
  const { format } = options;
  const machine = format === 'json' || format === 'ndjson' || format === 'yaml';
  const sink = machine ? await recordSink<ExtendRecord>(io.stdout, format, source.single) : null;
  const rows: string[][] = [];
  const style = await loadStyle(io.color && (format === 'table' || format === 'wide'));

  const summary = await renewAll(
    source,
    {
      seconds: options.seconds,
      retry: options.retry,
      concurrency: options.concurrency,
      onRetry: (leaseId, error, attempt, delayMs) => {
        if (!io.quiet) {
          void write(io.stderr, `queenctl: ${leaseId}: ${error.message}; retry ${attempt} of ${options.retry.retries} in ${formatDuration(delayMs)}\n`);
        }
      },
    },
    runtime,
    async (outcome) => {
      codes.add(outcome.code);
      report.add(outcome);
      if (!('error' in outcome)) {
        const suspicion = timeZoneSuspicion(outcome.renewal, options.seconds);
        if (suspicion) report.warn(suspicion);
      }
      // A single lease that failed prints nothing on stdout: nothing there may look like success.
      if (source.single && 'error' in outcome) return;
      if (sink) await sink.add(extendRecord(outcome));
      else if (format) rows.push(tableRow(outcome, format === 'wide', runtime.clock.now(), style));
    },
  );
  if (summary.inputError) codes.add(ExitCode.Usage);
  if (summary.stoppedBy === 'signal') codes.add(ExitCode.Interrupted);

  await sink?.end();
  if (rows.length > 0) {
    await write(io.stdout, await renderTable({ headers: tableHeaders(format === 'wide'), rows, noHeaders: options.noHeaders }));
  }
  const notes = report.render(summary, source.single);
  if (notes) await write(io.stderr, notes);
  return exitCodeOf(codes);
}

/** Contract precedence (3, 2, 4, 0); a bad id read from stdin ranks with broker errors, a signal first. */
function exitCodeOf(codes: Set<ExitCode>): ExitCode {
  if (codes.has(ExitCode.Interrupted)) return ExitCode.Interrupted;
  if (codes.has(ExitCode.Usage) && !codes.has(ExitCode.Auth) && !codes.has(ExitCode.Broker)) return ExitCode.Usage;
  return combineExitCodes(codes);
}

function tableHeaders(wide: boolean): string[] {
  const headers = ['LEASE ID', 'RENEWED', 'newExpiresAt', 'expiresAt', 'lease_expires_at', 'LEFT'];
  return wide ? [...headers, 'BROKER SAID', 'SHAPE', 'CLOCK'] : headers;
}

function tableRow(outcome: LeaseOutcome, wide: boolean, nowMs: number, style: Awaited<ReturnType<typeof loadStyle>>): string[] {
  if ('error' in outcome) {
    const row = [outcome.leaseId, style.bad('error'), '-', '-', '-', '-'];
    return wide ? [...row, outcome.error.message, '-', '-'] : row;
  }
  const { result, reason, expiresAtMs, shape } = outcome.renewal;
  const held = result.renewed > 0;
  const left = held && expiresAtMs !== null ? formatDuration(remainingMs(expiresAtMs, nowMs, outcome.brokerClock)) : '-';
  const row = [
    outcome.leaseId,
    held ? style.ok(String(result.renewed)) : style.bad(`${result.renewed} NOT RENEWED`),
    String(result.newExpiresAt),
    String(result.expiresAt),
    String(result.lease_expires_at),
    left,
  ];
  return wide ? [...row, reason ?? '-', shape, outcome.brokerClock.source] : row;
}
