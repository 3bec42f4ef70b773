/**
 * `queenctl lease watch <leaseId...> [-- command args...]`: keep leases renewed
 * (watch/scheduler.ts), and supervise the command that needs them (watch/child.ts). This module
 * decides how a watch ends and with which status (contract, "watch" and "Exit codes").
 *
 * Without a command the watch goes on with the leases still held; it ends when none is left,
 * at --for, or on SIGINT/SIGTERM. With one, the command starts after the first renewal of
 * every lease, and the watch ends with it: its status passes through, or 4 when a lease was
 * lost and the command was stopped for that.
 */
import { leaseIdSource } from '../../args.js';
import { ExitCode, UsageError, combineExitCodes } from '../../exit.js';
import {
  childExitedNote,
  childNotStartedNote,
  childStartedNote,
  childStartFailed,
  everyTooLongWarning,
  forwardedNote,
  killedAfterNote,
  leftoverNote,
  stoppingChildOnLoss,
  stoppingChildOnRefusal,
  tokenOnCommandLineHint,
  watchFailureMessage,
  watchRenderer,
  type WatchOutputMode,
  type WatchRenderer,
} from '../../output/watch.js';
import { errorMessage } from '../../output/words.js';
import { CONCURRENCY_CEILING } from '../../renewal/concurrency.js';
import { SupervisedChild, type ChildExit } from '../../watch/child.js';
import type { WatchEvent } from '../../watch/events.js';
import { RenewalScheduler, defaultEveryMs, safetyMarginMs, type WatchSummary } from '../../watch/scheduler.js';
import type { VerbProcess } from '../globals.js';
import type { Runtime } from '../runtime.js';

export interface WatchOptions {
  /** As given; `-` reads ids from standard input. */
  leaseIds: readonly string[];
  seconds: number;
  /** --every; default a third of --seconds. */
  everyMs: number | undefined;
  forMs: number | undefined;
  killAfterMs: number;
  requestTimeoutMs: number;
  concurrency: number;
  /** --concurrency was given: the most in flight; else the watch adapts up to its own ceiling. */
  concurrencyGiven?: boolean;
  /** What followed `--`: the command and its arguments; null without one. */
  command: readonly string[] | null;
  output: WatchOutputMode;
  /** A --token flag, visible in ps for as long as the watch runs. */
  tokenOnCommandLine: boolean;
}

export const DEFAULT_KILL_AFTER_MS = 10_000;

/** Everything `--` must not be, checked before anything is sent. */
export function checkCommand(options: Pick<WatchOptions, 'command' | 'forMs'>): void {
  if (options.command === null) return;
  if (options.command.length === 0 || options.command[0] === '') {
    throw new UsageError(
      '-- must be followed by the command to run',
      'queenctl lease watch "$LEASE" -- ./reprocess.sh',
    );
  }
  if (options.forMs !== undefined) {
    throw new UsageError(
      '--for ends a watch without a command; with a command the watch lasts as long as it does',
      'to bound the command, run it under timeout(1): queenctl lease watch "$LEASE" -- timeout 10m ./job.sh',
    );
  }
}

async function readLeaseIds(args: readonly string[], stdin: () => Runtime['io']['stdin']): Promise<string[]> {
  const ids = new Set<string>();
  // Watching the same lease twice would only renew it twice.
  for await (const leaseId of leaseIdSource(args, stdin).ids) ids.add(leaseId);
  return [...ids];
}

function summaryCode(summary: Pick<WatchSummary, 'lost' | 'failed' | 'refused'>): ExitCode {
  const codes: ExitCode[] = [];
  if (summary.refused) codes.push(ExitCode.Auth);
  if (summary.failed > 0) codes.push(ExitCode.Broker);
  if (summary.lost > 0) codes.push(ExitCode.NotHeld);
  return combineExitCodes(codes);
}

const signalCode = (reason: unknown): ExitCode => (reason === 'SIGTERM' ? ExitCode.Terminated : ExitCode.Interrupted);

export async function runWatch(options: WatchOptions, runtime: Runtime, proc: VerbProcess): Promise<number> {
  checkCommand(options);
  const leaseIds = await readLeaseIds(options.leaseIds, () => runtime.io.stdin);
  const watch = new Watch(leaseIds, options, runtime, proc);
  return watch.run();
}

class Watch {
  private readonly scheduler: RenewalScheduler;
  private renderer!: WatchRenderer;
  private readonly everyMs: number;
  private exitCode: number | null = null;
  private settle!: (code: number) => void;
  private readonly finished = new Promise<number>((resolve) => (this.settle = resolve));
  private crashed: { error: unknown } | null = null;
  /** The command's state; `requestStop` is how a loss or a refusal reaches its supervisor. */
  private child: 'none' | 'starting' | 'running' | 'ended' = 'none';
  private supervised: SupervisedChild | null = null;
  private requestStop: ((code: ExitCode) => void) | null = null;
  private stopRequested: ExitCode | null = null;
  private readonly forTimer = new AbortController();

  constructor(
    private readonly leaseIds: string[],
    private readonly options: WatchOptions,
    private readonly runtime: Runtime,
    private readonly proc: VerbProcess,
  ) {
    this.everyMs = options.everyMs ?? defaultEveryMs(options.seconds);
    this.scheduler = new RenewalScheduler(
      leaseIds,
      {
        seconds: options.seconds,
        everyMs: this.everyMs,
        requestTimeoutMs: options.requestTimeoutMs,
        concurrency: options.concurrency,
        maxConcurrency: options.concurrencyGiven === false ? CONCURRENCY_CEILING : options.concurrency,
        concurrencyGiven: options.concurrencyGiven !== false,
      },
      { client: runtime.client, clock: runtime.clock },
      { event: (event) => this.onEvent(event), warn: (text) => this.renderer.warn(text) },
    );
  }

  async run(): Promise<number> {
    const { io, clock, signal } = this.runtime;
    const { options } = this;
    this.renderer = await watchRenderer({
      mode: options.output,
      stdout: io.stdout,
      stderr: io.stderr,
      clock,
      color: io.color,
      quiet: io.quiet,
      leaseCount: this.leaseIds.length,
      firstLeaseId: this.leaseIds[0] as string,
      status: () => this.scheduler.status(),
    });
    if (options.tokenOnCommandLine) this.renderer.warn(tokenOnCommandLineHint());
    const marginMs = safetyMarginMs(options.seconds);
    if (this.everyMs > options.seconds * 1000 - marginMs)
      this.renderer.warn(everyTooLongWarning(this.everyMs, options.seconds, marginMs));

    const onSignal = (): void => {
      // Only reached without a running command: with one, cli.ts relays signals to it instead.
      if (this.child !== 'none') return;
      this.scheduler.stop('signal');
      this.finish(signalCode(signal.reason));
    };
    if (signal.aborted) onSignal();
    else signal.addEventListener('abort', onSignal, { once: true });
    if (options.forMs !== undefined) {
      clock.sleep(options.forMs, this.forTimer.signal).then(
        () => this.scheduler.stop('for'),
        () => {}, // cancelled: the watch ended first
      );
    }

    let summary: WatchSummary | null = null;
    const scheduled = this.scheduler.run().then(
      (result) => {
        summary = result;
        // With a command started, its supervisor decides the end; otherwise nothing is left.
        if (this.child === 'none') this.finish(summaryCode(result));
      },
      (error: unknown) => this.crash(error),
    );
    const code = await this.finished;
    this.scheduler.stop('signal'); // a no-op unless a crash left leases in it
    await scheduled;
    this.forTimer.abort();
    signal.removeEventListener('abort', onSignal);
    this.reportErrors(summary);
    this.renderer.close();
    if (this.crashed) throw this.crashed.error;
    return code;
  }

  private finish(code: number): void {
    if (this.exitCode !== null) return;
    this.exitCode = code;
    this.settle(code);
  }

  /** A bug, not an outcome: end now, and take the command down with us rather than leave it. */
  private crash(error: unknown): void {
    this.crashed ??= { error };
    try {
      this.supervised?.signalGroup('SIGKILL');
    } catch {
      // The exit guard of SupervisedChild tries again.
    }
    this.finish(ExitCode.Broker);
  }

  /** Runs an async reaction outside the scheduler's call stack; a bug ends the watch, never silently. */
  private react(action: () => Promise<void>): void {
    action().catch((error: unknown) => this.crash(error));
  }

  private onEvent(event: WatchEvent): void {
    this.renderer.event(event);
    if (event.event === 'renewed') {
      if (this.options.command && this.child === 'none' && this.scheduler.everyLeaseRenewed && this.exitCode === null) {
        this.child = 'starting';
        this.react(() => this.superviseChild(this.options.command as readonly string[]));
      }
      return;
    }
    const gone = event.event === 'lost' || (event.event === 'stopped' && event.reason === 'error');
    if (!gone || !this.options.command) return;
    // With a command, losing any one lease is losing the lease (contract).
    const code = this.scheduler.refusal ? ExitCode.Auth : event.event === 'lost' ? ExitCode.NotHeld : ExitCode.Broker;
    if (this.child === 'none') {
      if (this.stopRequested !== null) return;
      this.stopRequested = code;
      this.renderer.note(childNotStartedNote(this.options.command[0] as string));
      this.react(async () => {
        this.scheduler.stop('lease-lost');
        this.finish(code);
      });
    } else if (this.stopRequested === null) {
      this.stopRequested = code;
      this.requestStop?.(code);
    }
  }

  private async superviseChild(argv: readonly string[]): Promise<void> {
    const [command, ...args] = argv as [string, ...string[]];
    const { clock } = this.runtime;
    const { killAfterMs } = this.options;
    let child: SupervisedChild | null = null;
    const pending: NodeJS.Signals[] = [];
    let forwarded = false;
    // A command that ignores SIGINT/SIGTERM must not hold queenctl (and the lease) forever:
    // --kill-after after the first one, its group gets SIGKILL, as on a lost lease.
    const escalation = new AbortController();
    let escalating = false;
    const forward = (signal: NodeJS.Signals): void => {
      if (!child) return void pending.push(signal);
      forwarded = true;
      child.signalGroup(signal);
      this.renderer.note(forwardedNote(signal, command, killAfterMs));
      if (signal === 'SIGHUP' || escalating) return;
      escalating = true;
      const running = child;
      clock.sleep(killAfterMs, escalation.signal).then(
        () => {
          this.renderer.error(killedAfterNote(command, killAfterMs));
          running.signalGroup('SIGKILL');
        },
        () => {
          // The command exited in time.
        },
      );
    };
    const release = this.proc.relaySignals(forward);
    try {
      const started = await SupervisedChild.start({
        command,
        args,
        env: this.childEnv(),
        stdoutToStderr: this.options.output === 'events',
      });
      if (!(started instanceof SupervisedChild)) {
        this.child = 'ended';
        this.renderer.error(childStartFailed(command, started));
        this.scheduler.stop('child-exit');
        return this.finish(started.status);
      }
      child = this.supervised = started;
      this.child = 'running';
      this.renderer.note(childStartedNote(command, child.pid, this.leaseIds.length));
      for (const signal of pending.splice(0)) forward(signal);

      const stop = new Promise<ExitCode>((resolve) => (this.requestStop = resolve));
      if (this.stopRequested !== null) this.requestStop?.(this.stopRequested);
      const first = await Promise.race([child.exited, stop]);
      escalation.abort();
      if (typeof first === 'number') {
        // A lease is gone (or the token refused): the work must stop; renewal of the other
        // leases goes on until it has.
        this.renderer.error(
          (first === ExitCode.Auth ? stoppingChildOnRefusal : stoppingChildOnLoss)(command, killAfterMs),
        );
        await child.stopGroup(killAfterMs, clock, () => this.renderer.error(killedAfterNote(command, killAfterMs)));
        this.child = 'ended';
        this.scheduler.stop('lease-lost');
        return this.finish(first);
      }
      const exit: ChildExit = first;
      this.child = 'ended';
      this.renderer.note(childExitedNote(command, exit));
      this.scheduler.stop(forwarded ? 'signal' : 'child-exit');
      if (child.leftProcesses()) {
        this.renderer.note(leftoverNote(command, killAfterMs));
        await child.stopGroup(killAfterMs, clock, () => this.renderer.error(killedAfterNote(command, killAfterMs)));
      }
      this.finish(exit.status);
    } finally {
      release();
    }
  }

  /** The command's environment: the lease ids and expiry, never the token (contract). */
  private childEnv(): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...this.proc.env };
    delete env.QUEEN_TOKEN;
    env.QUEEN_LEASE_ID = this.leaseIds[0];
    env.QUEEN_LEASE_IDS = this.leaseIds.join(' ');
    const expiresAt = this.scheduler.earliestExpiresAt();
    if (expiresAt !== null) env.QUEEN_LEASE_EXPIRES_AT = expiresAt;
    return env;
  }

  /** One message per kind of failure, not one per lease: thousands may share it. */
  private reportErrors(summary: WatchSummary | null): void {
    const refused = this.scheduler.refusal;
    if (refused) return this.renderer.error(errorMessage(refused));
    const failure = this.scheduler.failure;
    if (failure) this.renderer.error(watchFailureMessage(failure, summary?.failed ?? 1));
  }
}
