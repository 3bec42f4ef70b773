/**
 * Nothing hangs (issue 25), through the real binary: HOME=/proc, where Node's recursive mkdir
 * looped for ever; a read-only HOME (a read-only bind mount in a mount namespace of the run's
 * own); SIGINT, SIGTERM and SIGHUP ending a command stuck in a file-system call (the open() of a
 * FIFO nobody writes, in the thread pool). The grace and the second signal on a fake clock, and
 * the config file replaced whole (never written in place, so no signal leaves half of one):
 * test/e2e/config.test.ts.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cliCommandLine, type CliResult, runCli, runProcess, startCli } from '../support/cli.js';

/** Long enough for a loaded machine, short beside "for ever": a hang fails, a slow run does not. */
const TIME_LIMIT_MS = 20_000;
const ELSEWHERE = 'point --config or QUEEN_CONFIG at a file in a writable directory, or set HOME to one';

/** The status a shell would report: the exit code, or 128 + the number of the signal that ended it. */
function shellStatus(result: CliResult): number | null {
  if (result.code !== null) return result.code;
  return result.signal ? 128 + constants.signals[result.signal] : null;
}

/** Waits until a thread of process `pid` waits in open() of a FIFO (Linux: its wchan says so). */
async function untilWaitingOnFifo(pid: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const waiting = readdirSync(`/proc/${pid}/task`).some((task) => {
      try {
        return readFileSync(`/proc/${pid}/task/${task}/wchan`, 'utf8') === 'wait_for_partner';
      } catch {
        return false;
      }
    });
    if (waiting) return;
    if (Date.now() > deadline) throw new Error(`process ${pid} never came to wait on the FIFO`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('a HOME where the config directory cannot be made', () => {
  it('HOME=/proc: set-context exits 1 at once with one line, instead of spinning for ever', async () => {
    const result = await runCli(['config', 'set-context', 'a', '--server', 'http://127.0.0.1:1'], {
      env: { HOME: '/proc', XDG_CACHE_HOME: undefined },
      timeoutMs: TIME_LIMIT_MS,
      exit: 1,
    });
    assert.equal(result.killed, false, 'ended by itself');
    assert.equal(result.code, 1, result.stderr);
    assert.equal(
      result.stderr,
      'queenctl: cannot create the config directory /proc/.queen: ' +
        `the file system there takes no new entries (ENOENT); ${ELSEWHERE}\n`,
    );
  });

  const mountNamespaces = spawnSync('unshare', ['-m', 'true']).status === 0;
  it('a read-only HOME (EROFS): exits 1 with one line naming it', {
    skip: mountNamespaces ? false : 'needs `unshare -m` (a mount namespace) for a read-only bind mount',
  }, async () => {
    const home = mkdtempSync(join(tmpdir(), 'queenctl-ro-home-'));
    mkdirSync(join(home, 'cache'));
    // The bind mount lives in the run's own mount namespace and goes with it.
    const script =
      'mount --bind "$HOME" "$HOME" && mount -o remount,bind,ro "$HOME" && ' +
      `exec ${cliCommandLine()} config set-context a --server http://127.0.0.1:1`;
    const result = await runProcess('unshare', ['-m', 'sh', '-c', script], {
      env: { HOME: home, XDG_CACHE_HOME: join(home, 'cache') },
      timeoutMs: TIME_LIMIT_MS,
      exit: 1,
    });
    assert.equal(result.killed, false, 'ended by itself');
    assert.equal(result.code, 1, result.stderr);
    assert.equal(
      result.stderr,
      `queenctl: cannot create the config directory ${home}/.queen: read-only file system (EROFS); ${ELSEWHERE}\n`,
    );
    assert.deepEqual(readdirSync(home), ['cache'], 'nothing written');
    assert.deepEqual(readdirSync(join(home, 'cache')), []);
  });
});

describe('a signal while a command waits on the file system', () => {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const status = 128 + constants.signals[signal];
    it(`config view of a FIFO nobody writes, ${signal}: ends with ${status} within a second or so`, async () => {
      const fifo = join(mkdtempSync(join(tmpdir(), 'queenctl-fifo-')), 'config.yaml');
      execFileSync('mkfifo', [fifo]);
      // Stuck in the thread pool, it outlives the grace: the signal itself ends it (a shell sees
      // 128 + n), as src/cli.ts's exit port does.
      const run = startCli(['--config', fifo, 'config', 'view'], { timeoutMs: TIME_LIMIT_MS, exit: signal });
      await untilWaitingOnFifo(run.process.pid as number);
      const sentAt = performance.now();
      run.kill(signal);
      const result = await run.exited;
      const tookMs = performance.now() - sentAt;
      assert.equal(result.killed, false, `ended by itself, not by the time limit\n${result.stderr}`);
      assert.equal(shellStatus(result), status, `${result.code} ${result.signal}\n${result.stderr}`);
      assert.equal(result.stdout, '');
      // The grace is 750 ms; the margin is for a loaded machine, not for a longer grace.
      assert.ok(tookMs < 10_000, `ended ${Math.round(tookMs)} ms after the signal`);
    });
  }
});
