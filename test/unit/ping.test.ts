import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Health } from '../../src/broker/health.js';
import { formatSkew, type PingOptions, runPing } from '../../src/commands/ping.js';
import { AuthError, BrokerError, UsageError } from '../../src/exit.js';
import { resolveFormat } from '../../src/output/format.js';
import { bufferIO, FakeClock } from '../support/fakes.js';

const T0 = Date.parse('2026-12-03T08:39:22.000Z');

/**
 * A broker on a fake clock: GET /health takes `latencyMs` and its Date header says `skewMs` off
 * the local clock; the token read answers as `token` says.
 */
function broker(options: {
  clock: FakeClock;
  health?: Partial<Health> | BrokerError;
  latencyMs?: number;
  skewMs?: number;
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
      const brokerDateMs = Math.floor((sentAt + (options.skewMs ?? 0)) / 1000) * 1000;
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
      clockSkewMs: 494,
      server: 'http://broker:6632',
      token: null,
    });
    assert.deepEqual(reads, ['health'], 'no token in force: nothing but GET /health');
  });

  it("measures the broker's clock against ours to within a second, and warns from a minute on", async () => {
    const ahead = await ping({ skewMs: 185_000 });
    assert.ok(Math.abs(ahead.record.clockSkewMs - 185_000) <= 1000, String(ahead.record.clockSkewMs));
    assert.match(ahead.io.stderr.text, /warning: the broker's clock is 3m0\ds ahead of this machine's/);
    const behind = await ping({ skewMs: -120_000 });
    assert.ok(Math.abs(behind.record.clockSkewMs + 120_000) <= 1000);
    assert.match(behind.io.stderr.text, /behind this machine's/);
    const close = await ping({ skewMs: 20_000 });
    assert.equal(close.io.stderr.text, '', 'seconds are no warning');
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

  it('shows the skew in words, within a second as 0s', () => {
    assert.equal(formatSkew(null), '-');
    assert.equal(formatSkew(400), '0s');
    assert.equal(formatSkew(-185_000), '-3m05s');
    assert.equal(formatSkew(2_000), '+2s');
  });
});
