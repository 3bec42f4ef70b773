/**
 * The command a watch runs (`lease watch ... -- command`), supervised: started once every lease
 * has been renewed, never while one is not held; signals to queenctl go to its whole process
 * group; a loss stops the group (SIGTERM, then SIGKILL after --kill-after); its exit status
 * becomes the watch's; and nothing it started is left running (docs/cli-contract.md, "watch").
 *
 * Processes are reached only through the `launch` port, and time only through the clock, as the
 * renewal scheduler reaches the broker only through its client: tests run every rule here on a
 * fake clock with fake commands. process-group.ts is the real launcher.
 */
import type { Clock } from '../clock.js';
import { ExitCode, UsageError } from '../exit.js';
import type { StopReason, WatchEvent } from '../renewal/events.js';

/** The verbs that run a supervised command, as their refusal names them. */
export type SupervisingVerb = 'lease watch -- <command>' | 'lease run';

/**
 * Refuses a supervised command where it cannot be supervised: Windows has no POSIX process
 * groups, no signals to send to one, no /proc to find what a command left behind and no 0700
 * directories for a batch file, and supervision that loses track of a command is worse than none
 * (a command left running on a lost lease). Called before anything is sent, read or started
 * (commands/globals.ts), so the refusal is a usage error, exit 1: nothing popped, no lease taken
 * (docs/cli-contract.md, Exit codes). `platform`: process.platform, or a test's.
 */
export function refuseUnsupervisable(verb: SupervisingVerb, platform: NodeJS.Platform): void {
  if (platform !== 'win32') return;
  throw new UsageError(
    `${verb} is not available on Windows: it runs its command in a POSIX process group (signals passed on to ` +
      'the whole group, whatever it started stopped with it), which Windows does not have. Nothing was sent',
    'run it in WSL (Windows Subsystem for Linux), with the Linux queenctl; here, lease watch <id> without a ' +
      'command and every other verb work',
  );
}

export interface LaunchSpec {
  command: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  /** The command's stdout goes to queenctl's stderr: stdout carries the event stream. */
  stdoutToStderr: boolean;
  /**
   * Should queenctl die while the command runs (SIGKILL, the OOM killer), its group gets SIGTERM
   * at once and SIGKILL this long after, from outside queenctl (guardian.ts).
   */
  killAfterMs: number;
  /**
   * Written to the command's standard input, one chunk after another, then its end (`lease
   * run`: the batch's messages, one JSON line each). Undefined: stdin is inherited.
   */
  input?: readonly string[];
  /**
   * The command's stdout and stderr pass through queenctl a whole line at a time (`lease run
   * --parallel`: several commands write to the same streams, and no line may be cut into
   * another's). Otherwise they are inherited.
   */
  wholeLines?: boolean;
}

/** How the command ended, and the status a shell would report for it. */
export interface ChildExit {
  /** The exit code, or 128 + the signal's number when a signal ended it (126/127 when it never ran). */
  status: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the command could not be started at all. */
  startError?: NodeJS.ErrnoException;
  /**
   * With `input`: how many of its chunks the pipe took in full before the command ended (lease
   * run completes no message whose line was not written).
   */
  inputWritten?: number;
}

/** A command started in a process group of its own. */
export interface LaunchedCommand {
  readonly pid: number;
  /** Resolves once the command's own process has exited (its group may live on). */
  readonly exited: Promise<ChildExit>;
  /** Sends a signal to every process of the group; a group already gone is not an error. */
  signalGroup(signal: NodeJS.Signals): void;
  /** True while a process of the group is running. */
  groupAlive(): boolean;
  /** The group is gone or no longer ours to watch: drop what guards it. */
  release(): void;
}

/**
 * Starts a command; resolves once it runs, or with how it could not be started (126/127).
 * `prepare`, if the launcher has it, gets ready for a launch to come, so that the launch itself
 * costs less (the real launcher starts its guardian then).
 */
export type Launch = ((spec: LaunchSpec) => Promise<LaunchedCommand | ChildExit>) & { prepare?(): void };

/** What the supervisor says happened, for the words on stderr (output/watch.ts). */
export type SupervisorNotice =
  | { kind: 'started'; pid: number }
  | { kind: 'not-started' }
  | { kind: 'start-failed'; exit: ChildExit }
  | { kind: 'forwarded'; signal: NodeJS.Signals }
  | { kind: 'stopping'; refused: boolean }
  | { kind: 'killed' }
  | { kind: 'exited'; exit: ChildExit }
  | { kind: 'leftover' };

export interface SupervisorObserver {
  notice(notice: SupervisorNotice): void;
  /** The watch ends with this status: the command's own, or why it was stopped or never started. */
  ended(status: number): void;
  /** A bug, not an outcome (an exception in a reaction): the watch must end, never silently. */
  crashed(error: unknown): void;
}

/** What the supervisor needs of the renewal scheduler. */
export interface SupervisedLeases {
  /** True once every lease has been renewed at least once and none has ended. */
  readonly everyLeaseRenewed: boolean;
  /** The refusal that ended renewal, if one did: the watch then ends with 3. */
  readonly refusal: unknown;
  earliestExpiresAt(): string | null;
  stop(reason: Extract<StopReason, 'child-exit' | 'signal' | 'lease-lost'>): void;
}

export interface SupervisorOptions {
  /** The command and its arguments (what followed `--`), never empty. */
  argv: readonly [string, ...string[]];
  leaseIds: readonly string[];
  /** queenctl's own environment, which the command inherits less the token. */
  env: NodeJS.ProcessEnv;
  killAfterMs: number;
  stdoutToStderr: boolean;
  /**
   * Set in the command's environment beside the lease ids (`lease run`: the queue, the batch
   * file); a variable given as undefined is removed from what the command inherits.
   */
  extraEnv?: Readonly<Record<string, string | undefined>>;
  /** The command's standard input (LaunchSpec.input); undefined: inherited. */
  input?: readonly string[];
  /** LaunchSpec.wholeLines. */
  wholeLines?: boolean;
}

export interface SupervisorPorts {
  launch: Launch;
  clock: Clock;
  /**
   * While a listener is registered, SIGINT, SIGTERM and SIGHUP to queenctl go to it and do
   * nothing else (cli.ts). Returns the release.
   */
  relaySignals(listener: (signal: NodeJS.Signals) => void): () => void;
}

/** How often a group that was told to stop is looked at. */
const GROUP_POLL_MS = 50;

export class CommandSupervisor {
  private state: 'none' | 'starting' | 'running' | 'ended' = 'none';
  private running: LaunchedCommand | null = null;
  /** Set by the first loss: the status the watch ends with once the command has stopped. */
  private stopRequested: ExitCode | null = null;
  private requestStop: ((code: ExitCode) => void) | null = null;

  constructor(
    private readonly options: SupervisorOptions,
    private readonly ports: SupervisorPorts,
    private readonly leases: SupervisedLeases,
    private readonly observer: SupervisorObserver,
  ) {
    // The command starts after the first renewal: what launching it needs is made ready meanwhile.
    ports.launch.prepare?.();
  }

  /** True from the moment the command is to start: signals are then its to act on. */
  get started(): boolean {
    return this.state !== 'none';
  }

  /** Every event of the renewal scheduler, in order, while the watch goes on. */
  onEvent(event: WatchEvent): void {
    if (event.event === 'renewed') {
      if (this.state === 'none' && this.stopRequested === null && this.leases.everyLeaseRenewed) {
        this.state = 'starting';
        this.react(() => this.supervise());
      }
      return;
    }
    const gone = event.event === 'lost' || (event.event === 'stopped' && event.reason === 'error');
    if (!gone || this.stopRequested !== null) return;
    // With a command, losing any one lease is losing the lease (docs/cli-contract.md).
    const code = this.leases.refusal ? ExitCode.Auth : event.event === 'lost' ? ExitCode.NotHeld : ExitCode.Broker;
    this.stopRequested = code;
    if (this.state === 'none') {
      this.observer.notice({ kind: 'not-started' });
      this.react(async () => {
        this.leases.stop('lease-lost');
        this.observer.ended(code);
      });
    } else {
      // Starting: the stop is taken up once it runs.
      this.requestStop?.(code);
    }
  }

  /** Last resort when the watch crashes: the command must not run on without a renewed lease. */
  kill(): void {
    this.running?.signalGroup('SIGKILL');
  }

  /** Runs an async reaction outside the scheduler's call stack; a bug ends the watch, never silently. */
  private react(action: () => Promise<void>): void {
    action().catch((error: unknown) => this.observer.crashed(error));
  }

  private async supervise(): Promise<void> {
    const { argv, killAfterMs, stdoutToStderr } = this.options;
    const [command, ...args] = argv;
    const { clock } = this.ports;
    let child: LaunchedCommand | null = null;
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
      this.observer.notice({ kind: 'forwarded', signal });
      if (signal === 'SIGHUP' || escalating) return;
      escalating = true;
      const running = child;
      clock.sleep(killAfterMs, escalation.signal).then(
        () => {
          this.observer.notice({ kind: 'killed' });
          running.signalGroup('SIGKILL');
        },
        () => {
          // The command exited in time.
        },
      );
    };
    const release = this.ports.relaySignals(forward);
    try {
      const env = this.childEnv();
      const { input, wholeLines } = this.options;
      const spec: LaunchSpec = {
        command,
        args,
        env,
        stdoutToStderr,
        killAfterMs,
        ...(input && { input }),
        ...(wholeLines && { wholeLines }),
      };
      const launched = await this.ports.launch(spec);
      if (!('exited' in launched)) {
        this.state = 'ended';
        this.observer.notice({ kind: 'start-failed', exit: launched });
        this.leases.stop('child-exit');
        return this.observer.ended(launched.status);
      }
      child = this.running = launched;
      this.state = 'running';
      this.observer.notice({ kind: 'started', pid: child.pid });
      for (const signal of pending.splice(0)) forward(signal);

      const stop = new Promise<ExitCode>((resolve) => (this.requestStop = resolve));
      if (this.stopRequested !== null) this.requestStop?.(this.stopRequested);
      const first = await Promise.race([child.exited, stop]);
      escalation.abort();
      if (typeof first === 'number') {
        // A lease is gone (or the token refused): the work must stop; renewal of the other
        // leases goes on until it has.
        this.observer.notice({ kind: 'stopping', refused: first === ExitCode.Auth });
        await this.stopGroup(child);
        this.state = 'ended';
        this.leases.stop('lease-lost');
        return this.observer.ended(first);
      }
      const exit: ChildExit = first;
      this.state = 'ended';
      this.observer.notice({ kind: 'exited', exit });
      this.leases.stop(forwarded ? 'signal' : 'child-exit');
      if (child.groupAlive()) {
        // What it started is no longer covered by a renewed lease.
        this.observer.notice({ kind: 'leftover' });
        await this.stopGroup(child);
      } else {
        child.release();
      }
      this.observer.ended(exit.status);
    } finally {
      release();
    }
  }

  /**
   * Stops the whole group: SIGTERM, then SIGKILL to whatever is left after --kill-after.
   * Resolves with how the command's own process ended, once the group is gone.
   */
  private async stopGroup(child: LaunchedCommand): Promise<ChildExit> {
    const { clock } = this.ports;
    child.signalGroup('SIGTERM');
    const killAt = clock.now() + this.options.killAfterMs;
    while (child.groupAlive()) {
      const now = clock.now();
      if (now >= killAt) {
        this.observer.notice({ kind: 'killed' });
        child.signalGroup('SIGKILL');
        break;
      }
      await clock.sleep(Math.min(GROUP_POLL_MS, killAt - now));
    }
    const exit = await child.exited;
    child.release();
    return exit;
  }

  /** The command's environment: the lease ids and expiry, never the token (docs/cli-contract.md). */
  private childEnv(): NodeJS.ProcessEnv {
    const { leaseIds } = this.options;
    const env: NodeJS.ProcessEnv = { ...this.options.env };
    for (const [name, value] of Object.entries(this.options.extraEnv ?? {})) {
      if (value === undefined) delete env[name];
      else env[name] = value;
    }
    delete env.QUEEN_TOKEN;
    env.QUEEN_LEASE_ID = leaseIds[0];
    env.QUEEN_LEASE_IDS = leaseIds.join(' ');
    const expiresAt = this.leases.earliestExpiresAt();
    if (expiresAt !== null) env.QUEEN_LEASE_EXPIRES_AT = expiresAt;
    return env;
  }
}
