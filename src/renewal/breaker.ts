/**
 * The outage breaker of `lease watch` (docs/cli-contract.md, "watch": an outage is the broker's,
 * not each lease's). Closed, it counts requests that failed the way an outage does (unreachable,
 * reset, timeout, 502/503/504, 500 pool) with no answer between them; once they come from
 * several leases, the broker is down for all of them and the breaker opens. Open, the scheduler
 * holds every renewal and sends one probe at a time, on a backoff; the first answer closes it.
 * A lease that fails alone while others are answered never opens it: its failures stay its own.
 * Pure: time comes in as arguments.
 */
import { backoffMs, type RetryPolicy } from '../broker/retry.js';

export interface BreakerOptions {
  /** Distinct leases failing in a row that make an outage (fewer when fewer are watched). */
  tripLeases: number;
  /** The probes' backoff: first delay, doubling up to the cap, with jitter. */
  probeBackoff: RetryPolicy;
}

export const DEFAULT_BREAKER: BreakerOptions = {
  tripLeases: 3,
  probeBackoff: { retries: Number.POSITIVE_INFINITY, baseDelayMs: 500, maxDelayMs: 2_000 },
};

/** Near a deadline probes come at least this far apart: closer would only add load. */
const MIN_PROBE_DELAY_MS = 50;

export class OutageBreaker {
  private readonly failing = new Set<string>();
  /** When the failures in a row began: an answer to a request sent before says nothing of now. */
  private failingSince: number | null = null;
  /** When the earliest request of the failures so far was sent: the outage's start, for its length. */
  private downSince: number | null = null;
  private openedAt: number | null = null;
  private probeInFlight = false;
  private failedProbes = 0;
  private probeAt = 0;
  private lastError: string | null = null;

  constructor(
    private readonly options: BreakerOptions = DEFAULT_BREAKER,
    private readonly random: () => number = Math.random,
  ) {}

  get isOpen(): boolean {
    return this.openedAt !== null;
  }

  /** Local time the outage began; null when none is on. */
  get since(): number | null {
    return this.openedAt;
  }

  /** The error of the last failure that counted, for the outage event and the spinner. */
  get error(): string | null {
    return this.lastError;
  }

  /** When the next probe may go; null when closed or while a probe is out. */
  get nextProbeAt(): number | null {
    return this.openedAt === null || this.probeInFlight ? null : this.probeAt;
  }

  /**
   * A request failed the way an outage does. True when this failure opened the breaker: the
   * caller reports the outage once. `watching`: one lease alone cannot tell its own trouble
   * from the broker's, so it never opens the breaker.
   */
  failed(leaseId: string, error: string, now: number, watching: number, sentAt: number = now): boolean {
    if (this.openedAt !== null) return false;
    this.failingSince ??= now;
    // The broker stopped answering when the first request that failed was sent, not when its
    // timeout ran out: a freeze of 12 s behind a 10 s timeout is 12 s down, not 2.
    this.downSince = Math.min(this.downSince ?? sentAt, sentAt);
    this.failing.add(leaseId);
    this.lastError = error;
    if (watching < 2 || this.failing.size < Math.min(this.options.tripLeases, watching)) return false;
    this.openedAt = now;
    this.failedProbes = 0;
    this.probeAt = now + this.probeDelay(Number.POSITIVE_INFINITY, undefined);
    return true;
  }

  /**
   * The broker answered a request sent at `sentAt`. Returns how long it was down when this ends
   * an outage, else null. An answer to a request sent before the failures began is from before
   * them: it neither breaks the run of failures nor ends an outage.
   */
  answered(now: number, sentAt: number = now): number | null {
    if (this.failingSince !== null && sentAt < this.failingSince) return null;
    this.failing.clear();
    this.failingSince = null;
    this.probeInFlight = false;
    const since = this.downSince ?? this.openedAt;
    this.downSince = null;
    if (this.openedAt === null) return null;
    const downMs = now - Math.min(since ?? this.openedAt, this.openedAt);
    this.openedAt = null;
    return downMs;
  }

  probeDue(now: number): boolean {
    return this.openedAt !== null && !this.probeInFlight && now >= this.probeAt;
  }

  probeSent(): void {
    this.probeInFlight = true;
  }

  /**
   * The probe failed too: the next one waits the backoff, or the broker's Retry-After, but at
   * most half the least time a lease has left, so a broker back in time is found in time.
   * Returns the wait.
   */
  probeFailed(error: string, now: number, leastTimeLeftMs: number, retryAfterMs: number | undefined): number {
    this.probeInFlight = false;
    this.lastError = error;
    this.failedProbes++;
    const delayMs = this.probeDelay(leastTimeLeftMs, retryAfterMs);
    this.probeAt = now + delayMs;
    return delayMs;
  }

  /** The probe ended without an outcome (its lease ended, or watching stopped). */
  probeDropped(): void {
    this.probeInFlight = false;
  }

  private probeDelay(leastTimeLeftMs: number, retryAfterMs: number | undefined): number {
    const wanted = retryAfterMs ?? backoffMs(this.failedProbes + 1, this.options.probeBackoff, this.random);
    return Math.max(0, Math.min(wanted, Math.max(MIN_PROBE_DELAY_MS, Math.floor(leastTimeLeftMs / 2))));
  }
}
