/**
 * The in-process runner keeps the promises a process would: the exit code a verb sets, what
 * each stream got and whether it is a terminal, standard input and its end, signals delivered to
 * what the run listens with (and a default end otherwise), the clean environment, and a run that
 * has ended prints nothing more.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startSimulator } from '../../tools/simulator/index.js';
import { runInProcess, startInProcess } from './in-process.js';

describe('in-process runner', () => {
  it('captures the exit code and both streams: a usage error is 1, a reason on stderr, nothing on stdout', async () => {
    const result = await runInProcess(['lease', 'extend']);
    assert.equal(result.code, 1);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /missing required argument|missing lease id/);
  });

  it('prints help on the injected stdout, as wide as the terminal it is told about', async () => {
    const wide = await runInProcess(['lease', 'extend', '--help'], { stdoutIsTTY: true, columns: 150 });
    const piped = await runInProcess(['lease', 'extend', '--help']);
    assert.equal(wide.code, 0);
    assert.equal(piped.code, 0);
    assert.match(piped.stdout, /^Usage: queenctl lease extend/);
    // Off a terminal, commander wraps at 80; on one, at its width.
    const retriesLine = (text: string): string => text.split('\n').find((line) => line.includes('--retries <n>')) ?? '';
    assert.ok(retriesLine(piped.stdout).length <= 80, piped.stdout);
    assert.ok(retriesLine(wide.stdout).length > 80, wide.stdout);
  });

  it('runs in the clean environment: no QUEEN_* of this process, a HOME without ~/.queen', async () => {
    process.env.QUEEN_CONTEXT = 'from-the-machine';
    try {
      const result = await runInProcess(['config', 'current-context']);
      assert.doesNotMatch(result.stdout + result.stderr, /from-the-machine/);
      assert.notEqual(result.code, 0, 'no config file, so no current context');
      const given = await runInProcess(['config', 'view', '-o', 'json'], { env: { QUEEN_CONTEXT: 'given' } });
      assert.equal(given.code, 0, given.stderr);
    } finally {
      delete process.env.QUEEN_CONTEXT;
    }
  });

  it('feeds standard input, tells a terminal from a pipe, and delivers a signal to what listens', async () => {
    const sim = await startSimulator();
    try {
      const [first, second] = [sim.mint({ seconds: 60 }), sim.mint({ seconds: 60 })];
      const piped = await runInProcess(['lease', 'inspect', '-', '--server', sim.url, '-o', 'name'], {
        stdin: `${first}\n${second}\n`,
      });
      assert.equal(piped.code, 0, piped.stderr);
      assert.deepEqual(piped.stdout.trim().split('\n').sort(), [first, second].sort());

      const terminal = await runInProcess(['lease', 'inspect', '-', '--server', sim.url], { stdinIsTTY: true });
      assert.equal(terminal.code, 1);
      assert.match(terminal.stderr, /standard input, but it is a terminal/);

      const watching = startInProcess(['lease', 'watch', '-', '--server', sim.url, '-o', 'ndjson'], { stdin: null });
      watching.write(`${first}\n`);
      watching.endInput(`${second}\n`);
      await watching.waitForStdout(/"event":"renewed"/);
      watching.kill('SIGTERM');
      const result = await watching.exited;
      assert.equal(result.code, 143, result.stderr);
      assert.match(result.stdout, /"event":"stopped"/);
    } finally {
      await sim.close();
    }
  });

  it('ends a run with the default action of a signal it cannot catch, and keeps nothing it prints after', async () => {
    const sim = await startSimulator();
    try {
      const lease = sim.mint({ seconds: 60 });
      const watching = startInProcess(['lease', 'watch', lease, '--server', sim.url, '-o', 'ndjson']);
      await watching.waitForStdout(/"event":"renewed"/);
      watching.kill('SIGKILL');
      const result = await watching.exited;
      assert.equal(result.code, null);
      assert.equal(result.signal, 'SIGKILL');
      assert.doesNotMatch(watching.stdout(), /"event":"stopped"/, 'a killed run reports nothing more');
    } finally {
      await sim.close();
    }
  });

  it('sends the signal an AbortSignal names when it aborts: an interrupted extend sends nothing, 129', async () => {
    const sim = await startSimulator();
    try {
      const hangup = new AbortController();
      hangup.abort('SIGHUP');
      const result = await runInProcess(['lease', 'extend', sim.mint(), '--server', sim.url], {
        signal: hangup.signal,
      });
      assert.equal(result.code, 129, result.stderr);
      assert.match(result.stderr, /interrupted/);
      assert.equal(sim.log.length, 0);
    } finally {
      await sim.close();
    }
  });
});
