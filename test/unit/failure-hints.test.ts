/**
 * What a final failure says to check once retries are spent (issue 13): a rate limit (429) points
 * at the proxy or load balancer in front of the broker and at --concurrency; 502/503/504 at that
 * proxy or a broker that is down or restarting; 500 and `500 pool` at the broker's database.
 * The hints live on the errors (broker/contract.ts), and every verb prints them the same way.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseGroupList } from '../../src/broker/consumer-groups.js';
import { FAILURE_HINTS, parseRenewal, statusError, type RawAnswer } from '../../src/broker/contract.js';
import { withRetries } from '../../src/broker/retry.js';
import { runExtend } from '../../src/commands/lease/extend.js';
import { BrokerError, QueenctlError } from '../../src/exit.js';
import { errorMessage } from '../../src/output/words.js';
import { bufferIO, FakeClock, instantClock } from '../support/fakes.js';
import { startWatch } from './watch-fakes.js';

const SERVER = 'http://broker.test:6632';
const answer = (status: number, body = '', headers: RawAnswer['headers'] = {}): RawAnswer => ({
  status,
  headers,
  body,
});

const RATE_LIMIT =
  /^check the rate limits of the proxy or load balancer in front of the broker, or lower --concurrency$/;
const UNAVAILABLE =
  /^check the proxy or load balancer in front of the broker, and whether the broker is down or restarting$/;
const DATABASE = /^check the broker's database \(down, or its connection pool exhausted\) and the broker's log$/;

const cases: Array<[string, RawAnswer, RegExp]> = [
  ['429', answer(429, '{"error":"Too Many Requests"}'), RATE_LIMIT],
  ['429 with Retry-After', answer(429, '', { 'retry-after': '1' }), RATE_LIMIT],
  ['502', answer(502, '<html>Bad Gateway</html>'), UNAVAILABLE],
  ['503', answer(503, '{"error":"unavailable"}'), UNAVAILABLE],
  ['504', answer(504), UNAVAILABLE],
  ['500 pool', answer(500, '{"error":"pool"}'), DATABASE],
  ['500 renew failed', answer(500, '{"error":"renew failed: deadlock detected"}'), DATABASE],
  ['500, anything else', answer(500, '{"error":"connection to server was lost"}'), DATABASE],
];

/** What the client reports when a request's deadline passes with no answer. */
const timedOut = (ms: number): BrokerError =>
  new BrokerError(
    `no answer from ${SERVER} within ${ms}ms`,
    true,
    'raise --timeout, or check the broker and its database',
  );

function hintOf(error: unknown): string {
  assert.ok(error instanceof QueenctlError, String(error));
  return error.hint ?? '';
}

describe('failure hints: on the error of each status', () => {
  for (const [what, raw, hint] of cases) {
    it(`${what}: says what to check, for the renewal and for the listing alike`, () => {
      assert.match(hintOf(statusError(raw, SERVER)), hint);
      assert.throws(
        () => parseRenewal('L1', raw, SERVER),
        (error) => hint.test(hintOf(error)),
      );
      assert.throws(
        () => parseGroupList(raw, SERVER),
        (error) => hint.test(hintOf(error)),
      );
    });
  }

  it('a failed query at HTTP 200 (no renewed): the database too', () => {
    const raw = answer(200, '{"success":false,"error":"could not connect to server"}');
    assert.throws(
      () => parseRenewal('L1', raw, SERVER),
      (error) => DATABASE.test(hintOf(error)),
    );
  });

  it('are the ones FAILURE_HINTS names, so every route says them in the same words', () => {
    assert.match(FAILURE_HINTS.rateLimited, RATE_LIMIT);
    assert.match(FAILURE_HINTS.unavailable, UNAVAILABLE);
    assert.match(FAILURE_HINTS.database, DATABASE);
  });

  it('a 4xx other than 429 keeps no such hint: the request, not the broker, is at fault', () => {
    assert.equal(statusError(answer(400, '{"error":"Empty request body"}'), SERVER).hint, undefined);
  });
});

describe('failure hints: printed after retries', () => {
  it('errorMessage: the reason on one line, the hint indented below it', () => {
    const error = statusError(answer(503, '{"error":"unavailable"}'), SERVER);
    assert.equal(
      errorMessage(error),
      'queenctl: the broker answered HTTP 503: unavailable\n' +
        '  check the proxy or load balancer in front of the broker, and whether the broker is down or restarting\n',
    );
  });

  it('the error that ends the retries keeps its hint', async () => {
    let tries = 0;
    const attempt = async (): Promise<never> => {
      tries++;
      throw statusError(answer(500, '{"error":"pool"}'), SERVER);
    };
    const policy = { retries: 2, baseDelayMs: 10, maxDelayMs: 10 };
    await assert.rejects(withRetries(attempt, policy, { clock: instantClock }), (error) =>
      DATABASE.test(hintOf(error)),
    );
    assert.equal(tries, 3);
  });

  it('a Retry-After too long to wait for says so, and still what to check', async () => {
    const limited = statusError(answer(429, '', { 'retry-after': '60' }), SERVER);
    const attempt = async (): Promise<never> => {
      throw limited;
    };
    const policy = { retries: 2, baseDelayMs: 10, maxDelayMs: 10, maxRetryAfterMs: 10_000 };
    await assert.rejects(withRetries(attempt, policy, { clock: instantClock }), (error) => {
      const [wait, check] = hintOf(error).split('\n  ');
      assert.match(wait ?? '', /longer than --timeout \(10s\) allows waiting/);
      assert.match(check ?? '', RATE_LIMIT);
      return true;
    });
  });

  for (const [what, raw, hint] of cases) {
    it(`extend over several leases, ${what} on every try: exit 2, and the hint under the error`, async () => {
      const clock = new FakeClock();
      const io = bufferIO();
      let requests = 0;
      const client = {
        server: SERVER,
        extend: async (leaseId: string) => {
          requests++;
          return parseRenewal(leaseId, raw, SERVER);
        },
      };
      const run = runExtend(
        {
          leaseIds: ['a', 'b'],
          seconds: 60,
          retry: { retries: 2, baseDelayMs: 10, maxDelayMs: 10, maxRetryAfterMs: 10_000 },
          concurrency: 2,
          format: 'ndjson',
          noHeaders: false,
        },
        { io, client, clock, signal: new AbortController().signal },
      );
      for (let waited = 0; waited < 5_000; waited += 50) {
        await new Promise((resolve) => setImmediate(resolve));
        clock.advance(50);
      }
      assert.equal(await run, 2);
      const retried = raw.status === 500 && !raw.body.includes('pool') ? 2 : 6;
      assert.equal(requests, retried, 'retried as transient failures are, and no more');
      const lines = io.stderr.text.split('\n');
      const failed = lines.findIndex((line) => line.includes('(lease a, b)'));
      assert.ok(failed >= 0, io.stderr.text);
      assert.match((lines[failed + 1] ?? '').replace(/^ {2}/, ''), hint);
    });
  }

  it("watch: the last try, cut short by the lease's own deadline, does not replace the broker's answer", async () => {
    // Every try gets a 503 at once, but the last ones, sent with little of the lease's time left,
    // hang until their deadline: that timeout says nothing about the broker the 503s did not.
    const w = startWatch({
      leaseIds: ['a'],
      setup: (broker) => {
        broker.client.extend = (_leaseId, _seconds, options) => {
          if ((options?.timeoutMs ?? 0) >= 500) return Promise.reject(statusError(answer(503), SERVER));
          return new Promise((_resolve, reject) =>
            w.clock.sleep(options?.timeoutMs ?? 0).then(() => reject(timedOut(options?.timeoutMs ?? 0))),
          );
        };
      },
      options: { requestTimeoutMs: 10_000, seconds: 3 },
    });
    await w.advance(4_000);
    assert.equal(w.status(), 2);
    assert.match(w.io.stderr.text, /could not be watched: no renewal succeeded within 3s of starting: .*HTTP 503/);
    assert.match(w.io.stderr.text, new RegExp(`\n  ${UNAVAILABLE.source.slice(1, -1)}\n`));
  });

  it('watch: a lease that could not be watched for a 503 says what to check', async () => {
    const w = startWatch({
      leaseIds: ['a'],
      setup: (broker) => {
        broker.failure = statusError(answer(503, '{"error":"unavailable"}'), SERVER);
      },
    });
    await w.advance(4_000);
    assert.equal(w.status(), 2);
    const lines = w.io.stderr.text.split('\n');
    const failed = lines.findIndex((line) => /lease a could not be watched: .*HTTP 503/.test(line));
    assert.ok(failed >= 0, w.io.stderr.text);
    assert.match((lines[failed + 1] ?? '').replace(/^ {2}/, ''), UNAVAILABLE);
  });
});
