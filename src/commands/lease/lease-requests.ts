/**
 * What `extend` and `inspect` share: read the ids, renew each (renew-all.ts), stream machine
 * records or collect table rows, then say on stderr what went wrong. A verb supplies only its
 * view: the record, the table and the word for success.
 */
import { leaseIdSource } from '../../args.js';
import { timeZoneSuspicion } from '../../broker/broker-clock.js';
import type { RetryPolicy } from '../../broker/retry.js';
import { ExitCode, runExitCode, signalExitCode } from '../../exit.js';
import { write } from '../../io.js';
import { isMachineFormat, type OutputFormat } from '../../output/format.js';
import { recordSink } from '../../output/records.js';
import { RunReport } from '../../output/report.js';
import { loadStyle } from '../../output/style.js';
import type { ColumnLike } from '../../output/fit.js';
import { tableFor, type Cell } from '../../output/table.js';
import { loadTerminalText, wrapMessage } from '../../output/width.js';
import { retryNote } from '../../output/words.js';
import type { Settings } from '../globals.js';
import type { Runtime } from '../runtime.js';
import { renewAll, type LeaseOutcome } from '../../renewal/renew-all.js';

export interface LeaseRunOptions {
  leaseIds: string[];
  seconds: number;
  retry: RetryPolicy;
  concurrency: number;
  /** null: print no results (-q without -o). */
  format: OutputFormat | null;
  noHeaders: boolean;
  /** --allow-empty: `-` reading no id is nothing to do (exit 0), not a usage error. */
  allowEmpty?: boolean;
}

/**
 * How many requests extend and inspect send (globals.ts RunOptions): as many as the ids on the
 * command line, a few; `-` reads any number from standard input, many.
 */
export function requestsFor(leaseIds: readonly string[]): 'few' | 'many' {
  return leaseIds.includes('-') ? 'many' : 'few';
}

/** What extend and inspect take from their operands, --retries and the global settings. */
export function leaseRunOptions(
  leaseIds: string[],
  flags: { retries: number; allowEmpty?: boolean },
  settings: Settings,
): Omit<LeaseRunOptions, 'seconds'> {
  const { retry, concurrency, format, noHeaders } = settings;
  const allowEmpty = flags.allowEmpty === true;
  return { leaseIds, retry: { ...retry, retries: flags.retries }, concurrency, format, noHeaders, allowEmpty };
}

export interface LeaseView<R extends object> {
  /** The verb, for hints that name it. */
  verb: 'extend' | 'inspect';
  /** How a lease that is not held is reported: 'was not renewed' (extend), 'is not held' (inspect). */
  failure: 'was not renewed' | 'is not held';
  record(outcome: LeaseOutcome, nowMs: number): R;
  /** The columns, and what each is worth on a narrow terminal (output/fit.ts). */
  headers(wide: boolean): ColumnLike[];
  row(outcome: LeaseOutcome, wide: boolean, nowMs: number): Cell[];
}

export async function runLeaseRequests<R extends object>(
  options: LeaseRunOptions,
  view: LeaseView<R>,
  runtime: Runtime,
): Promise<ExitCode> {
  const { io, clock } = runtime;
  const { format } = options;
  const source = leaseIdSource(options.leaseIds, () => io.stdin, {
    verb: view.verb,
    allowEmpty: options.allowEmpty === true,
  });
  const report = new RunReport(view.failure);
  const codes = new Set<ExitCode>();
  const sink = isMachineFormat(format) ? await recordSink<R>(io.stdout, format, source.single) : null;
  const wide = format === 'wide';
  const style = await loadStyle(io.color && (format === 'table' || wide));
  const rows: Cell[][] = [];
  // stderr on a terminal: its lines are wrapped to its width (output/width.ts), by libraries
  // loaded only once there is something to say there (`extend -o json | jq` on a terminal
  // usually says nothing on stderr, and need not load them).
  const stderrWidth = io.stderrWidth;
  const say = (text: string): void => {
    if (stderrWidth === undefined) void write(io.stderr, text);
    // Each waits for the same load, so the lines keep their order.
    else void loadTerminalText().then((libraries) => write(io.stderr, wrapMessage(text, stderrWidth, libraries)));
  };
  let printed = 0;
  let outcomes = 0;

  const summary = await renewAll(
    source,
    {
      seconds: options.seconds,
      retry: options.retry,
      concurrency: options.concurrency,
      onRetry: (leaseId, error, attempt, delayMs) => {
        if (io.quiet) return;
        say(retryNote(leaseId, error.message, attempt, options.retry.retries, delayMs));
      },
    },
    runtime,
    async (outcome) => {
      outcomes++;
      codes.add(outcome.code);
      report.add(outcome);
      if ('renewal' in outcome) {
        const suspicion = timeZoneSuspicion(outcome.renewal, options.seconds);
        if (suspicion) report.warn(suspicion);
      }
      // A single lease that failed prints nothing on stdout: nothing there may look like success.
      if (source.single && 'error' in outcome) return;
      // -o name passes on the ids of the leases that are held, for the next command of a pipe.
      if (format === 'name') {
        if (outcome.code === ExitCode.Ok) await write(io.stdout, `${outcome.leaseId}\n`);
        return;
      }
      printed++;
      if (sink) await sink.add(view.record(outcome, clock.now()));
      else if (format) rows.push(view.row(outcome, wide, clock.now()));
    },
  );
  if (summary.inputError) codes.add(ExitCode.Usage);
  // Also when every id was already sent: the answers the signal cut short are unknown.
  if (runtime.signal.aborted) codes.add(signalExitCode(runtime.signal.reason));

  // Stopped before any lease had a record (a bad first id on standard input, a signal): stdout
  // stays empty. An empty `[]` would read as "nothing failed" to `jq 'all(.renewed > 0)'`.
  // --allow-empty and nothing read: nothing failed, and the list is truly empty.
  const empty = outcomes === 0 && !summary.inputError && !runtime.signal.aborted;
  if (printed > 0 || empty) await sink?.end();
  if (empty && !io.quiet) io.stderr.write('queenctl: no lease ids on standard input: nothing was sent\n');
  if (rows.length > 0) {
    const table = { headers: view.headers(wide), rows, noHeaders: options.noHeaders, style };
    const printed = await tableFor(table, { width: io.width, stderrWidth: io.stderrWidth, wide, quiet: io.quiet });
    await write(io.stdout, printed.text);
    if (printed.note) io.stderr.write(printed.note);
  }
  let notes = report.render(summary, source.single);
  if (notes && stderrWidth !== undefined) {
    notes = report.render(summary, source.single, { width: stderrWidth, text: await loadTerminalText() });
  }
  // Not awaited for 'drain': a stderr nobody reads any more never drains, and the exit code
  // must still come out (the notes are a few lines; the process flushes them before it exits).
  if (notes) io.stderr.write(notes);
  return runExitCode(codes);
}
