/**
 * The scene of README.md's five-minute tour: the leases `npm run demo` (scripts/demo.ts) and
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

export function mintTourScene(sim: Simulator): TourScene {
  const LEASE = sim.mint({ queue: 'orders', partitions: [{ partition: 'p6' }, { partition: 'p7' }], seconds: 120 });
  const LEASE2 = sim.mint({ queue: 'orders', group: 'billing', partitions: [{ partition: 'p7' }], seconds: 300 });
  const LEASE3 = sim.mint({ queue: 'invoices', partitions: [{ partition: 'x' }], seconds: 60 });
  const DEAD = sim.mint({ queue: 'orders', partitions: [{ partition: 'p1' }], seconds: 60 });
  sim.release(DEAD);
  return { LEASE, LEASE2, LEASE3, DEAD };
}
