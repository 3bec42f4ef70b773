/**
 * The control interface under `/_sim/`, both ends: the routes a simulator serves (plainly not
 * the broker API: no auth, no faults, no log) and `SimulatorControl`, a typed client of them for
 * a demo or a benchmark that runs the simulator in another process (main.ts). The routes call
 * the in-process `Simulator` methods of the same names; so does the client, one HTTP call each.
 *
 *   POST   /_sim/leases              mint (a LeaseSpec) → 201 and the lease; or mint many (an
 *                                    array of LeaseSpecs, in one call) → 201 and their ids
 *   GET    /_sim/leases/:id          the lease, expiries as ISO timestamps → 200, or 404
 *   DELETE /_sim/leases/:id          release (an ack: its partitions stay listed, no holder)
 *                                    → 204, or 404
 *   POST   /_sim/leases/:id/expire   expire every row → 204, or 404
 *   POST   /_sim/faults              inject a fault (a WireFault) → 204
 *   DELETE /_sim/faults              clear every fault → 204
 *   GET    /_sim/held                requests held by `hang` or `until-abandoned` → 200 and a
 *                                    HeldCount (`/_sim/held/:id`: those of one lease id)
 *   POST   /_sim/config              shape, clockOffsetMs, tokens, database → 204
 *   GET    /_sim/log                 the request log → 200
 *   DELETE /_sim/log                 reset the log → 204
 *   GET    /_sim/stats               the stats → 200
 *   POST   /_sim/queues              create a queue (a QueueSpec: name, partitions, leaseTime,
 *                                    retryLimit), or change one → 201 and the queue
 *   GET    /_sim/queues/:name        the queue: pending per group, failures, dead letters → 200,
 *                                    or 404
 *   POST   /_sim/queues/:name/messages  push `{"messages": [data, ...], "partition"?: name}`,
 *                                    or with producer-chosen transaction ids `{"items":
 *                                    [{"data": any, "transactionId"?: id}, ...], "partition"?:
 *                                    name}` → 201 and their transaction ids, in order; 404 for
 *                                    no such queue, 409 for a transaction id already in the
 *                                    partition (nothing stored). Data of any depth is stored as
 *                                    text and popped unchanged; partition names may hold any
 *                                    character (spaces, quotes, `*`, control characters, NUL)
 *   GET    /_sim/queues/:name/messages[?consumerGroup=g]  each message's state for the group
 *                                    (default `__QUEUE_MODE__`) → 200 `{"queue", "consumerGroup",
 *                                    "messages": [{"transactionId", "partition", "partitionId",
 *                                    "state": "consumed"|"pending"|"dead-lettered", "settledBy":
 *                                    "completed"|"auto-ack"|"dead-letter"|"cursor"|null, "acks":
 *                                    {"completed", "retry", "failed"}, "deliveries": [{"leaseId",
 *                                    "at"}]}]}` (`at`: broker epoch ms; `settledBy` `cursor` is
 *                                    a message consumed without being completed: lost), or 404
 *
 * Bad input answers 400 (409 for a lease id in use) with `{"error": "..."}`.
 */
import { type HeldCount, parseFault, type WireFault } from './faults.js';
import { fail, SimulatorInputError } from './input.js';
import type { LeaseSpec, LeaseView } from './leases.js';
import { stringifyAnyDepth } from './json-text.js';
import type { MessageStatesView, PushItem, QueueSpec, QueueView } from './queues.js';
import type { LogEntry } from './request-log.js';
import type { Simulator, SimulatorConfig, SimulatorStats } from './server.js';
import { emptyReply, isoMicros, isRecord, jsonReply, type Reply, tryParseJson } from './wire.js';

// --- the routes -------------------------------------------------------------------------------

/** The answer to a control request; `parts` are the path segments after `/_sim/`. */
export function answerControl(
  sim: Simulator,
  method: string,
  parts: string[],
  body: string,
  query: URLSearchParams = new URLSearchParams(),
): Reply {
  try {
    return route(sim, method, parts, body, query);
  } catch (err) {
    if (err instanceof SimulatorInputError) return jsonReply(err.status, { error: err.message });
    throw err;
  }
}

function route(sim: Simulator, method: string, parts: string[], body: string, query: URLSearchParams): Reply {
  const [resource, id = '', action] = parts;
  const input = (): unknown => {
    const parsed = tryParseJson(body.length === 0 ? '{}' : body);
    return parsed.ok ? parsed.value : fail(`invalid JSON: ${parsed.message}`);
  };
  const noSuchLease = (): Reply => jsonReply(404, { error: 'no such lease' });
  const shapes = ['', `${resource}`, `${resource}/:id`, `${resource}/:id/${action}`];
  switch (`${method} ${shapes[parts.length] ?? ''}`) {
    case 'POST leases': {
      const specs = input();
      if (!Array.isArray(specs)) return jsonReply(201, leaseWire(sim.lease(sim.mint(specs as LeaseSpec))));
      return jsonReply(201, sim.mintMany(specs as LeaseSpec[]));
    }
    case 'GET leases/:id': {
      const lease = sim.lease(id);
      return lease ? jsonReply(200, leaseWire(lease)) : noSuchLease();
    }
    case 'DELETE leases/:id':
      return sim.release(id) ? emptyReply(204) : noSuchLease();
    case 'POST leases/:id/expire':
      return sim.expire(id) ? emptyReply(204) : noSuchLease();
    case 'POST faults':
      sim.inject(parseFault(input()));
      return emptyReply(204);
    case 'DELETE faults':
      sim.clearFaults();
      return emptyReply(204);
    case 'GET held':
      return jsonReply(200, sim.heldCount());
    case 'GET held/:id':
      return jsonReply(200, sim.heldCount(id));
    case 'POST config': {
      const config = input();
      if (!isRecord(config)) fail('config must be an object');
      sim.configure(config); // validates every field it reads
      return emptyReply(204);
    }
    case 'GET log':
      return jsonReply(200, sim.log);
    case 'DELETE log':
      sim.resetLog();
      return emptyReply(204);
    case 'GET stats':
      return jsonReply(200, sim.stats());
    case 'POST queues':
      return jsonReply(201, sim.createQueue(input() as QueueSpec));
    case 'GET queues/:id': {
      const queue = sim.queue(id);
      return queue ? jsonReply(200, queue) : jsonReply(404, { error: 'no such queue' });
    }
    case 'POST queues/:id/messages': {
      const push = input();
      if (!isRecord(push)) fail('a push must be an object with messages');
      const partition = push.partition;
      if (partition !== undefined && (typeof partition !== 'string' || partition === '')) {
        fail('partition must be a non-empty string');
      }
      if (push.items !== undefined) {
        if (push.messages !== undefined) fail('a push has messages or items, not both');
        return jsonReply(201, sim.pushItems(id, push.items as PushItem[], partition));
      }
      return jsonReply(201, sim.push(id, push.messages as unknown[], partition));
    }
    case 'GET queues/:id/messages': {
      const states = sim.messageStates(id, query.get('consumerGroup') || undefined);
      return states ? jsonReply(200, states) : jsonReply(404, { error: 'no such queue' });
    }
    default:
      return jsonReply(404, { error: 'Not found' });
  }
}

/** A lease on the wire: expiries as ISO timestamps with microseconds, like the documented broker's. */
interface WireLease {
  leaseId: string;
  tenant?: string;
  rows: Array<{ queue: string; partition: string; group: string; expiresAt: string }>;
}

function leaseWire(lease: LeaseView | undefined): WireLease | undefined {
  return lease && { ...lease, rows: lease.rows.map((row) => ({ ...row, expiresAt: isoMicros(row.expiresAt) })) };
}

/** The wire carries ISO expiries; give callers the broker epoch ms that `Simulator.lease` does. */
function fromWire(lease: WireLease): LeaseView {
  return {
    leaseId: lease.leaseId,
    tenant: lease.tenant,
    rows: lease.rows.map((row) => ({ ...row, expiresAt: Date.parse(row.expiresAt) })),
  };
}

// --- the client -------------------------------------------------------------------------------

/** What `configure` changes; the same for the simulator in process. */
export type ControlConfig = SimulatorConfig;

/** A non-2xx answer from the control interface. */
export class SimulatorControlError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'SimulatorControlError';
  }
}

export class SimulatorControl {
  private readonly base: string;

  /** `url`: the simulator's base URL, as main.ts prints it. */
  constructor(url: string) {
    this.base = url.replace(/\/+$/, '');
  }

  /** Mints a lease; resolves to its id. */
  async mint(spec: LeaseSpec = {}): Promise<string> {
    const lease = (await this.call('POST', '/_sim/leases', spec)) as WireLease;
    return lease.leaseId;
  }

  /** Mints a lease per spec in one request (none if any spec is wrong); resolves to their ids, in order. */
  async mintMany(specs: LeaseSpec[]): Promise<string[]> {
    return (await this.call('POST', '/_sim/leases', specs)) as string[];
  }

  /** The lease with its rows, or undefined once released (or never minted). */
  async lease(leaseId: string): Promise<LeaseView | undefined> {
    const lease = await this.call('GET', this.leasePath(leaseId), undefined, [404]);
    return lease === undefined ? undefined : fromWire(lease as WireLease);
  }

  /** An ack/nack: its partitions stay listed with no holder. Resolves false when there was no such lease. */
  async release(leaseId: string): Promise<boolean> {
    return (await this.call('DELETE', this.leasePath(leaseId), undefined, [404])) !== undefined;
  }

  /** Moves every row's expiry into the past. Resolves false when there was no such lease. */
  async expire(leaseId: string): Promise<boolean> {
    return (await this.call('POST', `${this.leasePath(leaseId)}/expire`, {}, [404])) !== undefined;
  }

  async inject(fault: WireFault): Promise<void> {
    await this.call('POST', '/_sim/faults', fault);
  }

  async clearFaults(): Promise<void> {
    await this.call('DELETE', '/_sim/faults');
  }

  /** Requests held by `hang` or `until-abandoned` (of the extend path of `leaseId`, when given). */
  async heldCount(leaseId?: string): Promise<HeldCount> {
    return (await this.call(
      'GET',
      leaseId === undefined ? '/_sim/held' : `/_sim/held/${encodeURIComponent(leaseId)}`,
    )) as HeldCount;
  }

  /**
   * Resolves once `count` requests (of `leaseId`, when given) have been held, those let go
   * included; asks every `pollMs` (the simulator in another process cannot call back).
   */
  async whenHeld(count: number, leaseId?: string, pollMs = 10): Promise<void> {
    while ((await this.heldCount(leaseId)).held < count) await new Promise((resolve) => setTimeout(resolve, pollMs));
  }

  async configure(config: ControlConfig): Promise<void> {
    await this.call('POST', '/_sim/config', config);
  }

  async log(): Promise<LogEntry[]> {
    return (await this.call('GET', '/_sim/log')) as LogEntry[];
  }

  async resetLog(): Promise<void> {
    await this.call('DELETE', '/_sim/log');
  }

  async stats(): Promise<SimulatorStats> {
    return (await this.call('GET', '/_sim/stats')) as SimulatorStats;
  }

  /** Creates a queue (partitions, lease time, retry limit), or changes an existing one. */
  async createQueue(spec: QueueSpec): Promise<QueueView> {
    return (await this.call('POST', '/_sim/queues', spec)) as QueueView;
  }

  /** Pushes messages (their payloads); resolves to their transaction ids. */
  async push(queue: string, messages: unknown[], partition?: string): Promise<string[]> {
    const body = partition === undefined ? { messages } : { messages, partition };
    return (await this.call('POST', `/_sim/queues/${encodeURIComponent(queue)}/messages`, body)) as string[];
  }

  /**
   * Pushes messages with producer-chosen transaction ids (random where left out) and data of
   * any depth; resolves to their transaction ids.
   */
  async pushItems(queue: string, items: PushItem[], partition?: string): Promise<string[]> {
    const body = partition === undefined ? { items } : { items, partition };
    return (await this.call('POST', `/_sim/queues/${encodeURIComponent(queue)}/messages`, body)) as string[];
  }

  /** Each message's state for `consumerGroup` (default `__QUEUE_MODE__`), or undefined for no such queue. */
  async messageStates(queue: string, consumerGroup?: string): Promise<MessageStatesView | undefined> {
    const group = consumerGroup === undefined ? '' : `?consumerGroup=${encodeURIComponent(consumerGroup)}`;
    return (await this.call('GET', `/_sim/queues/${encodeURIComponent(queue)}/messages${group}`, undefined, [404])) as
      | MessageStatesView
      | undefined;
  }

  /** The queue's state, or undefined when there is no such queue. */
  async queue(name: string): Promise<QueueView | undefined> {
    return (await this.call('GET', `/_sim/queues/${encodeURIComponent(name)}`, undefined, [404])) as
      | QueueView
      | undefined;
  }

  private leasePath(leaseId: string): string {
    return `/_sim/leases/${encodeURIComponent(leaseId)}`;
  }

  /**
   * One control call. Resolves to the parsed JSON body (null for 204), or to undefined when the
   * status is one of `absentOn` (e.g. 404 for "no such lease"); any other non-2xx throws.
   */
  private async call(method: string, path: string, body?: unknown, absentOn: number[] = []): Promise<unknown> {
    const res = await fetch(`${this.base}${path}`, {
      method,
      ...(body !== undefined && {
        headers: { 'content-type': 'application/json' },
        // Data nested past JSON.stringify's depth travels too (json-text.ts).
        body: stringifyAnyDepth(body),
      }),
    });
    const text = await res.text();
    if (absentOn.includes(res.status)) return undefined;
    if (!res.ok) throw new SimulatorControlError(res.status, `${method} ${path}: ${res.status} ${text}`);
    return text.length === 0 ? null : (JSON.parse(text) as unknown);
  }
}
