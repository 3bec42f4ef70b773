/**
 * How many renewals `lease watch` keeps in flight (docs/cli-contract.md, "watch": --concurrency
 * is the most it may use). The broker's capacity is found the way TCP finds a path's: additive
 * increase while renewals wait for a slot and latency holds near its floor, multiplicative
 * decrease when latency climbs well over it or the broker fails or throttles. Decisions are
 * taken once per window of about one round trip of answers, so one slow answer or a burst of
 * failures from the same moment counts once. Pure: time comes in as arguments.
 */

/** Where a watch starts without --concurrency: the global option's default. */
export const DEFAULT_CONCURRENCY = 16;
/** The most a watch uses without --concurrency: the most the global option allows. */
export const CONCURRENCY_CEILING = 256;

/** Latency "holds" while a window's mean stays within this many times the floor, plus the slack. */
const LATENCY_TOLERANCE = 2;
/** Room for noise where the floor is a millisecond or two (a broker on loopback). */
const LATENCY_SLACK_MS = 20;
/** Decrease on latency (gentle: the broker is answering) and on failures (sharp: it is not). */
const LATENCY_BACKOFF = 0.75;
const FAILURE_BACKOFF = 0.5;
/** A window closes after this many answers at least (and at least `limit` of them)... */
const MIN_WINDOW_SAMPLES = 4;
/** ...or after this long, whatever came back. */
const MAX_WINDOW_MS = 1_000;
/**
 * Latency still over the floor with this few requests in flight, or no better after a decrease,
 * is not our load: the broker is slower for good, and its latency now is the new floor.
 */
const FLOOR_RESET_LIMIT = 4;
/** A decrease on latency helped when the next window's mean is at most this share of the one before. */
const DECREASE_HELPED = 0.9;

/** What one request came to, as far as the broker's capacity goes. */
export type RequestOutcome =
  /** The broker answered (a renewal, renewed nothing, or an error of its own). */
  | 'answered'
  /** Unreachable, reset, timed out, 502/503/504, 500 pool, 429: the broker is struggling. */
  | 'overloaded';

export interface ConcurrencyOptions {
  /** Requests in flight at the start. */
  initial: number;
  /** The most ever in flight. */
  ceiling: number;
}

export interface ConcurrencySample {
  /** Local time the request was sent, and when its outcome came. */
  sentAt: number;
  now: number;
  outcome: RequestOutcome;
  /** Renewals were waiting for a free slot when it came back. */
  waiting: boolean;
}

interface Window {
  startedAt: number;
  samples: number;
  latencySumMs: number;
  minLatencyMs: number;
  waited: boolean;
}

export class ConcurrencyController {
  private current: number;
  readonly ceiling: number;
  private floorMs: number | null = null;
  private recentMs: number | null = null;
  /** Answers per second in the last closed window. */
  private throughput: number | null = null;
  /** A failure of a request sent before this already had its decrease; its latency is of the old load. */
  private decreasedAt = Number.NEGATIVE_INFINITY;
  /** The mean latency that made the last decrease, until a window is back within tolerance. */
  private decreasedOnMs: number | null = null;
  private window: Window;

  constructor(options: ConcurrencyOptions, now: number) {
    this.ceiling = Math.max(1, options.ceiling);
    this.current = Math.min(this.ceiling, Math.max(1, options.initial));
    this.window = this.newWindow(now);
  }

  /** Requests that may be in flight now. */
  get limit(): number {
    return this.current;
  }

  get atCeiling(): boolean {
    return this.current >= this.ceiling;
  }

  /** The least latency seen (reset when the broker became slower for good); null before any answer. */
  get floorLatencyMs(): number | null {
    return this.floorMs;
  }

  /** The mean latency of the last window; null before one closed. */
  get latencyMs(): number | null {
    return this.recentMs;
  }

  /** Answers per second in the last window; null before one closed. */
  get answersPerSecond(): number | null {
    return this.throughput;
  }

  /** Renewals per second the ceiling would give at the latency seen lately; null before it is known. */
  capacityPerSecond(): number | null {
    return this.recentMs === null ? null : (this.ceiling * 1000) / Math.max(1, this.recentMs);
  }

  /** Takes one request's outcome; true when it closed a window (a decision was taken). */
  record(sample: ConcurrencySample): boolean {
    const { now } = sample;
    if (sample.outcome === 'overloaded') {
      // Once per generation: the requests in flight when the trouble began all fail together.
      if (sample.sentAt < this.decreasedAt) return false;
      this.decrease(FAILURE_BACKOFF, now);
      return true;
    }
    if (sample.sentAt < this.decreasedAt) return false;
    const latencyMs = Math.max(0, now - sample.sentAt);
    const window = this.window;
    window.samples++;
    window.latencySumMs += latencyMs;
    window.minLatencyMs = Math.min(window.minLatencyMs, latencyMs);
    window.waited ||= sample.waiting;
    if (window.samples < Math.max(MIN_WINDOW_SAMPLES, this.current) && now - window.startedAt < MAX_WINDOW_MS) {
      return false;
    }
    this.close(window, now);
    return true;
  }

  private close(window: Window, now: number): void {
    const meanMs = window.latencySumMs / window.samples;
    this.recentMs = meanMs;
    this.throughput = (window.samples * 1000) / Math.max(1, now - window.startedAt);
    const least = window.minLatencyMs;
    if (this.floorMs === null || least < this.floorMs) this.floorMs = least;
    if (meanMs > this.floorMs * LATENCY_TOLERANCE + LATENCY_SLACK_MS) {
      const helped = this.decreasedOnMs === null || meanMs < this.decreasedOnMs * DECREASE_HELPED;
      if (helped && this.current > FLOOR_RESET_LIMIT) {
        this.decreasedOnMs = meanMs;
        return this.decrease(LATENCY_BACKOFF, now);
      }
      this.floorMs = least;
    }
    this.decreasedOnMs = null;
    // Grows by about its square root per round trip: a few seconds from 16 to the hundreds.
    if (window.waited)
      this.current = Math.min(this.ceiling, this.current + Math.max(1, Math.floor(Math.sqrt(this.current))));
    this.window = this.newWindow(now);
  }

  private decrease(factor: number, now: number): void {
    this.current = Math.max(1, Math.floor(this.current * factor));
    this.decreasedAt = now;
    this.window = this.newWindow(now);
  }

  private newWindow(now: number): Window {
    return { startedAt: now, samples: 0, latencySumMs: 0, minLatencyMs: Number.POSITIVE_INFINITY, waited: false };
  }
}

/** Renewals per second needed to renew every lease before it expires, and to keep to --every. */
export interface CapacityNeed {
  leases: number;
  /** Each lease renewed once per --every. */
  plannedPerSecond: number;
  /** Each lease renewed at least once per (lease length less the safety margin): below this, leases expire. */
  neededPerSecond: number;
}

export function capacityNeed(leases: number, everyMs: number, seconds: number, marginMs: number): CapacityNeed {
  const windowMs = Math.max(1, Math.min(seconds * 1000 - marginMs, seconds * 1000));
  return {
    leases,
    plannedPerSecond: (leases * 1000) / Math.max(1, Math.min(everyMs, windowMs)),
    neededPerSecond: (leases * 1000) / windowMs,
  };
}

/** The numbers of a watch that even the ceiling cannot keep renewed; output/watch.ts words them. */
export interface CannotKeepUp {
  leases: number;
  everyMs: number;
  plannedPerSecond: number;
  neededPerSecond: number;
  /** What the broker gives: at the ceiling and the latency seen lately, or as counted; null when unknown. */
  givesPerSecond: number | null;
  latencyMs: number | null;
  /** The most requests in flight, and whether --concurrency set it. */
  ceiling: number;
  concurrencyGiven: boolean;
}
