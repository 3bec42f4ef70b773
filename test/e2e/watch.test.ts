/**
 * `queenctl lease watch` end to end: the built binary against the simulator over loopback,
 * with faults injected while it runs, signals sent to it, and the processes it supervises
 * looked for afterwards. Each scenario has its own simulator, so they run side by side; short
 * leases (--seconds 3, --every 1s) keep each to a few seconds.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { BIN, cleanEnv } from '../support/cli.js';

interface WatchEventLine {
  event: string;
  leaseId: string;
  at: string;
  [key: string]: unknown;
}

interface Watching {
  process: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Parsed ndjson events on stdout so far. */
  events: () => WatchEventLine[];
  /** Resolves once an event matching `match` was printed; fails the test after `timeoutMs`. */
  waitFor(match: (event: WatchEventLine) => boolean, timeoutMs?: number): Promise<WatchEventLine>;
  waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
}

/** Starts `queenctl lease watch` with strict unhandled rejections, as `npm test` runs the suite. */
function watch(sim: Simulator, args: string[], env: Record<string, string | undefined> = {}, stdin = ''): Watching {
  const child = spawn(
    process.execPath,
    ['--unhandled-rejections=strict', BIN, 'lease', 'watch', '--server', sim.url, ...args],
    {
      env: cleanEnv(env),
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  child.stdin?.end(stdin);
  let stdout = '';
  let stderr = '';
  const waiters = new Set<() => void>();
  const poke = (): void => {
    for (const waiter of waiters) waiter();
  };
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    poke();
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    poke();
  });
  // A watch that never ends fails its test, not the suite.
  const guard = setTimeout(() => child.kill('SIGKILL'), 20_000);
  // 'exit', not 'close': a process left behind would hold the pipes open and delay 'close'
  // until it ends by itself, hiding exactly what the tests look for. The output still in the
  // pipes is collected for a moment after.
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>(
    (resolve) => {
      child.on('exit', (code, signal) => {
        clearTimeout(guard);
        const settle = setTimeout(() => {}, 500);
        void Promise.race([closed, new Promise((wait) => setTimeout(wait, 500))]).then(() => {
          clearTimeout(settle);
          poke();
          resolve({ code, signal, stdout, stderr });
        });
      });
    },
  );
  const events = (): WatchEventLine[] =>
    stdout
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as WatchEventLine);
  const until = <T>(check: () => T | undefined, what: string, timeoutMs: number): Promise<T> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        reject(new Error(`timed out waiting for ${what}\nstdout: ${stdout}\nstderr: ${stderr}`));
      }, timeoutMs);
      const waiter = (): void => {
        const found = check();
        if (found === undefined) return;
        clearTimeout(timer);
        waiters.delete(waiter);
        resolve(found);
      };
      waiters.add(waiter);
      waiter();
    });
  return {
    process: child,
    stdout: () => stdout,
    stderr: () => stderr,
    events,
    waitFor: (match, timeoutMs = 8_000) => until(() => events().find(match), 'an event', timeoutMs),
    waitForStderr: async (pattern, timeoutMs = 8_000) => {
      await until(() => (pattern.test(stderr) ? true : undefined), String(pattern), timeoutMs);
    },
    exited,
  };
}

/** Runs a scenario against a simulator of its own. */
async function withSimulator(scenario: (sim: Simulator) => Promise<void>): Promise<void> {
  const sim = await startSimulator({ tokens: null });
  try {
    await scenario(sim);
  } finally {
    await sim.close();
  }
}

/** Running, and not a zombie (an exited process nobody reaped yet is not running). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !['Z', 'X'].includes(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? '');
  } catch {
    return false;
  }
}

const scratch = (): string => mkdtempSync(join(tmpdir(), 'queenctl-watch-'));
const readPid = (file: string): number => Number(readFileSync(file, 'utf8').trim());
const isRenewed = (event: WatchEventLine): boolean => event.event === 'renewed';
const FAST = ['--seconds', '3', '--every', '1s'];

describe('lease watch: keeping a lease through faults', { concurrency: true }, () => {
  it('an outage of dropped connections shorter than the lease: retry events, no loss, exit 0 at --for', () =>
    withSimulator(async (sim) => {
      const leaseId = sim.mint({ seconds: 3 });
      const run = watch(sim, [leaseId, ...FAST, '--for', '5s', '-o', 'ndjson']);
      await run.waitFor(isRenewed);
      sim.inject({ kind: 'drop', leaseId });
      await run.waitFor((event) => event.event === 'retry');
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      sim.clearFaults();
      const result = await run.exited;
      assert.equal(result.code, 0, result.stderr);
      const events = run.events();
      assert.equal(events.filter((event) => event.event === 'lost').length, 0);
      const retries = events.filter((event) => event.event === 'retry');
      assert.ok(retries.length >= 2, JSON.stringify(retries));
      assert.deepEqual(Object.keys(retries[0] ?? {}).slice(0, 5), ['event', 'leaseId', 'at', 'error', 'attempt']);
      assert.equal(retries[0]?.attempt, 1);
      const lastRetry = events.lastIndexOf(retries.at(-1) as WatchEventLine);
      assert.ok(events.slice(lastRetry).some(isRenewed), 'renewed after the outage');
      assert.deepEqual(events.at(-1), { event: 'stopped', leaseId, at: events.at(-1)?.at, reason: 'for' });
      assert.equal(sim.stats().lapses, 0);
    }));

  it('a broker that hangs (database down) shorter than the lease: each request times out within the lease, no loss', () =>
    withSimulator(async (sim) => {
      const leaseId = sim.mint({ seconds: 3 });
      const run = watch(sim, [leaseId, ...FAST, '--timeout', '400ms', '--for', '5s', '-o', 'ndjson']);
      await run.waitFor(isRenewed);
      sim.inject({ kind: 'hang', leaseId });
      const retry = await run.waitFor((event) => event.event === 'retry');
      assert.match(String(retry.error), /no answer .* within 400ms/);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      sim.clearFaults();
      const result = await run.exited;
      assert.equal(result.code, 0, result.stderr);
      assert.equal(run.events().filter((event) => event.event === 'lost').length, 0);
      assert.equal(sim.stats().lapses, 0);
    }));

  it('a lease released mid-watch is reported lost within one interval; with none left the watch exits 4', () =>
    withSimulator(async (sim) => {
      const leaseId = sim.mint({ seconds: 3 });
      const run = watch(sim, [leaseId, ...FAST, '-o', 'ndjson']);
      await run.waitFor(isRenewed);
      sim.release(leaseId);
      const releasedAt = Date.now();
      const lost = await run.waitFor((event) => event.event === 'lost');
      // --every 1s: the next renewal finds it gone (event times are this machine's clock too).
      // Found by expiry instead, it would be 2 s or more; a loaded machine gets some slack.
      assert.ok(
        Date.parse(lost.at) - releasedAt <= 1_800,
        `reported ${Date.parse(lost.at) - releasedAt} ms after the release`,
      );
      assert.equal(lost.reason, 'not-renewed');
      const result = await run.exited;
      assert.equal(result.code, 4);
      assert.match(result.stderr, /is LOST: the broker renewed nothing/);
      assert.match(result.stderr, /Stop work that is not idempotent/);
    }));

  for (const offsetMs of [3_600_000, -3_600_000]) {
    it(`a broker clock an hour ${offsetMs > 0 ? 'ahead' : 'behind'}: renewed on schedule, no loss, no flood`, () =>
      withSimulator(async (sim) => {
        sim.setClockOffset(offsetMs);
        const leaseId = sim.mint({ seconds: 3 });
        const run = watch(sim, [leaseId, ...FAST, '--for', '3500ms', '-o', 'json']);
        const result = await run.exited;
        assert.equal(result.code, 0, result.stderr);
        const renewed = run.events().filter(isRenewed);
        assert.ok(renewed.length >= 3 && renewed.length <= 5, `${renewed.length} renewals in 3.5 s at --every 1s`);
        assert.equal(sim.stats().extendRequests, renewed.length);
        for (const event of renewed)
          assert.ok(Number(event.remainingMs) > 2_000 && Number(event.remainingMs) <= 3_000, JSON.stringify(event));
        assert.equal(sim.stats().lapses, 0);
      }));
  }

  it('--for with a lease lost on the way exits 4, after the other lease was kept to the end', () =>
    withSimulator(async (sim) => {
      const kept = sim.mint({ seconds: 3 });
      const released = sim.mint({ seconds: 3 });
      const run = watch(sim, ['-', ...FAST, '--for', '3s', '-o', 'ndjson'], {}, `${kept}\n${released}\n`);
      await run.waitFor((event) => isRenewed(event) && event.leaseId === released);
      sim.release(released);
      const result = await run.exited;
      assert.equal(result.code, 4, result.stderr);
      const events = run.events();
      assert.deepEqual(
        events.filter((event) => event.event === 'lost').map((event) => event.leaseId),
        [released],
      );
      assert.deepEqual(
        events.filter((event) => event.event === 'stopped').map((event) => [event.leaseId, event.reason]),
        [[kept, 'for']],
      );
    }));

  it('a refused token ends the watch at once with 3', () =>
    withSimulator(async (sim) => {
      sim.setTokens({ 'read-only': { role: 'read-only' } });
      const run = watch(sim, [sim.mint(), ...FAST, '-o', 'ndjson'], { QUEEN_TOKEN: 'read-only' });
      const result = await run.exited;
      assert.equal(result.code, 3);
      assert.match(result.stderr, /read-write role/);
      assert.equal(sim.log.length, 1, 'a refusal is not retried');
    }));
});

describe('lease watch: signals without a command', { concurrency: true }, () => {
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`${signal} stops the watch with ${code} and a stopped event`, () =>
      withSimulator(async (sim) => {
        const leaseId = sim.mint({ seconds: 3 });
        const run = watch(sim, [leaseId, ...FAST, '-o', 'ndjson']);
        await run.waitFor(isRenewed);
        run.process.kill(signal);
        const result = await run.exited;
        assert.equal(result.code, code, result.stderr);
        assert.deepEqual(run.events().at(-1)?.reason, 'signal');
      }));
  }
});

describe('lease watch -- command', { concurrency: true }, () => {
  it('starts the command only after the first renewal, with QUEEN_LEASE_ID(S) and the expiry, never QUEEN_TOKEN', () =>
    withSimulator(async (sim) => {
      sim.setTokens({ secret: { role: 'read-write' } });
      const first = sim.mint({ seconds: 3 });
      const second = sim.mint({ seconds: 3 });
      const script =
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, for sh to read
        'echo "id=$QUEEN_LEASE_ID"; echo "ids=$QUEEN_LEASE_IDS"; echo "expires=$QUEEN_LEASE_EXPIRES_AT"; echo "token=${QUEEN_TOKEN-none}"';
      const run = watch(sim, [first, second, ...FAST, '--', 'sh', '-c', script], { QUEEN_TOKEN: 'secret' });
      const result = await run.exited;
      assert.equal(result.code, 0, result.stderr);
      const lines = result.stdout.trim().split('\n');
      assert.deepEqual(lines.slice(0, 2), [`id=${first}`, `ids=${first} ${second}`]);
      assert.match(lines[2] ?? '', /^expires=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$/);
      assert.equal(lines[3], 'token=none');
      assert.equal(
        sim.log.filter((entry) => entry.status === 200).length >= 2,
        true,
        'both leases renewed before it ran',
      );
      assert.ok(sim.log.every((entry) => entry.authorization === 'Bearer secret'));
    }));

  it('does not start the command when a lease is not held, and exits 4', () =>
    withSimulator(async (sim) => {
      const dir = scratch();
      const run = watch(sim, [
        sim.mint({ seconds: 3 }),
        'no-such-lease',
        ...FAST,
        '--',
        'sh',
        '-c',
        `touch ${dir}/started`,
      ]);
      const result = await run.exited;
      assert.equal(result.code, 4, result.stderr);
      assert.equal(existsSync(join(dir, 'started')), false);
      assert.match(result.stderr, /was not started/);
    }));

  it("passes the command's exit status through, and 128 + the signal that ended it", () =>
    withSimulator(async (sim) => {
      const exits = await Promise.all([
        watch(sim, [sim.mint({ seconds: 3 }), ...FAST, '--', 'sh', '-c', 'exit 7']).exited,
        watch(sim, [sim.mint({ seconds: 3 }), ...FAST, '--', 'sh', '-c', 'kill -TERM $$']).exited,
        watch(sim, [sim.mint({ seconds: 3 }), ...FAST, '--', 'sh', '-c', 'kill -KILL $$']).exited,
        watch(sim, [sim.mint({ seconds: 3 }), ...FAST, '--', 'queenctl-test-no-such-command']).exited,
      ]);
      assert.deepEqual(
        exits.map((exit) => exit.code),
        [7, 143, 137, 127],
      );
      assert.match(exits[3]?.stderr ?? '', /cannot run queenctl-test-no-such-command: not found/);
    }));

  it('a command that exits leaving processes in its group: they are stopped, its status passes through', () =>
    withSimulator(async (sim) => {
      const dir = scratch();
      const run = watch(sim, [
        sim.mint({ seconds: 3 }),
        ...FAST,
        '--',
        'sh',
        '-c',
        `sleep 120 & echo $! > ${dir}/grandchild; exit 3`,
      ]);
      const result = await run.exited;
      assert.equal(result.code, 3, result.stderr);
      assert.match(result.stderr, /left processes running in its process group/);
      assert.equal(isRunning(readPid(join(dir, 'grandchild'))), false);
    }));

  it("a reader of the event stream that goes away does not end the watch: the command's status still passes", () =>
    withSimulator(async (sim) => {
      const run = watch(sim, [
        sim.mint({ seconds: 3 }),
        '--seconds',
        '3',
        '--every',
        '300ms',
        '-o',
        'ndjson',
        '--',
        'sh',
        '-c',
        'sleep 1.5; exit 5',
      ]);
      await run.waitFor(isRenewed);
      run.process.stdout?.destroy(); // as `| head -1` does
      const result = await run.exited;
      assert.equal(result.code, 5, result.stderr);
    }));

  it('keeps renewing while the command runs, and stops when it exits', () =>
    withSimulator(async (sim) => {
      const leaseId = sim.mint({ seconds: 3 });
      const run = watch(sim, [leaseId, ...FAST, '-o', 'ndjson', '--', 'sleep', '2.5']);
      const result = await run.exited;
      assert.equal(result.code, 0, result.stderr);
      const events = run.events();
      assert.ok(events.filter(isRenewed).length >= 3, JSON.stringify(events));
      assert.deepEqual(events.at(-1)?.reason, 'child-exit');
      const requests = sim.stats().extendRequests;
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      assert.equal(sim.stats().extendRequests, requests, 'no renewal after the command exited');
    }));

  it("stops the command's whole group with SIGTERM when the lease is lost, and exits 4", () =>
    withSimulator(async (sim) => {
      const dir = scratch();
      const leaseId = sim.mint({ seconds: 3 });
      const script = `sleep 120 & echo $! > ${dir}/grandchild; wait`;
      const run = watch(sim, [leaseId, ...FAST, '--', 'sh', '-c', script]);
      await run.waitForStderr(/started sh/);
      await waitForFile(join(dir, 'grandchild'));
      const grandchild = readPid(join(dir, 'grandchild'));
      assert.ok(isRunning(grandchild));
      sim.release(leaseId);
      const result = await run.exited;
      assert.equal(result.code, 4, result.stderr);
      assert.match(result.stderr, /stopping sh: SIGTERM to its process group/);
      assert.doesNotMatch(result.stderr, /sent SIGKILL/);
      assert.equal(isRunning(grandchild), false, 'the grandchild got SIGTERM too');
    }));

  it('sends SIGKILL after --kill-after to a group that ignores SIGTERM, grandchildren included', () =>
    withSimulator(async (sim) => {
      const dir = scratch();
      const leaseId = sim.mint({ seconds: 3 });
      // An ignored signal stays ignored in what the shell starts: the grandchild ignores it too.
      const script = `trap "" TERM; sleep 120 & echo $! > ${dir}/grandchild; wait; wait`;
      const run = watch(sim, [leaseId, ...FAST, '--kill-after', '700ms', '--', 'sh', '-c', script]);
      await run.waitForStderr(/started sh/);
      await waitForFile(join(dir, 'grandchild'));
      const grandchild = readPid(join(dir, 'grandchild'));
      sim.release(leaseId);
      await run.waitForStderr(/stopping sh/);
      const stoppingAt = Date.now();
      const result = await run.exited;
      assert.equal(result.code, 4, result.stderr);
      assert.ok(Date.now() - stoppingAt >= 600, 'SIGKILL waited for --kill-after');
      assert.match(result.stderr, /process group was still running 700ms after SIGTERM: sent SIGKILL/);
      assert.equal(isRunning(grandchild), false);
    }));

  for (const [signal, code] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
    ['SIGHUP', 129],
  ] as const) {
    it(`${signal} to queenctl goes to the command's group; queenctl waits, exits ${code}, and leaves nothing running`, () =>
      withSimulator(async (sim) => {
        const dir = scratch();
        const script = `echo $$ > ${dir}/child; sleep 120 & echo $! > ${dir}/grandchild; wait`;
        const run = watch(sim, [sim.mint({ seconds: 3 }), ...FAST, '--', 'sh', '-c', script]);
        await run.waitForStderr(/started sh/);
        await waitForFile(join(dir, 'grandchild'));
        const [child, grandchild] = [readPid(join(dir, 'child')), readPid(join(dir, 'grandchild'))];
        run.process.kill(signal);
        const result = await run.exited;
        assert.equal(result.code, code, result.stderr);
        assert.match(result.stderr, new RegExp(`${signal}: passed on to sh`));
        assert.equal(isRunning(child), false);
        // A shell's background job ignores SIGINT: queenctl stops what the command left behind.
        assert.equal(isRunning(grandchild), false);
      }));
  }

  it('a second signal is passed on too, and never makes queenctl leave the command behind', () =>
    withSimulator(async (sim) => {
      const dir = scratch();
      // Exits only at the second SIGINT.
      const script = `echo $$ > ${dir}/child; n=0; trap 'n=$((n+1)); [ $n -ge 2 ] && exit 42' INT; while :; do sleep 0.1; done`;
      const run = watch(sim, [sim.mint({ seconds: 3 }), ...FAST, '--', 'sh', '-c', script]);
      await run.waitForStderr(/started sh/);
      await waitForFile(join(dir, 'child'));
      run.process.kill('SIGINT');
      await run.waitForStderr(/SIGINT: passed on/);
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(run.process.exitCode, null, 'still waiting for the command');
      run.process.kill('SIGINT');
      const result = await run.exited;
      assert.equal(result.code, 42, result.stderr);
      assert.equal(isRunning(readPid(join(dir, 'child'))), false);
    }));

  it('a command that ignores the signal gets SIGKILL after --kill-after, so Ctrl+C always ends the watch', () =>
    withSimulator(async (sim) => {
      const dir = scratch();
      const script = `echo $$ > ${dir}/child; trap "" INT TERM; while :; do sleep 0.1; done`;
      const run = watch(sim, [sim.mint({ seconds: 3 }), ...FAST, '--kill-after', '700ms', '--', 'sh', '-c', script]);
      await run.waitForStderr(/started sh/);
      await waitForFile(join(dir, 'child'));
      run.process.kill('SIGTERM');
      const result = await run.exited;
      assert.equal(result.code, 128 + 9, result.stderr);
      assert.match(result.stderr, /SIGKILL in 700ms if it ignores it/);
      assert.equal(isRunning(readPid(join(dir, 'child'))), false);
    }));

  it("with -o ndjson the command's stdout goes to stderr, so stdout stays one event per line", () =>
    withSimulator(async (sim) => {
      const run = watch(sim, [
        sim.mint({ seconds: 3 }),
        ...FAST,
        '-o',
        'ndjson',
        '--',
        'sh',
        '-c',
        'echo child-stdout; sleep 1.2',
      ]);
      const result = await run.exited;
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stderr, /child-stdout/);
      for (const line of result.stdout.trim().split('\n')) assert.doesNotThrow(() => JSON.parse(line), line);
    }));

  it('a --token on the command line earns a hint; -- with no command and --for with a command are usage errors', () =>
    withSimulator(async (sim) => {
      sim.setTokens({ 'cli-token': { role: 'read-write' } });
      const [withToken, empty, forWithCommand] = await Promise.all([
        watch(sim, [sim.mint({ seconds: 3 }), ...FAST, '--token', 'cli-token', '--', 'true']).exited,
        watch(sim, [sim.mint({ seconds: 3 }), '--']).exited,
        watch(sim, [sim.mint({ seconds: 3 }), '--for', '1s', '--', 'true']).exited,
      ]);
      assert.equal(withToken.code, 0, withToken.stderr);
      assert.match(
        withToken.stderr,
        /warning: --token on the command line shows in ps.*use QUEEN_TOKEN or --token-file/,
      );
      assert.equal(empty.code, 1);
      assert.match(empty.stderr, /-- must be followed by the command/);
      assert.equal(forWithCommand.code, 1);
      assert.match(forWithCommand.stderr, /--for ends a watch without a command/);
      assert.equal(sim.log.length, 1, 'nothing sent for the usage errors');
    }));
});

async function waitForFile(file: string, timeoutMs = 5_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!existsSync(file) || readFileSync(file, 'utf8').trim() === '') {
    if (Date.now() > until) throw new Error(`${file} never appeared`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
