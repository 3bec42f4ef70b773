/**
 * The outage breaker of `lease watch` on fake time: when it opens (the broker's failure, not one
 * lease's), one probe at a time on a capped backoff that honours Retry-After and the least time
 * left, and how long the broker was down when it answers again.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_BREAKER, OutageBreaker } from '../../src/renewal/breaker.js';

const REFUSED = 'cannot reach the broker: connection refused';
const S = 1000;

describe('outage breaker: when it opens', () => {
  it('opens once failures in a row come from three leases, with no answer between', () => {
    const breaker = new OutageBreaker(DEFAULT_BREAKER, () => 1);
    assert.equal(breaker.failed('a', REFUSED, 0, 2_000), false);
    assert.equal(breaker.failed('a', REFUSED, 10, 2_000), false, 'the same lease again is not the broker');
    assert.equal(breaker.failed('b', REFUSED, 20, 2_000), false);
    assert.equal(breaker.failed('c', REFUSED, 30, 2_000), true, 'opened by this failure: reported once');
    assert.ok(breaker.isOpen);
    assert.equal(breaker.since, 30);
    assert.equal(breaker.error, REFUSED);
    assert.equal(breaker.failed('d', REFUSED, 40, 2_000), false, 'already open: not reported again');
  });

  it('an answer between failures means the broker is up: one lease failing alone never opens it', () => {
    const breaker = new OutageBreaker();
    for (let i = 0; i < 100; i++) {
      breaker.failed(`lease-${i}`, REFUSED, i * 10, 2_000);
      breaker.failed(`lease-${i}`, REFUSED, i * 10 + 1, 2_000);
      assert.equal(breaker.answered(i * 10 + 5), null, 'closed: nothing to recover from');
    }
    assert.equal(breaker.isOpen, false);
  });

  it('with two leases watched, both failing is an outage; one lease alone cannot tell, so never', () => {
    const two = new OutageBreaker();
    two.failed('a', REFUSED, 0, 2);
    assert.equal(two.failed('b', REFUSED, 1, 2), true);
    const one = new OutageBreaker();
    for (let i = 0; i < 20; i++) assert.equal(one.failed('a', REFUSED, i, 1), false);
  });
});

describe('outage breaker: probes', () => {
  it('one at a time: none while one is out, the next after a doubling backoff capped at 2 s', () => {
    const breaker = new OutageBreaker(DEFAULT_BREAKER, () => 1);
    for (const id of ['a', 'b', 'c']) breaker.failed(id, REFUSED, 0, 100);
    assert.equal(breaker.nextProbeAt, 500, 'the first probe half a second after it opened');
    assert.equal(breaker.probeDue(499), false);
    assert.equal(breaker.probeDue(500), true);
    breaker.probeSent();
    assert.equal(breaker.probeDue(10 * S), false, 'one probe at a time');
    assert.equal(breaker.nextProbeAt, null);
    const delays: number[] = [];
    let now = 500;
    for (let i = 0; i < 6; i++) {
      now += 5;
      delays.push(breaker.probeFailed(REFUSED, now, 60 * S, undefined));
      now = breaker.nextProbeAt as number;
      assert.ok(breaker.probeDue(now));
      breaker.probeSent();
    }
    assert.deepEqual(delays, [1_000, 2_000, 2_000, 2_000, 2_000, 2_000]);
  });

  it("waits the broker's Retry-After instead, but at most half the least time a lease has left", () => {
    const breaker = new OutageBreaker(DEFAULT_BREAKER, () => 1);
    for (const id of ['a', 'b', 'c']) breaker.failed(id, 'HTTP 503', 0, 100);
    breaker.probeSent();
    assert.equal(breaker.probeFailed('HTTP 503', 1_000, 60 * S, 5 * S), 5 * S, 'Retry-After: 5');
    breaker.probeSent();
    assert.equal(breaker.probeFailed('HTTP 503', 6_000, 6 * S, 30 * S), 3 * S, 'half of the 6 s left');
    breaker.probeSent();
    assert.equal(breaker.probeFailed(REFUSED, 9_000, 1 * S, undefined), 500, 'backoff, cut to half of 1 s');
  });

  it('the first answer closes it and says how long the broker was down', () => {
    const breaker = new OutageBreaker(DEFAULT_BREAKER, () => 1);
    for (const id of ['a', 'b', 'c']) breaker.failed(id, REFUSED, 1_000, 100);
    breaker.probeSent();
    assert.equal(breaker.answered(7_250), 6_250);
    assert.equal(breaker.isOpen, false);
    assert.equal(breaker.since, null);
    assert.equal(breaker.nextProbeAt, null);
    assert.equal(breaker.answered(8_000), null, 'once');
  });

  it('a probe that ended without an outcome frees the slot for the next', () => {
    const breaker = new OutageBreaker(DEFAULT_BREAKER, () => 1);
    for (const id of ['a', 'b', 'c']) breaker.failed(id, REFUSED, 0, 100);
    breaker.probeSent();
    breaker.probeDropped();
    assert.ok(breaker.probeDue(500));
  });
});

describe('outage breaker: how long the broker was down', () => {
  it('from when the first failing request was sent, not when its timeout ran out', () => {
    // A freeze: requests sent at 0 s time out at 10 s, the broker answers again at 12 s.
    const breaker = new OutageBreaker(DEFAULT_BREAKER, () => 1);
    breaker.failed('a', 'no answer within 10s', 10 * S, 2_000, 0);
    breaker.failed('b', 'no answer within 10s', 10 * S, 2_000, 0.1 * S);
    assert.equal(breaker.failed('c', 'no answer within 10s', 10 * S, 2_000, 0.2 * S), true);
    assert.equal(breaker.answered(12 * S, 11.5 * S), 12 * S, '12 s down, not the 2 s since it opened');
    // A refusal is known at once: sent and failed alike.
    breaker.failed('a', REFUSED, 20 * S, 2_000);
    breaker.failed('b', REFUSED, 20 * S, 2_000);
    breaker.failed('c', REFUSED, 20 * S, 2_000);
    assert.equal(breaker.answered(23 * S, 22 * S), 3 * S);
  });
});
