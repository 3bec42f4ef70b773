/**
 * Retrying a renewal is safe: the broker takes the later of the current deadline and
 * now + seconds (lease-extend-route.md), so a repeated request never shortens a lease. Only
 * transient failures are retried (BrokerError.transient: unreachable, reset, timeout, 502/503/504,
 * 500 pool); a refusal or an answer outside the contract would only repeat itself.
 */
import type { Clock } from '../clock.js';
import { BrokerError } from '../exit.js';

export interface RetryPolicy {
  /** Further attempts after the first. */
  retries: number;
  /** First backoff; doubles on each retry, with full jitter. */
  baseDelayMs: number;
  maxDelayMs: number;
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

export interface RetryContext {
  clock: Clock;
  signal?: AbortSignal | undefined;
  /** Called before each wait, so callers can say what is happening. */
  onRetry?: (error: BrokerError, attempt: number, delayMs: number) => void;
  random?: () => number;
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
      const delayMs = backoffMs(tries, policy, context.random);
      context.onRetry?.(error as BrokerError, tries, delayMs);
      await context.clock.sleep(delayMs, context.signal);
    }
  }
}
