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
 * - Requests in flight adapt to the broker (renewal/concurrency.ts), up to --concurrency when
 *   given; due leases wait for a slot least time left first. When even the ceiling cannot renew
 *   every lease in time, people are told once, in words.
 * - An outage is the broker's, not each lease's (renewal/breaker.ts): while every request fails
 *   that way, renewals wait and one probe at a time tries the broker; per-lease retries and
 *   their events stop until it answers.
 */
import { setMaxListeners } from 'node:events';
import { localDeadline, timeZoneSuspicion } from '../broker/broker-clock.js';
import type { BrokerClient } from '../broker/client.js';
import { isHeld, type Renewal } from '../broker/contract.js';
import { backoffMs, isTransient, type RetryPolicy } from '../broker/retry.js';
import { type Clock, WAKE } from '../clock.js';
import { AuthError, BrokerError, QueenctlError } from '../exit.js';
import { OutageBreaker } from '../renewal/breaker.js';
import { type CannotKeepUp, capacityNeed, ConcurrencyController, type RequestOutcome } from './concurrency.js';
import type { LostReason, StoppedEvent, StopReason, WatchEvent } from './events.js';
import { MinHeap, type HeapItem } from './heap.js';

export interface WatchTiming {
  /** Asked for in every renewal: the lease lasts until the broker's now + seconds. */
  seconds: number;
  everyMs: number;
  /** The longest any one request may take (--timeout); cut further to the time left. */
  requestTimeoutMs: number;
  /** Requests in flight at the start; they adapt from there to what the broker takes. */
  concurrency: number;
  /** The most ever in flight: --concurrency when given, else the watch's ceiling. Default: concurrency. */
  maxConcurrency?: number;
  /** --concurrency was given: the can't-keep-up warning says to raise it, not that the ceiling is reached. */
  concurrencyGiven?: boolean;
}

export interface SchedulerObserver {
  event(event: WatchEvent): void;
  /** Something about the broker people should know once (its clock, its time zone). */
  warn(text: string): void;
  /** Even the ceiling cannot renew every lease in time: said once, again after a quiet while. */
  cannotKeepUp(shortfall: CannotKeepUp): void;
  /**
   * What each request came to and how long it took, events or not: an outage's failures have no
   * event of their own (docs/metrics.md counts them).
   */
  attempt?(outcome: AttemptOutcome): void;
}

/** One renewal request answered or failed (not one cut short by the end of the watch). */
export interface AttemptOutcome {
  result: 'renewed' | 'not_renewed' | 'error';
  durationMs: number;
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
  /** The broker's outage while one is on. */
  outage?: { since: number; error: string | null; leases: number; nextProbeAt: number | null } | null;
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
export function retryDelayMs(
  attempt: number,
  timeLeftMs: number,
  policy: RetryPolicy,
  random: () => number,
  error?: BrokerError,
): number {
  // The broker's Retry-After (429, 503) replaces the backoff, within the same bound.
  const wanted =
    error?.retryAfterMs === undefined
      ? backoffMs(attempt, policy, random)
      : Math.max(MIN_RETRY_DELAY_MS, error.retryAfterMs);
  return Math.min(wanted, Math.max(MIN_RETRY_DELAY_MS, Math.floor(timeLeftMs / 2)));
}

/** Fails the way the whole broker does when it is down (contract, "watch": `outage`); a 429 is a limit, not that. */
export function isOutage(error: unknown): error is BrokerError {
  return isTransient(error) && (error as BrokerError).status !== 429;
}

/**
 * Requests sent beyond what answers paid for, before the broker answers one of them: many leases
 * may fall due at once with as many slots free, and a broker that went down meanwhile meets at
 * most this many before the failures say so. Answers clock the rest, so a healthy broker soon
 * fills every slot.
 */
const MAX_UNANSWERED = 16;

/** A request's timer may fire a little before the clock reads its deadline. */
const TIMER_SLACK_MS = 10;

/** After warning that the watch cannot keep up, warn again only once it has kept up this long. */
const CAPACITY_QUIET_MS = 10 * 60_000;

type Phase = 'waiting' | 'ready' | 'renewing' | 'ended';

/**
 * A lease's place in the line of due leases, keyed by its deadline. Equal deadlines (every lease
 * before its first renewal: nothing is known yet) go in the order the leases were given, so a
 * list of ids, oldest first, is renewed oldest first: `tieBreak` is the input position in steps
 * of 1/1024 ms, two units of the last place of an epoch in ms, too small to reorder real deadlines.
 */
interface LineEntry extends HeapItem {
  readonly lease: LeaseState;
  readonly tieBreak: number;
}

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
  line: LineEntry;
}

export class RenewalScheduler {
  private readonly leases: LeaseState[];
  private readonly heap = new MinHeap<LeaseState>();
  /** Due leases waiting for a free request slot (or for the broker), least time left first. */
  private readonly ready = new MinHeap<LineEntry>();
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
  /** When people were last told the watch cannot keep up. */
  private warnedCapacityAt: number | null = null;
  private readonly concurrency: ConcurrencyController;
  private readonly breaker: OutageBreaker;
  /** The lease whose renewal is the outage's probe, while it is out. */
  private probing: LeaseState | null = null;
  /** Sent with no answer yet to any of them, since when (see MAX_UNANSWERED). */
  private unanswered = 0;
  private unansweredSince = 0;
  /** When the last outage ended: renewals due before it are late for the outage, not for capacity. */
  private recoveredAt = Number.NEGATIVE_INFINITY;
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
  /** Waiting for the loop's next turn (heartbeat()). */
  private beats: Array<() => void> = [];
  private looping = false;

  constructor(
    leaseIds: readonly string[],
    private readonly timing: WatchTiming,
    private readonly context: SchedulerContext,
    private readonly observer: SchedulerObserver,
  ) {
    this.leases = leaseIds.map((leaseId, index) => {
      const lease: LeaseState = {
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
        line: undefined as unknown as LineEntry,
      };
      lease.line = { lease, wakeAt: 0, heapIndex: -1, tieBreak: index / 1024 };
      return lease;
    });
    this.watching = this.leases.length;
    this.marginMs = safetyMarginMs(timing.seconds);
    this.policy = retryPolicy(timing.everyMs);
    this.random = context.random ?? Math.random;
    this.concurrency = new ConcurrencyController(
      { initial: timing.concurrency, ceiling: timing.maxConcurrency ?? timing.concurrency },
      context.clock.now(),
    );
    this.breaker = new OutageBreaker(undefined, this.random);
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
    this.looping = true;
    try {
      while (!this.stopped && this.watching > 0) {
        this.dispatch(this.context.clock.now());
        this.answerBeats();
        if (this.stopped || this.watching === 0) break;
        await this.sleepUntilDue();
      }
    } finally {
      this.looping = false;
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
    if (this.ready.size > 0 || (this.inFlight > 0 && nextRenewalAt === null)) nextRenewalAt = this.context.clock.now();
    const since = this.breaker.since;
    return {
      watching: this.watching,
      held: this.countHeld(),
      lost: this.lost,
      renewals: this.renewals,
      earliestDeadline,
      nextRenewalAt,
      lastError: this.lastError,
      lastErrorAt: this.lastErrorAt,
      outage:
        since === null
          ? null
          : { since, error: this.breaker.error, leases: this.watching, nextProbeAt: this.breaker.nextProbeAt },
    };
  }

  /**
   * Resolves at the loop's next turn, which it wakes: the loop itself says it runs (a liveness
   * probe, docs/metrics.md). Never resolves once the loop has ended, or while it is stuck.
   */
  heartbeat(): Promise<void> {
    if (!this.looping) return new Promise<void>(() => {});
    return new Promise<void>((resolve) => {
      this.beats.push(resolve);
      this.sleep?.controller.abort(WAKE);
    });
  }

  /** The loop is running: started, and not yet ended. */
  get running(): boolean {
    return this.looping;
  }

  private answerBeats(): void {
    if (this.beats.length === 0) return;
    const beats = this.beats;
    this.beats = [];
    for (const beat of beats) beat();
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
    for (let top = this.heap.peek(); top && top.wakeAt <= now && !this.stopped; top = this.heap.peek()) {
      this.heap.remove(top);
      if (now >= top.deadline) {
        this.expire(top, now);
      } else {
        // In line, least time left first; wake at the deadline to declare it if no slot comes.
        top.phase = 'ready';
        this.ready.update(top.line, top.deadline + top.line.tieBreak);
        this.heap.update(top, top.deadline);
      }
    }
    if (this.breaker.isOpen) {
      // The broker is down: one probe at a time, the lease with the least time left.
      const first = this.ready.peek();
      if (first && !this.stopped && this.breaker.probeDue(now)) this.send(first.lease, now, true);
      return;
    }
    for (let first = this.ready.peek(); first && !this.stopped; first = this.ready.peek()) {
      if (this.inFlight >= this.concurrency.limit || this.unanswered >= MAX_UNANSWERED) break;
      this.send(first.lease, now);
    }
  }

  /** The next time something is due: a renewal, a deadline, or the outage's next probe. */
  private nextWakeAt(): number {
    const top = this.heap.peek();
    const probeAt = this.ready.size > 0 ? this.breaker.nextProbeAt : null;
    return Math.min(top ? top.wakeAt : Number.POSITIVE_INFINITY, probeAt ?? Number.POSITIVE_INFINITY);
  }

  private async sleepUntilDue(): Promise<void> {
    const { clock } = this.context;
    const until = this.nextWakeAt();
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
    if (this.sleep && (this.stopped || this.watching === 0 || this.nextWakeAt() < this.sleep.until)) {
      this.sleep.controller.abort(WAKE);
    }
  }

  // --- one renewal ---------------------------------------------------------------------------

  private send(lease: LeaseState, now: number, probe = false): void {
    this.heap.remove(lease);
    this.ready.remove(lease.line);
    if (probe) {
      this.probing = lease;
      this.breaker.probeSent();
    } else {
      if (this.unanswered++ === 0) this.unansweredSince = now;
      this.checkLateness(lease, now);
    }
    lease.phase = 'renewing';
    this.inFlight++;
    const timeoutMs = Math.max(1, Math.min(this.timing.requestTimeoutMs, Math.floor(lease.deadline - now)));
    // Cut to the lease's deadline: running out of that time says the lease ran out, not the broker.
    const cutAt = timeoutMs < this.timing.requestTimeoutMs ? now + timeoutMs : null;
    this.context.client.extend(lease.leaseId, this.timing.seconds, { timeoutMs, signal: this.requests.signal }).then(
      (renewal) => this.settle(lease, now, renewal, null),
      (error: unknown) => this.settle(lease, now, null, error, cutAt),
    );
  }

  private settle(
    lease: LeaseState,
    sentAt: number,
    renewal: Renewal | null,
    error: unknown,
    cutAt: number | null = null,
  ): void {
    this.inFlight--;
    const probe = this.probing === lease;
    if (probe) this.probing = null;
    try {
      if (lease.phase === 'renewing' && !this.stopped) {
        const now = this.context.clock.now();
        this.observer.attempt?.({
          result: renewal ? (isHeld(renewal) ? 'renewed' : 'not_renewed') : 'error',
          durationMs: now - sentAt,
        });
        if (renewal) {
          this.brokerAnswered(now, sentAt, 'answered');
          this.renewed(lease, sentAt, now, renewal);
        } else {
          const outlived = cutAt !== null && now >= cutAt - TIMER_SLACK_MS;
          this.failedAttempt(lease, now, sentAt, error, probe, outlived);
        }
        this.dispatch(now);
      } else if (probe) {
        this.breaker.probeDropped();
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

  /** `outlived`: the request ran out of the time the lease had left, not out of --timeout. */
  private failedAttempt(
    lease: LeaseState,
    now: number,
    sentAt: number,
    error: unknown,
    probe: boolean,
    outlived = false,
  ): void {
    this.lastErrorAt = now;
    if (error instanceof AuthError) {
      this.refused = error;
      this.lastError = error.message;
      return this.end('error', error.message);
    }
    if (!(error instanceof QueenctlError)) throw error;
    // What the broker said before stays what the lease is reported lost or failed with (and
    // its hint what to check): a timeout at the lease's own deadline adds nothing to it.
    if (!(outlived && lease.lastError)) lease.lastError = error;
    this.lastError = error.message;
    if (isOutage(error)) {
      if (this.outageFailure(lease, now, sentAt, error, probe)) return;
    } else {
      this.brokerAnswered(now, sentAt, isTransient(error) ? 'overloaded' : 'answered');
    }
    if (!this.retryable(lease, error)) return this.fail(lease, now, error.message, error.hint);
    lease.attempt++;
    const timeLeftMs = lease.deadline - now;
    const delayMs = retryDelayMs(
      lease.attempt,
      timeLeftMs,
      this.policy,
      this.random,
      error instanceof BrokerError ? error : undefined,
    );
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
   * A failure the way an outage fails. True when the breaker is open (or opens now) and takes
   * it over: the lease waits in line for the broker, with no retry or event of its own.
   */
  private outageFailure(lease: LeaseState, now: number, sentAt: number, error: BrokerError, probe: boolean): boolean {
    if (!this.breaker.isOpen) {
      this.concurrency.record({ sentAt, now, outcome: 'overloaded', waiting: this.ready.size > 0 });
      if (!this.breaker.failed(lease.leaseId, error.message, now, this.watching, sentAt)) return false;
      this.observer.event({
        event: 'outage',
        at: this.at(now),
        error: error.message,
        leases: this.watching,
        remainingMs: this.leastTimeLeftMs(now),
      });
    }
    lease.attempt++;
    // Back in line; declared at its deadline if the broker is not back by then.
    lease.phase = 'ready';
    this.ready.update(lease.line, lease.deadline + lease.line.tieBreak);
    this.heap.update(lease, lease.deadline);
    if (probe) {
      const first = this.ready.peek() as LineEntry;
      this.breaker.probeFailed(error.message, now, first.wakeAt - now, error.retryAfterMs);
    }
    return true;
  }

  /** The broker answered, or failed in a way an outage does not: it is up. */
  private brokerAnswered(now: number, sentAt: number, outcome: RequestOutcome): void {
    // An answer to a request sent before them pays for one more, no more: the broker may have
    // gone down since it took that one.
    this.unanswered = sentAt >= this.unansweredSince ? 0 : Math.max(0, this.unanswered - 1);
    const downMs = this.breaker.answered(now, sentAt);
    if (downMs !== null) {
      this.recoveredAt = now;
      this.observer.event({
        event: 'recovered',
        at: this.at(now),
        downMs: Math.round(downMs),
        leases: this.ready.size,
      });
    }
    if (this.concurrency.record({ sentAt, now, outcome, waiting: this.ready.size > 0 })) this.checkCapacity(now);
  }

  /** The least time a renewed lease has left; null before any renewal. */
  private leastTimeLeftMs(now: number): number | null {
    const earliest = this.status().earliestDeadline;
    return earliest === null ? null : Math.max(0, Math.round(earliest - now));
  }

  /** Even the ceiling at the latency seen lately cannot renew every lease before it expires. */
  private checkCapacity(now: number): void {
    const capacity = this.concurrency.capacityPerSecond();
    if (capacity === null) return;
    const need = capacityNeed(this.watching, this.timing.everyMs, this.timing.seconds, this.marginMs);
    if (capacity < need.neededPerSecond) this.warnCapacity(now, capacity);
  }

  /** A renewal leaving with less than half its safety margin, at the ceiling: seen, not estimated. */
  private checkLateness(lease: LeaseState, now: number): void {
    if (!lease.renewedOnce || lease.attempt > 0 || lease.dueAt < this.recoveredAt || !this.concurrency.atCeiling)
      return;
    if (lease.deadline - now < this.marginMs / 2) this.warnCapacity(now, this.concurrency.answersPerSecond);
  }

  private warnCapacity(now: number, givesPerSecond: number | null): void {
    const quiet = this.warnedCapacityAt === null || now - this.warnedCapacityAt >= CAPACITY_QUIET_MS;
    this.warnedCapacityAt = now;
    if (!quiet) return;
    const { everyMs, seconds, concurrencyGiven } = this.timing;
    this.observer.cannotKeepUp({
      ...capacityNeed(this.watching, everyMs, seconds, this.marginMs),
      everyMs,
      givesPerSecond,
      latencyMs: this.concurrency.latencyMs,
      ceiling: this.concurrency.ceiling,
      concurrencyGiven: concurrencyGiven ?? true,
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
    this.ready.remove(lease.line);
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
      if (reason === 'for' && !lease.renewedOnce) {
        this.observer.event(this.neverRenewed(lease, at));
        continue;
      }
      this.observer.event(
        error === undefined
          ? { event: 'stopped', leaseId: lease.leaseId, at, reason }
          : { event: 'stopped', leaseId: lease.leaseId, at, reason, error },
      );
    }
    this.wake();
  }

  /**
   * --for ended before any renewal of this lease succeeded: watching it failed, as a broker that
   * stays down for the lease's whole time fails it (exit 2, docs/cli-contract.md#watch-exit-status),
   * and its `stopped` event says so. 0 would call an unreachable broker a success.
   */
  private neverRenewed(lease: LeaseState, at: string): StoppedEvent {
    const why =
      lease.lastError?.message ??
      (this.breaker.isOpen ? this.breaker.error : null) ??
      'no answer to its first renewal had come';
    const error = `not renewed once before --for ended: ${why}`;
    this.failed++;
    this.firstFailure ??= { leaseId: lease.leaseId, message: error, hint: lease.lastError?.hint };
    return { event: 'stopped', leaseId: lease.leaseId, at, reason: 'for', neverRenewed: true, error };
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
