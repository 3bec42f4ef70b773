/**
 * What a watch reports, one event at a time (docs/cli-contract.md, "watch"): the names and the
 * keys `event`, `leaseId`, `at` and each event's own keys are fixed there; the rest are
 * additions. `-o json`/`-o ndjson` print these objects as they are.
 */

/** Why a lease is gone: the broker renewed nothing, or its known expiry passed unrenewed. */
export type LostReason = 'not-renewed' | 'expired';

/**
 * Why watching a lease ended for another reason. `for`, `signal` and `child-exit` are the
 * contract's (docs/cli-contract.md). Added: `error`, a lease that could not be watched (a
 * refused token, or a broker that failed before the first renewal), with the error in `error`;
 * and `lease-lost`, a watch with a command whose other lease was lost, so the command was
 * stopped or never started.
 */
export type StopReason = 'for' | 'signal' | 'child-exit' | 'error' | 'lease-lost';

export interface RenewedEvent {
  event: 'renewed';
  leaseId: string;
  at: string;
  renewed: number;
  /** As the broker sent it. */
  expiresAt: string | null;
  /** Time left, measured without trusting the local clock's agreement with the broker's. */
  remainingMs: number;
  nextRenewalInMs: number;
}

export interface RetryEvent {
  event: 'retry';
  leaseId: string;
  at: string;
  error: string;
  /** Failures in a row, 1 for the first. */
  attempt: number;
  retryInMs: number;
  /** Time the lease has left; null before its first renewal, when nothing is known. */
  remainingMs: number | null;
}

export interface LostEvent {
  event: 'lost';
  leaseId: string;
  at: string;
  reason: LostReason;
  /** The broker's own words (older brokers), or the last error before the expiry passed. */
  detail: string | null;
}

export interface StoppedEvent {
  event: 'stopped';
  leaseId: string;
  at: string;
  reason: StopReason;
  /**
   * Added: with reason `for`, true when no renewal of the lease succeeded before --for ended
   * (the watch exits 2); absent otherwise.
   */
  neverRenewed?: true;
  /** Why it could not be watched (reason `error`), or was never renewed (`neverRenewed`). */
  error?: string;
}

/**
 * The broker stopped answering every lease at once (unreachable, reset, timeout, 502/503/504,
 * 500 pool): reported once, with no leaseId; renewals wait while one probe at a time tries it.
 */
export interface OutageEvent {
  event: 'outage';
  at: string;
  /** The failure that made it an outage. */
  error: string;
  /** Leases waiting for the broker: every lease still watched. */
  leases: number;
  /** The least time a renewed lease has left: what the outage may last before one is lost; null before any renewal. */
  remainingMs: number | null;
}

/** The broker answers again after an outage: the waiting leases are renewed, least time left first. */
export interface RecoveredEvent {
  event: 'recovered';
  at: string;
  /** From the outage event to the first answer. */
  downMs: number;
  /** Leases due during the outage, now renewed at once. */
  leases: number;
}

export type WatchEvent = RenewedEvent | RetryEvent | LostEvent | StoppedEvent | OutageEvent | RecoveredEvent;
