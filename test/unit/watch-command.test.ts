/**
 * How a watch without a command ends and with which status (docs/cli-contract.md, "watch" and
 * "Exit codes"), called as a function: buffer IO, a fake clock and a fake broker.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkCommand } from '../../src/commands/lease/watch.js';
import { AuthError, BrokerError, UsageError } from '../../src/exit.js';
import { S, startWatch, type WatchHarnessOptions } from './watch-fakes.js';

const start = (
  leaseIds: string[],
  options: WatchHarnessOptions['options'] = {},
  setup: WatchHarnessOptions['setup'] = () => {},
) => startWatch({ leaseIds, options, setup });

describe('lease watch without a command: how it ends', () => {
  it('goes on with the leases still held, and exits 4 once none is left', async () => {
    const w = start(['a', 'b']);
    await w.advance(2_500);
    w.broker.expiries.delete('a');
    await w.advance(1_500);
    assert.equal(w.code(), null, 'b is still held: the watch goes on');
    w.broker.expiries.delete('b');
    await w.advance(1_500);
    assert.equal(w.status(), 4);
    assert.deepEqual(
      w
        .events()
        .filter((e) => e.event === 'lost')
        .map((e) => e.leaseId),
      ['a', 'b'],
    );
  });

  it('--for: exits 0 when no lease was lost', async () => {
    const w = start(['a'], { forMs: 5 * S });
    await w.advance(6 * S);
    assert.equal(w.status(), 0);
    assert.deepEqual(w.events().at(-1), {
      event: 'stopped',
      leaseId: 'a',
      at: '2026-12-02T10:00:05.000Z',
      reason: 'for',
    });
  });

  it('--for: exits 4 when a lease was lost on the way', async () => {
    const w = start(['a', 'b'], { forMs: 5 * S });
    await w.advance(1_500);
    w.broker.expiries.delete('b');
    await w.advance(5 * S);
    assert.equal(w.status(), 4);
    assert.deepEqual(
      w
        .events()
        .filter((e) => e.event === 'stopped')
        .map((e) => [e.leaseId, e.reason]),
      [['a', 'for']],
    );
  });

  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
    // The terminal or ssh session went away: the same end, with the shell's status for SIGHUP.
    ['SIGHUP', 129],
  ] as const) {
    it(`${signal}: exits ${code} with a stopped event of reason signal for each lease still watched`, async () => {
      const w = start(['a', 'b', 'c']);
      await w.advance(1_500);
      w.broker.expiries.delete('c');
      await w.advance(1_500);
      w.signal(signal);
      await w.advance(100);
      assert.equal(w.status(), code);
      assert.deepEqual(
        w
          .events()
          .filter((e) => e.event === 'stopped' || e.event === 'lost')
          .map((e) => [e.event, e.leaseId, e.reason]),
        [
          ['lost', 'c', 'not-renewed'],
          ['stopped', 'a', 'signal'],
          ['stopped', 'b', 'signal'],
        ],
      );
    });
  }

  it('a refused token: exits 3 with one message and its hint', async () => {
    const w = start(
      ['a', 'b', 'c'],
      {},
      (broker) =>
        (broker.failure = new AuthError(
          'the broker refused the renewal (HTTP 403: Insufficient permissions)',
          403,
          'extending a lease needs a token with the read-write role',
        )),
    );
    await w.advance(100);
    assert.equal(w.status(), 3);
    assert.equal(w.io.stderr.text.match(/HTTP 403/g)?.length, 1);
    assert.match(w.io.stderr.text, /read-write role/);
  });

  it("a broker unreachable from the start: retried for one lease's time, then exit 2 saying what to do", async () => {
    const w = start(
      ['a'],
      {},
      (broker) =>
        (broker.failure = new BrokerError(
          'cannot reach the broker at http://broker.test: connection refused',
          true,
          'is the broker running? check --server',
        )),
    );
    await w.advance(4 * S);
    assert.equal(w.status(), 2);
    assert.ok(w.broker.requests > 3, 'retried');
    assert.match(
      w.io.stderr.text,
      /lease a could not be watched: no renewal succeeded within 3s of starting: cannot reach the broker/,
    );
    assert.match(w.io.stderr.text, /is the broker running\?/);
    assert.ok(w.events().some((e) => e.event === 'retry'));
  });

  // Issue 31: `watch --for 30s && next-step` must not call a dead broker a success.
  const failures: Array<[string, () => Error]> = [
    [
      'unreachable',
      () => new BrokerError('cannot reach the broker at http://broker.test: connection refused', true, 'is it up?'),
    ],
    [
      'answering 501 to everything',
      () => new BrokerError('the broker answered HTTP 501', false, 'is it a Queen broker?', 501),
    ],
    [
      'answering 500 with a body outside the contract',
      () => new BrokerError('the broker answered HTTP 500: <html>', false, undefined, 500),
    ],
  ];
  for (const [name, failure] of failures) {
    it(`--for ends before any renewal succeeded, broker ${name}: exit 2, and the stopped event says so`, async () => {
      const w = start(['a'], { forMs: 2 * S }, (broker) => (broker.failure = failure()));
      await w.advance(2 * S + 100);
      assert.equal(w.status(), 2);
      assert.ok(w.broker.requests > 1, 'retried meanwhile');
      const stopped = w.events().at(-1);
      assert.deepEqual(stopped, {
        event: 'stopped',
        leaseId: 'a',
        at: '2026-12-02T10:00:02.000Z',
        reason: 'for',
        neverRenewed: true,
        error: `not renewed once before --for ended: ${failure().message}`,
      });
      assert.match(w.io.stderr.text, /lease a could not be watched: not renewed once before --for ended: /);
    });
  }

  it('--for with one lease renewed and one never: exit 2, and only the one never renewed is marked', async () => {
    const w = start(['a', 'b'], { forMs: 2 * S }, (broker) => {
      const extend = broker.client.extend;
      broker.client.extend = (leaseId, seconds, options) =>
        leaseId === 'b' ? Promise.reject(new BrokerError('connection reset', true)) : extend(leaseId, seconds, options);
    });
    await w.advance(2 * S + 100);
    assert.equal(w.status(), 2);
    const stopped = w.events().filter((e) => e.event === 'stopped');
    assert.deepEqual(
      stopped.map((e) => [e.leaseId, e.reason, e.neverRenewed ?? false]),
      [
        ['a', 'for', false],
        ['b', 'for', true],
      ],
    );
  });

  it('--for while the first renewal is still unanswered: exit 2, no answer had come', async () => {
    const w = start(['a'], { forMs: 2 * S }, (broker) => {
      // Held until the watch gives up on it, as a broker whose database is down holds it.
      broker.client.extend = (_leaseId, _seconds, options) =>
        new Promise((_resolve, reject) =>
          options?.signal?.addEventListener('abort', () => reject(new BrokerError('aborted', true)), { once: true }),
        );
    });
    await w.advance(2 * S + 100);
    assert.equal(w.status(), 2);
    assert.equal(
      w.events().at(-1)?.error,
      'not renewed once before --for ended: no answer to its first renewal had come',
    );
  });

  it('--for and a lost lease and one never renewed: 2 outranks 4', async () => {
    const w = start(['a', 'unknown'], { forMs: 2 * S }, (broker) => {
      const extend = broker.client.extend;
      broker.client.extend = (leaseId, seconds, options) =>
        leaseId === 'a' ? Promise.reject(new BrokerError('connection reset', true)) : extend(leaseId, seconds, options);
    });
    await w.advance(2 * S + 100);
    assert.deepEqual(
      w
        .events()
        .filter((e) => e.event === 'lost' || e.event === 'stopped')
        .map((e) => [e.event, e.leaseId]),
      [
        ['lost', 'unknown'],
        ['stopped', 'a'],
      ],
    );
    assert.equal(w.status(), 2);
  });

  it('a lease id twice is watched once', async () => {
    const w = start(['a', 'a'], { forMs: 1_500 });
    await w.advance(2 * S);
    assert.equal(w.status(), 0);
    assert.equal(w.broker.requests, 2);
  });
});

describe('lease watch: the command after --', () => {
  it('must be there when -- is, and does not go with --for', () => {
    assert.throws(() => checkCommand({ command: [], forMs: undefined }), UsageError);
    assert.throws(() => checkCommand({ command: ['./job.sh'], forMs: 1_000 }), /--for ends a watch without a command/);
    assert.doesNotThrow(() => checkCommand({ command: ['./job.sh'], forMs: undefined }));
    assert.doesNotThrow(() => checkCommand({ command: null, forMs: 1_000 }));
  });
});
