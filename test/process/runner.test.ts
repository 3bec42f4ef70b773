/**
 * The suite's process runner keeps its promises: a hang is killed and fails its own test, a
 * wait fails as soon as the process ends without what it waited for, a leftover holding the
 * pipes does not hide the exit, and no machine setting (QUEEN_*, ~/.queen) reaches a test.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runProcess, startProcess } from '../support/cli.js';

/** The runner is what is tested, not the process it runs: sh starts for a fraction of node's cost. */
const sh = (script: string): [string, string[]] => ['sh', ['-c', script]];

describe('process runner', () => {
  it('kills a process that outlives its time limit, and fails the run saying so', async () => {
    await assert.rejects(
      runProcess(...sh('echo started; exec sleep 30'), { exit: 0, timeoutMs: 300 }),
      /killed after 300 ms, its time limit\nsignal SIGKILL\n--- stdout\n/,
    );
  });

  it('fails the run when it ends otherwise than the test said, quoting both streams', async () => {
    await assert.rejects(
      runProcess(...sh('echo out; echo err >&2; exit 3'), { exit: 0 }),
      /expected to end with 0, got exit 3\n--- stdout\nout\n\n--- stderr\nerr\n/,
    );
    await assert.rejects(runProcess(...sh('kill -TERM $$'), { exit: 0 }), /expected to end with 0, got signal SIGTERM/);
    await assert.rejects(runProcess(...sh('exit 0'), { exit: 'SIGTERM' }), /expected to end with SIGTERM/);
  });

  it('will not start a process without an expected end', () => {
    // A test in plain JavaScript, or one that casts, still cannot leave it out.
    assert.throws(() => startProcess(...sh('exit 0'), {} as never), /say how the process must end/);
  });

  it('waits for a pattern, writes to standard input, relays a signal, and reports the exit', async () => {
    // The trap runs between the loop's sleeps: SIGTERM is answered within 50 ms.
    const run = startProcess(
      ...sh(`
        trap 'echo bye; exit 3' TERM
        echo ready
        read -r line; echo "got $line"
        while :; do sleep 0.05; done`),
      { stdin: null, exit: 3 },
    );
    await run.waitForStdout(/ready\n/);
    run.write('ping\n');
    await run.waitForStdout(/got ping\n/);
    run.kill('SIGTERM');
    const result = await run.exited;
    assert.deepEqual(result, { code: 3, signal: null, stdout: 'ready\ngot ping\nbye\n', stderr: '', killed: false });
  });

  it('fails a wait once the process has ended without printing what was awaited, not at the timeout', async () => {
    const run = startProcess(...sh('echo something else >&2; exit 2'), { exit: 2 });
    await assert.rejects(
      run.waitForStdout(/never/, 60_000),
      /the process ended \(2\) waiting for \/never\/[\s\S]*something else/,
    );
    assert.equal((await run.exited).code, 2);
  });

  it('reports the exit even while a process left behind holds the pipes open', async () => {
    const result = await runProcess('sh', ['-c', 'sleep 30 & echo $!'], { closeGraceMs: 200, exit: 0 });
    const leftover = Number(result.stdout.trim());
    try {
      assert.equal(result.code, 0);
      assert.ok(leftover > 0, result.stdout);
      // Reported while the leftover still runs (and holds the pipes): kill(0) finds it.
      assert.doesNotThrow(() => process.kill(leftover, 0));
    } finally {
      process.kill(leftover, 'SIGKILL');
    }
  });

  it('runs in a clean environment: no QUEEN_* variable, a HOME without ~/.queen', async () => {
    process.env.QUEEN_TOKEN = 'from-the-machine';
    try {
      // Three lines: HOME, the names of the QUEEN_* variables (none), EXTRA.
      const script = 'echo "$HOME"; echo $(env | grep -o "^QUEEN_[A-Z_]*" | sort); echo "$EXTRA"';
      const result = await runProcess(...sh(script), {
        env: { EXTRA: 'set', QUEEN_SERVER: undefined },
        exit: 0,
      });
      const [home = '', queen = '', extra = ''] = result.stdout.split('\n');
      const seen = { home, queen: queen.split(' ').filter(Boolean), extra };
      assert.deepEqual(seen.queen, []);
      assert.equal(seen.extra, 'set');
      assert.ok(seen.home, result.stdout);
      assert.notEqual(seen.home, process.env.HOME);
      assert.equal(existsSync(join(seen.home, '.queen')), false);
    } finally {
      delete process.env.QUEEN_TOKEN;
    }
  });
});
