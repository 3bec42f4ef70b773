import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Health } from '../../src/broker/health.js';
import { type PingOptions, runPing } from '../../src/commands/ping.js';
import { AuthError, BrokerError, UsageError } from '../../src/exit.js';
import { resolveFormat } from '../../src/output/format.js';
import { bufferIO, FakeClock } from '../support/fakes.js';

const T0 = Date.parse('2026-12-03T08:39:22.000Z');

/**
 * A broker on a fake clock: GET /health takes `latencyMs` and its Date header, in whole seconds,
 * is written at the time of the request on a clock `skewMs` off the local one, `lagMs` stale (the
 * broker caches it); the token read answers as `token` says.
 */
function broker(options: {
  clock: FakeClock;
  health?: Partial<Health> | BrokerError;
  latencyMs?: number;
  skewMs?: number;
  lagMs?: number;
  token?: 'accepted' | AuthError | BrokerError;
}) {
  const reads: string[] = [];
  const client = {
    server: 'http://broker:6632',
    async health() {
      reads.push('health');
      if (options.health instanceof BrokerError) throw options.health;
      const sentAt = options.clock.now();
      options.clock.advance(options.latencyMs ?? 4);
      // Whole seconds, as the header has them.
      const brokerDateMs = Math.floor((sentAt + (options.skewMs ?? 0) - (options.lagMs ?? 0)) / 1000) * 1000;
      return {
        status: 'healthy',
        database: 'connected',
        version: '1.0.0',
        httpStatus: 200,
        brokerDateMs,
        ...options.health,
      } as Health;
    },
    async consumerGroup(group: string) {
      reads.push(`group ${group}`);
      if (options.token instanceof Error) throw options.token;
      return [];
    },
  };
  return { client, reads };
}

async function ping(
  setup: Omit<Parameters<typeof broker>[0], 'clock'>,
  options: Partial<PingOptions> & { output?: string } = {},
) {
  const clock = new FakeClock(T0);
  const { client, reads } = broker({ ...setup, clock });
  const io = bufferIO();
  const format = await resolveFormat(options.output ?? 'json', false);
  const run = runPing(
    { timeoutMs: 5000, tokenInForce: false, noHeaders: false, ...options, format },
    { io, client, clock, signal: new AbortController().signal },
  );
  const outcome = await run.then(
    (code) => ({ code, error: null }),
    (error: unknown) => ({ code: (error as { exitCode?: number }).exitCode, error }),
  );
  const json = (options.output ?? 'json') === 'json' && io.stdout.text !== '';
  return { ...outcome, io, reads, record: json ? JSON.parse(io.stdout.text) : null };
}

describe('ping', () => {
  it('prints status, database, version, latency and clock skew; exit 0 when healthy', async () => {
    const { code, record, reads } = await ping({ latencyMs: 12 });
    assert.equal(code, 0);
    assert.deepEqual(record, {
      status: 'healthy',
      database: 'connected',
      version: '1.0.0',
      latencyMs: 12,
      // Date 08:39:22 on an answer sent at 22.000, received at 22.012: the skew is in [-12, 2000].
      clockSkewMs: 994,
      clockSkewErrorMs: 1006,
      server: 'http://broker:6632',
      token: null,
    });
    assert.deepEqual(reads, ['health'], 'no token in force: nothing but GET /health');
  });

  it("gives the broker's clock as the range its Date header allows; warns when a minute off", async () => {
    const ahead = await ping({ skewMs: 185_000 });
    // Date 08:42:27 on an answer sent at 08:39:22.000, received at 22.004: [184996, 187000].
    assert.deepEqual([ahead.record.clockSkewMs, ahead.record.clockSkewErrorMs], [185_998, 1002]);
    assert.equal(
      ahead.io.stderr.text,
      "queenctl: warning: the broker's clock is 3m04s..3m07s ahead of this machine's: lease deadlines run on the " +
        "broker's clock, so do not judge them by local time (queenctl measures them on the broker's)\n",
    );
    const behind = await ping({ skewMs: -120_000 });
    assert.deepEqual([behind.record.clockSkewMs, behind.record.clockSkewErrorMs], [-119_002, 1002]);
    assert.match(behind.io.stderr.text, /clock is 1m58s\.\.2m01s behind this machine's/);
    const close = await ping({ skewMs: 20_000 });
    assert.equal(close.io.stderr.text, '', 'seconds are no warning');
    // [-61004, -59000]: perhaps under a minute, so no warning, whatever the middle says.
    const underAMinute = await ping({ skewMs: -61_000 });
    assert.equal(underAMinute.record.clockSkewMs, -60_002);
    assert.equal(underAMinute.io.stderr.text, '', 'a skew that may be under a minute is not warned of');
  });

  const tableCases: Array<[string, Omit<Parameters<typeof broker>[0], 'clock'>, string]> = [
    ['in step, the header fresh: [-12, 2000]', { latencyMs: 12 }, 'in sync (within 2s)'],
    ['in step, the header 1.5 s stale: [-2004, 0]', { lagMs: 1_500 }, 'in sync (within 3s)'],
    ['a second ahead: [996, 3000]', { skewMs: 1_000 }, 'ahead by up to 3s'],
    ['three seconds ahead: [2996, 5000]', { skewMs: 3_000 }, 'ahead by 2s..5s'],
    ['two minutes behind: [-120004, -118000]', { skewMs: -120_000 }, 'behind by 1m58s..2m01s'],
    ['two hours ahead: [7199996, 7202000]', { skewMs: 7_200_000 }, 'ahead by 1h59m..2h01m'],
    ['no Date header', { health: { brokerDateMs: null } }, '-'],
  ];
  for (const [name, setup, cell] of tableCases) {
    it(`says the clock skew in the table as the header allows: ${name}`, async () => {
      const { code, io } = await ping(setup, { output: 'table' });
      assert.equal(code, 0);
      const [head = '', row = ''] = io.stdout.text.split('\n');
      assert.equal(row.slice(head.indexOf('CLOCK SKEW')).trimEnd(), cell, io.stdout.text);
    });
  }

  it('has no skew to give without a Date header: both keys null', async () => {
    const { record } = await ping({ health: { brokerDateMs: null } });
    assert.equal(record.clockSkewMs, null);
    assert.equal(record.clockSkewErrorMs, null);
  });

  it('exit 2 when unhealthy: the record printed, the reason on stderr', async () => {
    const { code, record, error } = await ping({
      health: { status: 'unhealthy', database: 'disconnected', httpStatus: 503 },
    });
    assert.equal(code, 2);
    assert.equal(record.status, 'unhealthy');
    assert.equal(record.database, 'disconnected');
    assert.match(String((error as Error).message), /is unhealthy \(HTTP 503, database disconnected\)/);
  });

  it('exit 2 and nothing on stdout when unreachable or silent past --timeout', async () => {
    const { code, io } = await ping({ health: new BrokerError('no answer from http://broker:6632 within 5s', true) });
    assert.equal(code, 2);
    assert.equal(io.stdout.text, '');
  });

  it('with a token in force, proves it with the read-only read; exit 3 when refused', async () => {
    const accepted = await ping({ token: 'accepted' }, { tokenInForce: true });
    assert.equal(accepted.code, 0);
    assert.equal(accepted.record.token, 'accepted');
    assert.deepEqual(accepted.reads, ['health', 'group queenctl-token-check']);

    const refusal = new AuthError('the broker refused the credentials (HTTP 401: Authentication required)', 401);
    const refused = await ping({ token: refusal }, { tokenInForce: true });
    assert.equal(refused.code, 3);
    assert.equal(refused.record.token, 'refused');
    assert.match(String((refused.error as Error).message), /healthy, but it refused the token/);
  });

  it('does not prove a token on an unhealthy broker: exit 2, token not-checked', async () => {
    const { code, record, reads } = await ping(
      { health: { status: 'unhealthy', database: 'disconnected', httpStatus: 503 } },
      { tokenInForce: true },
    );
    assert.equal(code, 2);
    assert.equal(record.token, 'not-checked');
    assert.deepEqual(reads, ['health']);
  });

  it('-o jsonpath= prints the keys asked for; -o name is refused before anything is sent', async () => {
    const picked = await ping({ latencyMs: 7 }, { output: 'jsonpath={.status} {.latencyMs}' });
    assert.equal(picked.io.stdout.text, 'healthy 7');
    const name = await ping({}, { output: 'name' });
    assert.ok(name.error instanceof UsageError);
    assert.deepEqual(name.reads, []);
  });
});
