/**
 * The adaptive concurrency of `lease watch` on fake time: it ramps up while renewals wait and
 * latency holds, backs off when latency climbs or the broker fails, never passes its ceiling,
 * and knows when even the ceiling is not enough.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CONCURRENCY_CEILING,
  ConcurrencyController,
  DEFAULT_CONCURRENCY,
  capacityNeed,
} from '../../src/renewal/concurrency.js';

/**
 * Drives a controller the way the scheduler does against a broker answering in `latencyMs`:
 * every slot busy, each answer coming `latencyMs` after its request, for `rounds` round trips.
 * Returns the limit after each round.
 */
function run(
  controller: ConcurrencyController,
  start: number,
  rounds: number,
  latencyMs: (limit: number) => number,
  waiting = true,
): { limits: number[]; now: number } {
  let now = start;
  const limits: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const limit = controller.limit;
    const latency = latencyMs(limit);
    const sentAt = now;
    now += latency;
    for (let answer = 0; answer < limit; answer++) controller.record({ sentAt, now, outcome: 'answered', waiting });
    limits.push(controller.limit);
  }
  return { limits, now };
}

describe('adaptive concurrency: ramp up', () => {
  it('starts at --concurrency or 16 and grows while renewals wait for a slot and latency holds', () => {
    const controller = new ConcurrencyController({ initial: DEFAULT_CONCURRENCY, ceiling: CONCURRENCY_CEILING }, 0);
    assert.equal(controller.limit, 16);
    const { limits } = run(controller, 0, 40, () => 150);
    for (let i = 1; i < limits.length; i++)
      assert.ok((limits[i] as number) >= (limits[i - 1] as number), 'never shrinks');
    // About its square root per round trip: past 64 within a couple of seconds of 150 ms answers.
    const roundsTo64 = limits.findIndex((limit) => limit >= 64);
    assert.ok(roundsTo64 > 0 && roundsTo64 <= 12, `reached 64 after ${roundsTo64} round trips: ${limits.join(',')}`);
  });

  it('never passes its ceiling: --concurrency when given', () => {
    const controller = new ConcurrencyController({ initial: 4, ceiling: 4 }, 0);
    const { limits } = run(controller, 0, 50, () => 100);
    assert.deepEqual(new Set(limits), new Set([4]));
    const unbounded = new ConcurrencyController({ initial: 16, ceiling: CONCURRENCY_CEILING }, 0);
    const after = run(unbounded, 0, 200, () => 100).limits;
    assert.equal(Math.max(...after), CONCURRENCY_CEILING);
    assert.ok(unbounded.atCeiling);
  });

  it('does not grow when nothing waits for a slot: a few leases need no more', () => {
    const controller = new ConcurrencyController({ initial: 16, ceiling: 256 }, 0);
    const { limits } = run(controller, 0, 30, () => 100, false);
    assert.deepEqual(new Set(limits), new Set([16]));
  });
});

describe('adaptive concurrency: back off', () => {
  it('when latency climbs well over its floor (the broker queues), multiplicatively, then holds', () => {
    const controller = new ConcurrencyController({ initial: 16, ceiling: 256 }, 0);
    // A broker that takes 64 requests at 100 ms, then queues: latency grows with what is in flight.
    const latency = (limit: number): number => (limit <= 64 ? 100 : 100 * (limit / 64) ** 2);
    const { limits } = run(controller, 0, 100, latency);
    const settled = limits.slice(-40);
    assert.ok(Math.max(...settled) <= 100, `kept near what the broker takes: ${settled.join(',')}`);
    assert.ok(Math.min(...settled) >= 32, `but not far below it: ${settled.join(',')}`);
    assert.ok(
      settled.some((limit, i) => i > 0 && limit < (settled[i - 1] as number)),
      'it backed off at least once',
    );
  });

  it('halves on failures, once for every request that was in flight when they began', () => {
    const controller = new ConcurrencyController({ initial: 64, ceiling: 256 }, 0);
    // 64 requests sent at 1000 all fail together at 1050: one decrease, not 64.
    for (let i = 0; i < 64; i++) controller.record({ sentAt: 1_000, now: 1_050, outcome: 'overloaded', waiting: true });
    assert.equal(controller.limit, 32);
    // A request sent after the decrease that fails too: the trouble goes on, halve again.
    controller.record({ sentAt: 1_060, now: 1_100, outcome: 'overloaded', waiting: true });
    assert.equal(controller.limit, 16);
    for (let i = 0; i < 20; i++)
      controller.record({ sentAt: 1_200, now: 1_300 + i, outcome: 'overloaded', waiting: true });
    assert.equal(controller.limit, 8);
  });

  it('never goes below one request in flight', () => {
    const controller = new ConcurrencyController({ initial: 2, ceiling: 256 }, 0);
    for (let t = 0; t < 10; t++)
      controller.record({ sentAt: t * 100, now: t * 100 + 50, outcome: 'overloaded', waiting: true });
    assert.equal(controller.limit, 1);
  });
});

describe('adaptive concurrency: when even the ceiling is not enough', () => {
  it('capacity is the ceiling over the latency seen lately', () => {
    const controller = new ConcurrencyController({ initial: 2, ceiling: 2 }, 0);
    assert.equal(controller.capacityPerSecond(), null, 'unknown before any answer');
    run(controller, 0, 4, () => 200);
    assert.equal(controller.capacityPerSecond(), 10);
  });

  it('need: leases over the lease length less the margin, and over --every for the plan', () => {
    // 1,500 leases at --seconds 9 (--every 3 s, margin 2.25 s): 500/s planned, 222/s or they expire.
    const need = capacityNeed(1_500, 3_000, 9, 2_250);
    assert.equal(need.plannedPerSecond, 500);
    assert.equal(Math.round(need.neededPerSecond), 222);
  });
});

describe('adaptive concurrency: a broker that became slower for good', () => {
  it('backs off once; when sending less does not bring latency down, takes it as the new floor and ramps again', () => {
    const controller = new ConcurrencyController({ initial: 64, ceiling: 256 }, 0);
    const { now } = run(controller, 0, 5, () => 2);
    const before = controller.limit;
    // From 2 ms to 80 ms whatever the load (a machine or a database busy with something else):
    // not ours to fix by sending less.
    const slower = run(controller, now, 60, () => 80);
    assert.ok(Math.min(...slower.limits) >= before * 0.75 - 1, `one decrease at most: ${slower.limits.join(',')}`);
    assert.equal(controller.floorLatencyMs, 80);
    assert.ok((slower.limits.at(-1) as number) > before, `then ramped again: ${slower.limits.join(',')}`);
  });
});
