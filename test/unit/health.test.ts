import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import type { RawAnswer } from '../../src/broker/contract.js';
import { clockSkewMs, isHealthy, parseHealth } from '../../src/broker/health.js';
import { AuthError, BrokerError } from '../../src/exit.js';

/** The recorded answers (test/fixtures/real-broker-health.txt), status line, headers and body. */
function recorded(): RawAnswer[] {
  const text = readFileSync(new URL('../../../test/fixtures/real-broker-health.txt', import.meta.url), 'utf8');
  return text
    .split(/^(?=HTTP\/1\.1 )/m)
    .slice(1)
    .map((block) => {
      const [head = '', rest = ''] = block.split(/\r?\n\r?\n/);
      const [statusLine = '', ...headerLines] = head.split('\n');
      const headers: Record<string, string> = {};
      for (const line of headerLines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      return { status: Number(statusLine.split(' ')[1]), headers, body: rest.split('\n')[0] ?? '' };
    });
}

const SERVER = 'http://localhost:6632';

describe('GET /health: the recorded answers', () => {
  const [healthy, unauthorized, unhealthy] = recorded();

  it('reads the healthy answer: status, database, version and the Date header', () => {
    const health = parseHealth(healthy as RawAnswer, SERVER);
    assert.deepEqual(health, {
      status: 'healthy',
      database: 'connected',
      version: '1.0.0',
      httpStatus: 200,
      brokerDateMs: Date.parse('2026-12-03T08:39:22Z'),
    });
    assert.equal(isHealthy(health), true);
  });

  it('reads the 503 with the database down as an answer, not a failure, and not healthy', () => {
    const health = parseHealth(unhealthy as RawAnswer, SERVER);
    assert.equal(health.status, 'unhealthy');
    assert.equal(health.database, 'disconnected');
    assert.equal(health.httpStatus, 503);
    assert.equal(isHealthy(health), false);
  });

  it('maps a 401 (something in front refusing) to an AuthError, a proxy 503 or 502 to a BrokerError', () => {
    assert.throws(() => parseHealth(unauthorized as RawAnswer, SERVER), AuthError);
    const proxy = { status: 503, headers: {}, body: '<html>Service Unavailable</html>' };
    assert.throws(
      () => parseHealth(proxy, SERVER),
      (error) => error instanceof BrokerError && error.status === 503,
    );
    assert.throws(() => parseHealth({ ...proxy, status: 502 }, SERVER), BrokerError);
  });

  it('refuses a 200 that is not a health report', () => {
    assert.throws(() => parseHealth({ status: 200, headers: {}, body: 'ok' }, SERVER), /not a health report/);
    assert.throws(() => parseHealth({ status: 200, headers: {}, body: '{"version":"1"}' }, SERVER), BrokerError);
  });
});

describe('clock skew from the Date header', () => {
  const at = (date: string | null) => ({
    status: 'healthy',
    database: 'connected',
    version: '1.0.0',
    httpStatus: 200,
    brokerDateMs: date === null ? null : Date.parse(date),
  });

  it("is the broker's clock minus ours, the header's second taken at its middle", () => {
    const local = Date.parse('2026-12-03T08:39:22.400Z');
    assert.equal(clockSkewMs(at('2026-12-03T08:39:22Z'), local - 100, local + 100), 100);
    assert.equal(clockSkewMs(at('2026-12-03T08:42:22Z'), local, local), 180_100, 'three minutes ahead');
    assert.equal(clockSkewMs(at('2026-12-03T08:38:22Z'), local, local), -59_900, 'a minute behind');
  });

  it('is unknown without a Date header', () => {
    assert.equal(clockSkewMs(at(null), 0, 0), null);
  });
});
