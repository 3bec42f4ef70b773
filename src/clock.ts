/**
 * Time, as a parameter. Everything that waits or reads the time takes a Clock, so tests run
 * the schedule of `watch` or a retry backoff on a fake clock without real waiting.
 */
export interface Clock {
  /** Local wall time, epoch ms. */
  now(): number;
  /** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/**
 * The reason a sleep is cut short with when nothing failed (the renewal loop woken early, the
 * deadline timer of requests no longer needed). `AbortController.abort()` without a reason builds
 * a DOMException, stack trace and all: ~40 µs each, and the first in a process loads
 * DOMException itself (~0.45 ms of `lease extend`, whose last request clears the timer). The
 * renewal loop is woken this way up to once a renewal.
 */
export const WAKE: unique symbol = Symbol('wake');

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(
        () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.max(0, ms),
      );
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

/**
 * The clock a real watch runs on: wall time at start-up plus monotonic time since. A watch
 * measures intervals and deadlines only, so a wall clock stepped by NTP in the middle of a long
 * watch must not make every deadline look passed (a false loss stops the command) or far away.
 */
export const monotonicClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  sleep: systemClock.sleep,
};
