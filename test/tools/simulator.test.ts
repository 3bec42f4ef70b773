/**
 * The simulator's rules, checked over real HTTP on loopback. Rules come from docs/broker.md: the
 * route's contract (documented shape), the older broker as recorded (array shape,
 * test/fixtures/real-broker-extend.txt), and the consumer-group routes as recorded
 * (test/fixtures/real-broker-consumer-groups.txt). Leases expire by advancing a fake clock, never
 * by sleeping.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { after, before, describe, it } from 'node:test';
import {
  type LeaseSpec,
  SimulatorControl,
  SimulatorControlError,
  startSimulator,
  type Simulator,
  type SimulatorOptions,
  type WireGroup,
  type WireGroupSummary,
} from '../../tools/simulator/index.js';
import { runProcess, startProcess } from '../support/cli.js';
import type { RenewalResult } from '../../src/broker/contract.js';

const T0 = Date.parse('2026-07-30T11:00:00.000Z');
const S = 1000;

interface FakeClock {
  now: () => number;
  advance(ms: number): void;
}

function fakeClock(start = T0): FakeClock {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
  };
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

function extendUrl(sim: Simulator, leaseId: string): string {
  return `${sim.url}/api/v1/lease/${encodeURIComponent(leaseId)}/extend`;
}

async function request(url: string, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(url, { redirect: 'manual', ...init });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** POST the extend route; `body` undefined sends no body at all. */
function extend(sim: Simulator, leaseId: string, body?: string, token?: string): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  return request(extendUrl(sim, leaseId), { method: 'POST', headers, ...(body !== undefined && { body }) });
}

/** The documented answer: the six keys queenctl's parser reads. */
type Documented = RenewalResult;

interface ArrayResult {
  error: string | null;
  expiresAt: string | null;
  index: number;
  leaseId: string;
  success: boolean;
}

function documented(answer: Answer): Documented {
  assert.equal(answer.status, 200, answer.text);
  return answer.json as Documented;
}

function arrayResult(answer: Answer): ArrayResult {
  assert.equal(answer.status, 200, answer.text);
  const results = answer.json as ArrayResult[];
  assert.equal(results.length, 1);
  const [result] = results;
  assert.ok(result);
  return result;
}

const iso = (ms: number): string => new Date(ms).toISOString();
const isoMicro = (ms: number): string => iso(ms).replace('Z', '000Z');

function expiries(sim: Simulator, leaseId: string): number[] {
  return sim.lease(leaseId)?.rows.map((row) => row.expiresAt) ?? [];
}

/** Waits for `check`; the limit only turns a hang into a failure, however busy the machine. */
async function waitFor(check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A fresh simulator on a fake clock for one describe block, closed after it. */
function useSimulator(opts: SimulatorOptions = {}): { sim: () => Simulator; clock: FakeClock } {
  const clock = fakeClock();
  let sim: Simulator | undefined;
  before(async () => {
    sim = await startSimulator({ now: clock.now, ...opts });
  });
  after(async () => {
    await sim?.close();
  });
  return {
    sim: () => {
      assert.ok(sim, 'simulator not started');
      return sim;
    },
    clock,
  };
}

describe('documented shape (docs/broker.md#documented-object)', () => {
  const { sim, clock } = useSimulator();

  it('falls back to 60 seconds for an empty, non-JSON, seconds-less or non-number body', async () => {
    const bodies = [
      undefined,
      '',
      'hello',
      '{}',
      '{"seconds":"120"}',
      '{"seconds":null}',
      '[]',
      'null',
      '{"seconds":true}',
    ];
    for (const body of bodies) {
      const id = sim().mint({ seconds: 30 });
      const answer = documented(await extend(sim(), id, body));
      assert.equal(answer.renewed, 1, `body ${body}`);
      assert.equal(answer.expiresAt, isoMicro(clock.now() + 60 * S), `body ${body}`);
    }
  });

  it('floors fractions and clamps values below 1 to 1', async () => {
    const floored = sim().mint({ seconds: 30 });
    assert.equal(documented(await extend(sim(), floored, '{"seconds":90.9}')).expiresAt, isoMicro(T0 + 90 * S));
    for (const seconds of [0, -5, 0.5]) {
      const id = sim().mint({ seconds: 0.25 });
      const answer = documented(await extend(sim(), id, JSON.stringify({ seconds })));
      assert.equal(answer.expiresAt, isoMicro(T0 + 1 * S), `seconds ${seconds}`);
    }
  });

  it('takes the later of the current expiry and now + seconds', async () => {
    const id = sim().mint({ seconds: 300 });
    const answer = documented(await extend(sim(), id, '{"seconds":120}'));
    assert.equal(answer.renewed, 1);
    assert.equal(answer.success, true);
    assert.equal(answer.expiresAt, isoMicro(T0 + 300 * S));
    assert.deepEqual(expiries(sim(), id), [T0 + 300 * S]);
  });

  it('renews every live row of a multi-partition lease and reports the earliest expiry', async () => {
    const id = sim().mint({ partitions: [{ seconds: 100 }, { seconds: 10 }, { seconds: 50 }, { seconds: -1 }] });
    const answer = documented(await extend(sim(), id, '{"seconds":30}'));
    assert.equal(answer.renewed, 3);
    assert.equal(answer.expiresAt, isoMicro(T0 + 30 * S));
    assert.deepEqual(expiries(sim(), id), [T0 + 100 * S, T0 + 30 * S, T0 + 50 * S, T0 - 1 * S]);
  });

  it('answers the three expiry keys with one microsecond value, keys in the documented order', async () => {
    const id = sim().mint();
    const answer = await extend(sim(), id, '{"seconds":120}');
    assert.equal(answer.headers.get('content-type'), 'application/json');
    const body = documented(answer);
    assert.deepEqual(Object.keys(body), [
      'leaseId',
      'success',
      'renewed',
      'newExpiresAt',
      'expiresAt',
      'lease_expires_at',
    ]);
    assert.equal(body.leaseId, id);
    assert.equal(body.newExpiresAt, '2026-07-30T11:02:00.000000Z');
    assert.equal(body.expiresAt, body.newExpiresAt);
    assert.equal(body.lease_expires_at, body.newExpiresAt);
  });

  it('answers 200 with success false and null timestamps for unknown, released and expired leases', async () => {
    const released = sim().mint();
    sim().release(released);
    const expired = sim().mint({ seconds: 5 });
    sim().expire(expired);
    for (const id of ['00000000-0000-0000-0000-000000000000', released, expired]) {
      assert.deepEqual(documented(await extend(sim(), id, '{"seconds":120}')), {
        leaseId: id,
        success: false,
        renewed: 0,
        newExpiresAt: null,
        expiresAt: null,
        lease_expires_at: null,
      });
    }
  });

  it('does not resurrect a lease that expired by the clock', async () => {
    const id = sim().mint({ seconds: 30 });
    clock.advance(31 * S);
    try {
      assert.equal(documented(await extend(sim(), id, '{"seconds":120}')).renewed, 0);
      assert.deepEqual(expiries(sim(), id), [T0 + 30 * S]);
    } finally {
      clock.advance(-31 * S);
    }
  });

  it('answers 500 renew failed when the new expiry is out of range', async () => {
    const answer = await extend(sim(), sim().mint(), '{"seconds":1e300}');
    assert.equal(answer.status, 500);
    assert.match(String((answer.json as { error: string }).error), /^renew failed: /);
  });
});

describe('authentication and tenants', () => {
  const { sim } = useSimulator({
    tokens: {
      'rw-a': { role: 'read-write', tenant: 'a' },
      'admin-b': { role: 'admin', tenant: 'b' },
      ro: { role: 'read-only', tenant: 'a' },
      none: { role: '' },
    },
  });

  it('isolates tenants: another tenant renews nothing', async () => {
    const id = sim().mint({ tenant: 'a' });
    assert.equal(documented(await extend(sim(), id, '{"seconds":120}', 'admin-b')).renewed, 0);
    assert.equal(documented(await extend(sim(), id, '{"seconds":120}', 'rw-a')).renewed, 1);
  });

  it('answers 401 without or with an unknown token and 403 without the read-write role', async () => {
    const id = sim().mint({ tenant: 'a' });
    const cases: Array<[string | undefined, number, string]> = [
      [undefined, 401, 'Authentication required'],
      ['forged', 401, 'HS256 validation error: invalid signature'],
      ['ro', 403, 'Insufficient permissions'],
      ['none', 403, 'Insufficient permissions'],
    ];
    for (const [token, status, error] of cases) {
      const answer = await extend(sim(), id, '{"seconds":120}', token);
      assert.equal(answer.status, status, `token ${token}`);
      assert.deepEqual(answer.json, { error });
    }
    const basic = await request(extendUrl(sim(), id), {
      method: 'POST',
      headers: { authorization: 'Basic eDp5' },
      body: '{}',
    });
    assert.equal(basic.status, 401);
  });

  it('checks auth before the body (recording: no token and empty body is 401)', async () => {
    sim().setShape('array');
    try {
      assert.equal((await extend(sim(), 'x', '')).status, 401);
    } finally {
      sim().setShape('documented');
    }
  });
});

describe('array shape (older broker, docs/broker.md#array-shape)', () => {
  const { sim, clock } = useSimulator({ shape: 'array', tokens: { rw: { role: 'read-write', tenant: 'a' } } });

  it('answers 400 for empty and non-JSON bodies and 500 for wrong types', async () => {
    const id = sim().mint({ tenant: 'a' });
    const cases: Array<[string | undefined, number, RegExp]> = [
      [undefined, 400, /^Empty request body$/],
      ['', 400, /^Empty request body$/],
      ['hello', 400, /^Invalid JSON: \[json\.exception\.parse_error\.101\] /],
      ['{"seconds":"120"}', 500, /^\[json\.exception\.type_error\.302\] type must be number, but is string$/],
      ['{"seconds":null}', 500, /^\[json\.exception\.type_error\.302\] type must be number, but is null$/],
      ['[]', 500, /^\[json\.exception\.type_error\.306\] cannot use value\(\) with array$/],
      ['null', 500, /^\[json\.exception\.type_error\.306\] cannot use value\(\) with null$/],
    ];
    for (const [body, status, error] of cases) {
      const answer = await extend(sim(), id, body, 'rw');
      assert.equal(answer.status, status, `body ${body}`);
      assert.match((answer.json as { error: string }).error, error);
    }
    assert.deepEqual(expiries(sim(), id), [T0 + 30 * S], 'no failed body renewed anything');
  });

  it('answers the recorded bytes, {} meaning 60 seconds', async () => {
    const id = sim().mint({ tenant: 'a' });
    const answer = await extend(sim(), id, '{}', 'rw');
    assert.equal(
      answer.text,
      `[{"error":null,"expiresAt":"2026-07-30T11:01:00.000Z","index":0,"leaseId":"${id}","success":true}]`,
    );
  });

  it('passes seconds ≤ 1 through: success with the expiry unchanged; accepts fractions', async () => {
    const id = sim().mint({ tenant: 'a', seconds: 30 });
    for (const seconds of [1, 0, -5, 1.7]) {
      const result = arrayResult(await extend(sim(), id, JSON.stringify({ seconds }), 'rw'));
      assert.equal(result.success, true);
      assert.equal(result.expiresAt, iso(T0 + 30 * S), `seconds ${seconds}`);
    }
    const short = sim().mint({ tenant: 'a', seconds: 0.5 });
    assert.equal(arrayResult(await extend(sim(), short, '{"seconds":1.7}', 'rw')).expiresAt, iso(T0 + 1700));
  });

  it('tells Lease already expired from Lease not found (unknown, released, foreign tenant)', async () => {
    const expired = sim().mint({ tenant: 'a', seconds: 2 });
    const released = sim().mint({ tenant: 'a' });
    sim().release(released);
    const foreign = sim().mint({ tenant: 'b' });
    clock.advance(3 * S);
    try {
      const cases: Array<[string, string]> = [
        [expired, 'Lease already expired'],
        [released, 'Lease not found'],
        [foreign, 'Lease not found'],
        ['not-a-lease', 'Lease not found'],
      ];
      for (const [id, error] of cases) {
        const result = arrayResult(await extend(sim(), id, '{"seconds":120}', 'rw'));
        assert.deepEqual(result, { error, expiresAt: null, index: 0, leaseId: id, success: false });
      }
    } finally {
      clock.advance(-3 * S);
    }
  });

  it('numbers concurrent requests of one batch 0, 1, 2… and sequential ones 0', async () => {
    const ids = Array.from({ length: 6 }, () => sim().mint({ tenant: 'a' }));
    const fire = (): Promise<ArrayResult[]> =>
      Promise.all(ids.map(async (id) => arrayResult(await extend(sim(), id, '{"seconds":60}', 'rw'))));
    await fire(); // opens one keep-alive connection per request, so the next round arrives at once
    const results = await fire();
    for (const [i, result] of results.entries()) assert.equal(result.leaseId, ids[i]);
    assert.ok(
      results.some((result) => result.index > 0),
      JSON.stringify(results),
    );
    for (const id of ids.slice(0, 2)) {
      assert.equal(arrayResult(await extend(sim(), id, '{}', 'rw')).index, 0);
    }
  });
});

describe('routing, headers and lease ids', () => {
  const { sim } = useSimulator({ clockOffsetMs: 3 * 3600 * S + 1500 });

  it('writes the Date header from the broker clock, truncated to the second', async () => {
    const answer = await request(`${sim().url}/health`);
    assert.equal(answer.headers.get('date'), 'Thu, 30 Jul 2026 14:00:01 GMT');
    assert.equal(sim().brokerNow(), T0 + 3 * 3600 * S + 1500);
    sim().setClockOffset(-S);
    try {
      assert.equal((await extend(sim(), 'x', '{}')).headers.get('date'), 'Thu, 30 Jul 2026 10:59:59 GMT');
    } finally {
      sim().setClockOffset(3 * 3600 * S + 1500);
    }
  });

  it('decodes a percent-encoded lease id as exactly one path segment', async () => {
    const id = 'a/b?c#d%e ..';
    sim().mint({ leaseId: id });
    sim().resetLog();
    const body = documented(await extend(sim(), id, '{"seconds":120}'));
    assert.equal(body.leaseId, id);
    assert.equal(body.renewed, 1);
    const [entry] = sim().log;
    assert.equal(entry?.leaseId, id);
    assert.equal(entry?.rawPath, '/api/v1/lease/a%2Fb%3Fc%23d%25e%20../extend');
    const split = await request(`${sim().url}/api/v1/lease/a/b/extend`, { method: 'POST', body: '{}' });
    assert.equal(split.status, 404);
    assert.deepEqual(split.json, { error: 'Not found' });
  });

  it('answers GET on the route with the recorded HTML 404, health, and a JSON 404 otherwise', async () => {
    const get = await request(extendUrl(sim(), 'x'));
    assert.equal(get.status, 404);
    assert.equal(get.text, '<html><body><h1>File Not Found</h1><hr><i>uWebSockets/20 Server</i></body></html>');
    const health = await request(`${sim().url}/health`);
    assert.equal(health.status, 200);
    assert.equal((health.json as { status?: unknown }).status, 'healthy');
    const other = await request(`${sim().url}/api/v1/pop`, { method: 'POST', body: '{}' });
    assert.equal(other.status, 404);
    assert.deepEqual(other.json, { error: 'Not found' });
  });

  it('mints UUIDv7-looking ids with one row per (partition, group)', () => {
    const id = sim().mint({
      partitions: [
        { partition: 'p1', group: 'g1' },
        { partition: 'p1', group: 'g2' },
      ],
    });
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(sim().lease(id)?.rows.length, 2);
    assert.throws(() => sim().mint({ leaseId: id }), /already exists/);
    assert.throws(() => sim().mint({ partitions: [{ partition: 'p' }, { partition: 'p' }] }), /once/);
  });

  it('mints rows on named queues: a lease-wide queue, its own per row, and the default', () => {
    const id = sim().mint({
      queue: 'orders',
      partitions: [{ partition: 'p7' }, { partition: 'p7', queue: 'invoices', group: 'billing' }],
    });
    assert.deepEqual(
      sim()
        .lease(id)
        ?.rows.map(({ queue, partition, group }) => [queue, partition, group]),
      [
        ['orders', 'p7', '__QUEUE_MODE__'],
        ['invoices', 'p7', 'billing'],
      ],
    );
    // The same partition and group on two queues are two rows; on one queue, one.
    assert.throws(() => sim().mint({ queue: 'q', partitions: [{ partition: 'p' }, { partition: 'p' }] }), /once/);
    assert.throws(() => sim().mint({ queue: 7 } as unknown as LeaseSpec), /queue must be a string/);
  });

  it('names unnamed rows after partitions their (queue, group) never used, so they take nothing over', async () => {
    const own = await startSimulator();
    try {
      const rows = (id: string): string[][] =>
        own.lease(id)?.rows.map(({ queue, partition, group }) => [queue, partition, group]) ?? [];
      const first = own.mint();
      assert.deepEqual(rows(first), [['default', 'p1', '__QUEUE_MODE__']]);
      own.release(first); // acked: p1 stays known to the group, so it is not handed out again
      const named = own.mint({ queue: 'orders', group: 'billing', partitions: [{ partition: 'p2' }, {}, {}] });
      assert.deepEqual(rows(named), [
        ['orders', 'p2', 'billing'],
        ['orders', 'p1', 'billing'],
        ['orders', 'p3', 'billing'],
      ]);
      assert.deepEqual(rows(own.mint({ partitions: 2 })), [
        ['default', 'p2', '__QUEUE_MODE__'],
        ['default', 'p3', '__QUEUE_MODE__'],
      ]);
      assert.equal(rows(named).length, 3, 'nothing taken over');
    } finally {
      await own.close();
    }
  });
});

describe('faults', () => {
  const { sim } = useSimulator();
  const live = (): string => sim().mint({ seconds: 30 });

  it('latency delays, then answers normally; times counts down', async () => {
    sim().inject({ kind: 'latency', ms: 150, times: 1 });
    // Behind it, a fault the next request meets only once the latency is used up: seen in the
    // answer, not in how fast it came (that upper bound failed on a loaded machine).
    sim().inject({ kind: 'status', status: 503, times: 1 });
    const started = Date.now();
    assert.equal(documented(await extend(sim(), live(), '{}')).renewed, 1);
    assert.ok(Date.now() - started >= 140);
    assert.equal((await extend(sim(), live(), '{}')).status, 503, 'the latency was used up');
    assert.equal((await extend(sim(), live(), '{}')).status, 200);
  });

  it('drop destroys the connection without an answer', async () => {
    sim().inject({ kind: 'drop', times: 1 });
    sim().resetLog();
    await assert.rejects(extend(sim(), live(), '{}'));
    assert.equal(sim().log[0]?.status, null);
  });

  it('reset-mid-body sends headers and half the body; the renewal itself happened', async () => {
    const id = live();
    sim().inject({ kind: 'reset-mid-body', times: 1 });
    const res = await fetch(extendUrl(sim(), id), { method: 'POST', body: '{"seconds":120}' });
    assert.equal(res.status, 200);
    await assert.rejects(res.text());
    assert.deepEqual(expiries(sim(), id), [T0 + 120 * S]);
  });

  it('status answers with the given status, body and headers', async () => {
    sim().inject({ kind: 'status', status: 503, times: 1 });
    sim().inject({ kind: 'status', status: 500, body: '{"error":"pool"}', times: 1 });
    sim().inject({ kind: 'status', status: 302, headers: { location: 'https://elsewhere.example/' }, times: 1 });
    const unavailable = await extend(sim(), live(), '{}');
    assert.equal(unavailable.status, 503);
    assert.deepEqual(await extend(sim(), live(), '{}').then((a) => [a.status, a.text]), [500, '{"error":"pool"}']);
    const moved = await extend(sim(), live(), '{}');
    assert.equal(moved.status, 302);
    assert.equal(moved.headers.get('location'), 'https://elsewhere.example/');
    assert.equal((await extend(sim(), live(), '{}')).status, 200);
  });

  it('body answers anything, including a function-made 10 MB body', async () => {
    sim().inject({ kind: 'body', body: '{"leaseId":', times: 1 });
    sim().inject({ kind: 'body', body: () => 'x'.repeat(10 * 1024 * 1024), status: 201, times: 1 });
    assert.deepEqual(await extend(sim(), live(), '{}').then((a) => [a.status, a.text]), [200, '{"leaseId":']);
    const huge = await extend(sim(), live(), '{}');
    assert.equal(huge.status, 201);
    assert.equal(huge.text.length, 10 * 1024 * 1024);
  });

  it('a leaseId restricts a fault; the first matching fault in injection order wins', async () => {
    const target = live();
    const other = live();
    sim().inject({ kind: 'status', status: 503, leaseId: target });
    sim().inject({ kind: 'status', status: 500, times: 1 });
    try {
      assert.equal((await extend(sim(), other, '{}')).status, 500);
      assert.equal((await extend(sim(), other, '{}')).status, 200);
      assert.equal((await extend(sim(), target, '{}')).status, 503);
      assert.equal((await extend(sim(), target, '{}')).status, 503);
    } finally {
      sim().clearFaults();
    }
    assert.equal((await extend(sim(), target, '{}')).status, 200);
  });

  it('hang holds requests until clearFaults(), then answers them normally', async () => {
    const id = live();
    sim().resetLog();
    sim().inject({ kind: 'hang' });
    const pending = extend(sim(), id, '{"seconds":120}');
    await waitFor(() => sim().log.length === 1, 'the held request');
    const early = await Promise.race([
      pending.then(() => 'answered'),
      new Promise((r) => setTimeout(() => r('held'), 50)),
    ]);
    assert.equal(early, 'held');
    assert.equal(sim().log[0]?.status, null);
    sim().clearFaults();
    assert.equal(documented(await pending).renewed, 1);
    assert.equal(sim().log[0]?.status, 200);
  });

  it('until-abandoned holds a request, through clearFaults(), until the client gives up', async () => {
    const id = live();
    const control = new SimulatorControl(sim().url);
    await control.inject({ kind: 'until-abandoned', leaseId: id, times: 1 });
    const client = new AbortController();
    const pending = request(extendUrl(sim(), id), { method: 'POST', body: '{}', signal: client.signal });
    await sim().whenHeld(1, id);
    await control.whenHeld(1, id);
    const holding = { held: 1, holding: 1, abandoned: 0 };
    assert.deepEqual(sim().heldCount(id), holding);
    sim().clearFaults();
    assert.deepEqual(await control.heldCount(id), holding, 'clearFaults() does not let it go');
    assert.equal(sim().log.at(-1)?.status, null, 'nothing was answered');
    client.abort();
    await assert.rejects(pending, { name: 'AbortError' });
    await waitFor(() => sim().heldCount(id).holding === 0, 'the simulator to see the client go');
    assert.deepEqual(sim().heldCount(id), { held: 1, holding: 0, abandoned: 1 });
    assert.equal(sim().heldCount().abandoned >= 1, true, 'counted among all requests too');
    assert.equal(sim().log.at(-1)?.status, null, 'still nothing answered');
    assert.equal((await extend(sim(), id, '{}')).status, 200);
  });

  it('whenHeld rejects when the simulator closes first', async () => {
    const own = await startSimulator();
    const waiting = own.whenHeld(1);
    await own.close();
    await assert.rejects(waiting, /simulator closed with 0 of 1 requests held/);
  });

  it('close() does not hang on a held request or on keep-alive connections', { timeout: 20_000 }, async () => {
    const own = await startSimulator();
    await request(`${own.url}/health`); // leaves a keep-alive connection open
    own.inject({ kind: 'hang', times: 1 });
    own.inject({ kind: 'until-abandoned' });
    const pending = [extend(own, own.mint(), '{}'), extend(own, own.mint(), '{}')].map((held) => assert.rejects(held));
    await own.whenHeld(2);
    await own.close();
    await Promise.all(pending);
  });
});

describe('log and stats', () => {
  const { sim } = useSimulator();

  it('logs every broker request with its details, and not the control requests', async () => {
    sim().resetLog();
    const id = sim().mint();
    await request(extendUrl(sim(), id), {
      method: 'POST',
      headers: { authorization: 'Bearer t', 'user-agent': 'queenctl-test/1' },
      body: '{"seconds":5}',
    });
    await new SimulatorControl(sim().url).stats();
    assert.deepEqual(sim().log, [
      {
        at: T0,
        method: 'POST',
        rawPath: `/api/v1/lease/${id}/extend`,
        leaseId: id,
        body: '{"seconds":5}',
        authorization: 'Bearer t',
        userAgent: 'queenctl-test/1',
        status: 200,
      },
    ]);
  });

  it('keeps at most logLimit entries; 0 keeps none', async () => {
    const two = await startSimulator({ logLimit: 2 });
    const none = await startSimulator({ logLimit: 0 });
    try {
      for (const path of ['/a', '/b', '/c']) {
        await request(`${two.url}${path}`);
        await request(`${none.url}${path}`);
      }
      assert.deepEqual(
        two.log.map((entry) => entry.rawPath),
        ['/b', '/c'],
      );
      assert.equal(none.log.length, 0);
    } finally {
      await Promise.all([two.close(), none.close()]);
    }
  });

  it('counts extend requests, renewed rows and lapses (each lease once)', async () => {
    const own = fakeClock();
    const sim = await startSimulator({ now: own.now });
    try {
      const lapsing = sim.mint({ seconds: 30 });
      const renewed = sim.mint({ seconds: 30, partitions: 2 });
      sim.release(sim.mint({ seconds: 30 })); // acked: never a lapse
      await extend(sim, renewed, '{"seconds":60}');
      own.advance(31 * S);
      await extend(sim, lapsing, '{}');
      await extend(sim, lapsing, '{}');
      // The renewed rows had their full 30 s left: the least margin seen at a renewal.
      assert.deepEqual(sim.stats(), {
        extendRequests: 3,
        popRequests: 0,
        ackRequests: 0,
        renewedRows: 2,
        lapses: 1,
        minMarginMs: 30 * S,
      });
      own.advance(30 * S);
      assert.equal(sim.stats().lapses, 2, 'the renewed lease ran out too');
      assert.equal(sim.stats().lapses, 2, 'counted once');
    } finally {
      await sim.close();
    }
  });
});

describe('control interface (/_sim/)', () => {
  const { sim } = useSimulator();
  const control = (): SimulatorControl => new SimulatorControl(sim().url);

  it('mints, reads, expires and releases leases', async () => {
    const id = await control().mint({ partitions: 2, tenant: 't', seconds: 45 });
    const lease = await control().lease(id);
    assert.deepEqual(lease, {
      leaseId: id,
      tenant: 't',
      rows: [
        { queue: 'default', partition: 'p1', group: '__QUEUE_MODE__', expiresAt: T0 + 45 * S },
        { queue: 'default', partition: 'p2', group: '__QUEUE_MODE__', expiresAt: T0 + 45 * S },
      ],
    });
    assert.equal(await control().expire(id), true);
    assert.ok(expiries(sim(), id).every((at) => at < T0));
    assert.equal(await control().release(id), true);
    assert.equal(await control().lease(id), undefined);
    assert.equal(await control().release(id), false);
    assert.equal(await control().expire(id), false);
  });

  it('injects and clears faults, configures, and serves the log and stats', async () => {
    await control().inject({ kind: 'status', status: 503 });
    assert.equal((await extend(sim(), 'x', '{}')).status, 503);
    await control().clearFaults();
    await control().configure({ shape: 'array', clockOffsetMs: 5 * S, tokens: { tk: { role: 'admin' } } });
    assert.equal(sim().brokerNow(), T0 + 5 * S);
    const id = sim().mint();
    assert.equal(arrayResult(await extend(sim(), id, '{}', 'tk')).success, true);
    await control().configure({ tokens: null });
    assert.equal((await extend(sim(), id, '{}')).status, 200, 'auth off again, shape kept');
    await control().configure({ shape: 'documented', clockOffsetMs: 0 });
    const log = await control().log();
    assert.equal(log.at(-1)?.leaseId, id);
    await control().resetLog();
    assert.deepEqual(await control().log(), []);
    const stats = await control().stats();
    assert.ok(stats.extendRequests >= 3);
  });

  it('rejects bad input with 400 and unknown control paths with 404', async () => {
    const post = (path: string, body: string): Promise<Answer> =>
      request(`${sim().url}/_sim/${path}`, { method: 'POST', body });
    assert.equal((await post('leases', '{"partitions":0}')).status, 400);
    assert.equal((await post('leases', 'nope')).status, 400);
    assert.equal((await post('faults', '{"kind":"explode"}')).status, 400);
    assert.equal((await post('faults', '{"kind":"latency","ms":-1}')).status, 400);
    assert.equal((await post('config', '{"shape":"xml"}')).status, 400);
    assert.equal((await request(`${sim().url}/_sim/nothing`)).status, 404);
  });
});

// --- consumer groups -----------------------------------------------------------------------------

function groupsUrl(sim: Simulator, group?: string): string {
  const base = `${sim.url}/api/v1/consumer-groups`;
  return group === undefined ? base : `${base}/${encodeURIComponent(group)}`;
}

/** GET a consumer-group route: the list, or one group when `group` is given. */
function getGroups(sim: Simulator, group?: string, token?: string): Promise<Answer> {
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
  return request(groupsUrl(sim, group), { headers });
}

/** The partitions of `queue` in a group's 200 answer, as [partition, workerId, leaseActive]. */
function holders(answer: Answer, queue: string): Array<[string, string | null, boolean]> {
  assert.equal(answer.status, 200, answer.text);
  const partitions = (answer.json as WireGroup)[queue]?.partitions ?? [];
  return partitions.map((p) => [p.partition, p.workerId, p.leaseActive]);
}

interface RecordedExchange {
  path: string;
  status: number;
  reason: string;
  headers: Map<string, string>;
  body: string;
}

/** The `curl -i` exchanges of the recording: status line, headers, and the one-line body. */
function recordedExchanges(): RecordedExchange[] {
  const url = new URL('../../../test/fixtures/real-broker-consumer-groups.txt', import.meta.url);
  const lines = readFileSync(url, 'utf8').split('\n');
  const exchanges: RecordedExchange[] = [];
  for (let i = 0; i < lines.length; i++) {
    const curl = /^\$ curl -s -i (\S+)$/.exec(lines[i] ?? '');
    if (!curl?.[1]) continue;
    const statusLine = /^HTTP\/1\.1 (\d{3}) (.*)$/.exec(lines[++i] ?? '');
    assert.ok(statusLine?.[1] && statusLine[2], `a status line after ${curl[0]}`);
    const headers = new Map<string, string>();
    for (let line = lines[++i] ?? ''; line !== ''; line = lines[++i] ?? '') {
      const colon = line.indexOf(':');
      headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
    }
    exchanges.push({
      path: new URL(curl[1]).pathname,
      status: Number(statusLine[1]),
      reason: statusLine[2],
      headers,
      body: lines[++i] ?? '',
    });
  }
  return exchanges;
}

/** The headers the recording shows that the simulator writes too (not Date, not uWebSockets). */
const COMPARED_HEADERS = [
  'content-type',
  'content-length',
  'access-control-allow-origin',
  'access-control-allow-methods',
  'access-control-allow-headers',
];

describe('consumer groups: the recorded scenario (docs/broker.md, "Consumer groups")', () => {
  it('answers the recorded bytes: list, groups, the stale and acked rows, the empty body, the 404', async () => {
    const exchanges = recordedExchanges();
    assert.equal(exchanges.length, 6, 'the recording holds six exchanges');
    // The recorded pops, at the instants their UUIDv7 lease ids carry. The simulator has one clock;
    // the real broker's Date header runs about a second behind its database (lastConsumedAt), and
    // the bodies are what is compared.
    const clock = fakeClock(Date.parse('2026-12-02T15:29:03.425Z'));
    const sim = await startSimulator({ now: clock.now });
    try {
      const at = (iso: string): void => clock.advance(Date.parse(iso) - clock.now());
      sim.mint({
        leaseId: '01a2375f-9fc1-7000-8e29-c05fb9c710f8',
        queue: 'orders',
        partitions: [{ partition: 'p1' }, { partition: 'p2' }],
        seconds: 120,
      });
      at('2026-12-02T15:29:03.572Z');
      sim.mint({
        leaseId: '01a2375f-a054-7000-a320-fc18ec828e4d',
        queue: 'orders',
        group: 'billing',
        partitions: [{ partition: 'p2' }],
        seconds: 120,
      });
      at('2026-12-02T15:29:03.718Z');
      const x = { leaseId: '01a2375f-a0e6-7000-ab3b-149c9412a450', queue: 'invoices', seconds: 3 };
      sim.mint({ ...x, partitions: [{ partition: 'x' }] });
      at('2026-12-02T15:29:03.743Z');
      const y = sim.mint({ ...x, leaseId: '01a2375f-a0ff-7000-a85f-7c0e30521b28', partitions: [{ partition: 'y' }] });
      at('2026-12-02T15:29:04.162Z');
      assert.equal(sim.release(y), true);
      at('2026-12-02T15:29:04.200Z');
      for (const [i, recorded] of exchanges.entries()) {
        if (i === 3) clock.advance(4 * S); // "4 s later": x's lease (3 s) has expired
        const answer = await request(`${sim.url}${recorded.path}`);
        const what = `exchange ${i}: GET ${recorded.path}`;
        assert.equal(answer.status, recorded.status, what);
        assert.equal(answer.text, recorded.body, what);
        for (const name of COMPARED_HEADERS) {
          assert.equal(answer.headers.get(name), recorded.headers.get(name) ?? null, `${what}: ${name}`);
        }
      }
      // The three quirks the CLI depends on, named (the loop above checked their bytes).
      assert.equal(exchanges[4]?.path, '/api/v1/consumer-groups/nobody');
      assert.equal(exchanges[4]?.headers.get('content-length'), '0');
      assert.equal(exchanges[5]?.status, 404);
    } finally {
      await sim.close();
    }
  });

  it('keeps the recorded key order (alphabetical) in both answers', async () => {
    const own = await startSimulator();
    try {
      own.mint({ queue: 'orders', group: 'billing', partitions: [{ partition: 'p1' }] });
      const [summary] = (await getGroups(own)).json as WireGroupSummary[];
      assert.ok(summary);
      assert.deepEqual(Object.keys(summary), [...Object.keys(summary)].sort());
      assert.equal(Object.keys(summary).length, 11);
      const [partition] = ((await getGroups(own, 'billing')).json as WireGroup).orders?.partitions ?? [];
      assert.ok(partition);
      assert.deepEqual(Object.keys(partition), [
        'lastConsumedAt',
        'leaseActive',
        'offsetLag',
        'partition',
        'timeLagSeconds',
        'totalConsumed',
        'workerId',
      ]);
    } finally {
      await own.close();
    }
  });
});

describe('consumer groups: holders', () => {
  const { sim, clock } = useSimulator();

  it('names the holder after a pop, keeps the stale id after expiry, and lists an acked row with null', async () => {
    const live = sim().mint({ queue: 'orders', group: 'g-life', partitions: [{ partition: 'p1' }], seconds: 60 });
    const lapsing = sim().mint({ queue: 'orders', group: 'g-life', partitions: [{ partition: 'p2' }], seconds: 10 });
    const acked = sim().mint({ queue: 'orders', group: 'g-life', partitions: [{ partition: 'p3' }] });
    assert.deepEqual(holders(await getGroups(sim(), 'g-life'), 'orders'), [
      ['p1', live, true],
      ['p2', lapsing, true],
      ['p3', acked, true],
    ]);
    sim().release(acked);
    clock.advance(11 * S);
    try {
      const answer = await getGroups(sim(), 'g-life');
      assert.deepEqual(holders(answer, 'orders'), [
        ['p1', live, true],
        ['p2', lapsing, false], // expired, never acked: the broker still records its holder
        ['p3', null, false], // acked: listed, with no holder
      ]);
      const p3 = (answer.json as WireGroup).orders?.partitions[2];
      assert.equal(p3?.lastConsumedAt, iso(T0));
      assert.equal(p3?.totalConsumed, 1);
      assert.equal(p3?.offsetLag, 0);
    } finally {
      clock.advance(-11 * S);
    }
  });

  it('gathers a multi-partition pop under one id, by queue, both sorted by name', async () => {
    const id = sim().mint({
      group: 'g-multi',
      partitions: [
        { queue: 'orders', partition: 'p2' },
        { queue: 'invoices', partition: 'x' },
        { queue: 'orders', partition: 'p10' },
      ],
    });
    const answer = await getGroups(sim(), 'g-multi');
    assert.deepEqual(Object.keys(answer.json as WireGroup), ['invoices', 'orders']);
    assert.deepEqual(holders(answer, 'orders'), [
      ['p10', id, true],
      ['p2', id, true],
    ]);
    assert.deepEqual(holders(answer, 'invoices'), [['x', id, true]]);
    const mine = ((await getGroups(sim())).json as WireGroupSummary[]).filter((g) => g.name === 'g-multi');
    assert.deepEqual(
      mine.map((g) => [g.queueName, g.topics, g.members, g.partitionsWithLag, g.state]),
      [
        ['invoices', ['invoices'], 1, 1, 'Dead'],
        ['orders', ['orders'], 2, 2, 'Dead'],
      ],
    );
  });

  it('a lease minted on a held row becomes its holder; the old one loses the row, and goes with its last', async () => {
    const spec = (partitions: string[]): LeaseSpec => ({
      queue: 'q',
      group: 'g-over',
      partitions: partitions.map((partition) => ({ partition })),
    });
    const old = sim().mint(spec(['a', 'b']));
    const taker = sim().mint(spec(['a']));
    assert.deepEqual(holders(await getGroups(sim(), 'g-over'), 'q'), [
      ['a', taker, true],
      ['b', old, true],
    ]);
    assert.deepEqual(
      sim()
        .lease(old)
        ?.rows.map((row) => row.partition),
      ['b'],
    );
    assert.equal(documented(await extend(sim(), old, '{"seconds":120}')).renewed, 1, 'only b');
    sim().mint(spec(['b']));
    assert.equal(sim().lease(old), undefined, 'no partition names it any more');
    assert.equal(documented(await extend(sim(), old, '{"seconds":120}')).renewed, 0);
  });

  it('decides leaseActive on the broker clock', async () => {
    const id = sim().mint({ queue: 'q', group: 'g-clock', partitions: [{ partition: 'p' }], seconds: 30 });
    sim().setClockOffset(31 * S);
    try {
      assert.deepEqual(holders(await getGroups(sim(), 'g-clock'), 'q'), [['p', id, false]]);
    } finally {
      sim().setClockOffset(0);
    }
    assert.deepEqual(holders(await getGroups(sim(), 'g-clock'), 'q'), [['p', id, true]]);
  });

  it('answers an unknown group 200 with an empty JSON body; decodes a percent-encoded group name', async () => {
    const unknown = await getGroups(sim(), 'nobody-at-all');
    assert.equal(unknown.status, 200);
    assert.equal(unknown.text, '');
    assert.equal(unknown.headers.get('content-length'), '0');
    assert.equal(unknown.headers.get('content-type'), 'application/json');
    const name = 'a/b c%d';
    const id = sim().mint({ queue: 'q', group: name, partitions: [{ partition: 'p' }] });
    assert.deepEqual(holders(await getGroups(sim(), name), 'q'), [['p', id, true]]);
    assert.ok(((await getGroups(sim())).json as WireGroupSummary[]).some((g) => g.name === name));
  });

  it('answers other methods and deeper paths with the HTML 404', async () => {
    const html = '<html><body><h1>File Not Found</h1><hr><i>uWebSockets/20 Server</i></body></html>';
    const cases: Array<[string, string]> = [
      ['GET', '/api/v1/consumer-groups/billing/queues/orders'],
      ['GET', '/api/v1/consumer-groups/'],
      ['POST', '/api/v1/consumer-groups'],
      ['DELETE', '/api/v1/consumer-groups/billing'],
      ['PUT', '/api/v1/consumer-groups/billing'],
    ];
    for (const [method, path] of cases) {
      const answer = await request(`${sim().url}${path}`, { method });
      assert.equal(answer.status, 404, `${method} ${path}`);
      assert.equal(answer.text, html, `${method} ${path}`);
    }
  });
});

describe('consumer groups: authentication', () => {
  const { sim } = useSimulator({
    tokens: {
      rw: { role: 'read-write', tenant: 'a' },
      ro: { role: 'read-only', tenant: 'a' },
      'ro-b': { role: 'read-only', tenant: 'b' },
      none: { role: '' },
    },
  });

  it('a read-only token lists both routes but cannot extend (403)', async () => {
    const id = sim().mint({ tenant: 'a', queue: 'orders', group: 'billing', partitions: [{ partition: 'p1' }] });
    const list = await getGroups(sim(), undefined, 'ro');
    assert.equal(list.status, 200);
    assert.deepEqual(
      (list.json as WireGroupSummary[]).map((g) => [g.name, g.queueName]),
      [['billing', 'orders']],
    );
    assert.deepEqual(holders(await getGroups(sim(), 'billing', 'ro'), 'orders'), [['p1', id, true]]);
    const denied = await extend(sim(), id, '{"seconds":120}', 'ro');
    assert.equal(denied.status, 403);
    assert.deepEqual(denied.json, { error: 'Insufficient permissions' });
    assert.equal(documented(await extend(sim(), id, '{"seconds":120}', 'rw')).renewed, 1);
  });

  it('answers 401 without a token or with an unknown one, and 403 for a role that may not read', async () => {
    const cases: Array<[string | undefined, number, string]> = [
      [undefined, 401, 'Authentication required'],
      ['forged', 401, 'HS256 validation error: invalid signature'],
      ['none', 403, 'Insufficient permissions'],
    ];
    for (const group of [undefined, 'billing']) {
      for (const [token, status, error] of cases) {
        const answer = await getGroups(sim(), group, token);
        assert.equal(answer.status, status, `${group} with token ${token}`);
        assert.deepEqual(answer.json, { error });
      }
    }
  });

  it("shows a tenant nothing of another tenant's partitions (as the extend route does)", async () => {
    sim().mint({ tenant: 'a', queue: 'orders', group: 'tenant-a-only', partitions: [{ partition: 'p1' }] });
    const list = (await getGroups(sim(), undefined, 'ro-b')).json as WireGroupSummary[];
    assert.ok(!list.some((g) => g.name === 'tenant-a-only'), JSON.stringify(list));
    const group = await getGroups(sim(), 'tenant-a-only', 'ro-b');
    assert.deepEqual([group.status, group.text], [200, ''], 'an unknown group to tenant b');
    assert.equal((await getGroups(sim(), 'tenant-a-only', 'ro')).status, 200);
  });
});

describe('consumer groups: faults', () => {
  const { sim } = useSimulator();

  it('status, body, drop and reset-mid-body faults apply to both routes', async () => {
    const id = sim().mint({ queue: 'orders', group: 'g-fault', partitions: [{ partition: 'p1' }] });
    sim().inject({ kind: 'status', status: 503, times: 2 });
    assert.equal((await getGroups(sim())).status, 503);
    assert.equal((await getGroups(sim(), 'g-fault')).status, 503);
    sim().inject({ kind: 'body', body: '{"orders":', times: 1 });
    assert.equal((await getGroups(sim(), 'g-fault')).text, '{"orders":');
    sim().inject({ kind: 'drop', times: 1 });
    await assert.rejects(getGroups(sim(), 'g-fault'));
    sim().inject({ kind: 'reset-mid-body', times: 1 });
    const res = await fetch(groupsUrl(sim(), 'g-fault'));
    assert.equal(res.status, 200);
    await assert.rejects(res.text());
    assert.deepEqual(holders(await getGroups(sim(), 'g-fault'), 'orders'), [['p1', id, true]], 'faults used up');
  });

  it('latency and hang delay the routes; a fault restricted to a lease id never matches them', async () => {
    const id = sim().mint({ queue: 'orders', group: 'g-slow', partitions: [{ partition: 'p1' }] });
    sim().inject({ kind: 'status', status: 500, leaseId: id });
    sim().inject({ kind: 'latency', ms: 150, times: 1 });
    try {
      const started = Date.now();
      assert.deepEqual(holders(await getGroups(sim(), 'g-slow'), 'orders'), [['p1', id, true]]);
      assert.ok(Date.now() - started >= 140, 'delayed by the latency fault');
      assert.equal((await getGroups(sim(), 'g-slow')).status, 200, 'the lease-id fault is not for this route');
      sim().resetLog();
      sim().inject({ kind: 'hang' });
      const pending = getGroups(sim());
      await waitFor(() => sim().log.length === 1, 'the held request');
      assert.equal(sim().log[0]?.status, null);
      sim().clearFaults();
      assert.equal((await pending).status, 200);
    } finally {
      sim().clearFaults();
    }
  });
});

describe('consumer groups: the control interface', () => {
  const { sim } = useSimulator({ logLimit: 0 });
  const control = (): SimulatorControl => new SimulatorControl(sim().url);

  it('mints on named queues, partitions and groups, and acks leaving the rows listed with null', async () => {
    const id = await control().mint({
      queue: 'orders',
      partitions: [{ partition: 'p1' }, { partition: 'p2', group: 'billing' }],
      seconds: 60,
    });
    assert.deepEqual(holders(await getGroups(sim(), '__QUEUE_MODE__'), 'orders'), [['p1', id, true]]);
    assert.deepEqual(holders(await getGroups(sim(), 'billing'), 'orders'), [['p2', id, true]]);
    assert.equal(await control().release(id), true);
    assert.deepEqual(holders(await getGroups(sim(), '__QUEUE_MODE__'), 'orders'), [['p1', null, false]]);
    assert.deepEqual(holders(await getGroups(sim(), 'billing'), 'orders'), [['p2', null, false]]);
  });

  it('sets a read-only token through configure', async () => {
    await control().configure({ tokens: { ro: { role: 'read-only' } } });
    try {
      const id = sim().mint({ queue: 'q', group: 'g-ro', partitions: [{ partition: 'p' }] });
      assert.equal((await getGroups(sim(), 'g-ro')).status, 401);
      assert.deepEqual(holders(await getGroups(sim(), 'g-ro', 'ro'), 'q'), [['p', id, true]]);
      assert.equal((await extend(sim(), id, '{}', 'ro')).status, 403);
    } finally {
      await control().configure({ tokens: null });
    }
  });

  it('mints many leases in one request, or none when one spec is wrong', async () => {
    const specs: LeaseSpec[] = ['a', 'b', 'c'].map((partition) => ({
      queue: 'q',
      group: 'g-many',
      partitions: [{ partition }],
    }));
    const ids = await control().mintMany(specs);
    assert.equal(new Set(ids).size, 3);
    assert.deepEqual(
      holders(await getGroups(sim(), 'g-many'), 'q').map(([partition, workerId]) => [partition, workerId]),
      [
        ['a', ids[0]],
        ['b', ids[1]],
        ['c', ids[2]],
      ],
    );
    const wrong = control().mintMany([{ queue: 'q', group: 'g-wrong' }, { seconds: 'x' } as unknown as LeaseSpec]);
    await assert.rejects(wrong, (err: unknown) => {
      assert.ok(err instanceof SimulatorControlError);
      assert.equal(err.status, 400);
      assert.match(err.message, /leases\[1\]: seconds must be a finite number/);
      return true;
    });
    assert.equal((await getGroups(sim(), 'g-wrong')).text, '', 'nothing minted');
  });

  it('answers 5,000 partitions of one group in one request, from one control request', async () => {
    const id = await control().mint({ queue: 'orders', group: 'g-5000', partitions: 5000, seconds: 600 });
    const started = performance.now();
    const answer = await getGroups(sim(), 'g-5000');
    const elapsedMs = performance.now() - started;
    const rows = holders(answer, 'orders');
    assert.equal(rows.length, 5000);
    assert.ok(rows.every(([, workerId, active]) => workerId === id && active));
    assert.equal(new Set(rows.map(([partition]) => partition)).size, 5000);
    // Generous for a loaded 2-core machine; on an idle one it takes a few tens of milliseconds.
    assert.ok(elapsedMs < 2000, `answered in ${Math.round(elapsedMs)} ms`);

    const ids = await control().mintMany(
      Array.from({ length: 5000 }, (_, i) => ({
        queue: 'orders',
        group: 'g-5000-leases',
        partitions: [{ partition: `p${i}` }],
      })),
    );
    const leases = holders(await getGroups(sim(), 'g-5000-leases'), 'orders');
    assert.equal(new Set(leases.map(([, workerId]) => workerId)).size, 5000);
    assert.deepEqual(new Set(leases.map(([, workerId]) => workerId)), new Set(ids));
  });
});

describe('transport', () => {
  it('serves HTTPS with the given key pair', async () => {
    const sim = await startSimulator({ tls: { key: TEST_KEY, cert: TEST_CERT } });
    try {
      assert.match(sim.url, /^https:\/\/127\.0\.0\.1:\d+$/);
      const status = await new Promise<number | undefined>((resolve, reject) => {
        https
          .get(`${sim.url}/health`, { ca: TEST_CERT, agent: false }, (res) => {
            res.resume();
            resolve(res.statusCode);
          })
          .on('error', reject);
      });
      assert.equal(status, 200);
    } finally {
      await sim.close();
    }
  });

  it('keeps up with 10,000 leases and hundreds of concurrent renewals', async () => {
    const sim = await startSimulator({ logLimit: 0 });
    try {
      const ids = Array.from({ length: 10_000 }, () => sim.mint({ seconds: 30 }));
      // node:http over 20 kept-alive connections: fetch cost this test four times the simulator's
      // own CPU.
      const agent = new http.Agent({ keepAlive: true, maxSockets: 20 });
      const post = (leaseId: string): Promise<Answer> =>
        new Promise((resolve, reject) => {
          const req = http.request(extendUrl(sim, leaseId), { method: 'POST', agent }, (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (text += chunk));
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, headers: new Headers(), text, json: JSON.parse(text) }),
            );
            res.on('error', reject);
          });
          req.on('error', reject);
          req.end('{"seconds":60}');
        });
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < 500) {
          const id = ids[(next++ * 7) % ids.length] ?? '';
          assert.equal(documented(await post(id)).renewed, 1);
        }
      };
      try {
        await Promise.all(Array.from({ length: 20 }, worker));
      } finally {
        agent.destroy();
      }
      assert.equal(sim.stats().renewedRows, 500);
    } finally {
      await sim.close();
    }
  });
});

describe('main.ts (the simulator as its own process)', () => {
  const main = new URL('../../tools/simulator/main.js', import.meta.url).pathname;

  it('prints its URL as one JSON line, serves, and exits 0 on SIGTERM', async () => {
    const simulator = startProcess(
      process.execPath,
      [main, '--shape', 'array', '--token', 'tk=read-write:t1', '--no-log'],
      { exit: 0 },
    );
    try {
      const [line = ''] = await simulator.waitForStdout(/^.*\n/);
      assert.match(line, /^\{"url":"http:\/\/127\.0\.0\.1:\d+"\}\n$/);
      const { url } = JSON.parse(line) as { url: string };
      const control = new SimulatorControl(url);
      const id = await control.mint({ tenant: 't1' });
      const answer = await request(`${url}/api/v1/lease/${id}/extend`, {
        method: 'POST',
        headers: { authorization: 'Bearer tk' },
        body: '{}',
      });
      assert.equal((answer.json as ArrayResult[])[0]?.success, true);
      assert.deepEqual(await control.log(), []);
    } finally {
      simulator.kill('SIGTERM');
    }
    const { code, stdout, stderr } = await simulator.exited;
    assert.equal(code, 0, stderr);
    assert.equal(stdout.split('\n').length, 2, 'exactly one line');
  });

  it('--help prints its usage and every option on stdout, and exits 0 without listening', async () => {
    for (const flag of ['--help', '-h']) {
      const { code, stdout, stderr } = await runProcess(process.execPath, [main, flag], { exit: 0 });
      assert.equal(code, 0, stderr);
      assert.equal(stderr, '');
      assert.match(stdout, /^usage: main\.js \[--port N\]/);
      for (const option of ['--port', '--host', '--shape', '--token', '--clock-offset', '--no-log', '--help']) {
        assert.match(stdout, new RegExp(`^ {2}(-h, )?${option}\\b`, 'm'), `${flag} documents ${option}`);
      }
      assert.doesNotMatch(stdout, /^\{"url":/m, 'it does not start');
    }
  });

  it('exits 1 with a message on stderr for a bad flag', async () => {
    const { code, stderr } = await runProcess(process.execPath, [main, '--shape', 'xml'], { exit: 1 });
    assert.equal(code, 1);
    assert.match(stderr, /--shape must be documented or array/);
  });
});

/** A self-signed P-256 pair for 127.0.0.1 and localhost, valid until 2126; for tests only. */
const TEST_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaSqV1YjEoO+AFMbb
wRjfiygG8h//M2QJ2Z6DeTWDudyhRANCAARFb7/pwHYlqUagh938+8F4zSUenLeT
5Osk7WQAu/xNg6D9sPRP5oGSLvOr9vuITa5t33Kacu7Zd7zEh/MCArYn
-----END PRIVATE KEY-----
`;
const TEST_CERT = `-----BEGIN CERTIFICATE-----
MIIBtzCCAV2gAwIBAgIUafxtOkIreW+MDSVLDC1u0V7LR38wCgYIKoZIzj0EAwIw
IjEgMB4GA1UEAwwXcXVlZW5jdGwtc2ltdWxhdG9yLXRlc3QwIBcNMjYxMjAyMTAy
NzU1WhgPMjEyNjExMDgxMDI3NTVaMCIxIDAeBgNVBAMMF3F1ZWVuY3RsLXNpbXVs
YXRvci10ZXN0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAERW+/6cB2JalGoIfd
/PvBeM0lHpy3k+TrJO1kALv8TYOg/bD0T+aBki7zq/b7iE2ubd9ymnLu2Xe8xIfz
AgK2J6NvMG0wHQYDVR0OBBYEFOcXaPa9AYFeGBn8bMhwEWNO8jvQMB8GA1UdIwQY
MBaAFOcXaPa9AYFeGBn8bMhwEWNO8jvQMA8GA1UdEwEB/wQFMAMBAf8wGgYDVR0R
BBMwEYcEfwAAAYIJbG9jYWxob3N0MAoGCCqGSM49BAMCA0gAMEUCIF2BLwfFLJg8
D6JfzseOHD+b1E6yRQeaeIpquB7MfuQpAiEA3os1sCDuKiO7R1XuldAw3hUBdlUB
M/i0dwDZvly2SHc=
-----END CERTIFICATE-----
`;
