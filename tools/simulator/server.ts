/**
 * A lease broker simulator: an HTTP(S) server that answers the broker's routes the way the Queen
 * broker does (docs/broker.md), so queenctl can be tested against every answer it may meet. It
 * serves the documented broker or the older array-shaped one (extend-route.ts) and the
 * consumer-group routes that name each partition's holder (consumer-groups.ts), injects faults
 * (faults.ts), and is driven in process through `Simulator` or from another process (main.ts)
 * through its control interface under `/_sim/` (control.ts).
 *
 * This file is the plumbing: the server, its settings, the request log and the stats, and the
 * order in which a broker request meets them (log, fault, route, answer).
 */
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { parseTokens, type TokenGrant, type Tokens } from './auth.js';
import { answerControl } from './control.js';
import { ExtendRoute, parseShape, type Shape } from './extend-route.js';
import { type Fault, type FaultRoute, Faults, type HeldCount } from './faults.js';
import { fail, isFiniteNumber, SimulatorInputError } from './input.js';
import { DEFAULT_GROUP, type LeaseSpec, LeaseStore, type LeaseView } from './leases.js';
import { type LogEntry, RequestLog } from './request-log.js';
import { type DatabaseState, parseDatabaseState } from './health.js';
import { PopAckRoute } from './pop-ack-route.js';
import type { MessageStatesView, PushItem, QueueSpec, QueueView } from './queues.js';
import { answerBroker, type BrokerRoute, type BrokerState, matchBrokerRoute } from './routes.js';
import {
  isRecord,
  jsonReply,
  pathSegments,
  rawPathSegments,
  type Reply,
  readBody,
  send,
  sendHalf,
  tryParseJson,
} from './wire.js';

export interface SimulatorOptions {
  host?: string;
  port?: number;
  shape?: Shape;
  /** null/undefined: authentication off. */
  tokens?: Record<string, TokenGrant> | null;
  /** What GET /health reports: `disconnected` answers 503 unhealthy (default `connected`). */
  database?: DatabaseState;
  /** The broker's clock is `now() + clockOffsetMs`: a broker whose clock disagrees with ours. */
  clockOffsetMs?: number;
  /** Local time source (epoch ms). Tests pass a fake to expire leases without sleeping. */
  now?: () => number;
  /** Serve HTTPS with this key pair instead of plain HTTP. */
  tls?: { key: string | Buffer; cert: string | Buffer };
  /** Keep at most this many log entries, oldest dropped first (default 10000; 0 = no log). */
  logLimit?: number;
}

/** What `configure` changes; a field left out keeps its value. */
export interface SimulatorConfig {
  shape?: Shape;
  clockOffsetMs?: number;
  /** null turns auth off; leave out to keep the current tokens. */
  tokens?: Record<string, TokenGrant> | null;
  /** `disconnected`: GET /health answers 503 unhealthy, as the broker does without its database. */
  database?: DatabaseState;
}

export interface SimulatorStats {
  extendRequests: number;
  /** Requests of the pop routes and of the ack routes (single and batch), answered or not. */
  popRequests: number;
  ackRequests: number;
  renewedRows: number;
  lapses: number;
  /** The least time any row had left at the moment it was renewed (ms), null before any renewal. */
  minMarginMs: number | null;
}

export interface Simulator {
  readonly url: string;
  readonly port: number;
  /** Entries of broker requests, oldest first (bounded by `logLimit`). */
  readonly log: readonly LogEntry[];
  /** A lease on the rows of `spec` (leases.ts: one holder per queue, partition and group). */
  mint(spec?: LeaseSpec): string;
  /** A lease per spec, in order, every spec checked first: thousands of leases in one call. */
  mintMany(specs: LeaseSpec[]): string[];
  /**
   * An ack or nack: the lease is gone; its partitions stay listed in their consumer groups with
   * no holder (`workerId` null). False when no such lease.
   */
  release(leaseId: string): boolean;
  /** Sets every row's expiry to the past. False when no such lease. */
  expire(leaseId: string): boolean;
  lease(leaseId: string): LeaseView | undefined;
  /**
   * Creates a queue with its partitions, lease time and retry limit, or changes an existing one's
   * settings and adds partitions (queues.ts).
   */
  createQueue(spec: QueueSpec): QueueView;
  /** Appends messages (their `data`) to a partition (default: the queue's first); their transaction ids. */
  push(queue: string, messages: unknown[], partition?: string): string[];
  /**
   * Appends messages with producer-chosen transaction ids (random where left out) and any data,
   * nested past JSON.stringify's depth included, to a partition (default: the queue's first;
   * any name). A transaction id already in the partition is refused (409), nothing stored.
   */
  pushItems(queue: string, items: PushItem[], partition?: string): string[];
  /** A queue: pending messages per group and partition, failures counted, dead letters. */
  queue(name: string): QueueView | undefined;
  /**
   * Each message of a queue for one consumer group (default `__QUEUE_MODE__`): consumed,
   * pending or dead-lettered, how it was settled, its acks and every delivery (lease id, time).
   */
  messageStates(queue: string, consumerGroup?: string): MessageStatesView | undefined;
  brokerNow(): number;
  setClockOffset(ms: number): void;
  setShape(shape: Shape): void;
  setTokens(tokens: Record<string, TokenGrant> | null): void;
  configure(config: SimulatorConfig): void;
  inject(fault: Fault): void;
  /** Removes every fault and answers (normally) the requests a `hang` is holding. */
  clearFaults(): void;
  /** Requests a `hang` or `until-abandoned` has held (of the extend path of `leaseId`, when given). */
  heldCount(leaseId?: string): HeldCount;
  /**
   * Resolves once `count` requests (of `leaseId`, when given) have been held by a `hang` or
   * `until-abandoned`, those let go included: where a test on a fake clock moves the client past
   * its deadline. Rejects when the simulator closes first.
   */
  whenHeld(count: number, leaseId?: string): Promise<void>;
  resetLog(): void;
  /** `lapses`: leases that ran out while nobody released them, each counted once (leases.ts). */
  stats(): SimulatorStats;
  /** Stops listening and destroys every connection, held and keep-alive ones included. */
  close(): Promise<void>;
}

function parseClockOffset(value: unknown): number {
  if (!isFiniteNumber(value)) fail('clockOffsetMs must be a finite number');
  return value;
}

class BrokerSimulator implements Simulator, BrokerState {
  url = '';
  port = 0;
  shape: Shape;
  tokens: Tokens;
  database: DatabaseState;

  private readonly server: http.Server;
  private readonly sockets = new Set<Socket>();
  private readonly store = new LeaseStore();
  readonly extend = new ExtendRoute(this.store, () => this.brokerNow());
  readonly consumerGroups = this.store.groups;
  readonly popAck = new PopAckRoute(this.store, () => this.brokerNow());
  private readonly faults = new Faults();
  private readonly requests: RequestLog;
  private extendRequests = 0;
  private popRequests = 0;
  private ackRequests = 0;
  private closed: Promise<void> | undefined;
  private clockOffsetMs: number;
  private readonly now: () => number;

  constructor(private readonly opts: SimulatorOptions) {
    this.shape = parseShape(opts.shape ?? 'documented');
    this.tokens = parseTokens(opts.tokens);
    this.database = parseDatabaseState(opts.database ?? 'connected');
    this.clockOffsetMs = parseClockOffset(opts.clockOffsetMs ?? 0);
    this.now = opts.now ?? Date.now;
    this.requests = new RequestLog(opts.logLimit);
    const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      this.handle(req, res).catch((err: unknown) => this.answerCrash(res, err));
    };
    this.server = opts.tls
      ? https.createServer({ key: opts.tls.key, cert: opts.tls.cert }, handler)
      : http.createServer(handler);
    // The real broker keeps connections open (docs/broker.md); Node's 5 s default would close
    // idle ones under a client that is about to reuse them (seen in the benchmark's pauses).
    this.server.keepAliveTimeout = 120_000;
    // Track raw sockets so close() can destroy every one: idle keep-alive, held, mid-handshake.
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  async listen(): Promise<void> {
    const host = this.opts.host ?? '127.0.0.1';
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.opts.port ?? 0, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('simulator: no TCP address');
    this.port = address.port;
    const scheme = this.opts.tls ? 'https' : 'http';
    this.url = `${scheme}://${host.includes(':') ? `[${host}]` : host}:${this.port}`;
  }

  // --- state --------------------------------------------------------------------------------

  get log(): readonly LogEntry[] {
    return this.requests.all;
  }

  brokerNow(): number {
    return this.now() + this.clockOffsetMs;
  }

  mint(spec: LeaseSpec = {}): string {
    return this.store.mint(spec, this.brokerNow());
  }

  mintMany(specs: LeaseSpec[]): string[] {
    return this.store.mintMany(specs, this.brokerNow());
  }

  release(leaseId: string): boolean {
    return this.store.release(leaseId, this.brokerNow());
  }

  expire(leaseId: string): boolean {
    return this.store.expire(leaseId, this.brokerNow());
  }

  lease(leaseId: string): LeaseView | undefined {
    return this.store.view(leaseId);
  }

  createQueue(spec: QueueSpec): QueueView {
    return this.popAck.queues.createQueue(spec);
  }

  push(queue: string, messages: unknown[], partition?: string): string[] {
    return this.popAck.queues.push(queue, messages, partition, this.brokerNow());
  }

  pushItems(queue: string, items: PushItem[], partition?: string): string[] {
    return this.popAck.queues.pushItems(queue, items, partition, this.brokerNow());
  }

  queue(name: string): QueueView | undefined {
    return this.popAck.queues.view(name);
  }

  messageStates(queue: string, consumerGroup = DEFAULT_GROUP): MessageStatesView | undefined {
    return this.popAck.queues.messageStates(queue, consumerGroup);
  }

  setClockOffset(ms: number): void {
    this.clockOffsetMs = parseClockOffset(ms);
  }

  setShape(shape: Shape): void {
    this.shape = parseShape(shape);
  }

  setTokens(tokens: Record<string, TokenGrant> | null): void {
    this.tokens = parseTokens(tokens);
  }

  configure(config: SimulatorConfig): void {
    // Validate everything before changing anything.
    const shape = config.shape === undefined ? this.shape : parseShape(config.shape);
    const offset = config.clockOffsetMs === undefined ? this.clockOffsetMs : parseClockOffset(config.clockOffsetMs);
    const tokens = 'tokens' in config ? parseTokens(config.tokens) : this.tokens;
    const database = config.database === undefined ? this.database : parseDatabaseState(config.database);
    this.shape = shape;
    this.database = database;
    this.clockOffsetMs = offset;
    this.tokens = tokens;
  }

  inject(fault: Fault): void {
    this.faults.add(fault, true);
  }

  clearFaults(): void {
    this.faults.clear();
  }

  heldCount(leaseId?: string): HeldCount {
    return this.faults.heldCount(leaseId);
  }

  whenHeld(count: number, leaseId?: string): Promise<void> {
    return this.faults.whenHeld(count, leaseId);
  }

  resetLog(): void {
    this.requests.reset();
  }

  stats(): SimulatorStats {
    this.store.noteLapses(this.brokerNow());
    const { renewedRows, lapses, minMarginMs } = this.store.counters;
    return {
      extendRequests: this.extendRequests,
      popRequests: this.popRequests,
      ackRequests: this.ackRequests,
      renewedRows,
      lapses,
      minMarginMs,
    };
  }

  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  private async shutdown(): Promise<void> {
    this.faults.close();
    this.extend.close();
    this.popAck.close();
    const stopped = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await stopped;
  }

  // --- HTTP ---------------------------------------------------------------------------------

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const target = req.url ?? '/';
    const segments = pathSegments(target);
    const body = await readBody(req);
    if (segments[1] === '_sim') {
      const method = req.method ?? 'GET';
      this.reply(res, null, answerControl(this, method, segments.slice(2), body, queryOf(target)));
      return;
    }
    await this.serveBroker(req, res, target, segments, body);
  }

  /** A broker request: logged, then its fault (if any) acts, then the route answers. */
  private async serveBroker(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    target: string,
    segments: string[],
    body: string,
  ): Promise<void> {
    const query = queryOf(target);
    const route = matchBrokerRoute(req.method ?? 'GET', segments, query, rawPathSegments(target));
    const leaseId =
      route.kind === 'extend' || route.kind === 'extend-other-method'
        ? route.leaseId
        : route.kind === 'ack'
          ? ackLeaseId(body)
          : null;
    const entry = this.requests.record(req, this.brokerNow(), target, leaseId, body);
    if (route.kind === 'extend') this.extendRequests++;
    if (route.kind === 'pop') this.popRequests++;
    if (route.kind === 'ack') this.ackRequests++;

    const fault = this.faults.take(leaseId, faultRoute(route));
    const outcome = await this.faults.apply(fault, res, leaseId);
    if (outcome === 'done') return;
    if (outcome !== 'continue') {
      this.reply(res, entry, outcome.reply);
      return;
    }
    const reply = await answerBroker(route, this, req.headers.authorization, body, goneSignal(route, res));
    if (reply === null) return; // closed, or the client went away, while it waited
    if (fault?.kind === 'reset-mid-body') {
      if (sendHalf(res, reply, this.brokerNow()) && entry) entry.status = reply.status;
    } else {
      this.reply(res, entry, reply);
    }
  }

  /** Sends `reply` and notes its status in the log entry, when there is one and it was sent. */
  private reply(res: http.ServerResponse, entry: LogEntry | null, reply: Reply): void {
    if (send(res, reply, this.brokerNow()) && entry) entry.status = reply.status;
  }

  private answerCrash(res: http.ServerResponse, err: unknown): void {
    if (err instanceof SimulatorInputError && err.status === 413) {
      res.shouldKeepAlive = false;
      this.reply(res, null, jsonReply(413, { error: err.message }));
      return;
    }
    if (res.destroyed) return; // the client went away while we read its body
    const message = err instanceof Error ? err.message : String(err);
    this.reply(res, null, jsonReply(500, { error: `simulator: ${message}` }));
  }
}

/** Never aborted: what the routes that never wait are handed. */
const NEVER_GONE = new AbortController().signal;
/** The reason a `gone` signal aborts with, made once: abort() without one makes a DOMException. */
const CLIENT_GONE = new Error('the client went away');

/**
 * Aborted when the client goes away, for the routes that wait (a long poll, a batch that is never
 * answered); the others never look. An AbortController for every request, and its abort on every
 * close, were a sixth of the simulator's CPU per request.
 */
function goneSignal(route: BrokerRoute, res: http.ServerResponse): AbortSignal {
  if (route.kind !== 'pop' && route.kind !== 'ack') return NEVER_GONE;
  const gone = new AbortController();
  res.once('close', () => gone.abort(CLIENT_GONE));
  return gone.signal;
}

function queryOf(target: string): URLSearchParams {
  return new URLSearchParams(target.includes('?') ? target.slice(target.indexOf('?') + 1) : '');
}

/** The lease id of an ack body's first acknowledgement (what a fault's `leaseId` matches), else null. */
function ackLeaseId(body: string): string | null {
  const parsed = tryParseJson(body);
  if (!parsed.ok || !isRecord(parsed.value)) return null;
  const list = parsed.value.acknowledgments;
  const first: unknown = Array.isArray(list) ? list[0] : parsed.value;
  return isRecord(first) && typeof first.leaseId === 'string' && first.leaseId !== '' ? first.leaseId : null;
}

/** Which FaultRoute a request is on, for faults restricted to one. */
function faultRoute(route: BrokerRoute): FaultRoute | null {
  switch (route.kind) {
    case 'extend':
    case 'pop':
    case 'ack':
    case 'health':
      return route.kind;
    case 'consumer-groups':
    case 'consumer-group':
      return 'consumer-groups';
    default:
      return null;
  }
}

/** Starts a simulator listening on `host:port` (default 127.0.0.1 and a free port). */
export async function startSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  const simulator = new BrokerSimulator(opts);
  await simulator.listen();
  return simulator;
}
