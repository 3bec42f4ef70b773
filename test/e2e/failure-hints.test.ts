/**
 * What a final failure says to check, run in-process (issue 13): each verb, after its
 * retries, names what stands between it and a renewal: a rate limit in front of the broker, a
 * proxy or a broker down or restarting, the broker's database. The words are unit-tested in
 * test/unit/failure-hints.test.ts; here they must reach stderr.
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import type { Simulator } from '../../tools/simulator/index.js';
import { instantClock } from '../support/fakes.js';
import { runInProcess } from '../support/in-process.js';
import { sharedSimulator } from '../support/shared.js';

const simulator = sharedSimulator();
let sim: Simulator;
beforeEach(() => {
  sim = simulator();
});

const RATE_LIMIT =
  /\n {2}check the rate limits of the proxy or load balancer in front of the broker, or lower --concurrency\n/;
const UNAVAILABLE =
  /\n {2}check the proxy or load balancer in front of the broker, and whether the broker is down or restarting\n/;
const DATABASE = /\n {2}check the broker's database \(down, or its connection pool exhausted\) and the broker's log\n/;

describe('failure hints on stderr', () => {
  const cases = [
    { what: '429', status: 429, body: '{"error":"Too Many Requests"}', hint: RATE_LIMIT },
    { what: '503', status: 503, body: '{"error":"Service Unavailable"}', hint: UNAVAILABLE },
    { what: '500 pool', status: 500, body: '{"error":"pool"}', hint: DATABASE },
  ];
  for (const { what, status, body, hint } of cases) {
    it(`extend, ${what} on every try: retried, exit 2, and what to check under the error`, async () => {
      sim.inject({ kind: 'status', status, body });
      // The backoff between tries on a clock that does not wait: what is said is the point.
      const result = await runInProcess(['lease', 'extend', sim.mint(), '--server', sim.url], { clock: instantClock });
      assert.equal(result.code, 2, result.stderr);
      assert.equal(sim.log.length, 3, 'the default two retries, then the final error');
      assert.equal(result.stdout, '');
      assert.match(result.stderr, hint);
    });
  }

  it('list, 502 from the consumer-group route: exit 2, and the proxy or the broker to check', async () => {
    sim.inject({ kind: 'status', status: 502, body: '<html>Bad Gateway</html>' });
    const result = await runInProcess(['lease', 'list', '--server', sim.url, '-o', 'json'], { clock: instantClock });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, UNAVAILABLE);
  });

  it('watch, 503 on every try until the lease could not be watched: exit 2, and what to check', async () => {
    sim.inject({ kind: 'status', status: 503, body: '{"error":"Service Unavailable"}' });
    // The watch gives up once --seconds passed without a first renewal: 2 s, however busy the machine.
    const result = await runInProcess([
      'lease',
      'watch',
      sim.mint(),
      '--seconds',
      '2',
      '--server',
      sim.url,
      '-o',
      'ndjson',
    ]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /could not be watched: no renewal succeeded within 2s of starting: .*HTTP 503/);
    assert.match(result.stderr, UNAVAILABLE);
  });
});
