/** `queenctl lease inspect` end to end: reads a lease without shortening it. */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import type { Simulator } from '../../tools/simulator/index.js';
import { runInProcess } from '../support/in-process.js';
import { sharedSimulator } from '../support/shared.js';

const simulator = sharedSimulator();
let sim: Simulator;
beforeEach(() => {
  sim = simulator();
});
const inspect = (args: string[], options: Parameters<typeof runInProcess>[1] = {}) =>
  runInProcess(['lease', 'inspect', '--server', sim.url, ...args], options);

/**
 * The least a lease minted with `seconds` at local time `mintedAt` can be said to have left now:
 * the time since the mint (however long a busy machine took to start queenctl) taken off, and
 * what reading the broker's clock at the middle of the range a Date header allows may take off
 * too: a second, and half the round trip, itself within the time since the mint
 * (docs/broker.md#date-header-lag).
 */
const leastLeftMs = (seconds: number, mintedAt: number): number => {
  const sinceMintMs = Date.now() - mintedAt;
  return seconds * 1000 - sinceMintMs - 1000 - sinceMintMs / 2;
};

describe('lease inspect', () => {
  it('reports the earliest expiry of a multi-partition lease and changes no row', async () => {
    const mintedAt = Date.now();
    const leaseId = sim.mint({ partitions: [{ seconds: 300 }, { seconds: 120 }, { seconds: 200 }] });
    const rowsBefore = sim.lease(leaseId)?.rows.map((row) => row.expiresAt);
    const result = await inspect([leaseId]);
    assert.equal(result.code, 0, result.stderr);
    const record = JSON.parse(result.stdout);
    assert.deepEqual(Object.keys(record), ['leaseId', 'live', 'held', 'expiresAt', 'remainingMs']);
    assert.equal(record.live, true);
    assert.equal(record.held, 3);
    assert.equal(Date.parse(record.expiresAt), Math.min(...(rowsBefore ?? [])));
    assert.deepEqual(
      sim.lease(leaseId)?.rows.map((row) => row.expiresAt),
      rowsBefore,
      'no deadline moved',
    );
    assert.deepEqual(JSON.parse(sim.log[0]?.body ?? ''), { seconds: 1 });
    // 120 s on the broker's clock, read through a Date header of one-second resolution.
    const least = leastLeftMs(120, mintedAt);
    assert.ok(record.remainingMs >= least && record.remainingMs <= 120_500, `${record.remainingMs}, least ${least}`);
  });

  for (const offsetMs of [3_600_000, -3_600_000]) {
    const broker = offsetMs > 0 ? 'an hour ahead' : 'an hour behind';
    it(`measures remaining time on the broker's clock (broker ${broker})`, async () => {
      sim.setClockOffset(offsetMs);
      const mintedAt = Date.now();
      const leaseId = sim.mint({ seconds: 90 });
      const record = JSON.parse((await inspect([leaseId])).stdout);
      const least = leastLeftMs(90, mintedAt);
      assert.ok(record.remainingMs >= least && record.remainingMs <= 90_500, `${record.remainingMs}, least ${least}`);
    });
  }

  const gone: Array<[string, (id: string) => void]> = [
    ['an unknown', () => {}],
    ['an expired', (id) => sim.expire(id)],
    ['a released', (id) => sim.release(id)],
  ];
  for (const [name, make] of gone) {
    it(`${name} lease is live: false, held 0, exit 4`, async () => {
      const leaseId = name === 'an unknown' ? 'never-minted' : sim.mint();
      make(leaseId);
      const result = await inspect([leaseId]);
      assert.equal(result.code, 4);
      assert.deepEqual(JSON.parse(result.stdout), {
        leaseId,
        live: false,
        held: 0,
        expiresAt: null,
        remainingMs: null,
      });
      assert.match(result.stderr, /is not held/);
    });
  }

  it('does not resurrect an expired lease', async () => {
    const leaseId = sim.mint();
    sim.expire(leaseId);
    const before = sim.lease(leaseId)?.rows[0]?.expiresAt;
    await inspect([leaseId]);
    assert.equal(sim.lease(leaseId)?.rows[0]?.expiresAt, before);
  });

  it('several ids give an array in input order', async () => {
    const ids = [sim.mint({ partitions: 2 }), 'gone', sim.mint()];
    const result = await inspect([...ids, '-o', 'json']);
    assert.equal(result.code, 4);
    const records = JSON.parse(result.stdout);
    assert.deepEqual(
      records.map((r: { leaseId: string }) => r.leaseId),
      ids,
    );
    assert.deepEqual(
      records.map((r: { held: number }) => r.held),
      [2, 0, 1],
    );
  });

  it('an older broker: live and expiry known, held null, its reason shown', async () => {
    sim.setShape('array');
    const leaseId = sim.mint({ partitions: 2 });
    const live = JSON.parse((await inspect([leaseId])).stdout);
    assert.equal(live.live, true);
    assert.equal(live.held, null);
    assert.ok(live.expiresAt);
    const gone = await inspect(['gone']);
    assert.equal(gone.code, 4);
    assert.equal(JSON.parse(gone.stdout).reason, 'Lease not found');
  });

  it('a table for people: live, held, expiry and remaining as 1m58s', async () => {
    const leaseId = sim.mint({ seconds: 119, partitions: 2 });
    const result = await inspect([leaseId, '-o', 'table']);
    assert.match(result.stdout, /LEASE ID\s+LIVE\s+HELD\s+EXPIRES AT\s+REMAINING/);
    assert.match(result.stdout, new RegExp(`${leaseId}\\s+yes\\s+2\\s+\\S+\\s+1m5[6-9]s`));
  });

  it('exits 3 on a refusal and 2 on a broker error, with nothing on stdout', async () => {
    sim.setTokens({ ro: { role: 'read-only' } });
    const refused = await inspect([sim.mint(), '--token', 'ro']);
    assert.equal(refused.code, 3);
    assert.equal(refused.stdout, '');
    sim.setTokens(null);
    sim.inject({ kind: 'status', status: 500, body: '{"error":"renew failed: x"}' });
    const failed = await inspect([sim.mint()]);
    assert.equal(failed.code, 2);
    assert.equal(failed.stdout, '');
  });

  it('--help says it uses the extend route with one second, and the last-second edge', async () => {
    const result = await runInProcess(['lease', 'inspect', '--help']);
    assert.match(result.stdout, /\{"seconds": 1\}/);
    assert.match(result.stdout, /last second gets at most one more second/);
  });
});
