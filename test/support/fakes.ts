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
      const timer = { at: this.current + ms, resolve };
      this.timers.push(timer);
      signal?.addEventListener(
        'abort',
        () => {
          this.timers = this.timers.filter((t) => t !== timer);
          reject(signal.reason);
        },
        { once: true },
      );
    });
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
  if (!signal) return clock.sleep(ms);
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
