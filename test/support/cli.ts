/**
 * The one process runner of the suite: queenctl run as a user would (a child process, its exit
 * code and its two streams), and any other command a test needs (a shell pipeline, script(1),
 * the simulator's own process), each in a clean environment and each with a kill timer, so a
 * hanging process fails its test and never the suite.
 *
 * - `runCli(args)` / `runProcess(command, args)`: run to completion, then look at the result.
 * - `startCli(args)` / `startProcess(command, args)`: a handle on a running process: wait for
 *   what it prints, write to its standard input, send it a signal, await its exit.
 * - `runShell(script)`: `bash -c script`, for pipelines.
 *
 * Every run says how it must end (`exit`: an exit code, or the signal that ends it) and has a
 * kill timer (`timeoutMs`, default 20 s): `exited` rejects, quoting both streams, when it ends
 * any other way or the timer has to kill it. A test cannot pass on a hang, on a crash of both
 * sides of a comparison, or on an exit it did not name.
 *
 * With QUEENCTL_EXE=<path> in the environment, startCli/runCli run that executable (the
 * standalone build) instead of `node bin/queenctl.cjs`. A test that needs node itself (its flags,
 * another entry than the bin) says so with `{ skip: needsNode(why) }`, and starting one under
 * QUEENCTL_EXE fails loudly instead of testing node in the executable's place.
 */
import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { until } from './until.js';

/** The published bin, as `npm install -g` would run it. */
export const BIN = fileURLToPath(new URL('../../../bin/queenctl.cjs', import.meta.url));

/** The executable under test instead of node and the bin (a standalone build), if set. */
export const EXE = process.env.QUEENCTL_EXE || undefined;

/**
 * For `it(name, { skip: needsNode('why') }, ...)`: false normally; under QUEENCTL_EXE, the reason
 * the test cannot run against a standalone executable.
 */
export function needsNode(why: string): string | false {
  return EXE ? `needs node itself (${why}); QUEENCTL_EXE runs ${EXE}` : false;
}

/** queenctl as a shell command line (for pipelines and wrapper scripts): quoted, then arguments. */
export function cliCommandLine(): string {
  return EXE ? JSON.stringify(EXE) : `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)}`;
}

/**
 * A HOME with no ~/.queen, so the machine's own config never leaks into a test. Removed as the
 * process ends: the runners without test/support/temp-root.ts (test:image) left one a run.
 */
const EMPTY_HOME = mkdtempSync(join(tmpdir(), 'queenctl-home-'));
process.once('exit', () => rmSync(EMPTY_HOME, { recursive: true, force: true }));

/**
 * How long a process may run before the kill timer ends it (SIGKILL), unless the test says
 * otherwise. It is there to turn a hang into a failure, well inside the runner's own limit
 * (`--test-timeout` in package.json's test scripts), and generous: a 2-core machine running
 * two suites makes a one-second run take ten (seen: 12 s under a load of 14).
 */
export const DEFAULT_KILL_AFTER_MS = 20_000;
/** How long `until` and the waits built on it wait by default (they fail at once if it ends). */
const DEFAULT_WAIT_MS = 20_000;
/** See ProcessOptions.closeGraceMs. */
const CLOSE_GRACE_MS = 2_000;

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** True when the kill timer had to end it. */
  killed: boolean;
}

/**
 * How a run must end: its exit code, or the signal that ends it; a list when the moment of a
 * signal decides between named ends (a run signalled during its start-up, or after its work).
 */
export type ExpectedExit = number | NodeJS.Signals | readonly (number | NodeJS.Signals)[];

export interface ProcessOptions {
  /**
   * How the test expects the process to end (required): an exit code, or the signal that ends
   * it. `exited` rejects, with both streams, on any other end.
   */
  exit: ExpectedExit;
  /** Set on top of the clean environment (see cleanEnv); undefined removes a variable. */
  env?: Record<string, string | undefined>;
  /** Written to standard input, which is then closed (default ''); null leaves it open. */
  stdin?: string | null;
  /** Kill the process after this long (default 20 s); `exited` then rejects. */
  timeoutMs?: number;
  /**
   * After the process exits, how long to wait for its pipes to close (default 2 s). A process it
   * left behind holds them open: that must not hide the exit (tests look for such leftovers).
   */
  closeGraceMs?: number;
  cwd?: string;
}

export interface CliOptions extends ProcessOptions {
  /** The script node runs: the published bin (default), or another entry point of queenctl. */
  entry?: string;
  /** Flags for node itself, before the entry (e.g. `--unhandled-rejections=strict`). */
  nodeArgs?: string[];
}

/** A running process. Every wait fails with what the process printed so far. */
export interface RunningProcess {
  readonly process: ChildProcessWithoutNullStreams;
  /** Everything printed so far. */
  stdout(): string;
  stderr(): string;
  /** Writes to standard input (started with `stdin: null`). */
  write(text: string): void;
  /** Closes standard input, after writing `text`. */
  endInput(text?: string): void;
  /**
   * Resolves with the first defined value of `check`, which is tried now and again whenever
   * the process prints something. Rejects after `timeoutMs` (default 30 s) or when the process
   * ends first; the error names `what` and quotes both streams.
   */
  until<T>(check: () => T | undefined, what: string, timeoutMs?: number): Promise<T>;
  /** Resolves with the match once `pattern` matches everything printed on stdout so far. */
  waitForStdout(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Sends a signal (default SIGTERM). */
  kill(signal?: NodeJS.Signals): void;
  /**
   * Resolves once the process has exited as `exit` says and its pipes are closed (or, when
   * something it left behind holds them open, a moment after it exited). Rejects when it could
   * not start, when the kill timer ended it, or when it ended any other way than `exit`.
   */
  readonly exited: Promise<CliResult>;
}

export function cleanEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    // COLUMNS and LINES fit output for people even in a pipe: a test that wants them sets them.
    const dropped = key === 'NO_COLOR' || key === 'FORCE_COLOR' || key === 'COLUMNS' || key === 'LINES';
    if (!key.startsWith('QUEEN_') && !dropped && !key.startsWith('NODE_TEST')) env[key] = value;
  }
  env.HOME = EMPTY_HOME;
  for (const [key, value] of Object.entries(extra)) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  return env;
}

/** What a process printed and how it ended, for the message of a failed expectation. */
export function describeRun(result: Pick<CliResult, 'code' | 'signal' | 'stdout' | 'stderr'>): string {
  const { code, signal, stdout, stderr } = result;
  const end = signal === null ? `exit ${code}` : `signal ${signal}`;
  return `${end}\n--- stdout\n${stdout.slice(0, 4000)}\n--- stderr\n${stderr.slice(0, 4000)}`;
}

/** Whether `result` ended as `exit` says. */
function endedAs(result: CliResult, exit: ExpectedExit): boolean {
  const ends = typeof exit === 'object' ? exit : [exit];
  return ends.some((end) =>
    typeof end === 'number' ? result.signal === null && result.code === end : result.signal === end,
  );
}

export function startProcess(command: string, args: string[], options: ProcessOptions): RunningProcess {
  if (options.exit === undefined) throw new Error('startProcess: say how the process must end (exit)');
  const timeoutMs = options.timeoutMs ?? DEFAULT_KILL_AFTER_MS;
  const child = spawn(command, args, { env: cleanEnv(options.env), stdio: 'pipe', cwd: options.cwd });
  let stdout = '';
  let stderr = '';
  let killed = false;
  let ended = false;
  const waiters = new Set<() => void>();
  const poke = (): void => {
    for (const waiter of [...waiters]) waiter();
  };
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    poke();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    poke();
  });
  child.stdin.on('error', () => {
    // The process may end before reading all of its input; that is its right.
  });
  if (options.stdin !== null) child.stdin.end(options.stdin ?? '');

  const timer = setTimeout(() => {
    killed = true;
    child.kill('SIGKILL');
  }, timeoutMs);
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const exited = new Promise<CliResult>((resolve, reject) => {
    child.once('error', (error) => {
      clearTimeout(timer);
      ended = true;
      poke();
      reject(error);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      let grace: NodeJS.Timeout | undefined;
      const graceOver = new Promise<void>((wait) => {
        grace = setTimeout(wait, options.closeGraceMs ?? CLOSE_GRACE_MS);
      });
      void Promise.race([closed, graceOver]).then(() => {
        clearTimeout(grace);
        ended = true;
        poke();
        const result = { code, signal, stdout, stderr, killed };
        const line = [command, ...args].join(' ').slice(0, 300);
        if (killed) reject(new Error(`${line}: killed after ${timeoutMs} ms, its time limit\n${describeRun(result)}`));
        else if (!endedAs(result, options.exit))
          reject(new Error(`${line}: expected to end with ${options.exit}, got ${describeRun(result)}`));
        else resolve(result);
      });
    });
  });
  exited.catch(() => {
    // Handled here so an unawaited handle cannot crash the run; awaiting it still rejects.
  });

  const until = <T>(check: () => T | undefined, what: string, timeoutMs = DEFAULT_WAIT_MS): Promise<T> =>
    new Promise((resolve, reject) => {
      const failWith = (why: string): void => {
        clearTimeout(deadline);
        waiters.delete(waiter);
        reject(new Error(`${why} waiting for ${what}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`));
      };
      const waiter = (): void => {
        const found = check();
        if (found !== undefined) {
          clearTimeout(deadline);
          waiters.delete(waiter);
          resolve(found);
        } else if (ended) {
          failWith(`the process ended (${child.exitCode ?? child.signalCode ?? 'not started'})`);
        }
      };
      const deadline = setTimeout(() => failWith(`timed out after ${timeoutMs} ms`), timeoutMs);
      waiters.add(waiter);
      waiter();
    });
  const matching = (stream: () => string, pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray> =>
    until(() => stream().match(pattern) ?? undefined, String(pattern), timeoutMs);

  return {
    process: child,
    stdout: () => stdout,
    stderr: () => stderr,
    write: (text) => {
      child.stdin.write(text);
    },
    endInput: (text = '') => {
      child.stdin.end(text);
    },
    until,
    waitForStdout: (pattern, timeoutMs) => matching(() => stdout, pattern, timeoutMs),
    waitForStderr: (pattern, timeoutMs) => matching(() => stderr, pattern, timeoutMs),
    kill: (signal = 'SIGTERM') => {
      child.kill(signal);
    },
    exited,
  };
}

export function runProcess(command: string, args: string[], options: ProcessOptions): Promise<CliResult> {
  return startProcess(command, args, options).exited;
}

/**
 * queenctl (the published bin unless `entry` says otherwise; QUEENCTL_EXE when set), running.
 */
export function startCli(args: string[], options: CliOptions): RunningProcess {
  const { entry, nodeArgs, ...rest } = options;
  if (EXE) {
    if (entry !== undefined || nodeArgs !== undefined)
      throw new Error(`this test runs node with ${entry ?? nodeArgs?.join(' ')}: mark it { skip: needsNode(...) }`);
    return startProcess(EXE, args, rest);
  }
  return startProcess(process.execPath, [...(nodeArgs ?? []), entry ?? BIN, ...args], rest);
}

/** queenctl run to completion. */
export function runCli(args: string[], options: CliOptions): Promise<CliResult> {
  return startCli(args, options).exited;
}

/** A bash script run to completion, for pipelines (`queenctl … | head -1`). */
export function runShell(script: string, options: ProcessOptions): Promise<CliResult> {
  return runProcess('bash', ['-c', script], options);
}

/** True while a process of this pid runs (a zombie, exited but not reaped, does not). */
export function isRunning(pid: number): boolean {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = text.slice(text.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * Shell text that starts `sleep <seconds>` in the background and returns only once it runs
 * `sleep`, for a script with a TERM trap that then says it is ready; the sleep's pid is written
 * to `pidFile` first, so that a test can check that it ended (sleepEnded). Between the fork and the
 * exec, the background child is still the shell, with the trap: a SIGTERM to the group landing
 * there is taken by the trap, then dropped as the child resets its traps, and the sleep never sees
 * it (measured: 69 of 300 such sleeps outlived a SIGTERM sent as soon as the script said it was
 * ready; 0 of 300 after this wait). A sleep left so holds the test's pipes until it ends. Should
 * the sleep not start at all, the wait ends with it. It assumes an external `sleep` on Linux (dash
 * or bash as sh): a shell that ran `sleep` as a builtin would never exec it, and would spin here.
 */
export function sleepStarted(seconds: number, pidFile: string): string {
  const running = '{ { read -r __c < /proc/$__s/comm; } 2>/dev/null && [ "$__c" = sleep ]; }';
  return `sleep ${seconds} & __s=$!; until [ ! -e /proc/$__s ] || ${running}; do :; done; echo $__s > ${pidFile}`;
}

/**
 * Waits until the sleep whose pid `sleepStarted` wrote to `pidFile` has ended. Should it not, it
 * is SIGKILLed as the test fails, so that it does not also hold the test's pipes.
 */
export async function sleepEnded(pidFile: string): Promise<void> {
  const pid = Number(readFileSync(pidFile, 'utf8'));
  // Still the sleep: pids are reused (pid_max may be 32768), and another process is never killed.
  const stillTheSleep = (): boolean => {
    try {
      return isRunning(pid) && readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep';
    } catch {
      return false;
    }
  };
  try {
    await until(() => !isRunning(pid), `the sleep (pid ${pid}) to end`);
  } finally {
    if (stillTheSleep()) process.kill(pid, 'SIGKILL');
  }
}

/** Whether `shell` runs here; asked once a shell, however many tests' skips ask. */
const shells = new Map<string, boolean>();
export function shellInstalled(shell: string): boolean {
  let runs = shells.get(shell);
  if (runs === undefined) {
    try {
      execFileSync(shell, ['-c', 'exit 0'], { stdio: 'ignore', timeout: 10_000 });
      runs = true;
    } catch {
      runs = false;
    }
    shells.set(shell, runs);
  }
  return runs;
}
