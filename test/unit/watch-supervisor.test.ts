/**
 * `lease watch ... -- command`: how the command is started, signalled, stopped and waited for
 * (watch/supervisor.ts), through a whole watch on a fake clock, with a fake broker and fake
 * process groups behind the launch port. No real process and no real waiting: hours of
 * --kill-after cost nothing, and a busy machine changes nothing. What only real processes can
 * show (process groups, /proc, signals from the kernel) is in watch-process-group.test.ts and
 * test/e2e/watch.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WatchOptions } from '../../src/commands/lease/watch.js';
import { AuthError, BrokerError } from '../../src/exit.js';
import { exitStatus } from '../../src/watch/process-group.js';
import { S, ignoresSignals, startWatch, type FakeCommand, type WatchHarnessOptions } from './watch-fakes.js';

const KILL_AFTER = 700;

/**
 * A watch of `leaseIds` that runs ./job.sh --batch 7 once they are renewed. Output `log`, as
 * without -o (notes for people on stderr); `events` puts the event stream on stdout instead.
 */
function watchJob(
  leaseIds: string[],
  command: (command: FakeCommand) => void,
  options: Partial<WatchOptions> = {},
  harness: Partial<WatchHarnessOptions> = {},
) {
  return startWatch({
    leaseIds,
    command,
    options: { command: ['./job.sh', '--batch', '7'], killAfterMs: KILL_AFTER, output: 'log', ...options },
    ...harness,
  });
}

const runsUntilStopped = (): void => {};
const signalsOf = (command: FakeCommand): string[] => command.signals.map((sent) => sent.signal);

describe('lease watch -- command: starting it', () => {
  it('starts once, after the first renewal of every lease, with the lease ids and expiry, not the token', async () => {
    const w = watchJob(
      ['a', 'b'],
      (command) => command.after(2 * S, () => command.exit(0)),
      {},
      {
        env: { PATH: '/usr/bin:/bin', HOME: '/home/operator', QUEEN_TOKEN: 'secret', QUEEN_SERVER: 'http://broker' },
        // b's first renewal fails and is retried: the command must wait for it.
        setup: (broker) => broker.failOnce.set('b', new BrokerError('cannot reach the broker: connection reset', true)),
      },
    );
    await w.advance(5 * S);
    assert.equal(w.status(), 0, w.io.stderr.text);
    assert.equal(w.launched.length, 1, 'started once, not once per renewal');
    const before = (w.callsBeforeLaunch[0] ?? []).map((call) => `${call.leaseId} ${call.outcome}`);
    assert.deepEqual(before, ['a renewed', 'b failed', 'b renewed'], 'started once b was renewed too');
    const { spec } = w.command;
    assert.equal(spec.command, './job.sh');
    assert.deepEqual(spec.args, ['--batch', '7']);
    assert.deepEqual(spec.env, {
      PATH: '/usr/bin:/bin',
      HOME: '/home/operator',
      QUEEN_SERVER: 'http://broker',
      QUEEN_LEASE_ID: 'a',
      QUEEN_LEASE_IDS: 'a b',
      // a was renewed first, at the start, for 3 s: it expires first.
      QUEEN_LEASE_EXPIRES_AT: '2026-12-02T10:00:03.000Z',
    });
    assert.match(w.io.stderr.text, /all 2 leases renewed; started \.\/job\.sh \(pid 4242, its own process group\)/);
  });

  it('readies the launcher (its guardian) before the first renewal, once; the launch gets --kill-after', async () => {
    const w = watchJob(['a'], (command) => command.exit(0), { killAfterMs: 7 * S });
    await w.advance(S);
    assert.equal(w.status(), 0, w.io.stderr.text);
    assert.deepEqual(w.callsBeforePrepare, [[]], 'prepared once, as the watch began');
    assert.equal(w.command.spec.killAfterMs, 7 * S, 'the guardian SIGKILLs after --kill-after too');
  });

  it('does not start it when a lease is not held: exit 4, and the other lease is no longer renewed', async () => {
    const w = watchJob(['a', 'unknown'], runsUntilStopped);
    await w.advance(5 * S);
    assert.equal(w.status(), 4, w.io.stderr.text);
    assert.equal(w.launched.length, 0);
    assert.match(w.io.stderr.text, /\.\/job\.sh was not started: the lease was not renewed/);
    const requests = w.broker.requests;
    await w.advance(5 * S);
    assert.equal(w.broker.requests, requests, 'no renewal after the watch ended');
  });

  it('does not start it when the token is refused: exit 3', async () => {
    const refusal = new AuthError('the broker refused the renewal (HTTP 401)', 401, 'check the token');
    const w = watchJob(['a'], runsUntilStopped, {}, { setup: (broker) => (broker.failure = refusal) });
    await w.advance(S);
    assert.equal(w.status(), 3);
    assert.equal(w.launched.length, 0);
    assert.match(w.io.stderr.text, /was not started/);
  });

  it('a command that cannot be run: 127 (or 126) and why, and renewal stops', async () => {
    const enoent = Object.assign(new Error('spawn ./job.sh ENOENT'), { code: 'ENOENT' });
    const eacces = Object.assign(new Error('spawn ./job.sh EACCES'), { code: 'EACCES' });
    for (const [startError, status, words] of [
      [enoent, 127, /cannot run \.\/job\.sh: not found \(check the name and PATH\)/],
      [eacces, 126, /cannot run \.\/job\.sh: permission denied: it is not an executable file/],
    ] as const) {
      const w = watchJob(
        ['a'],
        runsUntilStopped,
        { output: 'events' },
        { launchFails: { status, code: null, signal: null, startError } },
      );
      await w.advance(S);
      assert.equal(w.status(), status);
      assert.match(w.io.stderr.text, words);
      assert.equal(w.events().at(-1)?.reason, 'child-exit');
    }
  });

  it("with -o json/ndjson the command's stdout goes to stderr; otherwise it keeps its own", async () => {
    for (const [output, toStderr] of [
      ['events', true],
      ['log', false],
      ['quiet', false],
    ] as const) {
      const w = watchJob(['a'], (command) => command.exit(0), { output });
      await w.advance(S);
      assert.equal(w.status(), 0);
      assert.equal(w.command.spec.stdoutToStderr, toStderr, output);
    }
  });
});

describe('lease watch -- command: while it runs and when it ends', () => {
  it('keeps renewing while the command runs, and stops when it exits', async () => {
    const w = watchJob(['a'], (command) => command.after(5_500, () => command.exit(0)), { output: 'events' });
    await w.advance(10 * S);
    assert.equal(w.status(), 0, w.io.stderr.text);
    const renewed = w.events().filter((event) => event.event === 'renewed');
    assert.equal(renewed.length, 6, 'at 0, 1, 2, 3, 4 and 5 s');
    assert.deepEqual(w.events().at(-1), {
      event: 'stopped',
      leaseId: 'a',
      at: '2026-12-02T10:00:05.500Z',
      reason: 'child-exit',
    });
    const requests = w.broker.requests;
    await w.advance(5 * S);
    assert.equal(w.broker.requests, requests, 'no renewal after the command exited');
  });

  it('says on stderr that the command ended and renewal stopped', async () => {
    const w = watchJob(['a'], (command) => command.after(1_500, () => command.exit(0)));
    await w.advance(3 * S);
    assert.equal(w.status(), 0);
    assert.match(w.io.stderr.text, /\.\/job\.sh exited with status 0; renewal stopped/);
    assert.match(w.io.stderr.text, /lease a: the command has ended; no longer renewed/);
  });

  it("passes the command's exit status through, and 128 + the number of the signal that ended it", async () => {
    for (const [code, signal, status] of [
      [7, null, 7],
      [null, 'SIGTERM', 143],
      [null, 'SIGKILL', 137],
    ] as const) {
      const w = watchJob(['a'], (command) => command.after(1_500, () => command.exit(code, signal)));
      await w.advance(3 * S);
      assert.equal(w.status(), status);
      assert.deepEqual(w.command.signals, [], 'nothing was sent to it');
      assert.equal(w.command.released, true, 'its group is no longer guarded');
    }
    assert.equal(exitStatus(null, 'SIGHUP'), 129);
    assert.equal(exitStatus(0, null), 0);
  });

  it('a command that exits leaving processes in its group: they get SIGTERM, its status passes through', async () => {
    const w = watchJob(['a'], (command) => {
      command.spawnMember();
      command.after(1_500, () => command.exit(3));
    });
    await w.advance(3 * S);
    assert.equal(w.status(), 3, w.io.stderr.text);
    assert.match(w.io.stderr.text, /\.\/job\.sh exited but left processes running in its process group/);
    assert.deepEqual(signalsOf(w.command), ['SIGTERM']);
    assert.equal(w.command.livingMembers(), 0);
  });

  it('leftovers that ignore SIGTERM get SIGKILL after --kill-after; the status still passes through', async () => {
    const w = watchJob(['a'], (command) => {
      command.spawnMember(ignoresSignals);
      command.after(1_500, () => command.exit(3));
    });
    await w.advance(4 * S);
    assert.equal(w.status(), 3, w.io.stderr.text);
    const [term, kill] = w.command.signals;
    assert.deepEqual([term?.signal, kill?.signal], ['SIGTERM', 'SIGKILL']);
    assert.ok((kill?.at ?? 0) - (term?.at ?? 0) >= KILL_AFTER, 'SIGKILL waited for --kill-after');
    assert.equal(w.command.livingMembers(), 0);
    assert.match(w.io.stderr.text, /process group was still running 700ms after SIGTERM: sent SIGKILL/);
  });
});

describe('lease watch -- command: a lease lost while it runs', () => {
  it("stops the command's whole group with SIGTERM, and exits 4", async () => {
    const w = watchJob(['a'], (command) => command.spawnMember());
    await w.advance(1_500);
    assert.ok(w.command.running);
    w.broker.expiries.delete('a'); // released by an ack elsewhere
    await w.advance(3 * S);
    assert.equal(w.status(), 4, w.io.stderr.text);
    assert.deepEqual(signalsOf(w.command), ['SIGTERM']);
    assert.equal(w.command.groupAlive(), false, 'the whole group got it');
    assert.match(w.io.stderr.text, /is LOST: the broker renewed nothing/);
    assert.match(
      w.io.stderr.text,
      /stopping \.\/job\.sh: SIGTERM to its process group now, SIGKILL in 700ms if it is still running/,
    );
    assert.doesNotMatch(w.io.stderr.text, /sent SIGKILL/);
  });

  it('SIGKILL after --kill-after to a group that ignores SIGTERM; the other lease is renewed until then', async () => {
    const w = watchJob(
      ['a', 'b'],
      (command) => {
        command.spawnMember(ignoresSignals);
        command.leaderReacts(ignoresSignals);
      },
      { killAfterMs: 2_500, output: 'events' },
    );
    await w.advance(1_500);
    w.broker.expiries.delete('a');
    await w.advance(5 * S);
    assert.equal(w.status(), 4, w.io.stderr.text);
    const [term, kill] = w.command.signals;
    assert.deepEqual([term?.signal, kill?.signal], ['SIGTERM', 'SIGKILL']);
    const waited = (kill?.at ?? 0) - (term?.at ?? 0);
    assert.ok(waited >= 2_500 && waited < 2_600, `SIGKILL ${waited} ms after SIGTERM`);
    assert.equal(w.command.groupAlive(), false);
    const renewalsOfB = w
      .events()
      .filter((event) => event.event === 'renewed' && event.leaseId === 'b')
      .map((event) => Date.parse(String(event.at)));
    assert.ok(
      renewalsOfB.filter((at) => at > (term?.at ?? 0) && at < (kill?.at ?? 0)).length >= 2,
      'b was renewed while the command was being stopped',
    );
    assert.deepEqual(
      w
        .events()
        .filter((event) => event.event === 'stopped')
        .map((event) => [event.leaseId, event.reason]),
      [['b', 'lease-lost']],
    );
    assert.match(w.io.stderr.text, /process group was still running 2.5s after SIGTERM: sent SIGKILL/);
  });

  it('a lease lost while the command is being started: it is stopped as soon as it runs', async () => {
    let spawned!: () => void;
    const w = watchJob(['a'], runsUntilStopped, {}, { launchDelay: new Promise((resolve) => (spawned = resolve)) });
    await w.advance(100);
    w.broker.expiries.delete('a');
    await w.advance(S);
    assert.match(w.io.stderr.text, /is LOST/);
    spawned();
    await w.advance(S);
    assert.equal(w.status(), 4, w.io.stderr.text);
    assert.deepEqual(signalsOf(w.command), ['SIGTERM']);
  });

  it('a token refused while it runs stops it too, and the watch exits 3', async () => {
    const w = watchJob(['a'], runsUntilStopped);
    await w.advance(1_500);
    w.broker.failure = new AuthError('the broker refused the renewal (HTTP 401)', 401, 'check the token');
    await w.advance(3 * S);
    assert.equal(w.status(), 3, w.io.stderr.text);
    assert.deepEqual(signalsOf(w.command), ['SIGTERM']);
    assert.match(w.io.stderr.text, /stopping \.\/job\.sh: the lease cannot be renewed any more; SIGTERM/);
  });
});

describe('lease watch -- command: signals to queenctl', () => {
  for (const [signal, status] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
    ['SIGHUP', 129],
  ] as const) {
    it(`${signal} goes to the command's group; queenctl waits, exits ${status}, leaves nothing running`, async () => {
      // A shell's background job ignores SIGINT: queenctl stops what the command left behind.
      const w = watchJob(['a'], (command) =>
        command.spawnMember({ onSignal: (sent) => (sent === 'SIGINT' ? 'ignore' : 'die') }),
      );
      await w.advance(1_500);
      w.signal(signal);
      await w.advance(3 * S);
      assert.equal(w.status(), status, w.io.stderr.text);
      assert.equal(signalsOf(w.command)[0], signal);
      assert.equal(w.command.groupAlive(), false);
      assert.match(w.io.stderr.text, new RegExp(`${signal}: passed on to \\./job\\.sh and its process group`));
      assert.match(w.io.stderr.text, /lease a: interrupted; no longer renewed/);
      assert.equal(w.relaying, false, 'signals are queenctl’s own again');
    });
  }

  it('a second signal is passed on too, and never makes queenctl leave the command behind', async () => {
    // Exits only at the second SIGINT.
    const w = watchJob(['a'], (command) => {
      command.leaderReacts({
        onSignal: (signal, received) => (signal === 'SIGINT' && received >= 2 ? { exit: 42 } : 'ignore'),
      });
    });
    await w.advance(1_500);
    w.signal('SIGINT');
    await w.advance(300);
    assert.equal(w.code(), null, 'still waiting for the command');
    assert.ok(w.command.running);
    w.signal('SIGINT');
    await w.advance(S);
    assert.equal(w.status(), 42, w.io.stderr.text);
    assert.deepEqual(signalsOf(w.command), ['SIGINT', 'SIGINT']);
  });

  it('a command that ignores SIGINT or SIGTERM gets SIGKILL after --kill-after: Ctrl+C always ends it', async () => {
    const w = watchJob(['a'], (command) => {
      command.leaderReacts(ignoresSignals);
    });
    await w.advance(1_500);
    w.signal('SIGTERM');
    await w.advance(100);
    assert.equal(w.code(), null);
    await w.advance(2 * S);
    assert.equal(w.status(), 128 + 9, w.io.stderr.text);
    const [term, kill] = w.command.signals;
    assert.deepEqual([term?.signal, kill?.signal], ['SIGTERM', 'SIGKILL']);
    assert.ok((kill?.at ?? 0) - (term?.at ?? 0) >= KILL_AFTER);
    assert.match(w.io.stderr.text, /SIGTERM: passed on to .*SIGKILL in 700ms if it ignores it/);
    assert.match(w.io.stderr.text, /still running 700ms after SIGTERM: sent SIGKILL/);
  });

  it('SIGHUP is passed on without a SIGKILL to follow', async () => {
    const w = watchJob(['a'], (command) => {
      command.leaderReacts(ignoresSignals);
      command.after(5 * S, () => command.exit(0));
    });
    await w.advance(1_500);
    w.signal('SIGHUP');
    await w.advance(5 * S);
    assert.equal(w.status(), 0, w.io.stderr.text);
    assert.deepEqual(signalsOf(w.command), ['SIGHUP']);
    assert.doesNotMatch(w.io.stderr.text, /SIGKILL/);
  });

  it('a signal while the command is being started is passed on once it runs', async () => {
    let spawned!: () => void;
    const w = watchJob(['a'], runsUntilStopped, {}, { launchDelay: new Promise((resolve) => (spawned = resolve)) });
    await w.advance(100);
    assert.ok(w.relaying, 'the command is starting: signals are its own');
    w.signal('SIGINT');
    spawned();
    await w.advance(S);
    assert.equal(w.status(), 130, w.io.stderr.text);
    assert.deepEqual(signalsOf(w.command), ['SIGINT']);
  });

  it('a signal before the command was due to start ends the watch without starting it', async () => {
    const w = watchJob(
      ['a'],
      runsUntilStopped,
      { output: 'events' },
      {
        setup: (broker) => broker.failOnce.set('a', new BrokerError('cannot reach the broker: connection reset', true)),
      },
    );
    await w.advance(50);
    w.signal('SIGINT');
    await w.advance(2 * S);
    assert.equal(w.status(), 130);
    assert.equal(w.launched.length, 0);
    assert.equal(w.events().at(-1)?.reason, 'signal');
  });
});
