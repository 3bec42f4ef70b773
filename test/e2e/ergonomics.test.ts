/**
 * Issue 20's commands end to end, in-process against the simulator over loopback: -o jsonpath=
 * on the verbs, ping, version, lease list --watch. (TAB completion through the shells is in
 * test/process/lease-completion.test.ts.)
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, it } from 'node:test';
import type { Simulator } from '../../tools/simulator/index.js';
import { runInProcess, startInProcess, type InProcessOptions } from '../support/in-process.js';
import { sharedSimulator } from '../support/shared.js';

const simulator = sharedSimulator();
let sim: Simulator;
beforeEach(() => {
  sim = simulator();
  sim.configure({ database: 'connected' });
});
const queenctl = (args: string[], options: InProcessOptions = {}) =>
  runInProcess([...args, '--server', sim.url], options);

describe('-o jsonpath= on the commands', () => {
  it('a dead lease prints renewed 0 and still exits 4', async () => {
    const result = await queenctl(['lease', 'extend', 'gone', '-o', 'jsonpath=.renewed']);
    assert.equal(result.code, 4);
    assert.equal(result.stdout, '0\n');
  });

  it('applies to the array of several ids, as -o json prints it', async () => {
    const live = sim.mint();
    const template = '{range [*]}{.leaseId}{"\\t"}{.renewed}{"\\n"}{end}';
    const result = await queenctl(['lease', 'extend', live, 'gone', '-o', `jsonpath=${template}`]);
    assert.equal(result.code, 4);
    assert.equal(result.stdout, `${live}\t1\ngone\t0\n`);
    const inspect = await queenctl(['lease', 'inspect', live, '-o', 'jsonpath={.live} {.held}']);
    assert.equal(inspect.stdout, 'true 1');
  });

  it('on lease list, and on each event of a watch, one line an event', async () => {
    const leaseId = sim.mint({ queue: 'jsonpath-list', partitions: 2 });
    const list = await queenctl(['lease', 'list', '--queue', 'jsonpath-list', '-o', 'jsonpath=[0].partitions']);
    assert.equal(list.stdout, '["p1","p2"]\n');
    // Stopped by a signal once it renewed, not at a time: a busy machine may take long to renew.
    const run = startInProcess(['lease', 'watch', leaseId, '-o', 'jsonpath={.event} {.leaseId}', '--server', sim.url]);
    await run.until(() => (run.stdout().includes('\n') ? true : undefined), 'the first event');
    run.kill('SIGTERM');
    const watch = await run.exited;
    assert.equal(watch.code, 143, watch.stderr);
    const lines = watch.stdout.trimEnd().split('\n');
    assert.equal(lines[0], `renewed ${leaseId}`);
    assert.equal(lines.at(-1), `stopped ${leaseId}`);
  });

  it('on config get-contexts, dashed keys included', async () => {
    const home = mkdtempSync(join(tmpdir(), 'queenctl-home-'));
    const config = join(home, 'config.yaml');
    writeFileSync(config, 'current-context: prod\ncontexts:\n  - name: prod\n    token-ref: env\n  - name: dev\n');
    const result = await runInProcess(['config', 'get-contexts', '-o', 'jsonpath={[*].name} {[*].token-ref}'], {
      env: { QUEEN_CONFIG: config },
    });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, 'prod dev env null', 'a key set to null prints null');
  });

  for (const expression of ['', '.rows[', '{range [*]}{.leaseId}', '{.renewed']) {
    it(`refuses ${JSON.stringify(expression)}: exit 1, naming jsonpath, nothing sent`, async () => {
      const leaseId = sim.mint();
      sim.resetLog();
      const result = await queenctl(['lease', 'extend', leaseId, '-o', `jsonpath=${expression}`]);
      assert.equal(result.code, 1);
      assert.equal(result.stdout, '');
      assert.match(result.stderr, /^queenctl: -o jsonpath: the expression is (empty|malformed at character \d+)/);
      assert.deepEqual(sim.log, [], 'nothing reached the broker');
    });
  }
});

describe('ping', () => {
  it('healthy: exit 0 and the keys of -o json', async () => {
    const result = await queenctl(['ping', '-o', 'json']);
    assert.equal(result.code, 0, result.stderr);
    const record = JSON.parse(result.stdout);
    assert.deepEqual(Object.keys(record).slice(0, 6), [
      'status',
      'database',
      'version',
      'latencyMs',
      'clockSkewMs',
      'clockSkewErrorMs',
    ]);
    assert.equal(record.status, 'healthy');
    assert.equal(record.database, 'connected');
    // One clock: the range the Date header allows holds 0, and is at least a second each way.
    assert.ok(Math.abs(record.clockSkewMs) <= record.clockSkewErrorMs, result.stdout);
    assert.ok(record.clockSkewErrorMs >= 1000, result.stdout);
  });

  it('a broker clock minutes off: the skew holds it, and stderr warns with the range', async () => {
    sim.setClockOffset(-240_000);
    const result = await queenctl(['ping', '-o', 'json']);
    assert.equal(result.code, 0);
    const { clockSkewMs, clockSkewErrorMs } = JSON.parse(result.stdout);
    assert.ok(Math.abs(clockSkewMs + 240_000) <= clockSkewErrorMs, result.stdout);
    const said = /the broker's clock is (\d+)m(\d\d)s\.\.(\d+)m(\d\d)s behind this machine's/.exec(result.stderr);
    assert.ok(said, result.stderr);
    const [least, most] = [Number(said[1]) * 60 + Number(said[2]), Number(said[3]) * 60 + Number(said[4])];
    assert.ok(least <= 240 && most >= 240, result.stderr);
  });

  it('unhealthy (the database gone): exit 2, the record still printed', async () => {
    sim.configure({ database: 'disconnected' });
    const result = await queenctl(['ping', '-o', 'json']);
    assert.equal(result.code, 2);
    assert.equal(JSON.parse(result.stdout).status, 'unhealthy');
    assert.match(result.stderr, /unhealthy \(HTTP 503, database disconnected\)/);
  });

  it('no answer within --timeout, or unreachable: exit 2 and nothing on stdout', async () => {
    sim.inject({ kind: 'hang' });
    const hung = await queenctl(['ping', '--timeout', '200ms']);
    assert.equal(hung.code, 2);
    assert.equal(hung.stdout, '');
    assert.match(hung.stderr, /no answer from .* within 200ms/);
    sim.clearFaults();
    const down = await runInProcess(['ping', '--server', 'http://127.0.0.1:9']);
    assert.equal(down.code, 2);
    assert.equal(down.stdout, '');
  });

  it('a token in force is proven with a read-only read: accepted, or exit 3', async () => {
    sim.setTokens({ ro: { role: 'read-only' } });
    sim.resetLog();
    const accepted = await queenctl(['ping', '--token', 'ro', '-o', 'json']);
    assert.equal(accepted.code, 0, accepted.stderr);
    assert.equal(JSON.parse(accepted.stdout).token, 'accepted');
    assert.deepEqual(
      sim.log.map((entry) => `${entry.method} ${entry.rawPath}`),
      ['GET /health', 'GET /api/v1/consumer-groups/queenctl-token-check'],
    );
    const refused = await queenctl(['ping', '-o', 'json'], { env: { QUEEN_TOKEN: 'forged' } });
    assert.equal(refused.code, 3);
    assert.equal(JSON.parse(refused.stdout).token, 'refused');
    assert.match(refused.stderr, /refused the token/);
    const none = await queenctl(['ping', '-o', 'json']);
    assert.equal(none.code, 0, 'GET /health needs no token');
  });
});

describe('version', () => {
  it('--short prints the first line and never contacts the broker', async () => {
    sim.resetLog();
    const result = await queenctl(['version', '--short']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /^queenctl \d+\.\d+\.\d+ \(commit \S+, built \S+, npm package on \w+-\w+, node v\d+\.\d+\.\d+\)\n$/,
    );
    assert.deepEqual(sim.log, []);
  });

  it("asks GET /health for the broker's version, and names the context's server", async () => {
    const result = await queenctl(['version']);
    assert.equal(result.code, 0, result.stderr);
    const [first, broker, context] = result.stdout.trimEnd().split('\n');
    assert.match(first ?? '', /^queenctl /);
    assert.equal(broker, `broker: 1.0.0 (healthy, database connected) at ${sim.url}`);
    assert.equal(context, `context: - (${sim.url})`);
  });

  it('exit 2 after the first line when the broker cannot be reached', async () => {
    const result = await runInProcess(['version', '--server', 'http://127.0.0.1:9']);
    assert.equal(result.code, 2);
    assert.match(result.stdout, /^queenctl [^\n]*\n$/);
    assert.match(result.stderr, /connection refused/);
  });
});

describe('lease list --watch', () => {
  it('--interval 0, --interval without --watch, and --expiry with it are usage errors, nothing sent', async () => {
    sim.resetLog();
    for (const args of [
      ['--watch', '--interval', '0'],
      ['--watch', '--interval', '10ms'],
      ['--interval', '2s'],
      ['--watch', '--expiry'],
    ]) {
      const result = await queenctl(['lease', 'list', ...args]);
      assert.equal(result.code, 1, args.join(' '));
      assert.match(result.stderr, /--interval|--expiry/);
    }
    assert.deepEqual(sim.log, []);
  });

  it('prints the holders as added, then a release as removed, and stops on SIGINT with 130', async () => {
    const leaseId = sim.mint({ queue: 'watched' });
    const args = ['lease', 'list', '--watch', '--queue', 'watched', '--interval', '100ms', '--server', sim.url];
    const run = startInProcess(args);
    await run.waitForStdout(/"event":"added"/);
    sim.release(leaseId);
    await run.waitForStdout(/"event":"removed"/);
    run.kill('SIGINT');
    const result = await run.exited;
    assert.equal(result.code, 130);
    const events = result.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      events.map((event) => [event.event, event.leaseId, event.queue]),
      [
        ['added', leaseId, 'watched'],
        ['removed', leaseId, 'watched'],
      ],
    );
  });
});
