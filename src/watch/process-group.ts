/**
 * The real launcher of the supervisor's port: a watched command runs in a process group of its
 * own, is signalled as a group, and is never left behind. Lock tools that signal only the
 * `sh -c` wrapper leave the real work running without its lock; signalling the group
 * (kill(-pgid)) reaches what the command started.
 *
 * This module and cli.ts are where queenctl touches other processes.
 */
import type { ChildProcess, StdioOptions } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { constants } from 'node:os';
import type { ChildExit, Launch, LaunchedCommand, LaunchSpec } from './supervisor.js';

/** The status a shell reports: the exit code, or 128 + the number of the signal that ended it. */
export function exitStatus(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  const number = signal ? constants.signals[signal] : undefined;
  return number === undefined ? 1 : 128 + number;
}

/**
 * Starts the command with inherited stdio in a new process group (detached: a new session on
 * POSIX). Resolves once it runs, or with its ChildExit (126/127) when it cannot be started.
 */
export const launchInProcessGroup: Launch = async (spec: LaunchSpec) => {
  // Loaded here: node:child_process brings dgram and more (~5 ms of start-up), and only a watch
  // with a command needs it.
  const { spawn } = await import('node:child_process');
  return new Promise((resolve) => {
    const stdio: StdioOptions = spec.stdoutToStderr ? ['inherit', 2, 'inherit'] : 'inherit';
    const child: ChildProcess = spawn(spec.command, [...spec.args], { stdio, detached: true, env: spec.env });
    child.once('error', (error: NodeJS.ErrnoException) => {
      resolve({ status: error.code === 'ENOENT' ? 127 : 126, code: null, signal: null, startError: error });
    });
    child.once('spawn', () => resolve(new ProcessGroup(child)));
  });
};

class ProcessGroup implements LaunchedCommand {
  readonly exited: Promise<ChildExit>;
  private leaderAlive = true;
  private groupGone = false;
  private readonly guard = (): void => {
    // queenctl is exiting by a path that did not stop the command (a bug, or a fatal error):
    // the lease will not be renewed, so the work must not go on unsupervised.
    if (!this.groupGone) this.signalGroup('SIGKILL');
  };

  constructor(private readonly child: ChildProcess) {
    process.on('exit', this.guard);
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.leaderAlive = false;
        resolve({ status: exitStatus(code, signal), code, signal });
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
