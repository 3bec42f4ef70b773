/**
 * What the live view of `lease list --watch` knows of each lease's expiry (issue 39), so that it
 * probes a lease only when it must. The probe is the extend route's one second (as `inspect`
 * asks): a write on the broker's database, per lease. An expiry moves only when the lease's
 * holder renews it, so the view learns it once, then counts the time left down on its own clock,
 * and asks again only when the known deadline comes near: within two polls of it (so the time
 * left never reaches zero under a lease the listing still calls live), or within a third of the
 * lease's time (where the bar turns from green, so it turns only on what a fresh probe says).
 * A release or an expiry needs no probe: the listing, a read, says so at every poll.
 *
 * The time left shown is never above the truth: counted from the moment the probe was sent, it
 * is what the lease had then, less the time since; a holder's renewal in between only makes the
 * truth longer, and the next probe shows it.
 */
import type { ListRecord } from './list.js';

interface Known {
  /** Time left when the probe was sent (the answer's, which is at least that late). */
  remainingMs: number;
  /** The view's clock when the probe was sent. */
  at: number;
  expiresAt: string | null;
  held: number | null;
  /** The most time left seen: the lease's time, as far as the view knows it. */
  leaseMs: number;
  /** Where the lease was held when probed: a change (a partition acked) asks again. */
  holding: string;
}

/** The floor of the window before a deadline in which a lease is probed again. */
const NEAR_MIN_MS = 1_000;

const holdingOf = (records: readonly ListRecord[]): string =>
  JSON.stringify(records.map((record) => [record.consumerGroup, record.queue, record.partitions]));

export class KnownExpiries {
  private readonly known = new Map<string, Known>();

  /** @param intervalMs the time between two polls of the view. */
  constructor(private readonly intervalMs: number) {}

  /**
   * The live records whose expiry must be probed now (never known, not known since their holding
   * changed, or near the known deadline); the others get their known expiry, the time left counted
   * down to `now`. Leases no longer listed are forgotten.
   */
  due(records: readonly ListRecord[], now: number): ListRecord[] {
    const byId = new Map<string, ListRecord[]>();
    for (const record of records) {
      if (!record.live) continue;
      byId.set(record.leaseId, [...(byId.get(record.leaseId) ?? []), record]);
    }
    for (const leaseId of this.known.keys()) if (!byId.has(leaseId)) this.known.delete(leaseId);
    const due: ListRecord[] = [];
    for (const [leaseId, listed] of byId) {
      const known = this.known.get(leaseId);
      const left = known ? known.remainingMs - (now - known.at) : null;
      if (known === undefined || left === null || known.holding !== holdingOf(listed) || left <= this.nearMs(known)) {
        due.push(...listed);
        continue;
      }
      for (const record of listed) {
        record.expiresAt = known.expiresAt;
        record.remainingMs = left;
        record.held = known.held;
      }
    }
    return due;
  }

  /**
   * What a probe sent at `sentAt` found for `probed` (the records `due` returned, filled in by
   * probeExpiry): a lease found live with a time left is known from then on; one whose probe
   * failed, or that was found gone, is not, and is asked again at the next poll it is listed live.
   */
  learn(probed: readonly ListRecord[], sentAt: number): void {
    const byId = new Map<string, ListRecord[]>();
    for (const record of probed) byId.set(record.leaseId, [...(byId.get(record.leaseId) ?? []), record]);
    for (const [leaseId, records] of byId) {
      const first = records[0] as ListRecord;
      const remainingMs = first.remainingMs;
      if (!first.live || first.error !== undefined || typeof remainingMs !== 'number') {
        this.known.delete(leaseId);
        continue;
      }
      const before = this.known.get(leaseId)?.leaseMs ?? 0;
      this.known.set(leaseId, {
        remainingMs,
        at: sentAt,
        expiresAt: first.expiresAt ?? null,
        held: first.held ?? null,
        leaseMs: Math.max(before, remainingMs),
        holding: holdingOf(records),
      });
    }
  }

  /** Forgets every expiry: the next poll probes every live lease again. */
  clear(): void {
    this.known.clear();
  }

  /** How near its known deadline a lease is probed again. */
  private nearMs(known: Known): number {
    return Math.max(2 * this.intervalMs + NEAR_MIN_MS, known.leaseMs / 3);
  }
}
