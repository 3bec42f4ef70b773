/**
 * The real launcher behind the supervisor's port (watch/process-group.ts), against real
 * processes: the statuses a shell would report, start failures, the environment and stdout
 * given, and a group that outlives its leader. It holds no lease and measures no time: a test
 * waits for what it looks for, however busy the machine.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { exitStatus, launchInProcessGroup } from '../../src/watch/process-group.js';
import type { LaunchedCommand, LaunchSpec } from '../../src/watch/supervisor.js';

const scratch = (): string => mkdtempSync(join(tmpdir(), 'queenctl-group-'));

function spec(script: string, extra: Partial<LaunchSpec> = {}): LaunchSpec {
  return {
    command: 'sh',
    args: ['-c', script],
    env: { PATH: process.env.PATH },
    stdoutToStderr: false,
    killAfterMs: 10_000,
    ...extra,
  };
}

async function launch(launchSpec: LaunchSpec): Promise<LaunchedCommand> {
  const launched = await launchInProcessGroup(launchSpec);
  if (!('exited' in launched)) throw new Error(`could not start: ${launched.startError?.message}`);
  return launched;
}

/** Waits for `check`; a failure only, never a measurement, so the limit is generous. */
async function until(check: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(20);
  }
}

function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !['Z', 'X'].includes(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? '');
  } catch {
    return false;
  }
}

describe('the process-group launcher', () => {
  it('reports the status a shell would: the exit code, or 128 + the signal that ended it', async () => {
    const exits = await Promise.all(
      ['exit 7', 'kill -TERM $$', 'kill -KILL $$', 'kill -HUP $$'].map(async (script) => {
        const command = await launch(spec(script));
        const exit = await command.exited;
        command.release();
        return [exit.status, exit.signal];
      }),
    );
    assert.deepEqual(exits, [
      [7, null],
      [143, 'SIGTERM'],
      [137, 'SIGKILL'],
      [129, 'SIGHUP'],
    ]);
    assert.equal(exitStatus(null, null), 1, 'neither a code nor a signal is a failure, never 0');
  });

  it('a command that cannot be started: 127 when not found, 126 when not executable, with the error', async () => {
    const dir = scratch();
    writeFileSync(join(dir, 'not-executable'), '#!/bin/sh\nexit 0\n', { mode: 0o644 });
    const missing = await launchInProcessGroup({ ...spec(''), command: 'queenctl-test-no-such-command', args: [] });
    const denied = await launchInProcessGroup({ ...spec(''), command: join(dir, 'not-executable'), args: [] });
    assert.ok(!('exited' in missing) && !('exited' in denied));
    assert.equal(missing.status, 127);
    assert.equal(missing.startError?.code, 'ENOENT');
    assert.equal(denied.status, 126);
    assert.equal(denied.startError?.code, 'EACCES');
  });

  it('gives the command exactly the environment in the spec', async () => {
    const dir = scratch();
    const command = await launch(spec(`env > ${dir}/env`, { env: { PATH: process.env.PATH, QUEEN_LEASE_ID: 'L1' } }));
    assert.equal((await command.exited).status, 0);
    command.release();
    const env = readFileSync(join(dir, 'env'), 'utf8');
    assert.match(env, /^QUEEN_LEASE_ID=L1$/m);
    assert.doesNotMatch(env, /QUEEN_TOKEN/);
  });

  it("stdoutToStderr: the command's stdout is queenctl's stderr", async (t) => {
    const ours = { stdout: readlinkSync('/proc/self/fd/1'), stderr: readlinkSync('/proc/self/fd/2') };
    if (ours.stdout === ours.stderr) return t.skip('stdout and stderr are the same file here');
    for (const [toStderr, expected] of [
      [true, ours.stderr],
      [false, ours.stdout],
    ] as const) {
      const command = await launch(spec('exec sleep 30', { stdoutToStderr: toStderr }));
      try {
        await until(() => readlinkSync(`/proc/${command.pid}/fd/1`) === expected, `stdout of pid ${command.pid}`);
      } finally {
        command.signalGroup('SIGKILL');
        await command.exited;
        command.release();
      }
    }
  });

  it('runs the command in a group of its own, alive while anything in it runs, and signals all of it', async () => {
    const dir = scratch();
    const command = await launch(spec(`sleep 120 & echo $! > ${dir}/grandchild; exit 3`));
    assert.notEqual(command.pid, process.pid);
    assert.equal((await command.exited).status, 3);
    await until(
      () => existsSync(join(dir, 'grandchild')) && readFileSync(join(dir, 'grandchild'), 'utf8') !== '',
      'pid',
    );
    const grandchild = Number(readFileSync(join(dir, 'grandchild'), 'utf8'));
    assert.ok(isRunning(grandchild));
    assert.equal(command.groupAlive(), true, 'the leader exited, its background job did not');
    command.signalGroup('SIGTERM');
    await until(() => !command.groupAlive(), 'the group to end');
    assert.equal(isRunning(grandchild), false);
    command.release();
    command.signalGroup('SIGKILL'); // a released group is left alone: no error
  });
});
