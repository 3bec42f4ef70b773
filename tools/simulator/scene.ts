/**
 * The scene of README.md's five-minute tour: the leases (and queues of messages) `npm run demo` (scripts/demo.ts) and
 * every doc test (test/support/doctest.ts) start from, so that what the tour shows is what both
 * print.
 */
import type { Simulator } from './server.js';

export interface TourScene {
  /** Queue `orders`, partitions p6 and p7 (queue mode), 120 s. */
  LEASE: string;
  /** Queue `orders`, partition p7, consumer group `billing`, 300 s. */
  LEASE2: string;
  /** Queue `invoices`, partition x, 60 s: the tour's first renewal, to two minutes, shows. */
  LEASE3: string;
  /** Queue `orders`, partition p1, released by an ack: renews nothing. */
  DEAD: string;
}

/**
 * A queue with messages waiting, for `lease acquire` and `lease ack`: partition p1 holds three,
 * p2 one; a pop's lease lasts 120 s.
 */
export const TOUR_QUEUE = 'jobs';

/** A queue for `lease run --until-empty`: three emails on partition p1. */
export const TOUR_RUN_QUEUE = 'emails';

export function mintTourScene(sim: Simulator): TourScene {
  sim.createQueue({ name: TOUR_QUEUE, partitions: ['p1', 'p2'], leaseTime: 120, retryLimit: 3 });
  sim.push(TOUR_QUEUE, [{ job: 1 }, { job: 2 }, { job: 3 }], 'p1');
  sim.push(TOUR_QUEUE, [{ job: 4 }], 'p2');
  sim.createQueue({ name: TOUR_RUN_QUEUE, partitions: ['p1'], leaseTime: 120, retryLimit: 3 });
  sim.push(TOUR_RUN_QUEUE, [{ to: 'ann@example.com' }, { to: 'bo@example.com' }, { to: 'cy@example.com' }], 'p1');
  const LEASE = sim.mint({ queue: 'orders', partitions: [{ partition: 'p6' }, { partition: 'p7' }], seconds: 120 });
  const LEASE2 = sim.mint({ queue: 'orders', group: 'billing', partitions: [{ partition: 'p7' }], seconds: 300 });
  const LEASE3 = sim.mint({ queue: 'invoices', partitions: [{ partition: 'x' }], seconds: 60 });
  const DEAD = sim.mint({ queue: 'orders', partitions: [{ partition: 'p1' }], seconds: 60 });
  sim.release(DEAD);
  return { LEASE, LEASE2, LEASE3, DEAD };
}
