/**
 * The simulator's leases. As on the broker (docs/broker.md), a lease id names what one pop
 * claimed: one or more rows, each a (queue, partition, consumer group) with its own expiry.
 * Renewing moves every live row; an expired row stays expired, and its lease keeps its id
 * until an ack (`release`) removes it. The broker's consumer-group routes list these same rows
 * by group and queue, each with its holder's lease id (consumer-groups.ts).
 *
 * One holder per (queue, partition, group): a lease minted on a row another lease holds becomes
 * its holder, whether the other's row is live or expired. On the broker a pop claims only a free
 * partition (never claimed, acked, or expired), so minting over a live row is the simulator's
 * shortcut for "the old lease expired and a new pop claimed the partition": the old lease loses
 * that row (it renews it no more), and once it holds no row at all it is gone, as on the broker,
 * where no partition names its id any more. Rows minted without a partition name take one that
 * the (queue, group) never used, so they never take anything over.
 *
 * Every time is broker epoch ms and is passed in (`now`): the caller reads the broker clock once
 * per request, so one answer never mixes two instants.
 */
import { randomBytes } from 'node:crypto';
import type { Scope } from './auth.js';
import { ConsumerGroups } from './consumer-groups.js';
import { fail, isFiniteNumber, isPositiveInt, isString, optional, SimulatorInputError } from './input.js';
import { isRecord } from './wire.js';

/**
 * One row of a lease. Left out: the lease's queue and group, and a partition name that the
 * (queue, group) never used (`p1`, `p2`, … in a fresh simulator).
 */
export interface PartitionSpec {
  queue?: string;
  partition?: string;
  group?: string;
  seconds?: number;
}

export interface LeaseSpec {
  /** Lifetime of every row without its own `seconds` (default 30). May be ≤ 0: born expired. */
  seconds?: number;
  /** Queue of every row without its own `queue` (default `default`). */
  queue?: string;
  /** Consumer group of every row without its own `group` (default `__QUEUE_MODE__`, queue mode). */
  group?: string;
  /** A count of rows (default 1), or one entry per (queue, partition, group) row. */
  partitions?: number | PartitionSpec[];
  tenant?: string;
  /** Minted as a UUIDv7-looking id unless given. */
  leaseId?: string;
}

/** One (queue, partition, consumer group) a lease holds. */
export interface LeaseRow {
  queue: string;
  partition: string;
  group: string;
  /** Broker epoch ms. */
  expiresAt: number;
}

export interface LeaseView {
  leaseId: string;
  tenant: string | undefined;
  rows: LeaseRow[];
}

/** What renewals did to the store; part of the simulator's stats. */
export interface RenewalCounters {
  renewedRows: number;
  lapses: number;
  /** The least time any row had left at the moment it was renewed (ms), null before any renewal. */
  minMarginMs: number | null;
}

/** A lease as the store keeps it; handed to the routes that renew it, never outside the simulator. */
export interface StoredLease {
  readonly leaseId: string;
  readonly tenant: string | undefined;
  readonly rows: LeaseRow[];
  /** Counted in `lapses` already. */
  lapsed: boolean;
}

export const DEFAULT_QUEUE = 'default';
/** Queen's consumer group for plain queue consumption. */
export const DEFAULT_GROUP = '__QUEUE_MODE__';
const DEFAULT_MINT_SECONDS = 30;
/** 9999-12-31T23:59:59.999Z: beyond it an ISO timestamp changes format; treat as a DB error. */
export const MAX_EXPIRY_MS = 253402300799999;

export class LeaseStore {
  private readonly leases = new Map<string, StoredLease>();
  readonly counters: RenewalCounters = { renewedRows: 0, lapses: 0, minMarginMs: null };

  /** The consumer groups' view of the same rows: who holds each partition. */
  readonly groups = new ConsumerGroups();

  /** Validates `spec` (SimulatorInputError: 400, or 409 for an id in use) and stores the lease. */
  mint(spec: unknown, now: number): string {
    const [leaseId] = this.mintMany([spec], now);
    if (leaseId === undefined) throw new Error('simulator: a mint of one lease minted none');
    return leaseId;
  }

  /**
   * Mints a lease per spec, in order: what one control request does for a test that needs
   * thousands. Every spec is checked before any lease is minted; a later spec may take over a
   * row an earlier one claimed, exactly as when minted one by one.
   */
  mintMany(specs: unknown, now: number): string[] {
    if (!Array.isArray(specs)) fail('lease specs must be an array');
    const plans = specs.map((spec, i) => {
      try {
        return parseLeaseSpec(spec);
      } catch (err) {
        if (err instanceof SimulatorInputError && specs.length > 1) fail(`leases[${i}]: ${err.message}`, err.status);
        throw err;
      }
    });
    const named = new Set<string>();
    for (const plan of plans) {
      const id = plan.leaseId;
      if (id === undefined) continue;
      if (this.leases.has(id) || named.has(id)) fail(`lease ${id} already exists`, 409);
      named.add(id);
    }
    for (const plan of plans) {
      if (plan.rows.some((row) => now + row.seconds * 1000 > MAX_EXPIRY_MS)) {
        fail('seconds puts the expiry past year 9999');
      }
    }
    return plans.map((plan) => this.store(plan, now));
  }

  /**
   * An ack or nack: the lease is gone; its partitions stay listed in their groups, without a
   * holder. It always succeeds, also on an expired lease, whose ack the broker would refuse
   * (docs/broker.md): tests ack what they hold.
   */
  release(leaseId: string, now: number): boolean {
    const lease = this.leases.get(leaseId);
    if (!lease) return false;
    this.groups.release(lease, now);
    return this.leases.delete(leaseId);
  }

  /**
   * An ack that released one partition of a lease (queues.ts: as many acks as that partition's
   * messages, or a `retry`): the row is gone, its partition free and listed without a holder.
   * True when the lease held no other row and is gone too.
   */
  releaseRow(lease: StoredLease, row: LeaseRow, now: number): boolean {
    const i = lease.rows.indexOf(row);
    if (i === -1) return !this.leases.has(lease.leaseId);
    this.groups.releaseRow(lease, row, now);
    lease.rows.splice(i, 1);
    if (lease.rows.length > 0) return false;
    this.leases.delete(lease.leaseId);
    return true;
  }

  /** Moves every row's expiry to before `now`. False when no such lease. */
  expire(leaseId: string, now: number): boolean {
    const lease = this.leases.get(leaseId);
    if (!lease) return false;
    for (const row of lease.rows) row.expiresAt = Math.min(row.expiresAt, now - 1);
    return true;
  }

  /** A copy: changing it changes nothing in the store. */
  view(leaseId: string): LeaseView | undefined {
    const lease = this.leases.get(leaseId);
    if (!lease) return undefined;
    return { leaseId, tenant: lease.tenant, rows: lease.rows.map((row) => ({ ...row })) };
  }

  /**
   * The lease as `scope` may see it. docs/broker.md: another tenant's lease is deliberately
   * indistinguishable from an expired one; the older broker says `Lease not found`. A lease is
   * visible to a token only when their tenants are equal (both unset included).
   */
  lookup(leaseId: string, scope: Scope, now: number): StoredLease | undefined {
    const lease = this.leases.get(leaseId);
    if (!lease) return undefined;
    this.noteLapse(lease, now);
    if (scope !== null && scope.tenant !== lease.tenant) return undefined;
    return lease;
  }

  /**
   * The renewal of both brokers (docs/broker.md): every LIVE row (expiry after `now`) moves to
   * the later of its expiry and `target`; expired rows stay expired.
   */
  renew(lease: StoredLease, target: number, now: number): { renewed: number; earliest: number | null } {
    let renewed = 0;
    let earliest: number | null = null;
    for (const row of lease.rows) {
      if (row.expiresAt <= now) continue;
      const margin = row.expiresAt - now;
      if (this.counters.minMarginMs === null || margin < this.counters.minMarginMs) this.counters.minMarginMs = margin;
      row.expiresAt = Math.max(row.expiresAt, target);
      renewed++;
      earliest = earliest === null ? row.expiresAt : Math.min(earliest, row.expiresAt);
    }
    this.counters.renewedRows += renewed;
    return { renewed, earliest };
  }

  /**
   * `lapses` counts leases that ran out while nobody released them — the failure a renewing
   * client exists to prevent. Honest and cheap: a lease counts once, either when a request
   * looks it up (it exists, was never released, every row expired), or when this sweep finds
   * it in that state. Released leases are gone and never count.
   */
  noteLapses(now: number): void {
    for (const lease of this.leases.values()) this.noteLapse(lease, now);
  }

  private noteLapse(lease: StoredLease, now: number): void {
    if (lease.lapsed || lease.rows.some((row) => row.expiresAt > now)) return;
    lease.lapsed = true;
    this.counters.lapses++;
  }

  private store(plan: MintPlan, now: number): string {
    let leaseId = plan.leaseId;
    while (leaseId === undefined || this.leases.has(leaseId)) leaseId = uuidV7Like(now);
    const rows = this.nameRows(plan.rows).map(
      (row): LeaseRow => ({
        queue: row.queue,
        partition: row.partition,
        group: row.group,
        expiresAt: now + row.seconds * 1000,
      }),
    );
    const lease: StoredLease = { leaseId, tenant: plan.tenant, rows, lapsed: false };
    this.leases.set(leaseId, lease);
    for (const row of rows) {
      const previous = this.groups.holderOf(row.group, row.queue, row.partition);
      if (previous !== null) this.displace(previous.lease, previous.row, now);
      this.groups.claim(lease, row, now);
    }
    return leaseId;
  }

  /** Names the rows minted without a partition name (see ConsumerGroups.freshName). */
  private nameRows(rows: PlannedRow[]): Array<Omit<PlannedRow, 'partition'> & { partition: string }> {
    // One row (most mints, thousands per test): nothing of its own mint to keep clear of.
    const [only] = rows;
    if (rows.length === 1 && only !== undefined) {
      const partition = only.partition ?? this.groups.freshName(only.group, only.queue, NO_NAMES);
      return [{ ...only, partition }];
    }
    const reserved = new Map<string, Set<string>>();
    const reservedFor = (row: PlannedRow): Set<string> => {
      const key = JSON.stringify([row.group, row.queue]);
      let names = reserved.get(key);
      if (names === undefined) {
        names = new Set();
        reserved.set(key, names);
      }
      return names;
    };
    for (const row of rows) if (row.partition !== undefined) reservedFor(row).add(row.partition);
    return rows.map((row) => {
      if (row.partition !== undefined) return { ...row, partition: row.partition };
      const names = reservedFor(row);
      const partition = this.groups.freshName(row.group, row.queue, names);
      names.add(partition);
      return { ...row, partition };
    });
  }

  /** `lease` is no longer the holder of `row` (see the top of this file). */
  private displace(lease: StoredLease, row: LeaseRow, now: number): void {
    this.noteLapse(lease, now); // an expired lease whose partition was claimed again ran out
    const i = lease.rows.indexOf(row);
    if (i !== -1) lease.rows.splice(i, 1);
    if (lease.rows.length === 0) this.leases.delete(lease.leaseId);
  }
}

const NO_NAMES: ReadonlySet<string> = new Set();

interface PlannedRow {
  queue: string;
  /** Undefined: a name the (queue, group) never used (ConsumerGroups.freshName). */
  partition: string | undefined;
  group: string;
  seconds: number;
}

interface MintPlan {
  leaseId: string | undefined;
  tenant: string | undefined;
  rows: PlannedRow[];
}

function parseLeaseSpec(spec: unknown): MintPlan {
  if (!isRecord(spec)) fail('lease spec must be an object');
  const seconds = optional(spec, 'seconds', isFiniteNumber, 'a finite number') ?? DEFAULT_MINT_SECONDS;
  const queue = optional(spec, 'queue', isString, 'a string') ?? DEFAULT_QUEUE;
  const group = optional(spec, 'group', isString, 'a string') ?? DEFAULT_GROUP;
  const tenant = optional(spec, 'tenant', isString, 'a string');
  const leaseId = optional(spec, 'leaseId', isString, 'a string');
  if (leaseId === '') fail('leaseId must not be empty');
  const partitions = spec.partitions ?? 1;
  let entries: unknown[];
  if (Array.isArray(partitions)) entries = partitions;
  else if (isPositiveInt(partitions)) entries = Array.from({ length: partitions }, () => ({}));
  else fail('partitions must be a positive integer or an array');
  if (entries.length === 0) fail('partitions must not be empty');
  const rows = entries.map((entry, i): PlannedRow => {
    if (!isRecord(entry)) fail(`partitions[${i}] must be an object`);
    return {
      queue: optional(entry, 'queue', isString, 'a string') ?? queue,
      partition: optional(entry, 'partition', isString, 'a string'),
      group: optional(entry, 'group', isString, 'a string') ?? group,
      seconds: optional(entry, 'seconds', isFiniteNumber, 'a finite number') ?? seconds,
    };
  });
  const named = rows.filter((r) => r.partition !== undefined);
  if (named.length > 1) {
    const keys = new Set(named.map((r) => JSON.stringify([r.queue, r.partition, r.group])));
    if (keys.size !== named.length) fail('each (queue, partition, group) may appear once');
  }
  return { leaseId, tenant, rows };
}

/** Looks like the broker's ids (UUIDv7: 48-bit ms timestamp, version 7, RFC 4122 variant). */
/** Random bytes drawn in blocks: a test mints thousands of leases, and a draw per id was costly. */
let randomPool = Buffer.alloc(0);
let randomAt = 0;

function randomHex(bytes: number): string {
  if (randomAt + bytes > randomPool.length) {
    randomPool = randomBytes(4096);
    randomAt = 0;
  }
  randomAt += bytes;
  return randomPool.toString('hex', randomAt - bytes, randomAt);
}

export function uuidV7Like(ms: number): string {
  const time = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0').slice(-12);
  const rand = randomHex(10);
  const variant = VARIANT_OF_HEX[rand.charCodeAt(3)] as string;
  const [timeHigh, timeLow] = [time.slice(0, 8), time.slice(8, 12)];
  return `${timeHigh}-${timeLow}-7${rand.slice(0, 3)}-${variant}${rand.slice(4, 7)}-${rand.slice(7, 19)}`;
}

/** The RFC 4122 variant digit (8, 9, a or b) of a random hex digit, by its char code. */
const VARIANT_OF_HEX: string[] = [];
for (const digit of '0123456789abcdef') {
  VARIANT_OF_HEX[digit.charCodeAt(0)] = ((parseInt(digit, 16) & 0x3) | 0x8).toString(16);
}
