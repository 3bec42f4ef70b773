/** Test doubles: a clock that only moves when told, and IO that collects what was written. */
import type { StdinLike } from '../../src/args.js';
import type { Renewal } from '../../src/broker/contract.js';
import type { Clock } from '../../src/clock.js';
import type { IO, OutputStream } from '../../src/io.js';

export class FakeClock implements Clock {
  private timers: Array<{ at: number; resolve: () => void }> = [];
  readonly sleeps: number[] = [];

  constructor(private current = Date.parse('2026-12-02T10:00:00Z')) {}

  now(): number {
    return this.current;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.sleeps.push(ms);
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = (): void => {
        this.timers = this.timers.filter((t) => t !== timer);
        reject(signal?.reason);
      };
      // Woken, the sleep takes its listener off the signal: a request's signal outlives its sleeps.
      const wake = signal
        ? (): void => {
            signal.removeEventListener('abort', onAbort);
            resolve();
          }
        : resolve;
      const timer = { at: this.current + ms, resolve: wake };
      this.timers.push(timer);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** When the next sleeper wakes, or null when nobody sleeps: where a test may jump to. */
  nextAt(): number | null {
    let next: number | null = null;
    for (const timer of this.timers) if (next === null || timer.at < next) next = timer.at;
    return next;
  }

  /** Moves time on and wakes every sleeper whose time has come. */
  advance(ms: number): void {
    this.current += ms;
    const due = this.timers.filter((t) => t.at <= this.current);
    this.timers = this.timers.filter((t) => t.at > this.current);
    for (const timer of due) timer.resolve();
  }
}

/** A clock whose sleeps return at once, for code that should not wait in tests. */
export const instantClock: Clock = { now: () => Date.now(), sleep: async () => {} };

export class Collector implements OutputStream {
  text = '';
  constructor(readonly isTTY = false) {}
  write(chunk: string): boolean {
    this.text += chunk;
    return true;
  }
}

export function stdinOf(text: string | null, isTTY = false): StdinLike {
  const chunks = text === null ? [] : [Buffer.from(text)];
  return Object.assign(
    (async function* () {
      yield* chunks;
    })(),
    { isTTY },
  );
}

export function bufferIO(
  options: { stdin?: string | null; tty?: boolean; quiet?: boolean } = {},
): IO & { stdout: Collector; stderr: Collector } {
  return {
    stdout: new Collector(options.tty ?? false),
    stderr: new Collector(options.tty ?? false),
    stdin: stdinOf(options.stdin ?? null),
    color: false,
    quiet: options.quiet ?? false,
    verbose: false,
  };
}

/**
 * A documented renewal answer as a fake broker gives it: renewed 1 and the expiry when the lease
 * was live (`expiresAtMs` not null), renewed 0 and null expiries when not; the Date header in
 * whole seconds of `brokerNowMs`, as the real one.
 */
export function fakeRenewal(leaseId: string, expiresAtMs: number | null, brokerNowMs: number): Renewal {
  const live = expiresAtMs !== null;
  const iso = live ? new Date(expiresAtMs).toISOString() : null;
  return {
    result: { leaseId, success: live, renewed: live ? 1 : 0, newExpiresAt: iso, expiresAt: iso, lease_expires_at: iso },
    shape: 'documented',
    reason: null,
    expiresAtMs,
    brokerDateMs: Math.floor(brokerNowMs / 1000) * 1000,
  };
}

/** A sleep on `clock` that the request's signal cuts short, leaving no listener on it afterwards. */
export async function pauseUnless(clock: Clock, ms: number, signal: AbortSignal | undefined): Promise<void> {
  // A FakeClock's sleep leaves no listener behind by itself (and an AbortController per sleep
  // was most of the cost of the fake brokers at thousands of leases).
  if (!signal || clock instanceof FakeClock) return clock.sleep(ms, signal);
  const local = new AbortController();
  const onAbort = (): void => local.abort(signal.reason);
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  try {
    await clock.sleep(ms, local.signal);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Moves `clock` on by `ms` the way fixed steps of `stepMs` would, but skipping the steps where
 * nobody wakes: the same schedule for a fraction of the turns of the event loop. The code under
 * test runs (one turn of the event loop) after each move, then `afterEach`. Code that keeps
 * sleeping 0 ms is let through one step at a time, as fixed steps would.
 */
export async function runFor(
  clock: FakeClock,
  ms: number,
  afterEach: () => void = () => {},
  stepMs = 1,
): Promise<void> {
  await turn();
  const start = clock.now();
  const end = start + ms;
  let idle = 0;
  while (clock.now() < end) {
    const next = clock.nextAt();
    // The first step boundary at or after the next wake-up.
    const due = next === null ? end : start + Math.ceil((next - start) / stepMs) * stepMs;
    const to = Math.min(end, Math.max(due, clock.now()));
    idle = to === clock.now() ? idle + 1 : 0;
    clock.advance(idle > 100 ? Math.min(stepMs, end - clock.now()) : to - clock.now());
    await turn();
    afterEach();
  }
  await turn();
}
