/**
 * The simulator's leases. As on the broker (docs/broker.md), a lease id names what one pop
 * claimed: one or more rows, each a (queue, partition, consumer group) with its own expiry.
 * Renewing moves every live row; an expired row stays expired, and its lease keeps its id
 * until an ack (`release`) removes it. (The broker's consumer-group routes list these same rows
 * by group and queue, each with its holder's lease id.)
 *
 * Every time is broker epoch ms and is passed in (`now`): the caller reads the broker clock once
 * per request, so one answer never mixes two instants.
 */
import { randomBytes } from 'node:crypto';
import type { Scope } from './auth.js';
import { fail, isFiniteNumber, isPositiveInt, isString, optional } from './input.js';
import { isRecord } from './wire.js';

/** One row of a lease; each field defaults (queue `default`, partition `p<n>`, queue mode). */
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

  /** Validates `spec` (SimulatorInputError: 400, or 409 for an id in use) and stores the lease. */
  mint(spec: unknown, now: number): string {
    const plan = parseLeaseSpec(spec);
    let leaseId = plan.leaseId;
    if (leaseId !== undefined && this.leases.has(leaseId)) fail(`lease ${leaseId} already exists`, 409);
    while (leaseId === undefined || this.leases.has(leaseId)) leaseId = uuidV7Like(now);
    const rows = plan.rows.map(({ seconds, ...names }) => ({ ...names, expiresAt: now + seconds * 1000 }));
    if (rows.some((row) => row.expiresAt > MAX_EXPIRY_MS)) fail('seconds puts the expiry past year 9999');
    this.leases.set(leaseId, { leaseId, tenant: plan.tenant, rows, lapsed: false });
    return leaseId;
  }

  /** An ack or nack: the lease and its rows are gone. False when no such lease. */
  release(leaseId: string): boolean {
    return this.leases.delete(leaseId);
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
}

interface MintPlan {
  leaseId: string | undefined;
  tenant: string | undefined;
  rows: Array<{ queue: string; partition: string; group: string; seconds: number }>;
}

function parseLeaseSpec(spec: unknown): MintPlan {
  if (!isRecord(spec)) fail('lease spec must be an object');
  const seconds = optional(spec, 'seconds', isFiniteNumber, 'a finite number') ?? DEFAULT_MINT_SECONDS;
  const queue = optional(spec, 'queue', isString, 'a string') ?? DEFAULT_QUEUE;
  const tenant = optional(spec, 'tenant', isString, 'a string');
  const leaseId = optional(spec, 'leaseId', isString, 'a string');
  if (leaseId === '') fail('leaseId must not be empty');
  const partitions = spec.partitions ?? 1;
  let entries: unknown[];
  if (Array.isArray(partitions)) entries = partitions;
  else if (isPositiveInt(partitions)) entries = Array.from({ length: partitions }, () => ({}));
  else fail('partitions must be a positive integer or an array');
  if (entries.length === 0) fail('partitions must not be empty');
  const rows = entries.map((entry, i) => {
    if (!isRecord(entry)) fail(`partitions[${i}] must be an object`);
    return {
      queue: optional(entry, 'queue', isString, 'a string') ?? queue,
      partition: optional(entry, 'partition', isString, 'a string') ?? `p${i + 1}`,
      group: optional(entry, 'group', isString, 'a string') ?? DEFAULT_GROUP,
      seconds: optional(entry, 'seconds', isFiniteNumber, 'a finite number') ?? seconds,
    };
  });
  const keys = new Set(rows.map((r) => JSON.stringify([r.queue, r.partition, r.group])));
  if (keys.size !== rows.length) fail('each (queue, partition, group) may appear once');
  return { leaseId, tenant, rows };
}

/** Looks like the broker's ids (UUIDv7: 48-bit ms timestamp, version 7, RFC 4122 variant). */
function uuidV7Like(ms: number): string {
  const time = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0').slice(-12);
  const rand = randomBytes(10).toString('hex');
  const variant = ((parseInt(rand.slice(3, 4), 16) & 0x3) | 0x8).toString(16);
  return [
    time.slice(0, 8),
    time.slice(8, 12),
    `7${rand.slice(0, 3)}`,
    `${variant}${rand.slice(4, 7)}`,
    rand.slice(7, 19),
  ].join('-');
}
