/**
 * `queenctl lease run <queue> [acquire options] -- <command> [args...]`: a consumer in one line
 * (docs/cli-contract.md#lease-run). A batch at a time: take it as `lease acquire` does
 * (acquireBatch), run the command with the messages on its standard input while the lease is
 * renewed and the command supervised exactly as `lease watch -- command` does (watchWithCommand),
 * then ack it as `lease ack` does (ackBatch), always with the lease id:
 *
 * - the command exits 0: `completed`; non-zero: `--on-failure` (retry or failed); ended by the
 *   signal queenctl forwarded, or never started (126/127): `retry`, so the batch is back at once;
 * - the lease is lost while it runs: it is stopped, nothing is acked (the redelivery owns the
 *   batch), exit 4;
 * - an ack refused for the lease: exit 4; an ack whose outcome is unknown: exit 2, never resent.
 *
 * `retry` never counts toward the broker's retry limit, so a message that fails every time would
 * come back for ever: once one has failed `--give-up-after` times in this run, no further batch
 * is taken (docs/cli-contract.md#lease-run says how a run ends).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, Option } from 'commander';
import { parseCount } from '../../args.js';
import type { AckStatus } from '../../broker/ack.js';
import type { BatchRecord } from '../../broker/batch.js';
import { monotonicClock } from '../../clock.js';
import { ExitCode, QueenctlError, UsageError, signalExitCode } from '../../exit.js';
import { checkName } from '../../names.js';
import { isJsonPath } from '../../output/format.js';
import { escapeText } from '../../output/sanitise.js';
import { tokenOnCommandLineHint, watchOutputMode, type WatchOutputMode } from '../../output/watch.js';
import { loadTerminalText, writeMessage, writeMessageNow } from '../../output/width.js';
import { errorMessage, warningMessage } from '../../output/words.js';
import { isTransient } from '../../broker/retry.js';
import { processGroupLauncher } from '../../watch/process-group.js';
import type { ChildExit } from '../../watch/supervisor.js';
import { flagParser, type GlobalContext, type Settings, type VerbProcess } from '../globals.js';
import type { Runtime } from '../runtime.js';
import { ackBatch, ackRefusal, type AckRuntime } from './ack.js';
import {
  acquireBatch,
  acquireRequest,
  addAcquireOptions,
  type AcquireOptions,
  type AcquireRuntime,
} from './acquire.js';
import { durationOption, exitCodesHelp, retriesOption, secondsOption } from './options.js';
import { DEFAULT_KILL_AFTER_MS, watchWithCommand, type WatchOptions, type WatchPorts } from './watch.js';
import { defaultEveryMs } from '../../renewal/scheduler.js';

export const ON_FAILURE = ['retry', 'failed'] as const;
export type OnFailure = (typeof ON_FAILURE)[number];

/** The most batches `--batches` takes; `--until-empty` has no limit. */
export const MAX_BATCHES = 1_000_000;
/** `--give-up-after` default: a message that failed this many times in one run stops the run. */
export const DEFAULT_GIVE_UP_AFTER = 3;

export interface RunOptions {
  /** The pop: acquire's flags; `seconds` is run's --seconds (the renewal right after the pop). */
  acquire: Omit<AcquireOptions, 'format' | 'noHeaders'> & { seconds: number };
  everyMs: number | undefined;
  killAfterMs: number;
  onFailure: OnFailure;
  /** How many batches; 'until-empty': until a pop finds nothing. */
  batches: number | 'until-empty';
  giveUpAfter: number;
  command: readonly [string, ...string[]];
  output: WatchOutputMode;
  requestTimeoutMs: number;
  concurrency: number;
  concurrencyGiven: boolean;
  tokenOnCommandLine: boolean;
}

export type RunRuntime = Runtime<AcquireRuntime['client'] & AckRuntime['client'] & Runtime['client']>;

/** Machine events of a run besides watch's (docs/cli-contract.md#lease-run). */
type RunEvent =
  | { event: 'acquired'; at: string; leaseId: string; queue: string; partitions: string[]; messages: number }
  | { event: 'acked'; at: string; leaseId: string; status: AckStatus; acked: number; refused: number }
  | { event: 'empty'; at: string; queue: string };

interface RunFlags {
  group?: string;
  partition?: string;
  batch?: number;
  partitions?: number;
  wait?: number;
  seconds: number;
  every?: number;
  killAfter: number;
  onFailure: OnFailure;
  batches?: number;
  untilEmpty?: boolean;
  giveUpAfter: number;
  retries: number;
}

export function runCommand(globals: GlobalContext): Command {
  const command = new Command('run')
    .description('a consumer in one line: take a batch, run a command on it with the lease renewed, ack it')
    .argument('<queue>', 'the queue to pop from')
    .argument('[command...]', 'after --: the command to run for each batch, and its arguments')
    .usage('<queue> [options] -- <command> [args...]');
  return addAcquireOptions(command)
    .addOption(secondsOption('60', 'each renewal extends to now + seconds on the broker clock (1 to 2147483647)'))
    .addOption(durationOption('--every <duration>', 'renew this often (default: a third of --seconds)'))
    .addOption(
      durationOption('--kill-after <duration>', 'SIGKILL the command this long after SIGTERM').default(
        DEFAULT_KILL_AFTER_MS,
        '10s',
      ),
    )
    .addOption(
      new Option('--on-failure <status>', 'how a batch whose command failed is acked: retry (at once) or failed')
        .choices(ON_FAILURE)
        .default('retry'),
    )
    .addOption(
      new Option('--batches <n>', `take this many batches, one after another (1 to ${MAX_BATCHES}; default 1)`)
        .argParser(flagParser((text) => parseCount(text, '--batches', 1, MAX_BATCHES)))
        .conflicts('untilEmpty'),
    )
    .addOption(new Option('--until-empty', 'take batches until a pop finds nothing to take (then exit 0)'))
    .addOption(
      new Option('--give-up-after <n>', 'take no further batch once a message has failed n times in this run')
        .default(DEFAULT_GIVE_UP_AFTER)
        .argParser(flagParser((text) => parseCount(text, '--give-up-after', 1, 1000))),
    )
    .addOption(retriesOption('retries of a pop that never reached the broker (connection refused, host not found)'))
    .addHelpText(
      'after',
      `
How it works: a pop as lease acquire takes it (never autoAck), renewed at once to --seconds.
The command starts once the lease is renewed, in its own process group, with the messages on
its standard input, one JSON object per line (as the broker sent each), and in its environment
QUEEN_LEASE_ID, QUEEN_QUEUE, QUEEN_CONSUMER_GROUP, QUEEN_PARTITIONS (space-separated) and
QUEEN_BATCH_FILE: the batch record lease acquire -o json prints, in a file only you can read,
removed once the batch is done. Never the token. While it runs the lease is renewed exactly as
lease watch renews it, through broker outages; then the batch is acked, with its lease id:

  the command exits 0            completed; the next batch, if any
  it exits non-zero              --on-failure (retry: redelivered at once; failed: counts against
                                 the queue's retry limit); the run exits with its status
  it cannot start (126, 127)     retry, and no further batch is taken
  the lease is lost meanwhile    SIGTERM to its process group at once, SIGKILL after
                                 --kill-after; nothing is acked (the redelivery owns the batch);
                                 exit 4, no further batch
  the ack is refused (lease)     exit 4; an ack whose outcome is unknown exits 2, never resent

An ack that never reached the broker (connection refused) is tried again until the lease would
have expired. --batches n or --until-empty take batches one after another; the run exits with
the status of the first batch that was not acked completed, else 0. retry never counts toward
the broker's retry limit, so a message failing every time would come back for ever: once a
message has failed --give-up-after times (default ${DEFAULT_GIVE_UP_AFTER}) no further batch is taken.

Signals: the first SIGINT, SIGTERM or SIGHUP goes to the command's process group, and no further
batch is taken; a command ended by it is acked retry, so its batch is redelivered at once. A
command still running --kill-after later gets SIGKILL. A second signal also abandons the ack.
Should queenctl die, even by SIGKILL, a guardian process stops the command's group.

Output: -o json or -o ndjson streams lease watch's events on stdout, plus acquired (leaseId,
queue, partitions, messages: a count), acked (leaseId, status, acked, refused) and empty
(queue); the command's stdout then goes to stderr. Otherwise one line per step on stderr.

${exitCodesHelp({
  ok: 'every batch taken was acked completed (with --until-empty: and then a pop found nothing)',
  broker: 'broker error, or an ack whose outcome is unknown (stderr says how to find out)',
  notHeld:
    'nothing to take by the first pop (not with --until-empty); the lease was lost while the\n' +
    '     command ran (nothing acked); or the ack was refused for the lease',
})}
  n  the command's own exit status (128 + signal number when a signal ended it)

Examples:
  queenctl lease run orders --batch 10 -- ./process-orders.sh
  queenctl lease run orders --group billing --until-empty -- python3 handle.py
  queenctl lease run orders --batches 5 --on-failure failed -o ndjson -- ./job.sh > events.ndjson`,
    )
    .action(async (queue: string, _command: string[], flags: RunFlags, self: Command) => {
      await globals.run(
        self,
        (runtime, settings, proc) => runRun(runOptions(queue, flags, settings, proc, runtime), runtime, proc),
        // A run lasts as long as its batches: monotonic time, as watch (an NTP step moves no deadline).
        { requests: 'many', clock: monotonicClock },
      );
    });
}

/** The options of a run from its command line; every usage error before anything is sent. */
function runOptions(
  queue: string,
  flags: RunFlags,
  settings: Settings,
  proc: VerbProcess,
  runtime: Runtime,
): RunOptions {
  checkName(queue, 'queue', 'queue', true);
  const after = proc.argvAfterDashDash;
  if (after === null || after.length === 0 || after[0] === '') {
    throw new UsageError(
      'lease run needs the command to run for each batch after --',
      'queenctl lease run orders --batch 10 -- ./process-orders.sh',
    );
  }
  const { format } = settings;
  if (format === 'name' || format === 'yaml' || isJsonPath(format)) {
    throw new UsageError(
      `-o ${format === 'name' || format === 'yaml' ? format : 'jsonpath'} is not an output of lease run`,
      'use -o ndjson for one event per line',
    );
  }
  const output = watchOutputMode({
    format,
    outputGiven: settings.outputGiven,
    hasCommand: true,
    quiet: runtime.io.quiet,
    stderrIsTTY: Boolean(runtime.io.stderr.isTTY),
    term: proc.env.TERM,
  });
  return {
    acquire: { ...acquireRequest(queue, flags, settings.retry), seconds: flags.seconds },
    everyMs: flags.every,
    killAfterMs: flags.killAfter,
    onFailure: flags.onFailure,
    batches: flags.untilEmpty ? 'until-empty' : (flags.batches ?? 1),
    giveUpAfter: flags.giveUpAfter,
    command: after as readonly [string, ...string[]],
    output,
    requestTimeoutMs: settings.timeoutMs,
    concurrency: settings.concurrency,
    concurrencyGiven: settings.concurrencyGiven,
    tokenOnCommandLine: settings.tokenOnCommandLine,
  };
}

/** `exit status 1`, `killed by SIGTERM (143)`: the command's end, as recorded with a failed ack. */
export function exitWords(exit: ChildExit): string {
  if (exit.startError) {
    return `it could not be started (${exit.startError.code ?? exit.startError.message}, status ${exit.status})`;
  }
  if (exit.signal) return `it was ended by ${exit.signal} (status ${exit.status})`;
  return `it exited with status ${exit.status}`;
}

/** How a batch came to an end, and whether the run goes on. */
interface BatchEnd {
  /** 0: acked completed; else the batch's status (the command's, 4, 2, a signal's). */
  code: number;
  /** Take no further batch. */
  last: boolean;
}

export async function runRun(options: RunOptions, runtime: RunRuntime, proc: VerbProcess): Promise<number> {
  const run = new Consumer(options, runtime, proc);
  return run.run();
}

class Consumer {
  /** The first signal queenctl got; no batch is taken after it. */
  private signalled: NodeJS.Signals | null = null;
  /** Aborted by a signal during a pop, or a second signal: what is in flight is abandoned. */
  private readonly hard = new AbortController();
  /** The supervisor's signal listener while a command runs (watch's relay goes to it). */
  private forward: ((signal: NodeJS.Signals) => void) | null = null;
  /** Aborted by the first signal: an ack that never reached the broker is not tried again. */
  private readonly soft = new AbortController();
  /** Aborts the watch of the current batch: a signal before its command started. */
  private watchAbort: AbortController | null = null;
  private phase: 'pop' | 'watch' | 'ack' | 'idle' = 'idle';
  /** Failures per message (partitionId, transactionId) in this run, while it keeps failing. */
  private readonly failures = new Map<string, number>();
  // One guardian for every batch's command (src/watch/process-group.ts).
  private readonly launch = processGroupLauncher({ reuse: true });
  private dir: string | null = null;

  constructor(
    private readonly options: RunOptions,
    private readonly runtime: RunRuntime,
    private readonly proc: VerbProcess,
  ) {}

  async run(): Promise<number> {
    const { options } = this;
    // For the whole run, signals are this run's to act on (cli.ts then never exits on its own):
    // the first one is forwarded to a running command and ends the run after its batch.
    const release = this.proc.relaySignals((signal) => this.onSignal(signal));
    // On a terminal, the libraries that wrap its lines, loaded now: the run's lines are written
    // between the command's and the watch's, at once (writeMessageNow).
    if (this.runtime.io.stderrWidth !== undefined) await loadTerminalText();
    if (options.tokenOnCommandLine) this.warn(tokenOnCommandLineHint());
    let first: number | null = null;
    try {
      for (let taken = 0; ; taken++) {
        if (options.batches !== 'until-empty' && taken >= options.batches) break;
        if (this.signalled) break;
        const end = await this.batch(taken === 0);
        if (end.code !== ExitCode.Ok) first ??= end.code;
        if (end.last) break;
      }
    } finally {
      release();
      if (this.dir) rmSync(this.dir, { recursive: true, force: true });
    }
    return first ?? ExitCode.Ok;
  }

  private onSignal(signal: NodeJS.Signals): void {
    const again = this.signalled !== null;
    this.signalled ??= signal;
    this.soft.abort(signal);
    if (this.forward) this.forward(signal);
    else if (this.phase === 'watch') this.watchAbort?.abort(signal);
    if (again || this.phase === 'pop') this.hard.abort(signal);
  }

  /** One batch: take it, run the command on it, ack it. */
  private async batch(first: boolean): Promise<BatchEnd> {
    const { options, runtime } = this;
    const { io } = runtime;
    this.phase = 'pop';
    let acquired: Awaited<ReturnType<typeof acquireBatch>>;
    try {
      acquired = await acquireBatch(
        { ...options.acquire, format: null, noHeaders: false },
        { ...runtime, signal: this.hard.signal },
      );
    } catch (error) {
      if (!this.hard.signal.aborted) throw error;
      await writeMessage(
        io,
        `queenctl: interrupted during the pop of queue ${escapeText(options.acquire.queue)}: a lease it may have ` +
          `taken holds its messages for the queue's lease time\n`,
      );
      return { code: signalExitCode(this.hard.signal.reason), last: true };
    } finally {
      this.phase = 'idle';
    }
    if (acquired.kind === 'none') {
      this.emit({ event: 'empty', at: this.at(), queue: options.acquire.queue });
      if (options.batches === 'until-empty') {
        this.note(`nothing more to take: ${acquired.message}`);
        return { code: ExitCode.Ok, last: true };
      }
      // The first pop finding nothing is acquire's exit 4; a later one ends --batches early.
      if (first) await writeMessage(io, `queenctl: ${acquired.message}\n`);
      else this.note(`no further batch: ${acquired.message}`);
      return { code: first ? acquired.code : ExitCode.Ok, last: true };
    }
    const { record, renewal } = acquired;
    this.emit({
      event: 'acquired',
      at: this.at(),
      leaseId: record.leaseId,
      queue: record.queue,
      partitions: record.partitions,
      messages: record.messages.length,
    });
    this.note(
      `took lease ${escapeText(record.leaseId)}: ${record.messages.length} message` +
        `${record.messages.length === 1 ? '' : 's'} of queue ${escapeText(record.queue)}`,
    );
    if (!renewal.ok && 'lost' in renewal) {
      await writeMessage(
        io,
        `queenctl: lease ${escapeText(record.leaseId)} was taken, but the renewal right after the pop renewed ` +
          `nothing: it is gone already; the command was not started, nothing was acked, and its messages go to ` +
          `the next pop\n`,
      );
      return { code: ExitCode.NotHeld, last: true };
    }
    return this.process(record);
  }

  /** Runs the command on a batch taken, then acks it as its end says. */
  private async process(record: BatchRecord): Promise<BatchEnd> {
    const { options, runtime } = this;
    const { io, clock } = runtime;
    const file = this.writeBatchFile(record);
    this.watchAbort = new AbortController();
    this.phase = 'watch';
    const everyMs = options.everyMs ?? defaultEveryMs(options.acquire.seconds);
    const watch: WatchOptions & { command: readonly [string, ...string[]] } = {
      leaseIds: [record.leaseId],
      seconds: options.acquire.seconds,
      everyMs,
      forMs: undefined,
      killAfterMs: options.killAfterMs,
      requestTimeoutMs: options.requestTimeoutMs,
      concurrency: options.concurrency,
      concurrencyGiven: options.concurrencyGiven,
      command: options.command,
      output: options.output,
      tokenOnCommandLine: false,
      childEnv: {
        QUEEN_QUEUE: record.queue,
        QUEEN_CONSUMER_GROUP: record.consumerGroup,
        QUEEN_PARTITIONS: record.partitions.join(' '),
        QUEEN_BATCH_FILE: file,
      },
      childInput: record.messages.map((message) => `${JSON.stringify(message)}\n`),
    };
    const ports: WatchPorts = {
      env: this.proc.env,
      argvAfterDashDash: this.proc.argvAfterDashDash,
      launch: this.launch,
      relaySignals: (listener) => {
        this.forward = listener;
        return () => {
          if (this.forward === listener) this.forward = null;
        };
      },
    };
    let watched: Awaited<ReturnType<typeof watchWithCommand>>;
    try {
      watched = await watchWithCommand([record.leaseId], watch, { ...runtime, signal: this.watchAbort.signal }, ports);
    } finally {
      this.phase = 'idle';
      this.forward = null;
      // The command may have removed it, or put a directory in its place: neither is an error.
      rmSync(file, { force: true, recursive: true });
    }
    const lease = escapeText(record.leaseId);
    const { exit } = watched;
    let status: AckStatus;
    let error: string | null = null;
    if (exit === null) {
      if (!this.watchAbort.signal.aborted) {
        // Lost (or never renewed): watch said so; the batch is the redelivery's now.
        await writeMessage(
          io,
          `queenctl: nothing was acked: lease ${lease} is no longer this run's, and its messages go to the next ` +
            `pop\n`,
        );
        return { code: watched.status, last: true };
      }
      // A signal came before the command started: the batch goes back at once.
      status = 'retry';
      error = `queenctl was stopped by ${this.signalled ?? 'a signal'} before the command started`;
    } else if (exit.status === 0) {
      status = 'completed';
    } else {
      status = exit.startError || this.signalled ? 'retry' : options.onFailure;
      error = `${escapeText(options.command[0])}: ${exitWords(exit)}`;
    }
    this.phase = 'ack';
    let acked: Awaited<ReturnType<typeof ackBatch>>;
    try {
      acked = await ackBatch(
        record,
        {
          status,
          error,
          // Only an ack that never reached the broker is sent again: while the lease may still be held.
          retry: { ...options.acquire.retry, retries: Number.POSITIVE_INFINITY },
          deadline: clock.now() + Math.max(0, options.acquire.seconds * 1000 - everyMs),
          // A signal: the ack in flight may finish, but one that never reached the broker waits no more.
          stopRetries: this.soft.signal,
        },
        { ...runtime, signal: this.hard.signal },
        (line) => this.warn(line),
      );
    } catch (caught) {
      if (this.hard.signal.aborted) {
        await writeMessage(
          io,
          `queenctl: interrupted: the ack of lease ${lease} may or may not have landed; it was not sent again: ` +
            `queenctl lease inspect ${lease} exits 0 while the lease is held\n`,
        );
        return { code: signalExitCode(this.hard.signal.reason), last: true };
      }
      if (!(caught instanceof QueenctlError)) throw caught;
      if (this.soft.signal.aborted && isTransient(caught)) {
        await writeMessage(
          io,
          `queenctl: the ack of lease ${lease} never reached the broker (${escapeText(caught.message)}), and ` +
            `after ${this.signalled} it was not tried again: the batch comes back to the next pop once the lease ` +
            `has expired\n`,
        );
        return { code: caught.exitCode, last: true };
      }
      await writeMessage(io, errorMessage(caught));
      return { code: caught.exitCode, last: true };
    } finally {
      this.phase = 'idle';
    }
    this.emit({
      event: 'acked',
      at: this.at(),
      leaseId: record.leaseId,
      status,
      acked: acked.acked,
      refused: acked.refused,
    });
    const refusal = ackRefusal(acked);
    if (refusal !== null) {
      await writeMessage(io, `queenctl: ${refusal}\n`);
      return { code: ExitCode.NotHeld, last: true };
    }
    this.note(`acked ${acked.acked} message${acked.acked === 1 ? '' : 's'} of lease ${lease} as ${status}`);
    if (exit === null) return { code: signalExitCode(this.signalled), last: true };
    if (exit.status === 0) {
      for (const message of record.messages)
        this.failures.delete(`${message.partitionId}\u0000${message.transactionId}`);
      return { code: ExitCode.Ok, last: false };
    }
    if (exit.startError) return { code: exit.status, last: true };
    return { code: exit.status, last: this.failedTooOften(record, exit) };
  }

  /** Counts a failure of each message of the batch; true once one has failed --give-up-after times. */
  private failedTooOften(record: BatchRecord, exit: ChildExit): boolean {
    let worst = 0;
    for (const message of record.messages) {
      const key = `${message.partitionId}\u0000${message.transactionId}`;
      const failures = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, failures);
      worst = Math.max(worst, failures);
    }
    if (worst < this.options.giveUpAfter) return false;
    writeMessageNow(
      this.runtime.io,
      `queenctl: no further batch: a message of lease ${escapeText(record.leaseId)} has failed ${worst} times in ` +
        `this run (--give-up-after ${this.options.giveUpAfter}; last: ${escapeText(this.options.command[0])}: ` +
        `${exitWords(exit)}); acked ${this.options.onFailure === 'failed' ? 'failed' : 'retry'}, it is pending ` +
        `for the next consumer\n`,
    );
    return true;
  }

  /** The batch record, in a directory of this run's that only the user can read. */
  private writeBatchFile(record: BatchRecord): string {
    // mkdtemp makes the directory 0700; the file is created new (wx: no symlink is followed) 0600.
    this.dir ??= mkdtempSync(join(tmpdir(), 'queenctl-run-'));
    const file = join(this.dir, 'batch.json');
    writeFileSync(file, `${JSON.stringify(record)}\n`, { mode: 0o600, flag: 'wx' });
    return file;
  }

  private at(): string {
    return new Date(this.runtime.clock.now()).toISOString();
  }

  private emit(event: RunEvent): void {
    if (this.options.output === 'events') this.runtime.io.stdout.write(`${JSON.stringify(event)}\n`);
  }

  /** A step, for people (log mode only). */
  private note(text: string): void {
    if (this.options.output === 'log') writeMessageNow(this.runtime.io, `queenctl: ${text}\n`);
  }

  private warn(text: string): void {
    if (!this.runtime.io.quiet) writeMessageNow(this.runtime.io, warningMessage(text));
  }
}
