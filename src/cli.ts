/**
 * The process boundary: argv, streams, signals and the exit code. `run` takes them as ports and
 * never touches `process` (the suite runs commands through it in-process); `main` wires the real
 * process to it. Everything below takes them as parameters (commands/globals.ts builds the Runtime).
 */
import { setMaxListeners } from 'node:events';
import { fstatSync, readFileSync, statSync, writeSync } from 'node:fs';
import { getSystemErrorMap } from 'node:util';
import { type Command, CommanderError } from 'commander';
import type { StdinLike } from './args.js';
import type { Clock } from './clock.js';
import { globalContext, type ProcessPorts } from './commands/globals.js';
import { buildProgram } from './commands/program.js';
import { ExitCode, QueenctlError, signalExitCode } from './exit.js';
import type { OutputStream } from './io.js';
import { escapeText } from './output/sanitise.js';
import {
  fitHelp,
  loadedTerminalText,
  loadTerminalText,
  proseWidth,
  terminalWidth,
  wrapMessage,
} from './output/width.js';
import { errorMessage } from './output/words.js';
import { decodeArgv, rawArgv } from './utf8.js';
import { BUILD_INFO } from './build-info.js';
import { VERSION } from './version.js';

/** An output stream as the process has it: a terminal knows its width, a pipe may close. */
export interface CliStream extends OutputStream {
  columns?: number;
  /** A terminal's height, for the live views (output/live.ts). */
  rows?: number;
  hasColors?(): boolean;
  on?(event: 'error', listener: (error: NodeJS.ErrnoException) => void): unknown;
}

/** What a run needs from the process that hosts it; `main` gives the real one. */
export interface CliPorts {
  env: NodeJS.ProcessEnv;
  stdout: CliStream;
  stderr: CliStream;
  /** Read on use only: creating process.stdin costs start-up time that only `-` needs. */
  readonly stdin: StdinLike;
  /** From now on, calls `listener` on each of these signals. */
  onSignal(signals: readonly NodeJS.Signals[], listener: (signal: NodeJS.Signals) => void): void;
  /** Sets the status the process ends with when the run is over (it may set it more than once). */
  setExitCode(code: number): void;
  /** Ends the process now with this status: nothing after it may run. */
  exit(code: number): void;
  /** process.version, for `queenctl version`. */
  nodeVersion: string;
  /** The clock of every verb instead of the system's (tests only). */
  clock?: Clock;
  /** process.platform unless given (tests of what Windows changes, run on Linux). */
  platform?: NodeJS.Platform;
}

/**
 * queenctl on the real process: its streams, signals and exit code. `argv` as Node.js decoded it;
 * an argument that held bytes that are not UTF-8 is read again from the kernel (utf8.ts), so the
 * run can refuse it rather than send U+FFFD in its place.
 */
export async function main(argv: string[]): Promise<void> {
  const stdout = processOutput(1, () => process.stdout);
  const stderr = processOutput(2, () => process.stderr);
  await run(
    rawArgv(argv, () => readFileSync('/proc/self/cmdline')),
    {
      env: process.env,
      get stdout() {
        return stdout();
      },
      get stderr() {
        return stderr();
      },
      get stdin() {
        return process.stdin;
      },
      onSignal: (signals, listener) => {
        for (const signal of signals) process.on(signal, listener);
      },
      setExitCode: (status) => {
        process.exitCode = status;
      },
      exit: endProcess,
      nodeVersion: process.version,
    },
  );
}

/** The status each signal a run catches ends it with (exit.ts), and back. */
const SIGNAL_OF_STATUS = new Map<number, NodeJS.Signals>([
  [signalExitCode('SIGHUP'), 'SIGHUP'],
  [signalExitCode('SIGINT'), 'SIGINT'],
  [signalExitCode('SIGTERM'), 'SIGTERM'],
]);

/**
 * Ends the process now. The status of a signal (129, 130, 143) is given by that very signal,
 * at its default action: process.exit first waits for the threads of Node's thread pool, and
 * one stuck in a file-system call (the open() of a FIFO nobody writes, a hung network mount)
 * never returns, so the process would outlive the signal it was told to end on. A shell sees
 * the same status either way ($? is 128 + the signal's number).
 */
function endProcess(status: number): void {
  const signal = endingSignal(status, process.platform);
  if (signal) {
    process.exitCode = status;
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  }
  process.exit(status);
}

/**
 * The signal that ends the process with `status`, if one does. None on Windows: it has no
 * signals to raise, and process.kill there ends the process with status 1 (and refuses SIGHUP),
 * where the status must stay 129, 130 or 143.
 */
export function endingSignal(status: number, platform: NodeJS.Platform): NodeJS.Signals | undefined {
  return platform === 'win32' ? undefined : SIGNAL_OF_STATUS.get(status);
}

/**
 * The process's output `fd`, decided on first use. Output that is a pipe, a socket, a file or
 * /dev/null is no terminal: it is written to the descriptor directly (synchronously, as the stream
 * would be there), so neither process.stdout nor node:tty and node:net are loaded to ask (~5 ms
 * that `--version`, a usage error or a script's run need not pay; issue 19). A terminal gets the
 * real stream, which spinners need. `plain` and `writeFd` are the system's, or a test's.
 */
export function processOutput(
  fd: number,
  stream: () => NodeJS.WriteStream,
  plain: (fd: number) => boolean = isPlainOutput,
  writeFd: (fd: number, data: Uint8Array) => number = writeSync,
): () => CliStream {
  let port: CliStream | undefined;
  return () => {
    if (port) return port;
    if (!plain(fd)) {
      port = stream();
      return port;
    }
    const listeners: ((error: NodeJS.ErrnoException) => void)[] = [];
    let made = false;
    // After a write that failed, nothing more is written: output that resumed once the disk had
    // room again would leave a hole in the middle that looks like a whole file.
    let failed = false;
    const real = (): NodeJS.WriteStream => {
      if (!made) for (const listener of listeners) stream().on('error', listener);
      made = true;
      return stream();
    };
    port = {
      isTTY: false,
      write: (text: string) => {
        if (failed) return true;
        writeDirect(fd, text, made, real, writeFd, (error) => {
          failed = true;
          for (const listener of listeners) listener(error);
        });
        return true;
      },
      on: (_event, listener) => {
        listeners.push(listener);
        if (made) stream().on('error', listener);
        return port;
      },
    };
    return port;
  };
}

/**
 * Writes to descriptor `fd` at once, as process.stdout and stderr do on Linux (files and pipes
 * are synchronous there), without making the stream. Once the stream exists, or when the
 * descriptor would block (one left non-blocking by another process), the stream takes the rest,
 * so the order stays. Any other failure (a reader gone, a full disk) is the stream's error.
 */
function writeDirect(
  fd: number,
  text: string | Uint8Array,
  made: boolean,
  stream: () => NodeJS.WriteStream,
  writeFd: (fd: number, data: Uint8Array) => number,
  onError: (error: NodeJS.ErrnoException) => void,
): void {
  if (made) {
    stream().write(text);
    return;
  }
  let rest = typeof text === 'string' ? Buffer.from(text) : text;
  try {
    while (rest.length > 0) rest = rest.subarray(writeFd(fd, rest));
  } catch (error) {
    // Only a descriptor that would block hands the rest to the stream; any other failure (a
    // reader gone, a full disk) is the run's to act on now, not when the stream gets to it.
    if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') return onError(error as NodeJS.ErrnoException);
    stream().write(rest);
  }
}

/**
 * A pipe, a socket (what a Node.js parent's `stdio: 'pipe'`, journald or a container runtime
 * gives), a regular file or /dev/null: output that no terminal shows.
 */
function isPlainOutput(fd: number): boolean {
  try {
    const stat = fstatSync(fd);
    if (stat.isFIFO() || stat.isSocket() || stat.isFile()) return true;
    return stat.isCharacterDevice() && stat.rdev === statSync('/dev/null').rdev;
  } catch {
    return false;
  }
}

/**
 * One run of queenctl on these ports; resolves with its exit status (also given to setExitCode).
 * An argument may be given as the bytes the process got (main, and tests of bytes that are not
 * UTF-8): it is decoded here, before anything else, and refused if it is not text.
 */
export async function run(rawArgs: readonly (string | Uint8Array)[], ports: CliPorts): Promise<number> {
  let exitCode: number = ExitCode.Ok;
  const setExitCode = (code: number): void => {
    exitCode = code;
    ports.setExitCode(code);
  };
  let argv: string[];
  try {
    argv = decodeArgv(rawArgs);
  } catch (error) {
    setExitCode(await exitCodeFor(error, ports));
    return exitCode;
  }
  const controller = new AbortController();
  // Every request in flight listens to this one signal; a bulk run has many by design.
  setMaxListeners(0, controller.signal);
  let signalled: NodeJS.Signals | null = null;
  // Set while `watch` runs a command: signals are the command's to act on, and queenctl waits
  // for it. No path below may exit then, or the command would run on unsupervised.
  let relay: ((signal: NodeJS.Signals) => void) | null = null;
  // Whether this run has supervised a command (watch -- command, lease run): its status is then
  // the command's, or the run's, whatever became of its output.
  let supervises = false;
  // SIGINT, SIGTERM and SIGHUP (the terminal or the ssh session went away) end every command
  // the same way: the first aborts `signal` (a lease verb stops issuing and reports what it
  // did), and the run has SIGNAL_GRACE_MS to finish; then, or at a second signal, it is ended
  // with the signal's status whatever it waits on (docs/cli-contract.md#signals).
  const onSignal = (signal: NodeJS.Signals): void => {
    if (relay) return relay(signal);
    if (signalled) return ports.exit(signalExitCode(signal));
    signalled = signal;
    controller.abort(signal);
    const first = signal;
    afterGrace(ports.clock, () => {
      if (!relay) ports.exit(signalExitCode(first));
    });
  };
  ports.onSignal(['SIGINT', 'SIGTERM', 'SIGHUP'], onSignal);
  const relaySignals = (listener: (signal: NodeJS.Signals) => void): (() => void) => {
    relay = listener;
    supervises = true;
    return () => {
      if (relay === listener) relay = null;
    };
  };
  // A reader that went away (`| head -1`) ends the run quietly, as SIGPIPE would; a run that
  // supervises commands carries on without its event stream instead, and ends with its status.
  // Output that cannot be written for another reason (a full disk, an I/O error) is said once on
  // stderr, and the run carries on to its end without it, so that what it says on stderr and
  // keeps on disk (a batch's record) is not lost: a status of 0 then becomes 74, never one that
  // means success; any other stands, and a run that supervises commands keeps its own
  // (docs/cli-contract.md, "Output that cannot be written").
  let readerGone = false;
  let outputFailed = false;
  ports.stdout.on?.('error', (error) => {
    if (error.code === 'EPIPE') {
      readerGone ||= supervises;
      if (!readerGone) ports.exit(128 + 13);
      return;
    }
    if (!outputFailed) ports.stderr.write(outputFailure(error));
    outputFailed = true;
  });
  // Diagnostics that nobody can read any more must not change the outcome: unhandled, a closed
  // stderr would crash with status 1 ("nothing was sent") after a lease was renewed or lost.
  ports.stderr.on?.('error', () => {});

  const processPorts: ProcessPorts = {
    env: ports.env,
    stdout: ports.stdout,
    stderr: ports.stderr,
    get stdin() {
      return ports.stdin;
    },
    signal: controller.signal,
    argvAfterDashDash: argv.includes('--') ? argv.slice(argv.indexOf('--') + 1) : null,
    relaySignals,
    setExitCode,
    stdoutFailed: () => outputFailed,
    clock: ports.clock,
    platform: ports.platform ?? process.platform,
  };
  // Commander's defaults, on the ports instead of the process (every command: see below). Its
  // own default width is undefined too off a terminal (80 then, so help in a pipe and the docs
  // made from it keep one width), whatever its typing says. On a terminal help is as wide as it
  // (COLUMNS first), at most 100, its prose flowed again to fit (output/width.ts, issue 33).
  // Only a terminal's: help in a pipe stays 80 wide whatever COLUMNS says (docs/reference/).
  const outWidth = ports.stdout.isTTY ? terminalWidth(ports.stdout, ports.env) : undefined;
  const errWidth = ports.stderr.isTTY ? terminalWidth(ports.stderr, ports.env) : undefined;
  const fitted = (width: number | undefined, text: string): string => {
    const libraries = loadedTerminalText();
    return width === undefined || !libraries ? text : fitHelp(text, width, libraries);
  };
  const output = {
    writeErr: (text: string) => void ports.stderr.write(fitted(errWidth, text)),
    writeOut: (text: string) => void ports.stdout.write(fitted(outWidth, text)),
    getOutHelpWidth: () => (outWidth === undefined ? undefined : proseWidth(outWidth)) as number,
    getErrHelpWidth: () => (errWidth === undefined ? undefined : proseWidth(errWidth)) as number,
    getOutHasColors: () => commanderColor(ports.env) ?? Boolean(ports.stdout.isTTY && ports.stdout.hasColors?.()),
    getErrHasColors: () => commanderColor(ports.env) ?? Boolean(ports.stderr.isTTY && ports.stderr.hasColors?.()),
  };
  const globals = globalContext(processPorts, VERSION);
  const program = buildProgram(globals, { version: VERSION, info: BUILD_INFO, node: ports.nodeVersion }, output, argv);

  try {
    // Help is written synchronously: what fits it to a terminal is loaded before, when help may
    // be what this run prints.
    if ((outWidth !== undefined || errWidth !== undefined) && mayShowHelp(argv, program)) await loadTerminalText();
    await program.parseAsync(argv, { from: 'user' });
  } catch (error) {
    setExitCode(await exitCodeFor(error, ports));
  }
  if (signalled) setExitCode(signalExitCode(signalled));
  if (outputFailed && !supervises && exitCode === ExitCode.Ok) setExitCode(ExitCode.OutputFailed);
  return exitCode;
}

/**
 * How long a run may go on after the first SIGINT, SIGTERM or SIGHUP: long enough for a lease
 * verb to print what it did with the answers in flight (they are aborted at the signal), short
 * enough that every command ends within a second, a file-system call included.
 */
export const SIGNAL_GRACE_MS = 750;

/**
 * Calls `end` after the grace: on the run's clock when one is injected (tests), else on a timer
 * that never keeps a process alive (unref'd: a run that is over exits without waiting for it).
 */
function afterGrace(clock: Clock | undefined, end: () => void): void {
  if (clock) {
    clock.sleep(SIGNAL_GRACE_MS).then(end, () => {});
    return;
  }
  setTimeout(end, SIGNAL_GRACE_MS).unref();
}

/**
 * What a failed write to stdout says (its words are also bin/queenctl.cjs's, for `--version`):
 * the system's words for the error, `no space left on device`, whether it came from a write to
 * the descriptor or from the stream, and its code.
 */
function outputFailure(error: NodeJS.ErrnoException): string {
  const reason = (error.errno === undefined ? undefined : getSystemErrorMap().get(error.errno)?.[1]) ?? error.message;
  const code = error.code === undefined ? '' : ` (${error.code})`;
  const what = 'what this run did is not all in its output';
  return `queenctl: could not write to stdout: ${escapeText(reason)}${code}; ${what}\n`;
}

/** Commander's reading of NO_COLOR, FORCE_COLOR and CLICOLOR_FORCE, on the run's environment. */
function commanderColor(env: NodeJS.ProcessEnv): boolean | undefined {
  if (env.NO_COLOR || env.FORCE_COLOR === '0' || env.FORCE_COLOR === 'false') return false;
  if (env.FORCE_COLOR || env.CLICOLOR_FORCE !== undefined) return true;
  return undefined;
}

/**
 * Whether this command line may print help: `-h`, `--help`, `help`, no command at all, or a
 * group without its verb (`queenctl lease`). A guess that only decides what is loaded early.
 */
function mayShowHelp(argv: readonly string[], program: Command): boolean {
  const words = argv.includes('--') ? argv.slice(0, argv.indexOf('--')) : argv;
  if (words.some((word) => word === '-h' || word === '--help' || word === 'help')) return true;
  if (words.includes('--version')) return false;
  const operands = words.filter((word) => !word.startsWith('-'));
  const groups = program.commands.filter((command) => command.commands.length > 0).map((command) => command.name());
  return operands.length === 0 || (operands.length === 1 && groups.includes(operands[0] as string));
}

async function exitCodeFor(error: unknown, ports: CliPorts): Promise<ExitCode> {
  if (error instanceof CommanderError) {
    // Commander has already printed its message (or the help); usage errors are 1.
    return error.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage;
  }
  if (error instanceof QueenctlError) {
    // On a terminal, its lines wrapped to fit (output/width.ts); elsewhere as they are.
    const width = terminalWidth(ports.stderr, ports.env);
    const message = errorMessage(error);
    ports.stderr.write(width === undefined ? message : wrapMessage(message, width, await loadTerminalText()));
    return error.exitCode;
  }
  // A bug, not an outcome: say so plainly, and never exit 0. The stack only with QUEENCTL_DEBUG.
  const detail = ports.env.QUEENCTL_DEBUG
    ? ((error as Error)?.stack ?? String(error))
    : String((error as Error)?.message ?? error);
  // A message may quote outside text; a stack keeps its lines (output/sanitise.ts).
  const shown = detail.split('\n').map(escapeText).join('\n');
  ports.stderr.write(
    `queenctl: internal error: ${shown}\n  please report it with the command you ran (QUEENCTL_DEBUG=1 shows where)\n`,
  );
  return ExitCode.Broker;
}
