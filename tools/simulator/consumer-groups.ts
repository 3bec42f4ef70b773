/**
 * The broker's partitions as its consumer groups see them (docs/broker.md, "Consumer groups"), and
 * the answers of the two routes that list them. Each (group, queue, partition) that a lease ever
 * claimed has one slot, whose holder is the lease that claimed it last:
 *
 *   held   the holder's row is live: `workerId` the lease id, `leaseActive` true;
 *   stale  the row expired and nobody acked: `workerId` still the lease id, `leaseActive` false;
 *   acked  released by an ack: `workerId` null, `leaseActive` false, and the row stays listed.
 *
 * A partition never claimed has no slot and is not listed. The holder's row is the very object the
 * lease keeps (leases.ts), so a renewal or an expiry shows here at once.
 *
 * Tenants: the broker's documents say nothing about them on these routes. The simulator isolates
 * them as the extend route does (a lease of another tenant is invisible): a token sees the slots
 * whose last holder had its tenant, and a group with nothing visible is an unknown group.
 */
import type { Scope } from './auth.js';
import type { LeaseRow, StoredLease } from './leases.js';
import { isoMillis } from './wire.js';

/** The lease that claimed a slot last, and its row for that slot. */
export interface Holder {
  readonly lease: StoredLease;
  readonly row: LeaseRow;
}

interface PartitionSlot {
  /** null after an ack. */
  holder: Holder | null;
  /** Of the last holder: who may see the slot. */
  tenant: string | undefined;
  /** Broker epoch ms of the last claim. */
  claimedAt: number;
  /** Broker epoch ms of the last ack, null before any. */
  lastConsumedAt: number | null;
  totalConsumed: number;
}

interface QueueSlots {
  readonly partitions: Map<string, PartitionSlot>;
  /** Where the search for a partition name this (group, queue) never used starts. */
  nextUnnamed: number;
}

/** One partition of `GET /api/v1/consumer-groups/:group`, keys in the recorded (alphabetical) order. */
export interface WirePartition {
  lastConsumedAt: string | null;
  leaseActive: boolean;
  offsetLag: number;
  partition: string;
  timeLagSeconds: number;
  totalConsumed: number;
  workerId: string | null;
}

/** One entry of `GET /api/v1/consumer-groups`, keys in the recorded (alphabetical) order. */
export interface WireGroupSummary {
  maxTimeLag: number;
  members: number;
  name: string;
  partitionsWithLag: number;
  queueName: string;
  state: string;
  subscriptionCreatedAt: null;
  subscriptionMode: null;
  subscriptionTimestamp: null;
  topics: string[];
  totalLag: null;
}

/** The answer to `GET /api/v1/consumer-groups/:group`: partitions by queue name. */
export type WireGroup = Record<string, { partitions: WirePartition[] }>;

/** Code-unit order, the order of the recording (`__QUEUE_MODE__` before `billing`, `p1` before `p2`). */
const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export class ConsumerGroups {
  /** group → queue → its slots. */
  private readonly groups = new Map<string, Map<string, QueueSlots>>();

  /**
   * A name for a row minted without one: the first `p<n>` that (group, queue) never used and that
   * is not in `reserved` (the names the same mint is about to claim). So unnamed mints never take
   * a partition over; taking over is for rows that name their partition.
   */
  freshName(group: string, queue: string, reserved: ReadonlySet<string>): string {
    const slots = this.queueSlots(group, queue);
    let n = slots.nextUnnamed;
    while (slots.partitions.has(`p${n}`) || reserved.has(`p${n}`)) n++;
    slots.nextUnnamed = n + 1;
    return `p${n}`;
  }

  /** The holder of (group, queue, partition), if any lease holds it (live or stale). */
  holderOf(group: string, queue: string, partition: string): Holder | null {
    return this.groups.get(group)?.get(queue)?.partitions.get(partition)?.holder ?? null;
  }

  /**
   * `lease` claims its `row`: it becomes the slot's holder, whoever held it before. The caller
   * (leases.ts) takes the row away from the previous holder first.
   */
  claim(lease: StoredLease, row: LeaseRow, now: number): void {
    const partitions = this.queueSlots(row.group, row.queue).partitions;
    const slot = partitions.get(row.partition);
    if (slot === undefined) {
      partitions.set(row.partition, {
        holder: { lease, row },
        tenant: lease.tenant,
        claimedAt: now,
        lastConsumedAt: null,
        totalConsumed: 0,
      });
      return;
    }
    slot.holder = { lease, row };
    slot.tenant = lease.tenant;
    slot.claimedAt = now;
  }

  /** An ack of `lease`: every slot it still holds loses its holder and counts one consumption. */
  release(lease: StoredLease, now: number): void {
    for (const row of lease.rows) this.releaseRow(lease, row, now);
  }

  /** One row of `lease` released (queues.ts): its slot loses its holder and counts one consumption. */
  releaseRow(lease: StoredLease, row: LeaseRow, now: number): void {
    const slot = this.groups.get(row.group)?.get(row.queue)?.partitions.get(row.partition);
    if (slot?.holder?.lease !== lease) return;
    slot.holder = null;
    slot.lastConsumedAt = now;
    slot.totalConsumed++;
  }

  /** `GET /api/v1/consumer-groups`: one entry per (group, queue) with a slot `scope` may see. */
  summaries(scope: Scope, now: number): WireGroupSummary[] {
    const summaries: WireGroupSummary[] = [];
    for (const name of [...this.groups.keys()].sort(byName)) {
      const answer = this.group(name, scope, now) ?? {};
      for (const [queueName, { partitions }] of Object.entries(answer)) {
        summaries.push(summary(name, queueName, partitions));
      }
    }
    return summaries;
  }

  /**
   * `GET /api/v1/consumer-groups/:group`: the slots `scope` may see, by queue, both sorted by
   * name; undefined when there is none (the broker answers an unknown group with an empty body).
   */
  group(name: string, scope: Scope, now: number): WireGroup | undefined {
    const queues = this.groups.get(name);
    if (queues === undefined) return undefined;
    const answer: WireGroup = {};
    let any = false;
    for (const queue of [...queues.keys()].sort(byName)) {
      const partitions: WirePartition[] = [];
      const slots = queues.get(queue)?.partitions ?? new Map<string, PartitionSlot>();
      for (const partition of [...slots.keys()].sort(byName)) {
        const slot = slots.get(partition);
        if (slot === undefined || (scope !== null && scope.tenant !== slot.tenant)) continue;
        partitions.push(wirePartition(partition, slot, now));
      }
      if (partitions.length === 0) continue;
      answer[queue] = { partitions };
      any = true;
    }
    return any ? answer : undefined;
  }

  private queueSlots(group: string, queue: string): QueueSlots {
    let queues = this.groups.get(group);
    if (queues === undefined) {
      queues = new Map();
      this.groups.set(group, queues);
    }
    let slots = queues.get(queue);
    if (slots === undefined) {
      slots = { partitions: new Map(), nextUnnamed: 1 };
      queues.set(queue, slots);
    }
    return slots;
  }
}

/**
 * The lag fields are plausible rather than the broker's: a held or stale partition has one
 * message waiting since its claim (`timeLagSeconds` counts from one second at the claim, as
 * recorded), an acked one none.
 */
function wirePartition(partition: string, slot: PartitionSlot, now: number): WirePartition {
  const holder = slot.holder;
  return {
    lastConsumedAt: slot.lastConsumedAt === null ? null : isoMillis(slot.lastConsumedAt),
    leaseActive: holder !== null && holder.row.expiresAt > now,
    offsetLag: holder === null ? 0 : 1,
    partition,
    timeLagSeconds: holder === null ? 0 : Math.floor(Math.max(0, now - slot.claimedAt) / 1000) + 1,
    totalConsumed: slot.totalConsumed,
    workerId: holder === null ? null : holder.lease.leaseId,
  };
}

/**
 * Derived to fit the recording (the broker's own rules are not documented): `members` counts the
 * partitions listed, `state` is `Stable` once one of them was consumed and `Dead` before.
 */
function summary(name: string, queueName: string, partitions: WirePartition[]): WireGroupSummary {
  return {
    maxTimeLag: partitions.reduce((max, p) => Math.max(max, p.timeLagSeconds), 0),
    members: partitions.length,
    name,
    partitionsWithLag: partitions.filter((p) => p.offsetLag > 0).length,
    queueName,
    state: partitions.some((p) => p.lastConsumedAt !== null) ? 'Stable' : 'Dead',
    subscriptionCreatedAt: null,
    subscriptionMode: null,
    subscriptionTimestamp: null,
    topics: [queueName],
    totalLag: null,
  };
}
