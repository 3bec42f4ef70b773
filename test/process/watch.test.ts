/**
 * `queenctl lease watch` as a process: the real binary against the simulator over loopback,
 * signals sent to it through the kernel, the commands it runs in their own process groups with
 * its standard streams, and the processes they leave looked for afterwards. Each scenario has its
 * own simulator, so they run side by side. (Faults, -o yaml, --help and the usage errors: test/e2e/watch.test.ts.)
 *
 * Every rule of the schedule and of the supervision is tested on fake time
 * (test/unit/watch-*.test.ts); here the real thing is run a few times, and it must pass on a
 * busy machine: leases have room (60 s, renewed every second), so a process that starts
 * slowly or is descheduled for seconds loses nothing; waits are for what a test looks for,
 * with limits that only turn a hang into a failure; timing is checked only from below.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import type { Simulator } from '../../tools/simulator/index.js';
import {
  type CliResult,
  cliCommandLine,
  type ExpectedExit,
  type RunningProcess,
  runShell,
  startCli,
} from '../support/cli.js';
import { watchScenario, withSimulator, type WatchEventLine, type WatchScenario } from '../support/watch-scenario.js';

interface Watching extends WatchScenario<CliResult> {
  process: RunningProcess['process'];
}

/**
 * Starts `queenctl lease watch` with strict unhandled rejections (NODE_OPTIONS: the bin or a
 * standalone executable alike), as `npm test` runs the suite, through the one process runner:
 * its exit is reported even while a process it left behind holds the pipes open, which is
 * exactly what some of these tests look for.
 */
function watch(
  sim: Simulator,
  args: string[],
  exit: ExpectedExit,
  env: Record<string, string | undefined> = {},
  stdin = '',
): Watching {
  const run = startCli(['lease', 'watch', '--server', sim.url, ...args], {
    exit,
    env: { NODE_OPTIONS: '--unhandled-rejections=strict', ...env },
    stdin,
    closeGraceMs: 500,
  });
  return { ...watchScenario(run), process: run.process };
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
/** Leases with room: minted for a minute, renewed for a minute, every second. */
const LEASE = { seconds: 60 };
const ROOM = ['--seconds', '60', '--every', '1s'];

// Each scenario has its own simulator and its own processes: the groups below run side by side,
// as the scenarios in each do, so that the file takes its longest scenario, not the sum of its
// groups' longest.
describe('lease watch as a process', { concurrency: true }, () => {
  describe('lease watch -o yaml -- command', { concurrency: true }, () => {
    it("with a command, as with -o ndjson, the command's stdout goes to stderr: stdout is only documents", () =>
      withSimulator(async (sim) => {
        const run = watch(sim, [sim.mint(LEASE), ...ROOM, '-o', 'yaml', '--', 'sh', '-c', 'echo from-the-command'], 0);
        const result = await run.exited;
        assert.equal(result.code, 0, result.stderr);
        assert.match(result.stderr, /from-the-command/);
        const documents = parseAllDocuments(result.stdout);
        assert.ok(Array.isArray(documents), 'a stream of YAML documents');
        const events = documents.map((document) => document.toJS() as { event: string; reason?: string });
        // Renewed at once, again every second if the command is slow to start, then stopped with it.
        assert.deepEqual(events.at(-1)?.reason, 'child-exit', result.stdout);
        assert.ok(events.length >= 2, result.stdout);
        assert.ok(
          events.slice(0, -1).every((event) => event.event === 'renewed'),
          result.stdout,
        );
      }));
  });

  describe('lease watch: signals without a command', { concurrency: true }, () => {
    // SIGINT through the kernel: test/process/readers-and-signals.test.ts (the same handler,
    // src/cli.ts); a watch's SIGINT in-process: test/e2e/watch.test.ts.
    for (const [signal, code] of [
      ['SIGTERM', 143],
      // Caught, not fatal: the terminal that went away must not cost the stream its last events.
      ['SIGHUP', 129],
    ] as const) {
      it(`${signal} stops the watch with ${code} and a stopped event for each lease`, () =>
        withSimulator(async (sim) => {
          const leaseIds = [sim.mint(LEASE), sim.mint(LEASE)];
          const run = watch(sim, [...leaseIds, ...ROOM, '-o', 'ndjson'], code);
          for (const leaseId of leaseIds) await run.waitFor((event) => isRenewed(event) && event.leaseId === leaseId);
          run.process.kill(signal);
          const result = await run.exited;
          assert.equal(result.signal, null, `exited by itself, not killed by ${signal}`);
          assert.equal(result.code, code, result.stderr);
          const stopped = run.events().filter((event) => event.event === 'stopped');
          assert.deepEqual(stopped.map((event) => [event.leaseId, event.reason]).sort(), [
            ...leaseIds.map((leaseId) => [leaseId, 'signal']).sort(),
          ]);
          assert.deepEqual(run.events().slice(-2), stopped, 'nothing after the stopped events');
        }));
    }
  });

  // The rules of supervision are in test/unit/watch-supervisor.test.ts; these run real process
  // groups through the real binary: the environment, grandchildren, leftovers and signals.
  describe('lease watch -- command: real process groups', { concurrency: true }, () => {
    it('runs the command with QUEEN_LEASE_ID(S) and the expiry, not QUEEN_TOKEN; -o ndjson: its stdout is stderr', () =>
      withSimulator(async (sim) => {
        sim.setTokens({ secret: { role: 'read-write' } });
        const first = sim.mint(LEASE);
        const second = sim.mint(LEASE);
        const script = [
          'echo "id=$QUEEN_LEASE_ID"',
          'echo "ids=$QUEEN_LEASE_IDS"',
          'echo "expires=$QUEEN_LEASE_EXPIRES_AT"',
          // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, for sh to read
          'echo "token=${QUEEN_TOKEN-none}"',
        ].join('; ');
        const run = watch(sim, [first, second, ...ROOM, '-o', 'ndjson', '--', 'sh', '-c', script], 0, {
          QUEEN_TOKEN: 'secret',
        });
        const result = await run.exited;
        assert.equal(result.code, 0, result.stderr);
        assert.match(result.stderr, new RegExp(`^id=${first}$`, 'm'));
        assert.match(result.stderr, new RegExp(`^ids=${first} ${second}$`, 'm'));
        assert.match(result.stderr, /^expires=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$/m);
        assert.match(result.stderr, /^token=none$/m);
        for (const line of result.stdout.trim().split('\n')) assert.doesNotThrow(() => JSON.parse(line), line);
        assert.ok(run.events().filter(isRenewed).length >= 2, 'both leases renewed before it ran');
        assert.ok(sim.log.every((entry) => entry.authorization === 'Bearer secret'));
      }));

    it('a lost lease: SIGTERM to the group, SIGKILL after --kill-after to what ignores it, grandchildren too', () =>
      withSimulator(async (sim) => {
        const dir = scratch();
        const leaseId = sim.mint(LEASE);
        // An ignored signal stays ignored in what the shell starts: the grandchild ignores it too.
        const script = `trap "" TERM; sleep 120 & echo $! > ${dir}/grandchild; wait; wait`;
        const run = watch(sim, [leaseId, ...ROOM, '--kill-after', '700ms', '--', 'sh', '-c', script], 4);
        await run.waitForStderr(/started sh/);
        await waitForFile(join(dir, 'grandchild'));
        const grandchild = readPid(join(dir, 'grandchild'));
        assert.ok(isRunning(grandchild));
        sim.release(leaseId);
        await run.waitForStderr(/stopping sh: SIGTERM to its process group/);
        const stoppingAt = Date.now();
        const result = await run.exited;
        assert.equal(result.code, 4, result.stderr);
        assert.ok(Date.now() - stoppingAt >= 600, 'SIGKILL waited for --kill-after');
        assert.match(result.stderr, /process group was still running 700ms after SIGTERM: sent SIGKILL/);
        assert.equal(isRunning(grandchild), false);
      }));

    it('a command that exits leaving processes in its group: they are stopped, its status passes through', () =>
      withSimulator(async (sim) => {
        const dir = scratch();
        const script = `sleep 120 & echo $! > ${dir}/grandchild; exit 3`;
        const run = watch(sim, [sim.mint(LEASE), ...ROOM, '--', 'sh', '-c', script], 3);
        const result = await run.exited;
        assert.equal(result.code, 3, result.stderr);
        assert.match(result.stderr, /left processes running in its process group/);
        assert.equal(isRunning(readPid(join(dir, 'grandchild'))), false);
      }));

    for (const [signal, code] of [
      ['SIGTERM', 143],
      ['SIGINT', 130],
      ['SIGHUP', 129],
    ] as const) {
      it(`${signal} to queenctl goes to the command's group; it waits, exits ${code}, leaves nothing running`, () =>
        withSimulator(async (sim) => {
          const dir = scratch();
          const script = `echo $$ > ${dir}/child; sleep 120 & echo $! > ${dir}/grandchild; wait`;
          const run = watch(sim, [sim.mint(LEASE), ...ROOM, '--', 'sh', '-c', script], code);
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

    it("a reader of the event stream that goes away does not end the watch: the command's status still passes", () =>
      withSimulator(async (sim) => {
        const dir = scratch();
        // Runs until the reader is gone, then long enough for renewals to meet the closed pipe.
        const script = `while [ ! -e ${dir}/go ]; do sleep 0.05; done; sleep 1; exit 5`;
        const run = watch(
          sim,
          [sim.mint(LEASE), '--seconds', '60', '--every', '200ms', '-o', 'ndjson', '--', 'sh', '-c', script],
          5,
        );
        await run.waitFor(isRenewed);
        run.process.stdout?.destroy(); // as `| head -1` does
        writeFileSync(join(dir, 'go'), '');
        const result = await run.exited;
        assert.equal(result.code, 5, result.stderr);
      }));

    it("a stdout that cannot be written (a full disk) does not end the watch: said once; the command's status", () =>
      withSimulator(async (sim) => {
        // Every event meets /dev/full, those written while the command runs and the last one after.
        const args = [sim.mint(LEASE), '--server', sim.url, '--seconds', '60', '--every', '200ms', '-o', 'ndjson'];
        const result = await runShell(
          `${cliCommandLine()} lease watch ${args.join(' ')} -- sh -c 'sleep 1; exit 5' >/dev/full`,
          {
            exit: 5,
          },
        );
        assert.equal(result.code, 5, result.stderr);
        assert.equal(
          result.stderr.match(/^queenctl: could not write to stdout: .*\(ENOSPC\)/gm)?.length,
          1,
          result.stderr,
        );
      }));
  });

  /** Waits for a pid file a script writes; the limit only turns a hang into a failure. */
  async function waitForFile(file: string, timeoutMs = 30_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!existsSync(file) || readFileSync(file, 'utf8').trim() === '') {
      if (Date.now() > until) throw new Error(`${file} never appeared`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
});
