/**
 * The pop and ack routes (docs/broker.md, "Pop and ack") around the queues of queues.ts: what
 * takes time on the wire. A long poll (`wait=true&timeout=ms`) waits for a push, a release or an
 * expiry before its timeout; the empty batch ack (`{"acknowledgments":[]}`) is never answered,
 * as recorded: it is held until the client gives up or the simulator closes.
 */
import { setMaxListeners } from 'node:events';
import type { Scope } from './auth.js';
import type { LeaseStore } from './leases.js';
import { parseAckBody, type PopRequest, Queues } from './queues.js';
import type { Reply } from './wire.js';

/** How often a long poll looks again without being woken: leases expire without an event. */
const LONG_POLL_TICK_MS = 50;

export class PopAckRoute {
  readonly queues: Queues;
  private readonly waiters = new Set<() => void>();
  private readonly closing = new AbortController();
  /** Empty batch acks held now: what a test asserts was never answered. */
  heldEmptyAcks = 0;

  constructor(
    store: LeaseStore,
    private readonly brokerNow: () => number,
  ) {
    this.queues = new Queues(store);
    this.queues.onChange = () => {
      for (const wake of [...this.waiters]) wake();
    };
    setMaxListeners(0, this.closing.signal);
  }

  /** One pop; null when the client went away or the simulator closed while it waited. */
  async pop(request: PopRequest & { waitMs: number | null }, scope: Scope, gone: AbortSignal): Promise<Reply | null> {
    const first = this.queues.pop(request, scope, this.brokerNow());
    if (first.kind !== 'nothing' || request.waitMs === null) return first.reply;
    const deadline = Date.now() + request.waitMs;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) return Queues.waitedForNothing(request);
      if (!(await this.nap(Math.min(left, LONG_POLL_TICK_MS), gone))) return null;
      const again = this.queues.pop(request, scope, this.brokerNow());
      if (again.kind !== 'nothing') return again.reply;
    }
  }

  /** `POST /api/v1/ack` (`batch` false) or `/api/v1/ack/batch`. */
  ack(body: string, batch: boolean, gone: AbortSignal): Reply | Promise<null> {
    const parsed = parseAckBody(body, batch);
    if ('reply' in parsed) return parsed.reply;
    if ('never' in parsed) return this.never(gone);
    return this.queues.ack(parsed.acks, this.brokerNow());
  }

  close(): void {
    this.closing.abort();
  }

  /** Resolves true after `ms` or a change, false when the client or the simulator is gone. */
  private nap(ms: number, gone: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      const settle = (awake: boolean): void => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        gone.removeEventListener('abort', stop);
        this.closing.signal.removeEventListener('abort', stop);
        resolve(awake);
      };
      const wake = (): void => settle(true);
      const stop = (): void => settle(false);
      const timer = setTimeout(wake, ms);
      this.waiters.add(wake);
      if (gone.aborted || this.closing.signal.aborted) return stop();
      gone.addEventListener('abort', stop, { once: true });
      this.closing.signal.addEventListener('abort', stop, { once: true });
    });
  }

  /** Nothing, until the client gives up or the simulator closes. */
  private never(gone: AbortSignal): Promise<null> {
    this.heldEmptyAcks++;
    return new Promise((resolve) => {
      const stop = (): void => {
        this.heldEmptyAcks--;
        gone.removeEventListener('abort', stop);
        this.closing.signal.removeEventListener('abort', stop);
        resolve(null);
      };
      if (gone.aborted || this.closing.signal.aborted) return stop();
      gone.addEventListener('abort', stop, { once: true });
      this.closing.signal.addEventListener('abort', stop, { once: true });
    });
  }
}
