/**
 * queenctl run in this process: `run` of src/cli.ts on injected ports (streams that say whether
 * they are terminals, standard input, the environment, signals, an exit-code capture), so a
 * command test costs what the command does and not a Node start-up. What is about the process
 * itself (signals through the kernel, process groups, EPIPE, the bin, packaging) runs as a process
 * (test/support/cli.ts, in test/process/).
 *
 * - `runInProcess(args)`: run to completion, then look at `{ code, signal, stdout, stderr }`.
 * - `startInProcess(args)`: a handle on a run in progress (a watch): wait for what it prints,
 *   write to its standard input, send it a "signal", await its end. The same shape as
 *   startCli's handle, so a test moves between the two by changing the call.
 *
 * The environment is cleanEnv's (no QUEEN_*, NO_COLOR, FORCE_COLOR; HOME an empty directory),
 * so the machine's own config never reaches a test.
 */
import type { StdinLike } from '../../src/args.js';
import { type CliPorts, type CliStream, run } from '../../src/cli.js';
import type { Clock } from '../../src/clock.js';
import { cleanEnv } from './cli.js';

/** Turns a hang into a failure; generous for the same reason as cli.ts's kill timer. */
const DEFAULT_GIVE_UP_MS = 60_000;
const DEFAULT_WAIT_MS = 30_000;
/** What a terminal is, when a test says stdout or stderr is one and gives no width. */
const TERMINAL_COLUMNS = 80;
/** Signals that end a process that does not catch them, with the status a shell reports. */
const FATAL_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGKILL', 'SIGPIPE', 'SIGQUIT'];

export interface InProcessOptions {
  /** Set on top of the clean environment (see cleanEnv); undefined removes a variable. */
  env?: Record<string, string | undefined>;
  /** Standard input, then its end (default ''); null leaves it open for write/endInput. */
  stdin?: string | Uint8Array | null;
  stdinIsTTY?: boolean;
  stdoutIsTTY?: boolean;
  stderrIsTTY?: boolean;
  /** The width of a terminal stdout/stderr (default 80). */
  columns?: number;
  /** The height of a terminal stdout/stderr (default: none said, as a stream that does not know). */
  rows?: number;
  /** The clock of every verb (default: each verb's own, real time). */
  clock?: Clock;
  /** The platform the run takes itself to be on (default: this one's): what Windows changes. */
  platform?: NodeJS.Platform;
  /** Give up on the run after this long (default 60 s): the result says `killed`. */
  timeoutMs?: number;
  /**
   * Sends the run a signal when it aborts: its reason when that names one (`SIGHUP`), else SIGINT.
   * For runInProcess, which has no handle to `kill` with.
   */
  signal?: AbortSignal;
}

export interface InProcessResult {
  /** The exit status; null when a signal it did not catch ended it (see `signal`). */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** True when the run outlived `timeoutMs` and the runner gave up on it. */
  killed: boolean;
}

/** A run in progress. Every wait fails with what it printed so far. */
export interface RunningInProcess {
  stdout(): string;
  stderr(): string;
  /** Writes to standard input (started with `stdin: null`). */
  write(text: string): void;
  /** Closes standard input, after writing `text`. */
  endInput(text?: string): void;
  until<T>(check: () => T | undefined, what: string, timeoutMs?: number): Promise<T>;
  waitForStdout(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /**
   * Delivers a signal (default SIGTERM) as the process would get it: to what the run listens
   * with (cli.ts), else it ends the run as the signal's default action ends a process.
   */
  kill(signal?: NodeJS.Signals): void;
  /** Resolves once the run is over. Rejects only when `run` itself throws (a bug in cli.ts). */
  readonly exited: Promise<InProcessResult>;
}

class Output implements CliStream {
  text = '';
  /** A process that has ended writes nothing more. */
  closed = false;
  constructor(
    readonly isTTY: boolean,
    readonly columns: number | undefined,
    private readonly onWrite: () => void,
    readonly rows: number | undefined = undefined,
  ) {}
  write(chunk: string | Uint8Array): boolean {
    if (this.closed) return true;
    this.text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    this.onWrite();
    return true;
  }
  hasColors(): boolean {
    return this.isTTY;
  }
}

/** Standard input fed by the test: chunks as written, then its end. */
class Input implements StdinLike {
  private chunks: Buffer[] = [];
  private ended = false;
  private wake: (() => void) | null = null;
  constructor(readonly isTTY: boolean) {}
  write(text: string | Uint8Array): void {
    if (this.ended) return;
    this.chunks.push(Buffer.from(text));
    this.poke();
  }
  end(text: string | Uint8Array = ''): void {
    if (text.length > 0) this.write(text);
    this.ended = true;
    this.poke();
  }
  destroy(): void {
    this.chunks = [];
    this.end();
  }
  private poke(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    for (;;) {
      const chunk = this.chunks.shift();
      if (chunk) yield chunk;
      else if (this.ended) return;
      else await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}

export function startInProcess(
  args: readonly (string | Uint8Array)[],
  options: InProcessOptions = {},
): RunningInProcess {
  const waiters = new Set<() => void>();
  const poke = (): void => {
    for (const waiter of [...waiters]) waiter();
  };
  const columns = options.columns ?? TERMINAL_COLUMNS;
  const stdout = new Output(
    Boolean(options.stdoutIsTTY),
    options.stdoutIsTTY ? columns : undefined,
    poke,
    options.stdoutIsTTY ? options.rows : undefined,
  );
  const stderr = new Output(
    Boolean(options.stderrIsTTY),
    options.stderrIsTTY ? columns : undefined,
    poke,
    options.stderrIsTTY ? options.rows : undefined,
  );
  const stdin = new Input(Boolean(options.stdinIsTTY));
  if (options.stdin !== null) stdin.end(options.stdin ?? '');
  const listeners = new Map<NodeJS.Signals, Array<(signal: NodeJS.Signals) => void>>();

  let outcome: InProcessResult | null = null;
  let settle: (result: InProcessResult) => void = () => {};
  let fail: (error: unknown) => void = () => {};
  const exited = new Promise<InProcessResult>((resolve, reject) => {
    settle = resolve;
    fail = reject;
  });
  exited.catch(() => {
    // Handled here so an unawaited handle cannot crash the run; awaiting it still rejects.
  });
  /** The first end wins: a process that exited does not exit again, nor print. */
  const end = (code: number | null, signal: NodeJS.Signals | null, killed = false): void => {
    if (outcome) return;
    clearTimeout(giveUp);
    stdout.closed = true;
    stderr.closed = true;
    outcome = { code, signal, stdout: stdout.text, stderr: stderr.text, killed };
    settle(outcome);
    poke();
  };
  /**
   * A process a signal ended stops there; a run in this process would go on (a watch for as long
   * as its leases last), so it is told to stop as SIGTERM would, unheard: its output is closed.
   */
  let stopping = false;
  const stopUnheard = (): void => {
    if (stopping) return;
    stopping = true;
    stdin.destroy();
    for (const listener of listeners.get('SIGTERM') ?? []) listener('SIGTERM');
  };
  const giveUp = setTimeout(() => {
    end(null, 'SIGKILL', true);
    stopUnheard();
  }, options.timeoutMs ?? DEFAULT_GIVE_UP_MS);

  const ports: CliPorts = {
    env: cleanEnv(options.env),
    stdout,
    stderr,
    stdin,
    onSignal: (signals, listener) => {
      for (const signal of signals) listeners.set(signal, [...(listeners.get(signal) ?? []), listener]);
    },
    // run() resolves with the status it set last: that is the one a process would end with.
    setExitCode: () => {},
    exit: (code) => {
      end(code, null);
      stopUnheard();
    },
    nodeVersion: process.version,
    clock: options.clock,
    ...(options.platform && { platform: options.platform }),
  };
  run(args, ports).then(
    (code) => end(code, null),
    (error: unknown) => {
      if (outcome) return;
      clearTimeout(giveUp);
      fail(error);
      poke();
    },
  );

  const kill = (signal: NodeJS.Signals = 'SIGTERM'): void => {
    if (outcome) return;
    const caught = signal === 'SIGKILL' ? [] : (listeners.get(signal) ?? []);
    if (caught.length > 0) for (const listener of caught) listener(signal);
    else if (FATAL_SIGNALS.includes(signal)) {
      end(null, signal);
      stopUnheard();
    }
    // Any other signal's default is to be ignored (SIGWINCH, SIGCHLD) or is not sent by tests.
  };
  const abortSignal = options.signal;
  if (abortSignal) {
    const onAbort = (): void => {
      const reason: unknown = abortSignal.reason;
      kill(typeof reason === 'string' && /^SIG[A-Z]+$/.test(reason) ? (reason as NodeJS.Signals) : 'SIGINT');
    };
    if (abortSignal.aborted) onAbort();
    else {
      abortSignal.addEventListener('abort', onAbort, { once: true });
      void exited.finally(() => abortSignal.removeEventListener('abort', onAbort)).catch(() => {});
    }
  }

  const until = <T>(check: () => T | undefined, what: string, timeoutMs = DEFAULT_WAIT_MS): Promise<T> =>
    new Promise((resolve, reject) => {
      const failWith = (why: string): void => {
        clearTimeout(deadline);
        waiters.delete(waiter);
        reject(new Error(`${why} waiting for ${what}\n--- stdout\n${stdout.text}\n--- stderr\n${stderr.text}`));
      };
      const waiter = (): void => {
        const found = check();
        if (found !== undefined) {
          clearTimeout(deadline);
          waiters.delete(waiter);
          resolve(found);
        } else if (outcome) {
          failWith(`the run ended (${outcome.code ?? outcome.signal})`);
        }
      };
      const deadline = setTimeout(() => failWith(`timed out after ${timeoutMs} ms`), timeoutMs);
      waiters.add(waiter);
      waiter();
    });
  const matching = (text: () => string, pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray> =>
    until(() => text().match(pattern) ?? undefined, String(pattern), timeoutMs);

  return {
    stdout: () => stdout.text,
    stderr: () => stderr.text,
    write: (text) => stdin.write(text),
    endInput: (text) => stdin.end(text),
    until,
    waitForStdout: (pattern, timeoutMs) => matching(() => stdout.text, pattern, timeoutMs),
    waitForStderr: (pattern, timeoutMs) => matching(() => stderr.text, pattern, timeoutMs),
    kill,
    exited,
  };
}

/** queenctl run to completion in this process. */
export function runInProcess(
  args: readonly (string | Uint8Array)[],
  options: InProcessOptions = {},
): Promise<InProcessResult> {
  return startInProcess(args, options).exited;
}
