/**
 * `queenctl lease extend` end to end: the command run in-process against the simulator over
 * loopback, one test per rule of the contract it must keep. (A hangup through the kernel is in
 * test/process/signals.test.ts.)
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import type { Simulator } from '../../tools/simulator/index.js';
import { runInProcess, type InProcessOptions } from '../support/in-process.js';
import { sharedSimulator } from '../support/shared.js';

const SIX_KEYS = ['leaseId', 'success', 'renewed', 'newExpiresAt', 'expiresAt', 'lease_expires_at'];

const simulator = sharedSimulator();
let sim: Simulator;
beforeEach(() => {
  sim = simulator();
});
const extend = (args: string[], options: InProcessOptions = {}) =>
  runInProcess(['lease', 'extend', '--server', sim.url, ...args], options);

describe('lease extend: a renewal', () => {
  it('renews, prints the six keys as JSON in a pipe, and exits 0', async () => {
    const leaseId = sim.mint({ seconds: 30 });
    const result = await extend([leaseId, '--seconds', '120']);
    assert.equal(result.code, 0, result.stderr);
    const record = JSON.parse(result.stdout);
    assert.deepEqual(Object.keys(record), SIX_KEYS);
    assert.equal(record.leaseId, leaseId);
    assert.equal(record.renewed, 1);
    assert.equal(record.success, true);
    assert.equal(record.expiresAt, record.newExpiresAt);
    assert.equal(record.lease_expires_at, record.newExpiresAt);
    const row = sim.lease(leaseId)?.rows[0];
    assert.ok(row && row.expiresAt > sim.brokerNow() + 110_000, 'the simulator saw the deadline move');
    assert.equal(result.stderr, '');
  });

  it('always sends seconds explicitly: 60 by default, the flag otherwise', async () => {
    const leaseId = sim.mint();
    await extend([leaseId]);
    await extend([leaseId, '--seconds', '300']);
    assert.deepEqual(
      sim.log.map((entry) => JSON.parse(entry.body)),
      [{ seconds: 60 }, { seconds: 300 }],
    );
  });

  it('counts every (partition, group) of a multi-partition lease', async () => {
    const leaseId = sim.mint({ partitions: 3 });
    const result = await extend([leaseId, '-o', 'json']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(JSON.parse(result.stdout).renewed, 3);
  });

  it('sends User-Agent queenctl/<version> and the bearer token', async () => {
    sim.setTokens({ 'rw-token': { role: 'read-write' } });
    const leaseId = sim.mint();
    const result = await extend([leaseId, '--token', 'rw-token']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(sim.log[0]?.authorization, 'Bearer rw-token');
    assert.match(sim.log[0]?.userAgent ?? '', /^queenctl\/\d+\.\d+\.\d+$/);
  });

  it('takes the server from QUEEN_SERVER and the token from QUEEN_TOKEN', async () => {
    sim.setTokens({ 'env-token': { role: 'read-write' } });
    const leaseId = sim.mint();
    const result = await runInProcess(['lease', 'extend', leaseId], {
      env: { QUEEN_SERVER: sim.url, QUEEN_TOKEN: 'env-token' },
    });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(sim.log[0]?.authorization, 'Bearer env-token');
  });
});

describe('lease extend: nothing renewed exits 4, whatever the HTTP status', () => {
  it('an unknown lease: HTTP 200, renewed 0, exit 4, and words an operator can act on', async () => {
    const result = await extend(['no-such-lease']);
    assert.equal(result.code, 4);
    const record = JSON.parse(result.stdout);
    assert.equal(record.renewed, 0);
    assert.equal(record.success, false);
    assert.equal(record.newExpiresAt, null);
    assert.match(result.stderr, /no-such-lease was not renewed/);
    assert.match(result.stderr, /expired, was released by an ack or nack, or belongs to another tenant/);
    assert.match(result.stderr, /Stop work that is not idempotent/);
    assert.match(result.stderr, /Do not ack without the lease id/);
  });

  it('a released lease exits 4', async () => {
    const leaseId = sim.mint();
    sim.release(leaseId);
    assert.equal((await extend([leaseId])).code, 4);
  });

  it('an expired lease exits 4 and is not resurrected', async () => {
    const leaseId = sim.mint();
    sim.expire(leaseId);
    const before = sim.lease(leaseId)?.rows[0]?.expiresAt;
    assert.equal((await extend([leaseId])).code, 4);
    assert.equal(sim.lease(leaseId)?.rows[0]?.expiresAt, before);
  });

  it("another tenant's lease exits 4", async () => {
    sim.setTokens({ 'tenant-b': { role: 'read-write', tenant: 'b' } });
    const leaseId = sim.mint({ tenant: 'a' });
    assert.equal((await extend([leaseId, '--token', 'tenant-b'])).code, 4);
  });

  it('success: true with renewed: 0 still exits 4', async () => {
    sim.inject({
      kind: 'body',
      body: JSON.stringify({
        leaseId: 'x',
        success: true,
        renewed: 0,
        newExpiresAt: null,
        expiresAt: null,
        lease_expires_at: null,
      }),
    });
    const result = await extend(['x']);
    assert.equal(result.code, 4);
    assert.equal(JSON.parse(result.stdout).success, true, 'the keys are printed as the broker sent them');
  });
});

describe('lease extend: the older array-shaped broker', () => {
  it('maps a renewal to renewed 1 with the expiry in all three keys', async () => {
    sim.setShape('array');
    const leaseId = sim.mint({ partitions: 2 });
    const result = await extend([leaseId, '-o', 'json']);
    assert.equal(result.code, 0, result.stderr);
    const record = JSON.parse(result.stdout);
    assert.equal(record.renewed, 1);
    assert.match(record.expiresAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(record.newExpiresAt, record.expiresAt);
    assert.equal(record.lease_expires_at, record.expiresAt);
  });

  it("shows the broker's reason for a lease that is gone, and exits 4", async () => {
    sim.setShape('array');
    const leaseId = sim.mint();
    sim.expire(leaseId);
    const result = await extend([leaseId]);
    assert.equal(result.code, 4);
    assert.equal(JSON.parse(result.stdout).reason, 'Lease already expired');
    assert.match(result.stderr, /broker said: Lease already expired/);
  });

  it('matches concurrent answers by lease id, not index', async () => {
    sim.setShape('array');
    const ids = Array.from({ length: 20 }, () => sim.mint());
    const result = await extend(['-', '-o', 'ndjson'], { stdin: [...ids, 'gone'].join('\n') });
    assert.equal(result.code, 4, result.stderr);
    const records = result.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      records.map((r) => r.leaseId),
      [...ids, 'gone'],
    );
    assert.deepEqual(
      records.map((r) => r.renewed),
      [...ids.map(() => 1), 0],
    );
  });
});

describe('lease extend: refusals and broker failures', () => {
  it("no token on an auth broker: exit 3 with the broker's words", async () => {
    sim.setTokens({ good: { role: 'read-write' } });
    const result = await extend([sim.mint()]);
    assert.equal(result.code, 3);
    assert.match(result.stderr, /HTTP 401: Authentication required/);
    assert.equal(result.stdout, '');
  });

  it('a read-only token: exit 3, not retried', async () => {
    sim.setTokens({ ro: { role: 'read-only' } });
    const result = await extend([sim.mint(), '--token', 'ro']);
    assert.equal(result.code, 3);
    assert.match(result.stderr, /read-write role/);
    assert.equal(sim.log.length, 1);
  });

  it('503 twice then a renewal: retried, exit 0', async () => {
    const leaseId = sim.mint();
    sim.inject({ kind: 'status', status: 503, times: 2 });
    const result = await extend([leaseId]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(sim.log.length, 3);
    assert.match(result.stderr, /retry 1 of 2/);
  });

  it('500 pool is retried; --retries 0 gives up at once with exit 2', async () => {
    sim.inject({ kind: 'status', status: 500, body: '{"error":"pool"}' });
    const result = await extend([sim.mint(), '--retries', '0']);
    assert.equal(result.code, 2);
    assert.equal(sim.log.length, 1);
    assert.match(result.stderr, /no database connection/);
  });

  it('500 renew failed: exit 2, not retried, nothing on stdout', async () => {
    sim.inject({ kind: 'status', status: 500, body: '{"error":"renew failed: deadlock detected"}' });
    const result = await extend([sim.mint()]);
    assert.equal(result.code, 2);
    assert.equal(sim.log.length, 1);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /renew failed: deadlock detected/);
  });

  it('a 200 that is not JSON: exit 2 with an excerpt, nothing on stdout', async () => {
    sim.inject({ kind: 'body', body: '<html>gateway</html>' });
    const result = await extend([sim.mint()]);
    assert.equal(result.code, 2);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /not JSON.*<html>gateway<\/html>/);
    assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack trace');
  });

  it('no answer within --timeout: exit 2, and it says so', async () => {
    sim.inject({ kind: 'hang' });
    const result = await extend([sim.mint(), '--timeout', '300ms', '--retries', '0']);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /no answer from .* within 300ms/);
  });

  it('nothing listening: exit 2 with what to check', async () => {
    const result = await runInProcess(['lease', 'extend', 'x', '--server', 'http://127.0.0.1:9', '--retries', '0']);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /connection refused/);
    assert.match(result.stderr, /--server, QUEEN_SERVER or the context/);
  });
});

describe('lease extend: several leases', () => {
  it('prints an array in input order', async () => {
    const ids = [sim.mint(), 'gone-1', sim.mint({ partitions: 2 })];
    const result = await extend([...ids, '-o', 'json']);
    assert.equal(result.code, 4);
    const records = JSON.parse(result.stdout);
    assert.deepEqual(
      records.map((r: { leaseId: string }) => r.leaseId),
      ids,
    );
    assert.deepEqual(
      records.map((r: { renewed: number }) => r.renewed),
      [1, 0, 2],
    );
  });

  it('a broker error on one lease outranks a lost one: exit 2, and the failed one has renewed null', async () => {
    const failing = sim.mint();
    sim.inject({ kind: 'status', status: 500, body: '{"error":"renew failed: x"}', leaseId: failing });
    const result = await extend([sim.mint(), 'gone', failing, '-o', 'json']);
    assert.equal(result.code, 2);
    const records = JSON.parse(result.stdout);
    assert.equal(records[2].renewed, null);
    assert.match(records[2].error, /renew failed/);
  });

  it('an auth refusal outranks everything: exit 3', async () => {
    sim.setTokens({ ro: { role: 'read-only' } });
    const result = await extend(['a', 'b', '--token', 'ro', '-o', 'json']);
    assert.equal(result.code, 3);
  });

  it('reads hundreds of ids from - and streams ndjson in input order', async () => {
    // 500 ids through the default concurrency: answers come back out of order many times over.
    const ids = Array.from({ length: 500 }, (_, i) => (i % 125 === 7 ? `gone-${i}` : sim.mint()));
    const result = await extend(['-', '-o', 'ndjson'], { stdin: `${ids.join('\n')}\n` });
    assert.equal(result.code, 4, result.stderr);
    const lines = result.stdout.trim().split('\n');
    assert.equal(lines.length, ids.length);
    assert.deepEqual(
      lines.map((line) => JSON.parse(line).leaseId),
      ids,
    );
    assert.match(result.stderr, /4 leases were not renewed/);
  });

  it('stops sending once a whole window of requests found the broker down, and says what was not sent', async () => {
    sim.inject({ kind: 'hang' });
    const ids = Array.from({ length: 40 }, (_, i) => `lease-${i}`);
    const result = await extend(['-', '-o', 'ndjson', '--timeout', '200ms', '--retries', '0', '--concurrency', '4'], {
      stdin: ids.join('\n'),
    });
    sim.clearFaults();
    assert.equal(result.code, 2, result.stderr);
    assert.ok(sim.log.length < 12, `${sim.log.length} requests sent to a broker that never answers`);
    assert.match(result.stderr, /the broker kept failing; the remaining lease ids were not sent/);
    for (const line of result.stdout.trim().split('\n')) assert.equal(JSON.parse(line).renewed, null);
  });

  it('ids read from - print an array even when there is one', async () => {
    const result = await extend(['-', '-o', 'json'], { stdin: sim.mint() });
    assert.ok(Array.isArray(JSON.parse(result.stdout)));
  });
});

describe('lease extend: output formats', () => {
  it('-o yaml parses back to the six keys', async () => {
    const result = await extend([sim.mint(), '-o', 'yaml']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(Object.keys(parseYaml(result.stdout)), SIX_KEYS);
  });

  it('-o yaml with several ids is a sequence', async () => {
    const result = await extend([sim.mint(), 'gone', '-o', 'yaml']);
    const records = parseYaml(result.stdout);
    assert.equal(records.length, 2);
    assert.equal(records[1].renewed, 0);
  });

  it('-o table names renewed and the three expiry keys, and how long is left', async () => {
    const leaseId = sim.mint();
    const result = await extend([leaseId, '--seconds', '120', '-o', 'table']);
    assert.equal(result.code, 0, result.stderr);
    for (const key of ['RENEWED', 'newExpiresAt', 'expiresAt', 'lease_expires_at', 'LEFT'])
      assert.match(result.stdout, new RegExp(key));
    assert.match(result.stdout, new RegExp(`${leaseId}\\s+1\\s`));
    assert.match(result.stdout, /\s(1m59s|2m00s)\s*$/m);
  });

  it('-o table marks a lease that is gone', async () => {
    const result = await extend(['gone', '-o', 'table']);
    assert.equal(result.code, 4);
    assert.match(result.stdout, /NOT RENEWED/);
  });

  it('--no-headers drops the header row', async () => {
    const result = await extend([sim.mint(), '-o', 'table', '--no-headers']);
    assert.doesNotMatch(result.stdout, /RENEWED/);
  });

  it('-o wide adds what the broker said and its shape', async () => {
    sim.setShape('array');
    const result = await extend(['gone', '-o', 'wide']);
    assert.match(result.stdout, /Lease not found/);
    assert.match(result.stdout, /array/);
  });

  it('-q without -o prints nothing on stdout, and the exit code still tells', async () => {
    const result = await extend(['gone', '-q']);
    assert.equal(result.code, 4);
    assert.equal(result.stdout, '');
  });
});

describe('lease extend: bad input sends nothing', () => {
  const cases: Array<[string, string[], RegExp]> = [
    ['--seconds 0', ['x', '--seconds', '0'], /--seconds takes whole seconds/],
    ['--seconds 2147483648', ['x', '--seconds', '2147483648'], /--seconds/],
    ['--seconds 1.5', ['x', '--seconds', '1.5'], /--seconds/],
    ['an empty id', [''], /is empty/],
    ['a whitespace id', ['  '], /is empty/],
    ['an id with a control character', ['a\u0007b'], /control characters/],
    ['a 10,000-character id', ['x'.repeat(10_000)], /10000 characters long/],
    ['an unknown flag', ['x', '--frobnicate'], /unknown option/],
    ['an unknown output', ['x', '-o', 'xml'], /-o\/--output takes/],
    ['a bad --timeout', ['x', '--timeout', 'soon'], /--timeout takes a duration/],
    ['an unreadable --token-file', ['x', '--token-file', '/nonexistent/token'], /cannot read --token-file/],
    ['no id', [], /missing required argument/],
    ['a server that is not a URL', ['x', '--server', 'localhost:6632x'], /http:\/\/ or https:\/\/|not a broker URL/],
  ];
  for (const [name, args, message] of cases) {
    it(`${name}: exit 1, a clear message, no request`, async () => {
      const result = await runInProcess([
        'lease',
        'extend',
        ...args,
        ...(args.includes('--server') ? [] : ['--server', sim.url]),
      ]);
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, message);
      assert.equal(result.stdout, '');
      assert.equal(sim.log.length, 0);
    });
  }

  it('- with empty stdin: exit 1, no request', async () => {
    const result = await extend(['-'], { stdin: '' });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /no lease ids on standard input/);
    assert.equal(sim.log.length, 0);
  });

  it('ids holding / ? # % and .. arrive percent-encoded as one id, on the extend route', async () => {
    const odd = ['a/b', 'q?x=1', 'frag#ment', '100%', '...', '../../health'];
    const result = await extend([...odd, '-o', 'json']);
    assert.equal(result.code, 4, result.stderr);
    // Sent concurrently: which arrives first is not fixed, that each arrives whole is.
    assert.deepEqual(sim.log.map((entry) => entry.leaseId).sort(), [...odd].sort());
    for (const entry of sim.log) assert.match(entry.rawPath, /^\/api\/v1\/lease\/[^/]+\/extend$/);
  });
});
