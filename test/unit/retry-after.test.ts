/**
 * Retry-After on 429 and 503 (docs/cli-contract.md): read from the answer in seconds or as an
 * HTTP date, a 429 retried like a 503, and waited for by extend and inspect instead of the
 * backoff, for the whole run, but never longer than --timeout.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LeaseIdSource } from '../../src/args.js';
import type { Renewal } from '../../src/broker/contract.js';
import { parseRenewal, retryAfterMs, type RawAnswer } from '../../src/broker/contract.js';
import { DEFAULT_RETRY, retryWaitMs, withRetries } from '../../src/broker/retry.js';
import { renewAll } from '../../src/renewal/renew-all.js';
import { BrokerError } from '../../src/exit.js';
import { FakeClock } from '../support/fakes.js';

const SERVER = 'http://broker.test:6632';
const ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';
const DATE = 'Wed, 02 Dec 2026 10:00:00 GMT';

function statusError(status: number, headers: RawAnswer['headers'], body = ''): BrokerError {
  try {
    parseRenewal(ID, { status, headers, body }, SERVER);
  } catch (error) {
    assert.ok(error instanceof BrokerError, String(error));
    return error;
  }
  assert.fail('a status other than 200 is an error');
}

describe('Retry-After: reading it', () => {
  it('in seconds, or as an HTTP date measured against the answer’s own Date header', () => {
    assert.equal(retryAfterMs({ 'retry-after': '5' }), 5_000);
    assert.equal(retryAfterMs({ 'retry-after': ' 0 ' }), 0);
    assert.equal(retryAfterMs({ 'retry-after': 'Wed, 02 Dec 2026 10:00:30 GMT', date: DATE }), 30_000);
    assert.equal(retryAfterMs({ 'retry-after': 'Wed, 02 Dec 2026 09:59:00 GMT', date: DATE }), 0, 'passed: at once');
  });

  it('not at all when absent, unreadable, or a date with no Date header to measure it by', () => {
    assert.equal(retryAfterMs({}), undefined);
    assert.equal(retryAfterMs({ 'retry-after': 'soon' }), undefined);
    assert.equal(retryAfterMs({ 'retry-after': '-3' }), undefined);
    assert.equal(retryAfterMs({ 'retry-after': 'Wed, 02 Dec 2026 10:00:30 GMT' }), undefined);
  });

  it('a 429 is a rate limit, retried, and says who may be limiting and what it asked', () => {
    const error = statusError(429, { 'retry-after': '2' }, '{"error":"Too Many Requests"}');
    assert.equal(error.transient, true);
    assert.equal(error.retryAfterMs, 2_000);
    assert.equal(
      error.message,
      'the broker, or a proxy in front of it, is rate-limiting requests (HTTP 429: Too Many Requests); ' +
        'it asked to retry after 2s',
    );
    assert.match(error.hint ?? '', /lower --concurrency/);
    assert.equal(statusError(429, {}).retryAfterMs, undefined);
  });

  it('a 503 carries it too; other statuses do not', () => {
    const error = statusError(503, { 'retry-after': '7' });
    assert.equal(error.retryAfterMs, 7_000);
    assert.equal(error.message, 'the broker answered HTTP 503; it asked to retry after 7s');
    assert.equal(statusError(502, { 'retry-after': '7' }).retryAfterMs, undefined);
  });
});

describe('Retry-After: extend and inspect wait for it', () => {
  const policy = { ...DEFAULT_RETRY, maxRetryAfterMs: 10_000 };
  const throttled = (ms: number): BrokerError => new BrokerError('HTTP 429', true, undefined, 429, ms);

  it('instead of the backoff, up to --timeout; longer is not waited for', () => {
    assert.equal(
      retryWaitMs(throttled(3_000), 1, policy, () => 1),
      3_000,
    );
    assert.equal(
      retryWaitMs(throttled(10_000), 1, policy, () => 1),
      10_000,
    );
    assert.equal(
      retryWaitMs(throttled(10_001), 1, policy, () => 1),
      null,
    );
    assert.equal(
      retryWaitMs(new BrokerError('HTTP 503', true), 1, policy, () => 1),
      200,
      'none: the backoff',
    );
  });

  it('a Retry-After longer than --timeout ends the retries at once, saying so and what to do', async () => {
    const clock = new FakeClock();
    let calls = 0;
    const attempt = async (): Promise<string> => {
      calls++;
      throw new BrokerError('the broker answered HTTP 503; it asked to retry after 30s', true, undefined, 503, 30_000);
    };
    await assert.rejects(withRetries(attempt, policy, { clock }), (error: unknown) => {
      assert.ok(error instanceof BrokerError);
      assert.match(error.message, /it asked to retry after 30s/);
      assert.equal(
        error.hint,
        'that is longer than --timeout (10s) allows waiting; try again then, or raise --timeout to wait for it',
      );
      return true;
    });
    assert.equal(calls, 1);
    assert.deepEqual(clock.sleeps, []);
  });

  it("holds every request of the run until it has passed, not only the throttled lease's", async () => {
    const clock = new FakeClock();
    const start = clock.now();
    const sent: Array<[string, number]> = [];
    const failures = new Map<string, BrokerError>([
      ['a', new BrokerError('HTTP 429', true, undefined, 429, 2_000)],
      ['b', new BrokerError('HTTP 503', true, undefined, 503)],
    ]);
    const client = {
      extend: async (leaseId: string): Promise<Renewal> => {
        sent.push([leaseId, clock.now() - start]);
        const failure = failures.get(leaseId);
        failures.delete(leaseId);
        if (failure) throw failure;
        return parseRenewal(
          leaseId,
          {
            status: 200,
            headers: {},
            body: JSON.stringify({
              leaseId,
              success: true,
              renewed: 1,
              newExpiresAt: null,
              expiresAt: null,
              lease_expires_at: null,
            }),
          },
          SERVER,
        );
      },
    };
    const source: LeaseIdSource = {
      ids: (async function* () {
        yield* ['a', 'b'];
      })(),
      single: false,
      cancel: () => {},
    };
    const run = renewAll(
      source,
      { seconds: 60, retry: { ...policy, retries: 2 }, concurrency: 2 },
      { client, clock, signal: new AbortController().signal },
      async () => {},
    );
    for (let t = 0; t < 3_000; t += 50) {
      await new Promise((resolve) => setImmediate(resolve));
      clock.advance(50);
    }
    await run;
    // Nothing goes out until the 2 s the broker asked for have passed: b's own backoff would
    // have been 100-200 ms.
    assert.deepEqual(sent[0], ['a', 0]);
    assert.ok(
      sent.slice(1).every(([, at]) => at >= 2_000),
      JSON.stringify(sent),
    );
    assert.deepEqual(
      sent.filter(([leaseId]) => leaseId === 'a'),
      [
        ['a', 0],
        ['a', 2_000],
      ],
    );
    assert.equal(sent.filter(([leaseId]) => leaseId === 'b').length, 2, 'b failed once too, and was retried');
  });
});
