/**
 * Faults injected into broker requests: what a client meets when the broker or the network
 * misbehaves (latency, dropped connections, answers cut off mid-body, odd statuses and bodies,
 * and the older broker's hang while its database is down: docs/broker.md).
 *
 * A client's deadline is tested with `until-abandoned`, not `latency`: the answer is held until
 * the client gives up (its connection closes), so the verdict never depends on which of two real
 * timers fires first on a busy machine. `whenHeld` tells a test that a request is being held,
 * which is when a test on a fake clock moves the client's clock past its deadline.
 */
import { setMaxListeners } from 'node:events';
import http from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { fail, isFiniteNumber, isPositiveInt, isString, optional } from './input.js';
import { isRecord, type Reply } from './wire.js';

export type FaultAction =
  | { kind: 'latency'; ms: number }
  | { kind: 'drop' }
  | { kind: 'reset-mid-body' }
  | { kind: 'status'; status: number; body?: string; headers?: Record<string, string> }
  | { kind: 'body'; body: string | (() => string); status?: number }
  | { kind: 'hang' }
  | { kind: 'until-abandoned' };

/**
 * A fault applies to broker requests (everything outside `/_sim/`, `/health` included). Faults are
 * tried in injection order and a request takes the first that matches; `times` counts down
 * (default: until `clearFaults()`); `leaseId` restricts a fault to requests on the extend path
 * for that decoded id (a consumer-group request names no lease: such a fault never matches it).
 * `status` without a body answers `{"error":"<reason phrase>"}`. `reset-mid-body` runs the renewal
 * first (the broker committed, the answer was lost) and sends its status and half its body.
 * `route` restricts a fault to one route (`extend`, `pop`, `ack`, `consumer-groups`, `health`); on
 * the ack routes `leaseId` is the lease id of the body's first acknowledgement.
 * `hang` holds a request until `clearFaults()` (then answers it) or the client goes away;
 * `until-abandoned` holds it, answering nothing ever, until the client goes away (a deadline, a
 * stop): a broker slower than any --timeout, with no timer of its own to race the client's.
 */
export type Fault = { times?: number; leaseId?: string; route?: FaultRoute } & FaultAction;

/** The routes a fault may be restricted to. */
export const FAULT_ROUTES = ['extend', 'pop', 'ack', 'consumer-groups', 'health'] as const;
export type FaultRoute = (typeof FAULT_ROUTES)[number];
const isFaultRoute = (v: unknown): v is FaultRoute => (FAULT_ROUTES as readonly unknown[]).includes(v);

/** A fault that survives JSON: what the control interface accepts. */
export type WireFault = Fault extends infer F
  ? F extends { kind: 'body' }
    ? Omit<F, 'body'> & { body: string }
    : F
  : never;

/** What a request does once its fault has acted: answer as the fault says, go on, or nothing more. */
export type FaultOutcome = { reply: Reply } | 'continue' | 'done';

type HoldOutcome = 'released' | 'closed' | 'gone';

const isStatus = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 100 && (v as number) <= 599;
const isStringRecord = (v: unknown): v is Record<string, string> => isRecord(v) && Object.values(v).every(isString);

/** Validates a fault; a function `body` is only possible in process (`allowFunctionBody`). */
export function parseFault(value: unknown, allowFunctionBody = false): Fault {
  if (!isRecord(value)) fail('fault must be an object');
  const times = optional(value, 'times', isPositiveInt, 'a positive integer');
  const leaseId = optional(value, 'leaseId', isString, 'a string');
  const route = optional(value, 'route', isFaultRoute, FAULT_ROUTES.join(', '));
  const common = {
    ...(times !== undefined && { times }),
    ...(leaseId !== undefined && { leaseId }),
    ...(route !== undefined && { route }),
  };
  switch (value.kind) {
    case 'latency': {
      const ms = value.ms;
      if (!isFiniteNumber(ms) || ms < 0) fail('ms must be a number ≥ 0');
      return { ...common, kind: 'latency', ms };
    }
    case 'drop':
    case 'reset-mid-body':
    case 'hang':
    case 'until-abandoned':
      return { ...common, kind: value.kind };
    case 'status': {
      const status = value.status;
      if (!isStatus(status)) fail('status must be an integer 100..599');
      const body = optional(value, 'body', isString, 'a string');
      const headers = optional(value, 'headers', isStringRecord, 'an object of strings');
      return { ...common, kind: 'status', status, ...(body !== undefined && { body }), ...(headers && { headers }) };
    }
    case 'body': {
      const raw = value.body;
      let body: string | (() => string);
      if (typeof raw === 'string') body = raw;
      else if (allowFunctionBody && typeof raw === 'function') body = raw as () => string;
      else fail('body must be a string');
      const status = optional(value, 'status', isStatus, 'an integer 100..599');
      return { ...common, kind: 'body', body, ...(status !== undefined && { status }) };
    }
    default:
      return fail('kind must be latency, drop, reset-mid-body, status, body, hang or until-abandoned');
  }
}

function faultReply(fault: Extract<FaultAction, { kind: 'status' | 'body' }>): Reply {
  if (fault.kind === 'status') {
    const body = fault.body ?? JSON.stringify({ error: http.STATUS_CODES[fault.status] ?? 'error' });
    return {
      status: fault.status,
      headers: { 'Content-Type': 'application/json', ...fault.headers },
      body,
    };
  }
  const body = typeof fault.body === 'function' ? fault.body() : fault.body;
  return { status: fault.status ?? 200, headers: { 'Content-Type': 'application/json' }, body };
}

/** Requests a `hang` or `until-abandoned` has held: all of them, and those it holds now. */
export interface HeldCount {
  /** Every request held since the simulator started (those let go or abandoned included). */
  held: number;
  /** Held now. */
  holding: number;
  /** Let go because the client went away first. */
  abandoned: number;
}

/** The injected faults, and the requests they are delaying or holding. */
export class Faults {
  private faults: Fault[] = [];
  private readonly held = new Set<(outcome: HoldOutcome) => void>();
  private readonly closing = new AbortController();
  /** Held counts, overall (key null) and per lease id of the extend path. */
  private readonly counts = new Map<string | null, HeldCount>();
  private readonly heldWaiters = new Set<() => void>();
  /** The holds of `until-abandoned`, which clear() does not let go. */
  private readonly unreleasable = new Set<(outcome: HoldOutcome) => void>();

  constructor() {
    // A latency fault delays every request it catches, each listening here: thousands at once.
    setMaxListeners(0, this.closing.signal);
  }

  /** Appends a validated fault (see parseFault). */
  add(fault: unknown, allowFunctionBody = false): void {
    this.faults.push(parseFault(fault, allowFunctionBody));
  }

  /** Removes every fault and lets the requests a `hang` is holding go on to be answered. */
  clear(): void {
    this.faults = [];
    for (const settle of [...this.held]) if (!this.unreleasable.has(settle)) settle('released');
  }

  /** The first fault that matches, in injection order; `times` counts down to removal. */
  take(leaseId: string | null, route: FaultRoute | null = null): Fault | undefined {
    const i = this.faults.findIndex(
      (f) => (f.leaseId === undefined || f.leaseId === leaseId) && (f.route === undefined || f.route === route),
    );
    const fault = this.faults[i];
    if (fault === undefined) return undefined;
    if (fault.times !== undefined) {
      if (fault.times <= 1) this.faults.splice(i, 1);
      else fault.times--;
    }
    return fault;
  }

  /**
   * Acts out `fault` on a request before it is answered. `reset-mid-body` acts after: the
   * request goes on, and the caller sends half of the answer.
   */
  async apply(
    fault: Fault | undefined,
    res: http.ServerResponse,
    leaseId: string | null = null,
  ): Promise<FaultOutcome> {
    switch (fault?.kind) {
      case 'drop':
        res.destroy();
        return 'done';
      case 'status':
      case 'body':
        return { reply: faultReply(fault) };
      case 'latency':
        return (await this.sleep(fault.ms)) ? 'continue' : 'done';
      case 'hang':
        return (await this.hold(res, leaseId, true)) === 'released' ? 'continue' : 'done';
      case 'until-abandoned':
        await this.hold(res, leaseId, false);
        return 'done';
      case 'reset-mid-body':
      case undefined:
        return 'continue';
    }
  }

  /** Ends every delay and hold at once: the simulator is closing. */
  close(): void {
    this.closing.abort();
    for (const settle of [...this.held]) settle('closed');
    for (const wake of [...this.heldWaiters]) wake();
  }

  /** The held counts, of every request or of those on the extend path of `leaseId`. */
  heldCount(leaseId?: string): HeldCount {
    return { ...(this.counts.get(leaseId ?? null) ?? { held: 0, holding: 0, abandoned: 0 }) };
  }

  /**
   * Resolves once `count` requests (of `leaseId`, when given) have been held, counting those
   * already let go: the moment a test on a fake clock moves a client past its deadline. Rejects
   * if the simulator closes first.
   */
  whenHeld(count: number, leaseId?: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (this.heldCount(leaseId).held >= count) {
          this.heldWaiters.delete(check);
          resolve();
        } else if (this.closing.signal.aborted) {
          this.heldWaiters.delete(check);
          reject(new Error(`simulator closed with ${this.heldCount(leaseId).held} of ${count} requests held`));
        }
      };
      this.heldWaiters.add(check);
      check();
    });
  }

  private count(leaseId: string | null, change: (count: HeldCount) => void): void {
    for (const key of leaseId === null ? [null] : [null, leaseId]) {
      let count = this.counts.get(key);
      if (count === undefined) {
        count = { held: 0, holding: 0, abandoned: 0 };
        this.counts.set(key, count);
      }
      change(count);
    }
    for (const wake of [...this.heldWaiters]) wake();
  }

  /** Resolves false when the simulator closes first. */
  private async sleep(ms: number): Promise<boolean> {
    try {
      await delay(ms, undefined, { signal: this.closing.signal });
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Nothing at all until the client goes away or the simulator closes; and, when `releasable`
   * (the older broker with its database down), until clear().
   */
  private hold(res: http.ServerResponse, leaseId: string | null, releasable: boolean): Promise<HoldOutcome> {
    return new Promise((resolve) => {
      const settle = (outcome: HoldOutcome): void => {
        this.held.delete(settle);
        this.unreleasable.delete(settle);
        res.off('close', gone);
        this.count(leaseId, (count) => {
          count.holding--;
          if (outcome === 'gone') count.abandoned++;
        });
        resolve(outcome);
      };
      const gone = (): void => settle('gone');
      this.held.add(settle);
      if (!releasable) this.unreleasable.add(settle);
      res.once('close', gone);
      this.count(leaseId, (count) => {
        count.held++;
        count.holding++;
      });
      // The client may have gone while this request waited to be taken.
      if (res.destroyed || res.socket?.destroyed) gone();
    });
  }
}
