/**
 * A crash of queenctl while `lease watch <id> -- <command>` runs (docs/security.md, "A crash of
 * queenctl"): queenctl killed by SIGKILL through the kernel, as the OOM killer does, and its
 * command's process group stopped all the same by the guardian (src/watch/guardian.ts), the
 * grandchildren included; the guardian's own shape (a session of its own, none of the command's
 * streams, asleep until an event); and nothing of it left after a normal run.
 *
 * Verdicts never depend on the machine's speed: waits poll for what they look for with limits
 * that only turn a hang into a failure, and timing is checked from below, or with slack an order
 * of magnitude over what is promised. That the reaction is prompt is proven by its mechanism: the
 * guardian sleeps in the kernel, never waking, until queenctl's end of its socket closes.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { Simulator } from '../../tools/simulator/index.js';
import { type ExpectedExit, type RunningProcess, sleepEnded, sleepStarted, startCli } from '../support/cli.js';
import { until } from '../support/until.js';
import { withSimulator } from '../support/watch-scenario.js';

/** Leases with room: nothing here is about renewal. */
const ROOM = ['--seconds', '60', '--every', '1s'];
const GUARDIAN_ARG = '--queenctl-guardian';
/** How long a wait may last: only a hang, never a slow machine, reaches it. */
const PATIENCE_MS = 30_000;

function watch(sim: Simulator, args: string[], exit: ExpectedExit): RunningProcess {
  return startCli(['lease', 'watch', '--server', sim.url, sim.mint({ seconds: 60 }), ...ROOM, ...args], {
    exit,
    env: { NODE_OPTIONS: '--unhandled-rejections=strict' },
    // The command, orphaned by a SIGKILL, holds the pipes for as long as it runs.
    closeGraceMs: 500,
    timeoutMs: 60_000,
  });
}

interface Stat {
  state: string;
  ppid: number;
  pgrp: number;
  session: number;
}

/** /proc/<pid>/stat, or null once the process is gone. */
function stat(pid: number): Stat | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // pid (comm) state ppid pgrp session ...: comm may hold spaces and parentheses.
    const [state, ppid, pgrp, session] = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: state as string, ppid: Number(ppid), pgrp: Number(pgrp), session: Number(session) };
  } catch {
    return null;
  }
}

/** Running, and not a zombie. */
function isRunning(pid: number): boolean {
  const state = stat(pid)?.state;
  return state !== undefined && state !== 'Z' && state !== 'X';
}

function cmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

/** The guardians queenctl (`pid`) started: its children that name themselves so. */
function guardiansOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((child) => stat(child)?.ppid === pid && cmdline(child).includes(GUARDIAN_ARG));
}

/** The main thread's sleeps so far: it grows each time the process wakes up. */
function wakeups(pid: number): number {
  const status = readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8');
  return Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status)?.[1]);
}

/** Resolves once `pid` has slept through a whole window of `windowMs` without waking. */
async function quiet(pid: number, windowMs: number): Promise<void> {
  const deadline = Date.now() + PATIENCE_MS;
  for (;;) {
    const before = wakeups(pid);
    await delay(windowMs);
    if (wakeups(pid) === before) return;
    if (Date.now() > deadline) throw new Error(`process ${pid} woke up in every ${windowMs} ms for ${PATIENCE_MS} ms`);
  }
}

/** Finds the one guardian of queenctl (`pid`) and checks its shape; returns its pid. */
async function checkGuardian(queenctl: number): Promise<number> {
  const [guardian, ...others] = await until(() => {
    const found = guardiansOf(queenctl);
    return found.length > 0 && found;
  }, 'the guardian');
  assert.deepEqual(others, [], 'one guardian');
  const pid = guardian as number;
  const guardianStat = stat(pid) as Stat;
  const queenctlStat = stat(queenctl) as Stat;
  // Not reached by a SIGKILL of queenctl's process group, Ctrl+C or a closed terminal.
  assert.equal(guardianStat.session, pid, 'the leader of a session of its own');
  assert.notEqual(guardianStat.pgrp, queenctlStat.pgrp);
  // A reader of the command's stdout or stderr sees their end when the command ends.
  assert.equal(readlinkSync(`/proc/${pid}/fd/1`), '/dev/null');
  assert.equal(readlinkSync(`/proc/${pid}/fd/2`), '/dev/null');
  assert.match(readlinkSync(`/proc/${pid}/fd/0`), /^socket:/, "queenctl's socket: its end is the signal");
  // Event-driven: once started, asleep until queenctl's end of the socket closes; it never wakes
  // to look. (A guardian that polled queenctl's liveness would wake each time it looked, and no
  // window would be quiet.)
  await quiet(pid, 1500);
  return pid;
}

const scratch = (): string => mkdtempSync(join(tmpdir(), 'queenctl-guardian-'));
/** A pid or a timestamp a script wrote, once it has. */
const written = (file: string): number | undefined =>
  existsSync(file) && readFileSync(file, 'utf8').trim() !== '' ? Number(readFileSync(file, 'utf8')) : undefined;

describe('lease watch -- command: queenctl killed by SIGKILL', { concurrency: true }, () => {
  it('the command and its grandchild get SIGTERM at once from the guardian, not SIGKILL after --kill-after', () =>
    withSimulator(async (sim) => {
      const dir = scratch();
      // Each level records, in nanoseconds, when SIGTERM reached it, then ends.
      const onTerm = (name: string): string => `trap 'date +%s%N > ${dir}/${name}-term; exit 143' TERM`;
      // Its pid is written once its trap is set and its sleep started: a SIGTERM to the group from
      // then on reaches both. (Written first, a SIGTERM before the trap ended it unrecorded, and
      // one as it forked the sleep left the sleep out, holding this test's pipe until --kill-after.)
      // A file of its own: in a `sh -c "..."` of the command, its $$ would be the command's.
      const grandchild = join(dir, 'grandchild.sh');
      writeFileSync(
        grandchild,
        `${onTerm('grandchild')}; ${sleepStarted(120, `${dir}/sleep`)}; echo $$ > ${dir}/grandchild; wait\n`,
      );
      const script = [`echo $$ > ${dir}/child`, onTerm('child'), `sh ${grandchild} &`, 'wait'].join('\n');
      // --kill-after 120s: an end well before it was SIGTERM's, never the escalation's.
      const run = watch(sim, ['--kill-after', '120s', '--', 'sh', '-c', script], 'SIGKILL');
      await run.waitForStderr(/started sh/);
      const child = await until(() => written(join(dir, 'child')), 'the command to start');
      const grandchildPid = await until(() => written(join(dir, 'grandchild')), 'the grandchild to start');
      const killedAt = Date.now();
      run.kill('SIGKILL');
      await run.exited;
      await until(() => !isRunning(child) && !isRunning(grandchildPid), 'the group to end after SIGTERM');
      await sleepEnded(join(dir, 'sleep'));
      const termAt = (file: string): number => Number(BigInt(readFileSync(join(dir, file), 'utf8')) / 1_000_000n);
      for (const file of ['child-term', 'grandchild-term']) {
        // Promised within a second; the bound has slack for a loaded machine (prompt by mechanism:
        // see the next test).
        const after = termAt(file) - killedAt;
        assert.ok(after < 10_000, `${file}: SIGTERM ${after} ms after queenctl was killed`);
      }
    }));

  it('a command that ignores SIGTERM is SIGKILLed, grandchild included, once --kill-after has passed', () =>
    withSimulator(async (sim) => {
      const dir = scratch();
      // An ignored signal stays ignored in what the shell starts: the grandchild ignores it too.
      const script = `trap "" TERM; echo $$ > ${dir}/child; sleep 120 & echo $! > ${dir}/grandchild; wait; wait`;
      const run = watch(sim, ['--kill-after', '1500ms', '--', 'sh', '-c', script], 'SIGKILL');
      await run.waitForStderr(/started sh/);
      const child = await until(() => written(join(dir, 'child')), 'the command to start');
      const grandchild = await until(() => written(join(dir, 'grandchild')), 'the grandchild to start');
      const killedAt = performance.now();
      run.kill('SIGKILL');
      await run.exited;
      await until(() => !isRunning(child) && !isRunning(grandchild), 'the group to be SIGKILLed');
      const after = performance.now() - killedAt;
      assert.ok(after >= 1500, `the group ended ${Math.round(after)} ms after queenctl died, before --kill-after`);
    }));
});

describe('lease watch -- command: the guardian', { concurrency: true }, () => {
  it("sleeps in its own session holding none of the command's streams, and is gone after a normal run", () =>
    withSimulator(async (sim) => {
      const dir = scratch();
      const script = `echo $$ > ${dir}/child; while [ ! -e ${dir}/go ]; do sleep 0.05; done; exit 7`;
      const run = watch(sim, ['--', 'sh', '-c', script], 7);
      let guardian: number;
      try {
        await until(() => written(join(dir, 'child')), 'the command to start');
        guardian = await checkGuardian(run.process.pid as number);
      } finally {
        // Let go even after a failure, so the run ends rather than wait for its kill timer.
        writeFileSync(join(dir, 'go'), '');
      }
      const result = await run.exited;
      assert.equal(result.code, 7, result.stderr);
      await until(() => !isRunning(guardian), 'the guardian to exit after the command did');
    }));

  it('a command that cannot be started leaves no guardian either', () =>
    withSimulator(async (sim) => {
      const run = watch(sim, ['--', 'queenctl-test-no-such-command'], 127);
      const queenctl = run.process.pid as number;
      const seen = new Set<number>();
      const looking = setInterval(() => {
        for (const pid of guardiansOf(queenctl)) seen.add(pid);
      }, 5);
      try {
        const result = await run.exited;
        assert.match(result.stderr, /cannot run queenctl-test-no-such-command: not found/);
      } finally {
        clearInterval(looking);
      }
      for (const pid of seen) await until(() => !isRunning(pid), `guardian ${pid} to exit`);
    }));
});
