/**
 * The real launcher of the supervisor's port: a watched command runs in a process group of its
 * own, is signalled as a group, and is never left behind. Lock tools that signal only the
 * `sh -c` wrapper leave the real work running without its lock; signalling the group
 * (kill(-pgid)) reaches what the command started. Not even when queenctl dies by SIGKILL: a
 * guardian (guardian.ts), started first, stops the group then (docs/security.md).
 *
 * This module and cli.ts are where queenctl touches other processes.
 */
import type { ChildProcess, SpawnOptions, StdioOptions } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import {
  FORGET_MESSAGE,
  GUARDIAN_ARG,
  GUARDIAN_ENV,
  groupMessage,
  guardCommandGroup,
  RELEASE_MESSAGE,
} from './guardian.js';
import type { ChildExit, Launch, LaunchedCommand, LaunchSpec } from './supervisor.js';
import { BUILD_INFO } from '../build-info.js';

/** The status a shell reports: the exit code, or 128 + the number of the signal that ended it. */
export function exitStatus(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  const number = signal ? constants.signals[signal] : undefined;
  return number === undefined ? 1 : 128 + number;
}

/**
 * The real launcher: starts the command with inherited stdio in a new process group (detached: a
 * new session on POSIX), guarded (guardian.ts). Resolves once it runs, or with its ChildExit
 * (126/127) when it cannot be started.
 *
 * `prepare()` starts the guardian ahead of the command (the supervisor calls it as a watch
 * begins), so that its start overlaps the first renewal instead of delaying the command: a
 * second fork and exec, ~35 ms on a loaded machine. Without it, launch starts one first.
 */
export function processGroupLauncher(options: { reuse?: boolean } = {}): Launch {
  let prepared: Promise<ChildProcess | ChildExit> | null = null;
  /**
   * With `reuse` (`lease run`: a command per batch), the guardian of a command that ended is told
   * to forget its group and guards the next command: a Node.js start (~0.1 CPU-s) per batch saved.
   * Between commands it guards nothing, and it exits when queenctl does.
   */
  let spare: ChildProcess | null = null;
  const free = (guardian: ChildProcess): void => {
    if (!options.reuse || !guardian.stdin?.writable) return releaseGuardian(guardian);
    guardian.stdin.write(FORGET_MESSAGE);
    spare = guardian;
  };
  const launch: Launch = async (spec: LaunchSpec) => {
    const kept = spare;
    spare = null;
    const ready = kept ?? (prepared ? await prepared : null);
    if (!kept) prepared = null;
    // A guardian killed meanwhile is replaced: the command never runs without one.
    const guardian = ready && !('status' in ready) && isUsable(ready) ? ready : await startGuardian();
    if ('status' in guardian) return guardian; // it could not be started

    return launchGuarded(spec, guardian, free);
  };
  launch.prepare = () => {
    if (spare && isUsable(spare)) return; // the last command's guardian will do
    prepared ??= startGuardian();
  };
  return launch;
}

/** A launch that starts its guardian just before the command (tests, and any caller that does not prepare). */
export const launchInProcessGroup: Launch = (spec: LaunchSpec) => processGroupLauncher()(spec);

async function launchGuarded(
  spec: LaunchSpec,
  guardian: ChildProcess,
  free: (guardian: ChildProcess) => void,
): Promise<LaunchedCommand | ChildExit> {
  // Loaded here: node:child_process brings dgram and more (~5 ms of start-up), and only a watch
  // with a command needs it.
  const { spawn } = await import('node:child_process');
  return new Promise((resolve) => {
    const stdin = spec.input ? 'pipe' : 'inherit';
    const stdio: StdioOptions = spec.wholeLines
      ? [stdin, 'pipe', 'pipe']
      : [stdin, spec.stdoutToStderr ? 2 : 'inherit', 'inherit'];
    const cannotStart = (error: NodeJS.ErrnoException): void => {
      free(guardian);
      resolve({
        status: error.code === 'ENOENT' ? 127 : 126,
        code: null,
        signal: null,
        startError: error,
        inputWritten: 0,
      });
    };
    let child: ChildProcess;
    try {
      child = spawn(spec.command, [...spec.args], { stdio, detached: true, env: spec.env });
    } catch (error) {
      // Refused before any process existed (an argument or variable Node.js will not pass on):
      // the command cannot be started, like E2BIG, never a crash of queenctl's.
      return cannotStart(error as NodeJS.ErrnoException);
    }
    // At once, in the same turn as the start: the group is named before queenctl can die. The
    // command counts as started (and says so) only an immediate later: Node.js sends the message
    // to the socket within the write, but Bun (the standalone executable) sends it later in that
    // turn of its loop, before the loop's next immediate (and calls the write's callback before
    // it is sent: observed with strace, docs/standalone.md). A SIGKILL of queenctl in between
    // would leave a guardian that knows no group. (Not the write's callback: the guardian's
    // socket is unref'd, and on Node.js nothing else need keep the loop alive for it.)
    if (child.pid !== undefined) guardian.stdin?.write(groupMessage(child.pid, spec.killAfterMs));
    const named = new Promise<void>((done) => setImmediate(done));
    child.once('error', cannotStart);
    child.once('spawn', () => {
      if (spec.wholeLines) {
        passLines(child.stdout, spec.stdoutToStderr ? process.stderr : process.stdout);
        passLines(child.stderr, process.stderr);
      }
      const written = { lines: 0 };
      if (spec.input && child.stdin) void feed(child.stdin, spec.input, written);
      // Made now, so that it sees the command's exit however soon that comes; handed over once named.
      const group = new ProcessGroup(child, guardian, free, written);
      void named.then(() => resolve(group));
    });
  });
}

/**
 * Writes the command's input with backpressure (a chunk only once the pipe drained the last), then
 * closes it. A command that reads none of it, or exits before the end, closes the pipe: EPIPE,
 * and the rest is dropped, never an error of queenctl's and never a wait on a reader gone.
 */
async function feed(stdin: Writable, chunks: readonly string[], written: { lines: number }): Promise<void> {
  let gone = false;
  const stop = (): void => {
    gone = true;
  };
  stdin.on('error', stop); // EPIPE, ECONNRESET: the reader went away
  stdin.once('close', stop);
  // A chunk counts as written once the pipe took all of it (its callback without an error): the
  // lines before it are what the command can have read (lease run completes no other).
  let taken = 0;
  const tookOne = (error?: Error | null): void => {
    if (error) gone = true;
    else if (!gone) written.lines = ++taken;
  };
  for (const chunk of chunks) {
    if (gone) return;
    if (stdin.write(chunk, tookOne)) continue;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        stdin.off('drain', done);
        stdin.off('close', done);
        resolve();
      };
      stdin.once('drain', done);
      stdin.once('close', done);
    });
  }
  if (!gone) stdin.end();
}

/** A line longer than this is passed on in pieces: memory stays bounded whatever a command writes. */
const MAX_HELD_LINE = 1024 * 1024;

/**
 * Passes a command's output on a whole line at a time, so that the lines of commands running side
 * by side are never cut into each other: each write to `target` is whole lines, and one process
 * writes them one after another. A last line without its newline gets one. The command waits
 * while `target` cannot take more (backpressure), as it would on its own pipe.
 */
function passLines(source: Readable | null, target: Writable): void {
  if (!source) return;
  let held: Buffer[] = [];
  let heldBytes = 0;
  const write = (chunk: Buffer): void => {
    if (!target.write(chunk)) {
      source.pause();
      target.once('drain', () => source.resume());
    }
  };
  source.on('data', (chunk: Buffer) => {
    const end = chunk.lastIndexOf(0x0a);
    if (end === -1) {
      held.push(chunk);
      heldBytes += chunk.length;
      if (heldBytes < MAX_HELD_LINE) return;
      write(Buffer.concat(held));
      held = [];
      heldBytes = 0;
      return;
    }
    write(Buffer.concat([...held, chunk.subarray(0, end + 1)]));
    const rest = chunk.subarray(end + 1);
    held = rest.length > 0 ? [rest] : [];
    heldBytes = rest.length;
  });
  source.on('end', () => {
    if (heldBytes > 0) write(Buffer.concat([...held, Buffer.from('\n')]));
    held = [];
  });
  source.on('error', () => {}); // the command's end is seen on its exit
}

/** Starts a guardian, waiting for nothing: resolves with it, or with why the command cannot run. */
async function startGuardian(): Promise<ChildProcess | ChildExit> {
  const { spawn } = await import('node:child_process');
  const line = guardianCommandLine();
  const guardian = spawn(line.command, line.args, line.options);
  guardian.on('error', () => {}); // a failed start is seen below; a later one changes nothing
  guardian.stdin?.on('error', () => {}); // a guardian gone (killed on its own) has nothing to tell
  if (guardian.pid === undefined) {
    // Fail closed: a command without its guardian would outlive a SIGKILL of queenctl.
    return new Promise((resolve) => guardian.once('error', (error) => resolve(guardianFailed(error))));
  }
  // Neither the guardian nor its socket keep queenctl running.
  guardian.unref();
  (guardian.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return guardian;
}

function isUsable(guardian: ChildProcess): boolean {
  return guardian.exitCode === null && guardian.signalCode === null && Boolean(guardian.stdin?.writable);
}

interface GuardianCommandLine {
  command: string;
  args: string[];
  options: SpawnOptions;
}

/**
 * How queenctl runs its guardian: this very Node.js with the guardian's source (`node -e`), or,
 * in the standalone executable (built with Bun, which takes no `-e` of a script here), the
 * executable itself in guardian mode (src/standalone.ts). /proc/self/exe is this process's own
 * binary even when an upgrade replaced the file meanwhile.
 */
function guardianCommandLine(): GuardianCommandLine {
  const self = existsSync('/proc/self/exe') ? '/proc/self/exe' : process.execPath;
  const guardianEnv: NodeJS.ProcessEnv = { ...process.env };
  // Options for queenctl's runtime (a --require or --preload of the user's) are not the
  // guardian's; the token is no business of a process that never sends a request.
  delete guardianEnv.NODE_OPTIONS;
  delete guardianEnv.BUN_OPTIONS;
  delete guardianEnv.QUEEN_TOKEN;
  const options: SpawnOptions = {
    // A session of its own: Ctrl+C, a closed terminal and a SIGKILL of queenctl's process group
    // do not reach it. None of the command's streams: a reader of them sees their end when the
    // command ends, never when the guardian does. The root, so it holds no directory busy.
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
    cwd: '/',
    argv0: process.execPath,
    env: guardianEnv,
  };
  if (BUILD_INFO.standalone) {
    guardianEnv[GUARDIAN_ENV] = '1';
    // Bun runs a garbage collection timer every second, which would wake the guardian from its
    // sleep in the kernel; it allocates nothing worth collecting (docs/standalone.md).
    guardianEnv.BUN_GC_TIMER_DISABLE = '1';
    return { command: self, args: [GUARDIAN_ARG], options };
  }
  // No heap flags: measured, --max-old-space-size and --max-semi-space-size saved nothing.
  return { command: self, args: ['-e', `(${guardCommandGroup.toString()})()`, '--', GUARDIAN_ARG], options };
}

function guardianFailed(error: NodeJS.ErrnoException): ChildExit {
  // Not the command's own error code: ENOENT here is not "command not found".
  const startError: NodeJS.ErrnoException = new Error(
    `queenctl could not start the guardian that stops it should queenctl die (${error.code ?? error.message}), ` +
      'so it was not started',
  );
  return { status: 126, code: null, signal: null, startError };
}

/** The group is ended or stopped by queenctl itself: the guardian exits now. */
function releaseGuardian(guardian: ChildProcess): void {
  if (guardian.stdin?.writable) guardian.stdin.end(RELEASE_MESSAGE);
}

class ProcessGroup implements LaunchedCommand {
  readonly exited: Promise<ChildExit>;
  private leaderAlive = true;
  private groupGone = false;
  private readonly guard = (): void => {
    // queenctl is exiting by a path that did not stop the command (a bug, or a fatal error):
    // the lease will not be renewed, so the work must not go on unsupervised.
    if (!this.groupGone) this.signalGroup('SIGKILL');
  };

  constructor(
    private readonly child: ChildProcess,
    private readonly guardian: ChildProcess,
    private readonly free: (guardian: ChildProcess) => void,
    written: { lines: number },
  ) {
    process.on('exit', this.guard);
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.leaderAlive = false;
        // A turn later: the callbacks of writes the pipe completed before the exit have run.
        setImmediate(() => resolve({ status: exitStatus(code, signal), code, signal, inputWritten: written.lines }));
      });
    });
  }

  get pid(): number {
    return this.child.pid as number;
  }

  /** Sends a signal to every process of the group (0: only asks whether one exists). */
  signalGroup(signal: NodeJS.Signals | 0): void {
    if (this.groupGone) return;
    try {
      process.kill(-this.pid, signal);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') this.groupGone = true;
      else throw error;
    }
  }

  /**
   * True while a process of the group is running. A group of zombies only (children nobody
   * reaped, where PID 1 does not reap) is not running: on Linux /proc tells them apart.
   */
  groupAlive(): boolean {
    if (this.groupGone) return false;
    this.signalGroup(0);
    if (this.groupGone) return false;
    if (this.leaderAlive) return true;
    const living = livingMembers(this.pid);
    if (living === 0) this.groupGone = true;
    return living !== 0;
  }

  release(): void {
    this.groupGone = true;
    process.off('exit', this.guard);
    this.free(this.guardian);
  }
}

/** Processes of a group that are not zombies; null when /proc cannot say (not Linux). */
function livingMembers(pgid: number): number | null {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  let living = 0;
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) === pgid && fields[0] !== 'Z' && fields[0] !== 'X') living++;
  }
  return living;
}
