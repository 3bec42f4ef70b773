/**
 * The consumer-group routes, read for `lease list`: which lease id holds which partition
 * (docs/broker.md, "Consumer groups"). The broker has no route that lists leases; these name
 * each partition's holder in `workerId`, and whether its lease is still active.
 *
 * Like the renewal (contract.ts), an answer is checked against its shape: anything outside it
 * is a BrokerError quoting what came back, never a guess and never a crash.
 */
import { BrokerError } from '../exit.js';
import { excerpt, isObject, statusError, type RawAnswer, type RouteWords } from './contract.js';

export const GROUPS_PATH = '/api/v1/consumer-groups';

/** The group queue-mode consumers (a pop without a consumer group) are filed under. */
export const QUEUE_MODE_GROUP = '__QUEUE_MODE__';

/** The path of one group's partitions; the name is percent-encoded, never interpreted. */
export function groupPath(group: string): string {
  return `${GROUPS_PATH}/${encodeURIComponent(group)}`;
}

const LISTING_WORDS: RouteWords = {
  action: 'the listing of consumer groups',
  roleHint: 'listing leases needs a token with the read-only role at least',
  route: 'consumer-group route',
};

/** One (group, queue) the broker knows, from GET /api/v1/consumer-groups. */
export interface GroupQueue {
  group: string;
  queue: string;
}

/** One partition of a group's answer, as far as `list` needs it. */
export interface PartitionHolder {
  group: string;
  queue: string;
  partition: string;
  /** The lease id of the pop that claimed it; null once released by an ack (or never leased). */
  leaseId: string | null;
  /** The broker's `lease_expires_at > now()`. */
  leaseActive: boolean;
}

function outsideContract(what: string, body: string): BrokerError {
  return new BrokerError(
    `the broker's answer is outside the consumer-group contract: ${what}; it sent ${excerpt(body)}`,
    false,
    'nothing is known about the leases; is --server a Queen broker of a supported version?',
  );
}

function parseJson(answer: RawAnswer, server: string): unknown {
  if (answer.status !== 200) throw statusError(answer, server, LISTING_WORDS);
  try {
    return JSON.parse(answer.body);
  } catch {
    throw outsideContract('HTTP 200 with a body that is not JSON', answer.body);
  }
}

/** GET /api/v1/consumer-groups: one entry per (group, queue). */
export function parseGroupList(answer: RawAnswer, server: string): GroupQueue[] {
  const parsed = parseJson(answer, server);
  if (!Array.isArray(parsed)) throw outsideContract('the list of consumer groups is not an array', answer.body);
  return parsed.map((entry) => {
    if (!isObject(entry) || typeof entry.name !== 'string' || typeof entry.queueName !== 'string') {
      throw outsideContract('an entry without a string name and queueName', answer.body);
    }
    return { group: entry.name, queue: entry.queueName };
  });
}

/**
 * GET /api/v1/consumer-groups/:group: an object keyed by queue name, each with its partitions.
 * An unknown group is answered 200 with an empty body: nothing found, not an error.
 */
export function parseGroupPartitions(group: string, answer: RawAnswer, server: string): PartitionHolder[] {
  if (answer.status === 200 && answer.body.trim() === '') return [];
  const parsed = parseJson(answer, server);
  if (!isObject(parsed))
    throw outsideContract(`the answer for group ${JSON.stringify(group)} is not an object`, answer.body);
  const holders: PartitionHolder[] = [];
  for (const [queue, entry] of Object.entries(parsed)) {
    if (!isObject(entry) || !Array.isArray(entry.partitions)) {
      throw outsideContract(`queue ${JSON.stringify(queue)} has no partitions array`, answer.body);
    }
    for (const row of entry.partitions) {
      if (!isObject(row) || typeof row.partition !== 'string') {
        throw outsideContract(`a partition of queue ${JSON.stringify(queue)} has no name`, answer.body);
      }
      const { workerId, leaseActive } = row;
      if (workerId !== null && (typeof workerId !== 'string' || workerId === '')) {
        throw outsideContract(
          `workerId of partition ${JSON.stringify(row.partition)} is not a lease id or null`,
          answer.body,
        );
      }
      if (typeof leaseActive !== 'boolean') {
        throw outsideContract(
          `leaseActive of partition ${JSON.stringify(row.partition)} is not a boolean`,
          answer.body,
        );
      }
      holders.push({ group, queue, partition: row.partition, leaseId: workerId, leaseActive });
    }
  }
  return holders;
}

/** The record `lease list -o json` prints for one lease id (contract, "list"). */
export interface HeldLease {
  leaseId: string;
  consumerGroup: string;
  queue: string;
  /** The partitions the lease id holds, in natural order (p2 before p10). */
  partitions: string[];
  live: boolean;
}

export interface ListFilter {
  /** Each: any of the values; the three together: all of them. Empty: no filter. */
  queues: readonly string[];
  partitions: readonly string[];
  /** --all: also holders whose lease is no longer active but whose id is still recorded. */
  all: boolean;
}

// Made on first use: creating a collator loads ICU's collation data (~6 ms of every start-up
// otherwise), and one made at load time cannot be kept in the standalone executable's start-up
// snapshot (docs/standalone.md).
let collator: Intl.Collator | undefined;
function natural(a: string, b: string): number {
  collator ??= new Intl.Collator('en', { numeric: true });
  return collator.compare(a, b);
}

/**
 * One record per lease id, its partitions gathered (a multi-partition pop holds several), sorted
 * by group, queue and first partition. A partition with no holder is never listed; a holder whose
 * lease is no longer active only with --all. A lease is kept when it holds any named partition,
 * and shows every partition it holds, so the operator sees all it would renew.
 */
export function heldLeases(holders: Iterable<PartitionHolder>, filter: ListFilter): HeldLease[] {
  const byLease = new Map<string, HeldLease>();
  for (const holder of holders) {
    if (holder.leaseId === null) continue;
    if (!holder.leaseActive && !filter.all) continue;
    if (filter.queues.length > 0 && !filter.queues.includes(holder.queue)) continue;
    // One pop is one (group, queue); should a broker ever file one id under two, each is its own record.
    const key = JSON.stringify([holder.leaseId, holder.group, holder.queue]);
    const lease = byLease.get(key);
    if (lease) {
      lease.partitions.push(holder.partition);
      lease.live ||= holder.leaseActive;
    } else {
      byLease.set(key, {
        leaseId: holder.leaseId,
        consumerGroup: holder.group,
        queue: holder.queue,
        partitions: [holder.partition],
        live: holder.leaseActive,
      });
    }
  }
  const wanted = new Set(filter.partitions);
  const leases = [...byLease.values()].filter(
    (lease) => wanted.size === 0 || lease.partitions.some((partition) => wanted.has(partition)),
  );
  for (const lease of leases) lease.partitions.sort(natural);
  return leases.sort(
    (a, b) =>
      natural(a.consumerGroup, b.consumerGroup) ||
      natural(a.queue, b.queue) ||
      natural(a.partitions[0] ?? '', b.partitions[0] ?? '') ||
      natural(a.leaseId, b.leaseId),
  );
}
