/**
 * `lease list --watch --metrics-address`: what each poll found, for Prometheus (docs/metrics.md):
 * held leases by group and queue as of the last listing that worked, the changes seen, and the
 * polls that failed.
 */
import type { HeldLease } from '../broker/consumer-groups.js';
import type { Clock } from '../clock.js';
import type { MetricsAddress } from './address.js';
import { baseRegistry, loadPromClient, metricsRoute } from './registry.js';
import { serveMetrics } from './server.js';

export interface ListMetrics {
  readonly address: string;
  /** A listing that worked: its records, and how many changes it showed. */
  listed(records: readonly HeldLease[], changes: number): void;
  pollFailed(): void;
  close(): Promise<void>;
}

export async function serveListMetrics(address: MetricsAddress, clock: Clock): Promise<ListMetrics> {
  const prom = await loadPromClient();
  const registry = baseRegistry(prom);
  const held = new prom.Gauge({
    name: 'queenctl_list_held_leases',
    help: 'Live leases by consumer group and queue, as of the last listing that worked.',
    labelNames: ['group', 'queue'],
    registers: [registry],
  });
  const changes = new prom.Counter({
    name: 'queenctl_list_changes_total',
    help: 'Changes seen between listings: leases added, changed or removed.',
    registers: [registry],
  });
  const failures = new prom.Counter({
    name: 'queenctl_list_poll_failures_total',
    help: 'Listings that failed (the broker unreachable or failing); the next poll is the retry.',
    registers: [registry],
  });
  const server = await serveMetrics(address, { '/metrics': metricsRoute(registry, clock) });
  return {
    address: server.address,
    listed(records, changed) {
      const counts = new Map<string, { group: string; queue: string; count: number }>();
      for (const record of records) {
        if (!record.live) continue;
        const key = JSON.stringify([record.consumerGroup, record.queue]);
        const entry = counts.get(key) ?? { group: record.consumerGroup, queue: record.queue, count: 0 };
        entry.count++;
        counts.set(key, entry);
      }
      // A group and queue no longer held has no series, rather than a 0 kept for ever.
      held.reset();
      for (const { group, queue, count } of counts.values()) held.set({ group, queue }, count);
      changes.inc(changed);
    },
    pollFailed: () => failures.inc(),
    close: () => server.close(),
  };
}
