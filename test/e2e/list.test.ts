/**
 * `queenctl lease list` end to end, against the simulator's consumer-group routes: every rule of
 * docs/cli-contract.md#lease-list, run in-process. Each test has its own simulator: acked
 * partitions stay listed for the life of a broker. (A pipe into extend and signals:
 * test/process/list.test.ts.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { withSimulator } from '../support/shared.js';
import { type InProcessResult, runInProcess } from '../support/in-process.js';

const list = (sim: Simulator, args: string[], env: Record<string, string | undefined> = {}): Promise<InProcessResult> =>
  runInProcess(['lease', 'list', '--server', sim.url, ...args], { env });

interface ListRecord {
  leaseId: string;
  consumerGroup: string;
  queue: string;
  partitions: string[];
  live: boolean;
  expiresAt?: string | null;
  remainingMs?: number | null;
  held?: number | null;
}

function records(result: InProcessResult): ListRecord[] {
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout) as ListRecord[];
}

/** Orders p1, p2 (queue mode, one pop), billing on p2, analytics on 12 partitions, invoices x. */
function scene(sim: Simulator): { queueMode: string; billing: string; analytics: string; invoices: string } {
  return {
    queueMode: sim.mint({ queue: 'orders', partitions: [{ partition: 'p1' }, { partition: 'p2' }], seconds: 120 }),
    billing: sim.mint({ queue: 'orders', group: 'billing', partitions: [{ partition: 'p2' }], seconds: 300 }),
    analytics: sim.mint({ queue: 'orders', group: 'analytics', partitions: 12, seconds: 600 }),
    invoices: sim.mint({ queue: 'invoices', partitions: [{ partition: 'x' }], seconds: 60 }),
  };
}

const groupReads = (sim: Simulator): string[] =>
  sim.log.filter((entry) => entry.method === 'GET').map((entry) => entry.rawPath);

// At most 8 at once: in npm test's e2e group (scripts/test-files.mjs) every test here also runs the
// root beforeEach hooks of the other files, and Node 20's runner adds an abort listener to a hook's
// signal for each run of it in progress: 11 at once printed MaxListenersExceededWarning (issue 33).
describe('lease list', { concurrency: 8 }, () => {
  it('one record per lease id, partitions gathered, sorted by group, queue, partition; reads only', () =>
    withSimulator(async (sim) => {
      const ids = scene(sim);
      const found = records(await list(sim, ['-o', 'json']));
      assert.deepEqual(
        found.map((record) => [record.consumerGroup, record.queue, record.leaseId]),
        [
          ['__QUEUE_MODE__', 'invoices', ids.invoices],
          ['__QUEUE_MODE__', 'orders', ids.queueMode],
          ['analytics', 'orders', ids.analytics],
          ['billing', 'orders', ids.billing],
        ],
      );
      assert.deepEqual(found[1], {
        leaseId: ids.queueMode,
        consumerGroup: '__QUEUE_MODE__',
        queue: 'orders',
        partitions: ['p1', 'p2'],
        live: true,
      });
      assert.deepEqual(found[2]?.partitions.slice(0, 3), ['p1', 'p2', 'p3'], 'natural order: p2 before p10');
      assert.equal(found[2]?.partitions.at(-1), 'p12');
      assert.ok(
        sim.log.every((entry) => entry.method === 'GET'),
        'listing renews nothing',
      );
      assert.deepEqual(groupReads(sim).sort(), [
        '/api/v1/consumer-groups',
        '/api/v1/consumer-groups/__QUEUE_MODE__',
        '/api/v1/consumer-groups/analytics',
        '/api/v1/consumer-groups/billing',
      ]);
    }));

  it('--group reads only the named groups (no group list); --queue and --partition filter, and combine', () =>
    withSimulator(async (sim) => {
      const ids = scene(sim);
      const billing = records(await list(sim, ['--group', 'billing', '-o', 'json']));
      assert.deepEqual(
        billing.map((record) => record.leaseId),
        [ids.billing],
      );
      assert.deepEqual(groupReads(sim), ['/api/v1/consumer-groups/billing']);

      const invoices = records(await list(sim, ['--queue', 'invoices', '-o', 'json']));
      assert.deepEqual(
        invoices.map((record) => record.leaseId),
        [ids.invoices],
      );

      const p2 = records(await list(sim, ['--partition', 'p2', '-o', 'json']));
      assert.deepEqual(
        p2.map((record) => record.leaseId),
        [ids.queueMode, ids.analytics, ids.billing],
        'every lease holding p2, whatever its group',
      );

      const both = records(
        await list(sim, ['--group', 'analytics', '--group', '__QUEUE_MODE__', '--partition', 'p12', '-o', 'json']),
      );
      assert.deepEqual(
        both.map((record) => record.leaseId),
        [ids.analytics],
        'repeated --group: any of them; with --partition: both must hold',
      );

      const none = records(await list(sim, ['--queue', 'invoices', '--partition', 'p1', '-o', 'json']));
      assert.deepEqual(none, []);
    }));

  it('--all adds a stale holder as live: false; an acked partition is never listed', () =>
    withSimulator(async (sim) => {
      const stale = sim.mint({ queue: 'orders', partitions: [{ partition: 'p1' }], seconds: 120 });
      const acked = sim.mint({ queue: 'orders', partitions: [{ partition: 'p2' }], seconds: 120 });
      const held = sim.mint({ queue: 'orders', partitions: [{ partition: 'p3' }], seconds: 120 });
      sim.expire(stale);
      sim.release(acked);
      const live = records(await list(sim, ['-o', 'json']));
      assert.deepEqual(
        live.map((record) => record.leaseId),
        [held],
      );
      const all = records(await list(sim, ['--all', '-o', 'json']));
      assert.deepEqual(
        all.map((record) => [record.leaseId, record.live]),
        [
          [stale, false],
          [held, true],
        ],
      );
      assert.ok(!all.some((record) => record.partitions.includes('p2')), 'the acked partition has no holder');
    }));

  it('--expiry adds the expiry as inspect probes it, and leaves every deadline where it was', () =>
    withSimulator(async (sim) => {
      const ids = scene(sim);
      const before = Object.values(ids).map((id) => sim.lease(id)?.rows.map((row) => row.expiresAt));
      const found = records(await list(sim, ['--expiry', '-o', 'json']));
      const billing = found.find((record) => record.leaseId === ids.billing);
      assert.deepEqual(Object.keys(billing ?? {}), [
        'leaseId',
        'consumerGroup',
        'queue',
        'partitions',
        'live',
        'expiresAt',
        'remainingMs',
        'held',
      ]);
      assert.equal(billing?.held, 1);
      assert.equal(Date.parse(billing?.expiresAt ?? ''), sim.lease(ids.billing)?.rows[0]?.expiresAt);
      assert.ok((billing?.remainingMs ?? 0) > 240_000 && (billing?.remainingMs ?? 0) <= 301_000);
      assert.equal(found.find((record) => record.leaseId === ids.analytics)?.held, 12);
      const after = Object.values(ids).map((id) => sim.lease(id)?.rows.map((row) => row.expiresAt));
      assert.deepEqual(after, before, 'the one-second probe moved no deadline');
      const probes = sim.log.filter((entry) => entry.method === 'POST');
      assert.equal(probes.length, 4);
      assert.ok(probes.every((entry) => entry.body === '{"seconds":1}'));
    }));

  it('--expiry finds a lease gone since the listing: live false, held 0, exit 0', () =>
    withSimulator(async (sim) => {
      const leaseId = sim.mint({ queue: 'orders', partitions: [{ partition: 'p1' }], seconds: 120 });
      // Gone for the extend route (another tenant's, as far as this token is concerned) but
      // still active in the group's answer: what a race between the two requests looks like.
      sim.inject({ kind: 'body', status: 200, body: JSON.stringify(notRenewed(leaseId)), leaseId });
      const [record] = records(await list(sim, ['--expiry', '-o', 'json']));
      assert.equal(record?.live, false);
      assert.equal(record?.held, 0);
      assert.equal(record?.remainingMs, null);
    }));

  it('--expiring-within keeps the leases that expire within the duration', () =>
    withSimulator(async (sim) => {
      const ids = scene(sim);
      const soon = records(await list(sim, ['--expiring-within', '3m', '-o', 'json']));
      assert.deepEqual(
        soon.map((record) => record.leaseId),
        [ids.invoices, ids.queueMode],
      );
      assert.ok(soon.every((record) => typeof record.remainingMs === 'number'));
      const none = await list(sim, ['--expiring-within', '10s', '-o', 'json']);
      assert.deepEqual(records(none), []);
      assert.match(none.stderr, /no held leases were found \(expiring within 10s\)/);
    }));

  it('a read-only token lists, but --expiry exits 3 saying the probe needs the read-write role', () =>
    withSimulator(async (sim) => {
      scene(sim);
      sim.setTokens({ reader: { role: 'read-only' } });
      const listed = records(await list(sim, ['-o', 'json'], { QUEEN_TOKEN: 'reader' }));
      assert.equal(listed.length, 4);
      const probed = await list(sim, ['--expiry', '-o', 'json'], { QUEEN_TOKEN: 'reader' });
      assert.equal(probed.code, 3, probed.stderr);
      assert.equal(probed.stdout, '', 'nothing on stdout that could pass for a listing with expiries');
      assert.match(probed.stderr, /read-write role/);
      assert.match(probed.stderr, /drop --expiry/);
    }));

  it('no token on a broker that wants one: exit 3, nothing on stdout', () =>
    withSimulator(async (sim) => {
      scene(sim);
      sim.setTokens({ reader: { role: 'read-only' } });
      const result = await list(sim, ['-o', 'json']);
      assert.equal(result.code, 3, result.stderr);
      assert.equal(result.stdout, '');
      assert.match(result.stderr, /HTTP 401/);
    }));

  it('an unknown group is nothing found: exit 0, [] in JSON, a sentence on stderr', () =>
    withSimulator(async (sim) => {
      scene(sim);
      const result = await list(sim, ['--group', 'nobody', '-o', 'json']);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, '[]\n');
      assert.match(result.stderr, /^queenctl: no held leases were found \(group nobody\)\n$/);
      const quiet = await list(sim, ['--group', 'nobody', '-o', 'json', '-q']);
      assert.equal(quiet.stderr, '', '-q: nothing but errors');
      const named = await list(sim, ['--group', 'nobody', '-o', 'name']);
      assert.equal(named.stdout, '');
    }));

  it('one record is still an array in JSON; ndjson is a record per line; yaml a sequence', () =>
    withSimulator(async (sim) => {
      const ids = scene(sim);
      const one = await list(sim, ['--group', 'billing', '-o', 'json']);
      assert.ok(Array.isArray(JSON.parse(one.stdout)));
      const lines = (await list(sim, ['-o', 'ndjson'])).stdout.trim().split('\n');
      assert.deepEqual(
        lines.map((line) => (JSON.parse(line) as ListRecord).leaseId),
        [ids.invoices, ids.queueMode, ids.analytics, ids.billing],
      );
      const yaml = await list(sim, ['--group', 'billing', '-o', 'yaml']);
      assert.match(yaml.stdout, /^- leaseId: /);
    }));

  it('the table: (queue mode), a long partition list shortened, EXPIRES AT and REMAINING with --expiry', () =>
    withSimulator(async (sim) => {
      scene(sim);
      const table = await list(sim, ['-o', 'table']);
      assert.equal(table.code, 0, table.stderr);
      const [header, ...rows] = table.stdout.trimEnd().split('\n');
      assert.match(header ?? '', /^LEASE ID\s+GROUP\s+QUEUE\s+PARTITIONS\s+LIVE$/);
      assert.match(rows[0] ?? '', /\(queue mode\)\s+invoices\s+x\s+yes$/);
      assert.match(rows[2] ?? '', /analytics\s+orders\s+p1, p2, p3, \+9 more\s+yes$/);
      const wide = await list(sim, ['-o', 'wide']);
      assert.match(wide.stdout, /p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12/);
      const expiry = await list(sim, ['--expiry', '-o', 'table']);
      assert.match(expiry.stdout.split('\n')[0] ?? '', /LIVE\s+EXPIRES AT\s+REMAINING$/);
      assert.match(expiry.stdout, /billing\s+orders\s+p2\s+yes\s+\S+Z\s+[45]m\d\ds/);
    }));

  it('the broker down: exit 2, nothing on stdout', async () => {
    const sim = await startSimulator();
    const url = sim.url;
    await sim.close();
    const result = await runInProcess(['lease', 'list', '--server', url, '-o', 'json', '--retries', '0']);
    assert.equal(result.code, 2, result.stderr);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /could not list its consumer groups|refused/);
  });

  it('an answer outside the contract is exit 2 quoting it, never a crash', () =>
    withSimulator(async (sim) => {
      scene(sim);
      sim.inject({ kind: 'body', status: 200, body: '{"orders":{"partitions":[{"partition":"p1","workerId":7}]}}' });
      const result = await list(sim, ['--group', 'billing', '-o', 'json']);
      assert.equal(result.code, 2, result.stderr);
      assert.equal(result.stdout, '');
      assert.match(result.stderr, /outside the consumer-group contract: workerId of partition "p1"/);
      assert.doesNotMatch(result.stderr, /internal error|at .*\.js/);
    }));

  it('a 503 on the group list is retried, then the listing works', () =>
    withSimulator(async (sim) => {
      const ids = scene(sim);
      sim.inject({ kind: 'status', status: 503, times: 1 });
      const found = records(await list(sim, ['--queue', 'invoices', '-o', 'json']));
      assert.deepEqual(
        found.map((record) => record.leaseId),
        [ids.invoices],
      );
    }));

  it('5,000 partitions of one group: one request for the group, 5,000 records', (t) =>
    withSimulator(async (sim) => {
      sim.mintMany(
        Array.from({ length: 5_000 }, (_, i) => ({
          queue: 'orders',
          group: 'bulk',
          partitions: [{ partition: `p${i}` }],
          seconds: 600,
        })),
      );
      const started = performance.now();
      const found = records(await list(sim, ['--group', 'bulk', '-o', 'json']));
      t.diagnostic(`5,000 leases listed in ${Math.round(performance.now() - started)} ms (process included)`);
      assert.equal(found.length, 5_000);
      assert.equal(groupReads(sim).length, 1);
      assert.deepEqual(found[0]?.partitions, ['p0']);
      assert.deepEqual(found.at(-1)?.partitions, ['p4999']);
    }));

  it('-o name elsewhere: extend prints only the ids it renewed; watch refuses it', () =>
    withSimulator(async (sim) => {
      const held = sim.mint({ seconds: 120 });
      const gone = sim.mint({ seconds: 120 });
      sim.release(gone);
      const extended = await runInProcess(['lease', 'extend', held, gone, '--server', sim.url, '-o', 'name']);
      assert.equal(extended.code, 4, extended.stderr);
      assert.equal(extended.stdout, `${held}\n`);
      const watched = await runInProcess(['lease', 'watch', held, '--server', sim.url, '-o', 'name']);
      assert.equal(watched.code, 1);
      assert.match(watched.stderr, /-o name prints lease ids, and watch prints events/);
    }));
});

function notRenewed(leaseId: string): Record<string, unknown> {
  return {
    leaseId,
    success: false,
    renewed: 0,
    newExpiresAt: null,
    expiresAt: null,
    lease_expires_at: null,
  };
}
