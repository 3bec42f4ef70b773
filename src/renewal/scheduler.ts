/**
 * The renewal scheduler of `lease watch`: one loop for every lease, a min-heap of due times
 * and a bounded number of requests in flight over the client's one connection pool. Time comes
 * from the Clock it is given, so tests run hours of schedule on a fake clock.
 *
 * The rules, in one place:
 * - Renew at once, then every `everyMs` on a fixed grid (a slow answer or a late wake-up does
 *   not shift later renewals; a missed slot renews at once, not once per missed slot), and
 *   never later than the lease's deadline less a safety margin.
 * - Deadlines are local times computed by brokerClock.localDeadline, which does not depend on
 *   the local clock agreeing with the broker's.
 * - A failed renewal is retried with exponential backoff and jitter while the lease has time
 *   left; each request's timeout is cut to that time, since a broker whose database is down
 *   may hold a request without answering (docs/broker.md).
 * - A lease is lost when the broker renews nothing, or when its deadline passes unrenewed.
 *   A refused token stops everything: every other lease would be refused too.
 */
import { setMaxListeners } from 'node:events';
import { localDeadline, timeZoneSuspicion } from '../broker/broker-clock.js';
import type { BrokerClient } from '../broker/client.js';
import { isHeld, type Renewal } from '../broker/contract.js';
import { backoffMs, isTransient, type RetryPolicy } from '../broker/retry.js';
import type { Clock } from '../clock.js';
import { AuthError, BrokerError, QueenctlError } from '../exit.js';
import type { LostReason, StopReason, WatchEvent } from './events.js';
import { MinHeap, type HeapItem } from './heap.js';

export interface WatchTiming {
  /** Asked for in every renewal: the lease lasts until the broker's now + seconds. */
  seconds: number;
  everyMs: number;
  /** The longest any one request may take (--timeout); cut further to the time left. */
  requestTimeoutMs: number;
  concurrency: number;
}

export interface SchedulerObserver {
  event(event: WatchEvent): void;
  /** Something about the broker people should know once (its clock, its time zone). */
  warn(text: string): void;
}

export interface SchedulerContext {
  client: Pick<BrokerClient, 'extend'>;
  clock: Clock;
  /** For the jitter of retries; tests pin it. */
  random?: () => number;
}

/** What the run came to, for the exit code. */
export interface WatchSummary {
  /** Leases still renewed when watching ended. */
  held: number;
  lost: number;
  /** Leases that could not be watched for a broker error (before their first renewal). */
  failed: number;
  /** The refusal that stopped everything, if one did. */
  refused: AuthError | null;
}

/** The first lease that could not be watched for a broker error, for the one message about it. */
export interface WatchFailure {
  leaseId: string;
  message: string;
  hint: string | undefined;
}

/** What the spinner shows; cheap enough to ask for every second. */
export interface WatchStatus {
  watching: number;
  held: number;
  lost: number;
  renewals: number;
  /** Local time of the earliest deadline of a held lease, null when none is held. */
  earliestDeadline: number | null;
  /** Local time of the next renewal or retry, null when none is waiting. */
  nextRenewalAt: number | null;
  lastError: string | null;
  /** Local time of lastError. */
  lastErrorAt: number | null;
}

/** Never later than this before a deadline: room for a slow answer and a retry or two. */
export function safetyMarginMs(seconds: number): number {
  return Math.min(10_000, seconds * 250);
}

/** The default --every: a third of the lease (docs/cli-contract.md). */
export function defaultEveryMs(seconds: number): number {
  return Math.max(1, Math.floor((seconds * 1000) / 3));
}

/**
 * The next renewal of a lease just renewed: the next slot of its grid after `now`, but no later
 * than `latest` (its deadline less the margin), and not before now.
 */
export function nextRenewalAt(dueAt: number, everyMs: number, now: number, latest: number): number {
  let next = dueAt + everyMs;
  if (next <= now) next += Math.ceil((now - next + 1) / everyMs) * everyMs;
  return Math.max(now, Math.min(next, latest));
}

/** Retries back off from this, doubling, capped at a renewal interval and at MAX_RETRY_DELAY_MS. */
const FIRST_RETRY_DELAY_MS = 250;
const MAX_RETRY_DELAY_MS = 5_000;
/** Near the deadline retries come at least this far apart: closer would only add load. */
const MIN_RETRY_DELAY_MS = 50;
/** setTimeout's ceiling; a longer sleep is taken in steps. */
const MAX_SLEEP_MS = 2_147_483_647;

export function retryPolicy(everyMs: number): RetryPolicy {
  const maxDelayMs = Math.min(MAX_RETRY_DELAY_MS, Math.max(everyMs, MIN_RETRY_DELAY_MS));
  return { retries: Number.POSITIVE_INFINITY, baseDelayMs: Math.min(FIRST_RETRY_DELAY_MS, maxDelayMs), maxDelayMs };
}

/**
 * How long to wait before retry number `attempt`: the backoff, but at most half the time left,
 * so several tries still fit before the deadline.
 */
export function retryDelayMs(attempt: number, timeLeftMs: number, policy: RetryPolicy, random: () => number): number {
  return Math.min(backoffMs(attempt, policy, random), Math.max(MIN_RETRY_DELAY_MS, Math.floor(timeLeftMs / 2)));
}

type Phase = 'waiting' | 'ready' | 'renewing' | 'ended';

interface LeaseState extends HeapItem {
  readonly leaseId: string;
  phase: Phase;
  /** The grid slot of the current renewal; retries keep it, so the grid does not drift. */
  dueAt: number;
  /**
   * Local time the lease expires by, erring early. Before the first renewal nothing is known:
   * it is the budget for that renewal, start + seconds.
   */
  deadline: number;
  renewedOnce: boolean;
  /** Failures in a row. */
  attempt: number;
  lastError: QueenctlError | null;
  /** The broker's expiry of the last renewal, epoch ms on its clock, and as it wrote it. */
  expiresAtMs: number | null;
  expiresAt: string | null;
}

export class RenewalScheduler {
  private readonly leases: LeaseState[];
  private readonly heap = new MinHeap<LeaseState>();
  /** Due leases waiting for a free request slot, oldest first; entries may be stale. */
  private ready: LeaseState[] = [];
  private readyHead = 0;
  private inFlight = 0;
  private watching: number;
  private renewals = 0;
  /** Leases renewed at least once. */
  private renewedOnce = 0;
  private lost = 0;
  private failed = 0;
  private refused: AuthError | null = null;
  private firstFailure: WatchFailure | null = null;
  private crashed: { error: unknown } | null = null;
  private lastError: string | null = null;
  private lastErrorAt: number | null = null;
  private warnedClock = false;
  private stopped = false;
  /** Leases held when stop() ended them. */
  private heldAtStop = 0;
  private readonly requests = new AbortController();
  private readonly marginMs: number;
  private readonly policy: RetryPolicy;
  private readonly random: () => number;
  /** The loop's current sleep, to cut short when something falls due sooner. */
  private sleep: { until: number; controller: AbortController } | null = null;
  private drained: (() => void) | null = null;

  constructor(
    leaseIds: readonly string[],
    private readonly timing: WatchTiming,
    private readonly context: SchedulerContext,
    private readonly observer: SchedulerObserver,
  ) {
    this.leases = leaseIds.map((leaseId) => ({
      leaseId,
      phase: 'waiting',
      wakeAt: 0,
      heapIndex: -1,
      dueAt: 0,
      deadline: 0,
      renewedOnce: false,
      attempt: 0,
      expiresAtMs: null,
      expiresAt: null,
      lastError: null,
    }));
    this.watching = this.leases.length;
    this.marginMs = safetyMarginMs(timing.seconds);
    this.policy = retryPolicy(timing.everyMs);
    this.random = context.random ?? Math.random;
    // Every request in flight listens to it, up to --concurrency of them.
    setMaxListeners(0, this.requests.signal);
  }

  /** Runs until every lease has ended, or stop(); rejects only on a bug. */
  async run(): Promise<WatchSummary> {
    const now = this.context.clock.now();
    for (const lease of this.leases) {
      if (lease.phase === 'ended') continue; // stopped before it started
      lease.dueAt = now;
      lease.deadline = now + this.timing.seconds * 1000;
      this.heap.update(lease, now);
    }
    while (!this.stopped && this.watching > 0) {
      this.dispatch(this.context.clock.now());
      if (this.stopped || this.watching === 0) break;
      await this.sleepUntilDue();
    }
    if (this.inFlight > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    if (this.crashed) throw this.crashed.error;
    return {
      held: this.stopped ? this.heldAtStop : this.countHeld(),
      lost: this.lost,
      failed: this.failed,
      refused: this.refused,
    };
  }

  /** Ends watching every lease still watched, with a `stopped` event for each. */
  stop(reason: Exclude<StopReason, 'error'>): void {
    // Called from an observer too, in the middle of a settle: end() leaves nothing to dispatch.
    this.end(reason, undefined);
  }

  /** True once every lease has been renewed at least once and none has ended. */
  get everyLeaseRenewed(): boolean {
    return this.watching === this.leases.length && this.renewedOnce === this.leases.length;
  }

  /** The earliest reported expiry among held leases, as the broker wrote it. */
  earliestExpiresAt(): string | null {
    let earliest: LeaseState | null = null;
    for (const lease of this.leases) {
      if (lease.phase === 'ended' || !lease.renewedOnce || lease.expiresAtMs === null) continue;
      if (!earliest || lease.expiresAtMs < (earliest.expiresAtMs as number)) earliest = lease;
    }
    return earliest?.expiresAt ?? null;
  }

  status(): WatchStatus {
    let earliestDeadline: number | null = null;
    for (const lease of this.leases) {
      if (lease.phase === 'ended' || !lease.renewedOnce) continue;
      if (earliestDeadline === null || lease.deadline < earliestDeadline) earliestDeadline = lease.deadline;
    }
    let nextRenewalAt: number | null = null;
    const top = this.heap.peek();
    if (top && top.phase === 'waiting') nextRenewalAt = top.wakeAt;
    if (this.readyHead < this.ready.length || (this.inFlight > 0 && nextRenewalAt === null))
      nextRenewalAt = this.context.clock.now();
    return {
      watching: this.watching,
      held: this.countHeld(),
      lost: this.lost,
      renewals: this.renewals,
      earliestDeadline,
      nextRenewalAt,
      lastError: this.lastError,
      lastErrorAt: this.lastErrorAt,
    };
  }

  /** The refusal that ended the watch, if one did. */
  get refusal(): AuthError | null {
    return this.refused;
  }

  /** The first lease that could not be watched for a broker error, if one could not. */
  get failure(): WatchFailure | null {
    return this.firstFailure;
  }

  private countHeld(): number {
    let held = 0;
    for (const lease of this.leases) if (lease.phase !== 'ended' && lease.renewedOnce) held++;
    return held;
  }

  // --- the loop ------------------------------------------------------------------------------

  /** Starts what is due, as far as free request slots allow; declares passed deadlines. */
  private dispatch(now: number): void {
    if (this.stopped) return;
    while (this.inFlight < this.timing.concurrency && this.readyHead < this.ready.length) {
      const lease = this.ready[this.readyHead++] as LeaseState;
      if (lease.phase !== 'ready') continue;
      this.heap.remove(lease);
      if (now >= lease.deadline) this.expire(lease, now);
      else this.send(lease, now);
    }
    // Drop the consumed front now and then: under sustained saturation the line never empties.
    if (this.readyHead > 0 && (this.readyHead === this.ready.length || this.readyHead >= 1024)) {
      this.ready = this.ready.slice(this.readyHead);
      this.readyHead = 0;
    }
    for (let top = this.heap.peek(); top && top.wakeAt <= now && !this.stopped; top = this.heap.peek()) {
      this.heap.remove(top);
      if (now >= top.deadline) {
        this.expire(top, now);
      } else if (this.inFlight < this.timing.concurrency) {
        this.send(top, now);
      } else {
        // No slot: wait in line, and wake at the deadline to declare it if no slot comes.
        top.phase = 'ready';
        this.ready.push(top);
        this.heap.update(top, top.deadline);
      }
    }
  }

  private async sleepUntilDue(): Promise<void> {
    const { clock } = this.context;
    const top = this.heap.peek();
    const until = top ? top.wakeAt : Number.POSITIVE_INFINITY;
    const controller = new AbortController();
    this.sleep = { until, controller };
    try {
      await clock.sleep(Math.min(MAX_SLEEP_MS, Math.max(0, Math.ceil(until - clock.now()))), controller.signal);
    } catch (error) {
      if (!controller.signal.aborted) throw error;
    } finally {
      this.sleep = null;
    }
  }

  /** Cuts the loop's sleep short when something is due before it would wake. */
  private wake(): void {
    const top = this.heap.peek();
    if (this.sleep && (this.stopped || this.watching === 0 || (top && top.wakeAt < this.sleep.until))) {
      this.sleep.controller.abort();
    }
  }

  // --- one renewal ---------------------------------------------------------------------------

  private send(lease: LeaseState, now: number): void {
    lease.phase = 'renewing';
    this.inFlight++;
    const timeoutMs = Math.max(1, Math.min(this.timing.requestTimeoutMs, Math.floor(lease.deadline - now)));
    this.context.client.extend(lease.leaseId, this.timing.seconds, { timeoutMs, signal: this.requests.signal }).then(
      (renewal) => this.settle(lease, now, renewal, null),
      (error: unknown) => this.settle(lease, now, null, error),
    );
  }

  private settle(lease: LeaseState, sentAt: number, renewal: Renewal | null, error: unknown): void {
    this.inFlight--;
    try {
      if (lease.phase === 'renewing' && !this.stopped) {
        const now = this.context.clock.now();
        if (renewal) this.renewed(lease, sentAt, now, renewal);
        else this.failedAttempt(lease, now, error);
        this.dispatch(now);
      }
    } catch (bug) {
      // Not an outcome: stop, and let run() reject with it instead of an unhandled rejection.
      this.crashed ??= { error: bug };
      this.end('error', 'internal error');
    }
    this.wake();
    if (this.inFlight === 0) this.drained?.();
  }

  private renewed(lease: LeaseState, sentAt: number, now: number, renewal: Renewal): void {
    if (!isHeld(renewal)) return this.lose(lease, now, 'not-renewed', renewal.reason);
    const { seconds, everyMs } = this.timing;
    lease.deadline = localDeadline(renewal, seconds, sentAt, lease.expiresAtMs);
    lease.expiresAtMs = renewal.expiresAtMs;
    lease.expiresAt = renewal.result.expiresAt;
    if (!lease.renewedOnce) {
      // The grid starts at the first renewal actually sent: thousands of leases started
      // together spread over the time their first renewals took.
      lease.renewedOnce = true;
      this.renewedOnce++;
      lease.dueAt = sentAt;
      this.noteClock(renewal);
    }
    lease.attempt = 0;
    lease.lastError = null;
    lease.dueAt = nextRenewalAt(lease.dueAt, everyMs, now, lease.deadline - this.marginMs);
    lease.phase = 'waiting';
    this.heap.update(lease, lease.dueAt);
    this.renewals++;
    this.observer.event({
      event: 'renewed',
      leaseId: lease.leaseId,
      at: this.at(now),
      renewed: renewal.result.renewed,
      expiresAt: renewal.result.expiresAt,
      remainingMs: Math.max(0, Math.round(lease.deadline - now)),
      nextRenewalInMs: Math.round(lease.dueAt - now),
    });
  }

  private failedAttempt(lease: LeaseState, now: number, error: unknown): void {
    this.lastErrorAt = now;
    if (error instanceof AuthError) {
      this.refused = error;
      this.lastError = error.message;
      return this.end('error', error.message);
    }
    if (!(error instanceof QueenctlError)) throw error;
    lease.lastError = error;
    this.lastError = error.message;
    if (!this.retryable(lease, error)) return this.fail(lease, now, error.message, error.hint);
    lease.attempt++;
    const timeLeftMs = lease.deadline - now;
    const delayMs = retryDelayMs(lease.attempt, timeLeftMs, this.policy, this.random);
    lease.phase = 'waiting';
    if (now + delayMs >= lease.deadline) {
      // No time for another try: wake at the deadline and declare it then.
      this.heap.update(lease, lease.deadline);
      return;
    }
    this.heap.update(lease, now + delayMs);
    this.observer.event({
      event: 'retry',
      leaseId: lease.leaseId,
      at: this.at(now),
      error: error.message,
      attempt: lease.attempt,
      retryInMs: delayMs,
      remainingMs: lease.renewedOnce ? Math.max(0, Math.round(timeLeftMs)) : null,
    });
  }

  /**
   * Transient failures always. Once a lease has been renewed, any broker failure: repeating a
   * renewal is harmless (the broker keeps the later deadline), and giving up early can only
   * lose the lease sooner. Before that, a broker that answers outside the contract, redirects
   * or has no lease route will not get better by itself: say so at once.
   */
  private retryable(lease: LeaseState, error: QueenctlError): boolean {
    if (!(error instanceof BrokerError)) return false;
    return lease.renewedOnce || isTransient(error) || (error.status ?? 0) >= 500;
  }

  /** The deadline passed with no renewal. */
  private expire(lease: LeaseState, now: number): void {
    const { lastError } = lease;
    if (lease.renewedOnce) return this.lose(lease, now, 'expired', lastError?.message ?? null);
    const why = lastError ? `: ${lastError.message}` : '';
    this.fail(lease, now, `no renewal succeeded within ${this.timing.seconds}s of starting${why}`, lastError?.hint);
  }

  private lose(lease: LeaseState, now: number, reason: LostReason, detail: string | null): void {
    this.finish(lease);
    this.lost++;
    this.observer.event({ event: 'lost', leaseId: lease.leaseId, at: this.at(now), reason, detail });
  }

  private fail(lease: LeaseState, now: number, error: string, hint: string | undefined): void {
    this.finish(lease);
    this.failed++;
    this.firstFailure ??= { leaseId: lease.leaseId, message: error, hint };
    this.observer.event({ event: 'stopped', leaseId: lease.leaseId, at: this.at(now), reason: 'error', error });
  }

  private finish(lease: LeaseState): void {
    lease.phase = 'ended';
    this.heap.remove(lease);
    this.watching--;
  }

  private end(reason: StopReason, error: string | undefined): void {
    if (this.stopped) return;
    this.stopped = true;
    this.heldAtStop = this.countHeld();
    this.requests.abort();
    const at = this.at(this.context.clock.now());
    for (const lease of this.leases) {
      if (lease.phase === 'ended') continue;
      this.finish(lease);
      if (reason === 'error') this.failed++;
      this.observer.event(
        error === undefined
          ? { event: 'stopped', leaseId: lease.leaseId, at, reason }
          : { event: 'stopped', leaseId: lease.leaseId, at, reason, error },
      );
    }
    this.wake();
  }

  private noteClock(renewal: Renewal): void {
    if (this.warnedClock) return;
    const suspicion = timeZoneSuspicion(renewal, this.timing.seconds);
    if (!suspicion) return;
    this.warnedClock = true;
    this.observer.warn(suspicion);
  }

  private at(now: number): string {
    return new Date(now).toISOString();
  }
}
