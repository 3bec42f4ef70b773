/**
 * `queenctl lease watch` end to end: the command run in-process against the simulator over
 * loopback, with faults injected while it runs and stopped by a signal it is given. Each scenario
 * has its own simulator, so they run side by side. (Signals through the kernel and the commands
 * a watch runs, in their process groups: test/process/watch.test.ts.)
 *
 * Every rule of the schedule and of the supervision is tested on fake time
 * (test/unit/watch-*.test.ts); here the real thing is run a few times, and it must pass on a
 * busy machine: leases have room (60 s, renewed every second), so a process that starts
 * slowly or is descheduled for seconds loses nothing; waits are for what a test looks for,
 * with limits that only turn a hang into a failure; timing is checked only from below.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import type { Simulator } from '../../tools/simulator/index.js';
import { closedPort } from '../reliability/harness.js';
import { runInProcess, startInProcess, type InProcessResult } from '../support/in-process.js';
import { watchScenario, withSimulator, type WatchEventLine, type WatchScenario } from '../support/watch-scenario.js';

interface Watching extends WatchScenario<InProcessResult> {
  /** Delivers a signal to the run, as the process would get it. */
  kill(signal: NodeJS.Signals): void;
}

/** Starts `queenctl lease watch` in this process (the suite runs with strict unhandled rejections). */
function watch(sim: Simulator, args: string[], env: Record<string, string | undefined> = {}, stdin = ''): Watching {
  const run = startInProcess(['lease', 'watch', '--server', sim.url, ...args], { env, stdin });
  return { ...watchScenario(run), kill: (signal) => run.kill(signal) };
}

const isRenewed = (event: WatchEventLine): boolean => event.event === 'renewed';
/** Leases with room: minted for a minute, renewed for a minute, every second. */
const LEASE = { seconds: 60 };
const ROOM = ['--seconds', '60', '--every', '1s'];

// The scenarios wait on the wall clock (a --for, an outage, a retry's backoff), each against its
// own simulator: the groups below run side by side, as the scenarios in each group do, so that the
// file takes its longest scenario (about 5 s), not the sum of its groups (about 12 s).
describe('lease watch end to end', { concurrency: true }, () => {
  describe('lease watch: keeping a lease through faults', { concurrency: true }, () => {
    // An outage ends when the test says so, not at a time: then the watch is stopped by hand.
    const afterOutage = (events: WatchEventLine[]): boolean => {
      const lastRetry = events.findLastIndex((event) => event.event === 'retry');
      return lastRetry >= 0 && events.slice(lastRetry).some(isRenewed);
    };
    /** Ends the outage once the watch retried twice, waits for a renewal after it, and stops the watch (130). */
    const rideOut = async (sim: Simulator, run: Watching): Promise<void> => {
      await run.waitFor((event) => event.event === 'retry' && Number(event.attempt) >= 2);
      sim.clearFaults();
      await run.waitFor(() => afterOutage(run.events()));
      run.kill('SIGINT');
      const result = await run.exited;
      assert.equal(result.code, 130, result.stderr);
    };

    it('an outage of dropped connections shorter than the lease: retry events, then renewed, no loss', () =>
      withSimulator(async (sim) => {
        const leaseId = sim.mint(LEASE);
        const run = watch(sim, [leaseId, ...ROOM, '-o', 'ndjson']);
        await run.waitFor(isRenewed);
        sim.inject({ kind: 'drop', leaseId });
        await rideOut(sim, run);
        const events = run.events();
        assert.equal(events.filter((event) => event.event === 'lost').length, 0);
        const retries = events.filter((event) => event.event === 'retry');
        assert.ok(retries.length >= 2, JSON.stringify(retries));
        assert.deepEqual(Object.keys(retries[0] ?? {}).slice(0, 5), ['event', 'leaseId', 'at', 'error', 'attempt']);
        assert.equal(retries[0]?.attempt, 1);
        assert.deepEqual(events.at(-1), { event: 'stopped', leaseId, at: events.at(-1)?.at, reason: 'signal' });
        assert.equal(sim.stats().lapses, 0);
      }));

    it('a broker hanging (database down) shorter than the lease: each request times out, then renewed, no loss', () =>
      withSimulator(async (sim) => {
        const leaseId = sim.mint(LEASE);
        const run = watch(sim, [leaseId, ...ROOM, '--timeout', '400ms', '-o', 'ndjson']);
        await run.waitFor(isRenewed);
        sim.inject({ kind: 'hang', leaseId });
        const retry = await run.waitFor((event) => event.event === 'retry');
        assert.match(String(retry.error), /no answer .* within 400ms/);
        await rideOut(sim, run);
        assert.equal(run.events().filter((event) => event.event === 'lost').length, 0);
        assert.equal(sim.stats().lapses, 0);
      }));

    it('a lease released mid-watch is reported lost by its next renewal, not at its expiry; none left: exit 4', () =>
      withSimulator(async (sim) => {
        const leaseId = sim.mint(LEASE);
        const run = watch(sim, [leaseId, ...ROOM, '-o', 'ndjson']);
        await run.waitFor(isRenewed);
        sim.release(leaseId);
        const releasedAt = Date.now();
        const lost = await run.waitFor((event) => event.event === 'lost');
        // Found by a renewal (every second), not by the expiry a minute away.
        assert.equal(lost.reason, 'not-renewed');
        const after = Date.parse(lost.at) - releasedAt;
        assert.ok(after < 30_000, `reported ${after} ms after the release`);
        const result = await run.exited;
        assert.equal(result.code, 4);
        assert.match(result.stderr, /is LOST: the broker renewed nothing/);
        assert.match(result.stderr, /Stop work that is not idempotent/);
      }));

    for (const offsetMs of [3_600_000, -3_600_000]) {
      it(`a broker clock an hour ${offsetMs > 0 ? 'ahead' : 'behind'}: renewed on schedule, no loss, no flood`, () =>
        withSimulator(async (sim) => {
          sim.setClockOffset(offsetMs);
          const leaseId = sim.mint(LEASE);
          const run = watch(sim, [leaseId, ...ROOM, '--for', '4s', '-o', 'json']);
          const result = await run.exited;
          assert.equal(result.code, 0, result.stderr);
          const renewed = run.events().filter(isRenewed);
          // At once and then every second: 5 in 4 s, fewer on a busy machine, never a flood.
          assert.ok(renewed.length >= 2 && renewed.length <= 6, `${renewed.length} renewals in 4 s at --every 1s`);
          assert.equal(sim.stats().extendRequests, renewed.length);
          for (const event of renewed)
            assert.ok(Number(event.remainingMs) > 45_000 && Number(event.remainingMs) <= 60_000, JSON.stringify(event));
          assert.equal(sim.stats().lapses, 0);
        }));
    }

    it('--for with one of two leases lost exits 4, after the other lease was kept to the end', () =>
      withSimulator(async (sim) => {
        const kept = sim.mint(LEASE);
        // Released (acked elsewhere) before the watch starts, so its loss does not race --for.
        const released = sim.mint(LEASE);
        sim.release(released);
        const run = watch(sim, ['-', ...ROOM, '--for', '3s', '-o', 'ndjson'], {}, `${kept}\n${released}\n`);
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

    // In-process: the hint and the usage errors are queenctl's words, not the process's; the
    // command (`true`) is still a real one.
    it('a --token on the command line earns a hint; -- with no command and --for with a command are usage errors', () =>
      withSimulator(async (sim) => {
        sim.setTokens({ 'cli-token': { role: 'read-write' } });
        const withTokenLease = sim.mint(LEASE);
        const [withToken, empty, forWithCommand] = await Promise.all([
          watch(sim, [withTokenLease, ...ROOM, '--token', 'cli-token', '--', 'true']).exited,
          watch(sim, [sim.mint(LEASE), '--']).exited,
          watch(sim, [sim.mint(LEASE), '--for', '1s', '--', 'true']).exited,
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
        // The watch with a command renews until `true` has exited: once, or more on a busy machine.
        const leaseIds = new Set(sim.log.map((entry) => entry.leaseId));
        assert.deepEqual([...leaseIds], [withTokenLease], 'nothing sent for the usage errors');
      }));

    it('a refused token ends the watch at once with 3', () =>
      withSimulator(async (sim) => {
        sim.setTokens({ 'read-only': { role: 'read-only' } });
        const run = watch(sim, [sim.mint(LEASE), ...ROOM, '-o', 'ndjson'], { QUEEN_TOKEN: 'read-only' });
        const result = await run.exited;
        assert.equal(result.code, 3);
        assert.match(result.stderr, /read-write role/);
        assert.equal(sim.log.length, 1, 'a refusal is not retried');
      }));
  });

  describe('lease watch --for when no renewal ever succeeded: exit 2, never 0 (issue 31)', {
    concurrency: true,
  }, () => {
    /** The last event, and that every lease's stopped event says it was never renewed. */
    const neverRenewed = (run: Watching, result: InProcessResult, error: RegExp): void => {
      assert.equal(result.code, 2, result.stderr);
      const stopped = run.events().filter((event) => event.event === 'stopped');
      assert.equal(stopped.length, 1, JSON.stringify(run.events()));
      assert.equal(stopped[0]?.reason, 'for');
      assert.equal(stopped[0]?.neverRenewed, true);
      assert.match(String(stopped[0]?.error), /^not renewed once before --for ended: /);
      // On a machine busy enough that no answer came before --for ended, the reason says that
      // instead: the verdict (exit 2, neverRenewed) is the same, and no verdict may depend on speed.
      const why = new RegExp(`${error.source}|no answer to its first renewal had come`);
      assert.match(String(stopped[0]?.error), why);
      assert.match(result.stderr, /^queenctl: lease \S+ could not be watched: not renewed once before --for ended/m);
    };

    it('an unreachable server', async () => {
      const port = await closedPort();
      const run = startInProcess(
        ['lease', 'watch', 'abc', '--server', `http://127.0.0.1:${port}`, '--for', '2s', '-o', 'ndjson'],
        {},
      );
      const watching = { ...watchScenario(run), kill: (signal: NodeJS.Signals) => run.kill(signal) };
      neverRenewed(watching, await run.exited, /cannot reach the broker/);
    });

    it('a server answering 501 to everything', () =>
      withSimulator(async (sim) => {
        sim.inject({ kind: 'status', status: 501 });
        // 5 s: long enough that the broker has seen a request however busy the machine is.
        const run = watch(sim, [sim.mint(LEASE), ...ROOM, '--for', '5s', '-o', 'ndjson']);
        neverRenewed(run, await run.exited, /HTTP 501/);
        assert.ok(sim.stats().extendRequests >= 1);
      }));

    it('a server answering 500 with a body outside the contract', () =>
      withSimulator(async (sim) => {
        sim.inject({ kind: 'body', status: 500, body: '<html>busy</html>' });
        const run = watch(sim, [sim.mint(LEASE), ...ROOM, '--for', '2s', '-o', 'ndjson']);
        neverRenewed(run, await run.exited, /HTTP 500/);
      }));

    it('-q: nothing on stdout, the reason on stderr, still 2', async () => {
      const port = await closedPort();
      const result = await runInProcess([
        'lease',
        'watch',
        'abc',
        '--server',
        `http://127.0.0.1:${port}`,
        '--for',
        '1s',
        '-q',
      ]);
      assert.equal(result.code, 2, result.stderr);
      assert.equal(result.stdout, '');
      assert.match(result.stderr, /could not be watched: not renewed once before --for ended: cannot reach the broker/);
    });

    it('a 200 outside the contract was already refused at once, before --for: 2', () =>
      withSimulator(async (sim) => {
        sim.inject({ kind: 'body', body: '{"ok":true}' });
        const run = watch(sim, [sim.mint(LEASE), ...ROOM, '--for', '30s', '-o', 'ndjson']);
        const result = await run.exited;
        assert.equal(result.code, 2, result.stderr);
        assert.equal(run.events().at(-1)?.reason, 'error');
        assert.match(result.stderr, /outside the lease contract/);
      }));
  });

  describe('lease watch --help', () => {
    it('names every event, -o yaml, how many requests it may use, Retry-After and the signal statuses', async () => {
      const result = await runInProcess(['lease', 'watch', '--help']);
      assert.equal(result.code, 0, result.stderr);
      const help = result.stdout.replace(/\s+/g, ' ');
      for (const event of ['renewed', 'retry', 'lost', 'stopped', 'outage', 'recovered'])
        assert.match(help, new RegExp(event));
      assert.match(help, /-o yaml prints each event as one YAML document, --- between them/);
      assert.match(help, /up to --concurrency when given, else up to 256/);
      assert.match(help, /cannot renew every lease in time, a warning says so/);
      assert.match(help, /Retry-After/);
      assert.match(help, /129\/130\/143 stopped by SIGHUP\/SIGINT\/SIGTERM \(without a command\)/);
    });
  });

  describe('lease watch -o yaml', { concurrency: true }, () => {
    /** A lease kept to --for and one released before the start: renewed, lost and stopped events. */
    const scenario = async (sim: Simulator, format: 'ndjson' | 'yaml') => {
      const kept = sim.mint(LEASE);
      const released = sim.mint(LEASE);
      sim.release(released);
      const run = watch(sim, [kept, released, ...ROOM, '--for', '3s', '-o', format]);
      const result = await run.exited;
      const documents = format === 'yaml' ? parseAllDocuments(result.stdout) : [];
      assert.ok(Array.isArray(documents), 'a stream of YAML documents');
      const events: Array<Record<string, unknown>> =
        format === 'yaml'
          ? documents.map((document) => {
              assert.deepEqual(document.errors, [], result.stdout);
              return document.toJS() as Record<string, unknown>;
            })
          : run.events();
      // What does not depend on timing: the keys of each kind of event, and every event but renewals.
      const roles = new Map([
        [kept, 'kept'],
        [released, 'released'],
      ]);
      const keysOf = new Map(events.map((event) => [event.event, Object.keys(event)]));
      const outcomes = events
        .filter((event) => event.event !== 'renewed')
        .map((event) => [event.event, roles.get(String(event.leaseId)), event.reason]);
      return { result, events, keysOf, outcomes };
    };

    it('prints each event as one YAML document, --- between them, with the keys and values of -o ndjson', () =>
      withSimulator(async (sim) => {
        const [ndjson, yaml] = await Promise.all([scenario(sim, 'ndjson'), scenario(sim, 'yaml')]);
        assert.equal(yaml.result.code, 4, yaml.result.stderr);
        assert.equal(ndjson.result.code, 4, ndjson.result.stderr);
        assert.deepEqual(yaml.outcomes, [
          ['lost', 'released', 'not-renewed'],
          ['stopped', 'kept', 'for'],
        ]);
        assert.deepEqual(yaml.outcomes, ndjson.outcomes);
        assert.deepEqual([...yaml.keysOf], [...ndjson.keysOf]);
        assert.ok(yaml.events.some((event) => event.event === 'renewed'));
        assert.equal(yaml.result.stdout.match(/^---$/gm)?.length, yaml.events.length - 1);
        for (const event of yaml.events) assert.equal(typeof event.at, 'string', 'at stays an ISO-8601 string');
        assert.match(yaml.result.stderr, /is LOST: the broker renewed nothing/);
      }));
  });
});
