/**
 * The deadlines of every request in flight, kept by one timer (issue 19): a timer, an
 * AbortController and its listeners per request cost a bulk run of 10,000 ids ~0.4 s of CPU.
 * The timer is set for the earliest deadline; when it fires, every deadline that has passed
 * expires, and it is set for the next. A request that ends first only leaves the heap: the timer
 * stays for the deadline it was set for (most often the next one's, a little later) and is set
 * again from there, so a bulk run sets about one timer per --timeout instead of one per request.
 * Once no request is in flight the timer is cleared: it never keeps a finished run alive.
 */
import { type Clock, WAKE } from '../clock.js';
import { MinHeap, type HeapItem } from '../renewal/heap.js';

export interface Deadline extends HeapItem {
  /** The deadline passed before the request ended. */
  expire(): void;
}

export class Deadlines {
  private readonly heap = new MinHeap<Deadline>();
  /** When the timer that is set fires; Infinity when none is. */
  private setFor = Number.POSITIVE_INFINITY;
  private unset: AbortController | null = null;

  constructor(private readonly clock: Clock) {}

  /** `deadline` expires at `at` (ms on the clock) unless removed first. */
  add(deadline: Deadline, at: number): void {
    this.heap.update(deadline, at);
    if (at < this.setFor) this.set(at);
  }

  remove(deadline: Deadline): void {
    this.heap.remove(deadline);
    if (this.heap.size === 0) this.clear();
  }

  /** Clears the timer (the client's close; by then no request is in flight). */
  clear(): void {
    if (this.unset === null) return;
    this.unset.abort(WAKE);
    this.unset = null;
    this.setFor = Number.POSITIVE_INFINITY;
  }

  private set(at: number): void {
    this.clear();
    const unset = new AbortController();
    this.unset = unset;
    this.setFor = at;
    this.clock.sleep(Math.max(1, at - this.clock.now()), unset.signal).then(
      () => {
        if (this.unset === unset) this.fire();
      },
      () => {},
    );
  }

  private fire(): void {
    this.unset = null;
    this.setFor = Number.POSITIVE_INFINITY;
    const now = this.clock.now();
    for (let next = this.heap.peek(); next !== undefined && next.wakeAt <= now; next = this.heap.peek()) {
      this.heap.remove(next);
      next.expire();
    }
    const next = this.heap.peek();
    if (next !== undefined) this.set(next.wakeAt);
  }
}
