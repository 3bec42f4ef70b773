import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { dateHeaderSkew, estimateBrokerClock, remainingMs, timeZoneSuspicion } from '../../src/broker/broker-clock.js';
import { fakeRenewal } from '../support/fakes.js';

const S = 1000;
const DATE = Date.parse('2026-12-03T08:39:22Z');

describe("the broker's clock from a Date header", () => {
  it('allows [Date - received, Date + 2 s - sent]: whole seconds, up to a second stale, made in the round trip', () => {
    assert.deepEqual(dateHeaderSkew(DATE, DATE + 300, DATE + 500), { minMs: -500, maxMs: 1700 });
    assert.deepEqual(dateHeaderSkew(DATE, DATE - 180_000, DATE - 180_000), { minMs: 180_000, maxMs: 182_000 });
  });

  it('places the broker clock of a renewal that did not move the expiry at the middle of that range', () => {
    // The lease had 90 s left and a one-second inspect left it; Date 08:39:22, sent 22.300, received 22.500.
    const renewal = fakeRenewal('L', DATE + 90 * S, DATE);
    const clock = estimateBrokerClock(renewal, 1, DATE + 300, DATE + 500);
    assert.deepEqual(clock, { offsetMs: 600, source: 'date-header' });
    // At 22.500 local the broker's clock reads 23.100 by that middle: 88.9 s left of the 90.
    assert.equal(remainingMs(DATE + 90 * S, DATE + 500, clock), 88_900);
  });

  it('takes the renewal itself when it moved the expiry: brokerNow + seconds, to the millisecond', () => {
    const renewal = fakeRenewal('L', DATE + 400 + 30 * S, DATE);
    assert.deepEqual(estimateBrokerClock(renewal, 30, DATE + 300, DATE + 500), { offsetMs: 0, source: 'renewal' });
  });

  it('names the Date header in whole seconds when an expiry is hours earlier than it allows', () => {
    const renewal = fakeRenewal('L', DATE + 30 * S - 3_600_000, DATE);
    const said = timeZoneSuspicion(renewal, 30) ?? '';
    assert.match(said, /an expiry 1h earlier than its own clock allows \(Date: 2026-12-03T08:39:22Z\)/);
    assert.match(said, /does not run in UTC/);
  });
});
