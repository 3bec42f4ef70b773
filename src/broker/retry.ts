/**
 * Retrying a renewal is safe: the broker takes the later of the current deadline and
 * now + seconds (docs/broker.md#retries-are-safe), so a repeated request never shortens a lease. Only
 * transient failures are retried (BrokerError.transient: unreachable, reset, timeout, 502/503/504,
 * 500 pool, 429); a refusal or an answer outside the contract would only repeat itself. A
 * Retry-After on 429 or 503 replaces the backoff (docs/cli-contract.md, "watch").
 */
import type { Clock } from '../clock.js';
import { BrokerError } from '../exit.js';

export interface RetryPolicy {
  /** Further attempts after the first. */
  retries: number;
  /** First backoff; doubles on each retry, with full jitter. */
  baseDelayMs: number;
  maxDelayMs: number;
  /**
   * The longest Retry-After (429, 503) waited for instead of the backoff (--timeout); a longer
   * one ends the retries at once. Default: maxDelayMs.
   */
  maxRetryAfterMs?: number;
}

export const DEFAULT_RETRY: RetryPolicy = { retries: 2, baseDelayMs: 200, maxDelayMs: 5_000 };

/** Backoff before retry number `attempt` (1-based): exponential, capped, full jitter. */
export function backoffMs(attempt: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

export function isTransient(error: unknown): boolean {
  return error instanceof BrokerError && error.transient;
}

/**
 * The wait before the next try: the broker's Retry-After when it gave one, else the backoff.
 * Null when Retry-After is longer than the policy waits for: retrying sooner would only be
 * refused again.
 */
export function retryWaitMs(
  error: BrokerError,
  attempt: number,
  policy: RetryPolicy,
  random: () => number = Math.random,
): number | null {
  if (error.retryAfterMs === undefined) return backoffMs(attempt, policy, random);
  return error.retryAfterMs <= (policy.maxRetryAfterMs ?? policy.maxDelayMs) ? error.retryAfterMs : null;
}

/** The error a Retry-After too long to wait for ends with: what the broker asked, and what to do. */
function tooLongToWait(error: BrokerError, policy: RetryPolicy): BrokerError {
  const limitS = Math.round((policy.maxRetryAfterMs ?? policy.maxDelayMs) / 1000);
  const limit = `--timeout (${limitS}s)`;
  const wait = `that is longer than ${limit} allows waiting; try again then, or raise --timeout to wait for it`;
  // What to check stays: a rate limit that asks for minutes is worth looking at too.
  const hint = error.hint ? `${wait}\n  ${error.hint}` : wait;
  return new BrokerError(error.message, error.transient, hint, error.status, error.retryAfterMs);
}

export interface RetryContext {
  clock: Clock;
  signal?: AbortSignal | undefined;
  /** Called before each wait, so callers can say what is happening. */
  onRetry?: (error: BrokerError, attempt: number, delayMs: number) => void;
  random?: () => number;
  /** Clock time after which no further try is made: a wait that would end past it ends the retries. */
  deadline?: number;
  /** Aborted: no further try, and a wait for one ends (what is in flight is left to `signal`). */
  stopRetries?: AbortSignal;
}

export async function withRetries<T>(
  attempt: () => Promise<T>,
  policy: RetryPolicy,
  context: RetryContext,
): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      if (!isTransient(error) || tries > policy.retries || context.signal?.aborted) throw error;
      if (context.stopRetries?.aborted) throw error;
      const delayMs = retryWaitMs(error as BrokerError, tries, policy, context.random);
      if (delayMs === null) throw tooLongToWait(error as BrokerError, policy);
      if (context.deadline !== undefined && context.clock.now() + delayMs > context.deadline) throw error;
      context.onRetry?.(error as BrokerError, tries, delayMs);
      const { stopRetries, signal } = context;
      if (!stopRetries) {
        await context.clock.sleep(delayMs, signal);
        continue;
      }
      const wait = signal ? AbortSignal.any([signal, stopRetries]) : stopRetries;
      const stopped = await context.clock.sleep(delayMs, wait).then(
        () => false,
        (reason: unknown) => {
          if (signal?.aborted) throw reason;
          return true;
        },
      );
      if (stopped) throw error;
    }
  }
}
