import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isHeld, parseRenewal, type RawAnswer } from '../../src/broker/contract.js';
import { AuthError, BrokerError } from '../../src/exit.js';
import { recordedAnswers } from '../support/recorded.js';

const SERVER = 'http://broker.test:6632';
const ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';
const T = '2026-07-30T11:06:44.512873Z';

function ok(body: unknown, headers: RawAnswer['headers'] = {}): RawAnswer {
  return { status: 200, headers, body: typeof body === 'string' ? body : JSON.stringify(body) };
}

function documented(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { leaseId: ID, success: true, renewed: 2, newExpiresAt: T, expiresAt: T, lease_expires_at: T, ...overrides };
}

/** The recorded answers of the real broker, by case title (test/fixtures; docs/broker.md#recorded-answers). */
function recorded(): Map<string, RawAnswer> {
  return recordedAnswers('real-broker-extend.txt', (title) => title);
}

describe('parseRenewal: the documented object', () => {
  it('keeps the six keys as the broker sent them and reads renewed', () => {
    const renewal = parseRenewal(ID, ok(documented()), SERVER);
    assert.deepEqual(renewal.result, documented());
    assert.equal(renewal.shape, 'documented');
    assert.equal(renewal.expiresAtMs, Date.parse('2026-07-30T11:06:44.512Z'));
    assert.equal(isHeld(renewal), true);
  });

  it('renewed 0 is not held even when success says true', () => {
    const renewal = parseRenewal(
      ID,
      ok(documented({ renewed: 0, success: true, newExpiresAt: null, expiresAt: null, lease_expires_at: null })),
      SERVER,
    );
    assert.equal(isHeld(renewal), false);
    assert.equal(renewal.result.success, true, 'success is printed as sent');
  });

  it('renewed decides over a success of false', () => {
    assert.equal(isHeld(parseRenewal(ID, ok(documented({ success: false })), SERVER)), true);
  });

  it('a failed renewal with nulls is not held', () => {
    const renewal = parseRenewal(
      ID,
      ok(documented({ success: false, renewed: 0, newExpiresAt: null, expiresAt: null, lease_expires_at: null })),
      SERVER,
    );
    assert.equal(isHeld(renewal), false);
    assert.equal(renewal.expiresAtMs, null);
  });

  it('reads the Date header as the broker clock', () => {
    const renewal = parseRenewal(ID, ok(documented(), { date: 'Wed, 02 Dec 2026 09:36:23 GMT' }), SERVER);
    assert.equal(renewal.brokerDateMs, Date.parse('2026-12-02T09:36:23Z'));
  });

  const outside: Array<[string, unknown]> = [
    ['renewed as a string', documented({ renewed: '2' })],
    ['renewed negative', documented({ renewed: -1 })],
    ['renewed fractional', documented({ renewed: 1.5 })],
    ['success missing', documented({ success: undefined })],
    ['an expiry that is not a timestamp', documented({ expiresAt: 'soon' })],
    ['disagreeing expiry keys', documented({ lease_expires_at: '2026-07-30T11:07:44.512873Z' })],
    ['renewed without an expiry', documented({ newExpiresAt: null, expiresAt: null, lease_expires_at: null })],
    ['another lease id', documented({ leaseId: 'someone-else' })],
    ['neither renewed nor success', { ok: true }],
    ['JSON that is not an object', 42],
    ['an empty array', []],
  ];
  for (const [name, body] of outside) {
    it(`rejects ${name} as a broker error, never a renewal`, () => {
      assert.throws(
        () => parseRenewal(ID, ok(body), SERVER),
        (error) => error instanceof BrokerError && !error.transient,
      );
    });
  }

  it('rejects HTTP 200 that is not JSON with an excerpt of the body', () => {
    assert.throws(
      () => parseRenewal(ID, ok('<html>proxy error</html>'), SERVER),
      (error) => error instanceof BrokerError && error.message.includes('<html>proxy error</html>'),
    );
  });

  it('keeps the excerpt of a huge body short', () => {
    assert.throws(
      () => parseRenewal(ID, ok('x'.repeat(100_000)), SERVER),
      (error) => error instanceof BrokerError && error.message.length < 400,
    );
  });

  it('treats 200 {success:false,error} without renewed as a broker failure, not a lost lease', () => {
    assert.throws(
      () => parseRenewal(ID, ok({ success: false, error: 'deadlock detected' }), SERVER),
      (error) => error instanceof BrokerError && error.message.includes('deadlock detected'),
    );
  });
});

describe('parseRenewal: the older array shape (docs/broker.md#array-shape)', () => {
  const answers = recorded();

  it('maps a recorded success to renewed 1 with its expiry in all three keys', () => {
    const answer = answers.get('extend 01a2361c-b52f-7000-a40b-921128688ca0 with {"seconds":120}');
    assert.ok(answer);
    const renewal = parseRenewal('01a2361c-b52f-7000-a40b-921128688ca0', answer, SERVER);
    const at = '2026-12-02T09:38:24.534Z';
    assert.deepEqual(renewal.result, {
      leaseId: '01a2361c-b52f-7000-a40b-921128688ca0',
      success: true,
      renewed: 1,
      newExpiresAt: at,
      expiresAt: at,
      lease_expires_at: at,
    });
    assert.equal(renewal.shape, 'array');
    assert.equal(renewal.brokerDateMs, Date.parse('2026-12-02T09:36:23Z'));
  });

  it('maps a recorded unknown lease to renewed 0 and keeps the reason', () => {
    const answer = answers.get('3a unknown lease id, {"seconds":120}');
    assert.ok(answer);
    const renewal = parseRenewal('00000000-0000-0000-0000-000000000000', answer, SERVER);
    assert.equal(renewal.result.renewed, 0);
    assert.equal(renewal.result.expiresAt, null);
    assert.equal(renewal.reason, 'Lease not found');
  });

  it('maps a recorded expired lease and keeps its reason', () => {
    const answer = answers.get('extend expired lease {"seconds":120}');
    assert.ok(answer);
    const renewal = parseRenewal('01a2361d-0c98-7000-b175-965f12828805', answer, SERVER);
    assert.equal(isHeld(renewal), false);
    assert.equal(renewal.reason, 'Lease already expired');
  });

  it('finds its entry by leaseId, not by index', () => {
    const body = [
      { error: null, expiresAt: T, index: 0, leaseId: 'other', success: true },
      { error: 'Lease not found', expiresAt: null, index: 1, leaseId: ID, success: false },
    ];
    assert.equal(isHeld(parseRenewal(ID, ok(body), SERVER)), false);
  });

  it('rejects an array without our lease id', () => {
    assert.throws(
      () => parseRenewal(ID, ok([{ error: null, expiresAt: T, index: 0, leaseId: 'other', success: true }]), SERVER),
      BrokerError,
    );
  });

  it('rejects success without an expiry', () => {
    assert.throws(
      () => parseRenewal(ID, ok([{ error: null, expiresAt: null, index: 0, leaseId: ID, success: true }]), SERVER),
      BrokerError,
    );
  });

  it("maps the recorded 401 and 403 to auth errors with the broker's words", () => {
    for (const title of ['3e no token', '3e read-only token (role=read-only)', '3e token signed with wrong secret']) {
      const answer = answers.get(title);
      assert.ok(answer, title);
      assert.throws(
        () => parseRenewal('nope', answer, SERVER),
        (error) =>
          error instanceof AuthError &&
          error.exitCode === 3 &&
          /Authentication required|Insufficient permissions|invalid signature/.test(error.message),
      );
    }
  });

  it('maps the recorded 404 of a GET to "is it a Queen broker?"', () => {
    const answer = answers.get('extra: GET on the route');
    assert.ok(answer);
    assert.throws(
      () => parseRenewal(ID, answer, SERVER),
      (error) => error instanceof BrokerError && /Queen broker/.test(error.message),
    );
  });
});

describe('parseRenewal: statuses and what is retried', () => {
  const cases: Array<[string, RawAnswer, boolean]> = [
    ['500 pool', { status: 500, headers: {}, body: '{"error":"pool"}' }, true],
    ['500 renew failed', { status: 500, headers: {}, body: '{"error":"renew failed: deadlock"}' }, false],
    ['500 type error', { status: 500, headers: {}, body: '{"error":"[json.exception.type_error.302] x"}' }, false],
    ['502', { status: 502, headers: {}, body: 'bad gateway' }, true],
    ['503', { status: 503, headers: {}, body: '' }, true],
    ['504', { status: 504, headers: {}, body: '' }, true],
    ['400', { status: 400, headers: {}, body: '{"error":"Empty request body"}' }, false],
    ['302', { status: 302, headers: { location: 'https://elsewhere/' }, body: '' }, false],
  ];
  for (const [name, answer, transient] of cases) {
    it(`${name} is a broker error, ${transient ? '' : 'not '}retried`, () => {
      assert.throws(
        () => parseRenewal(ID, answer, SERVER),
        (error) => error instanceof BrokerError && error.transient === transient,
      );
    });
  }

  it('names the redirect target', () => {
    assert.throws(
      () => parseRenewal(ID, { status: 302, headers: { location: 'https://elsewhere/' }, body: '' }, SERVER),
      /redirect \(HTTP 302 to https:\/\/elsewhere\/\)/,
    );
  });
});
