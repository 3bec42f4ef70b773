/**
 * A lease broker simulator: an HTTP(S) server that answers `POST /api/v1/lease/:leaseId/extend`
 * the way the Queen broker does, so queenctl can be tested against every answer it may meet.
 *
 * Two shapes are served:
 * - `documented`: the contract of ../shared/broker/lease-extend-route.md (the authority).
 * - `array`: the older open-source broker as observed (../shared/broker/BROKER-FACTS.md and the
 *   byte-for-byte recording in ../shared/broker/recorded/real-broker-extend.txt).
 *
 * Besides the broker route it serves a control interface under `/_sim/` (see control.ts), so a
 * simulator started in another process (main.ts) can be driven by a demo or a benchmark.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';

// ---------------------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------------------

/** `documented` object (lease-extend-route.md) or the older broker's one-element array. */
export type Shape = 'documented' | 'array';

/** What a bearer token grants. Roles `read-write` and `admin` may renew; anything else is 403. */
export interface TokenGrant {
  role: string;
  tenant?: string;
}

export interface SimulatorOptions {
  host?: string;
  port?: number;
  shape?: Shape;
  /** null/undefined: authentication off. */
  tokens?: Record<string, TokenGrant> | null;
  /** The broker's clock is `now() + clockOffsetMs`: a broker whose clock disagrees with ours. */
  clockOffsetMs?: number;
  /** Local time source (epoch ms). Tests pass a fake to expire leases without sleeping. */
  now?: () => number;
  /** Serve HTTPS with this key pair instead of plain HTTP. */
  tls?: { key: string | Buffer; cert: string | Buffer };
  /** Keep at most this many log entries, oldest dropped first (default 10000; 0 = no log). */
  logLimit?: number;
}

export interface PartitionSpec {
  partition?: string;
  group?: string;
  seconds?: number;
}

export interface LeaseSpec {
  /** Lifetime of every row without its own `seconds` (default 30). May be ≤ 0: born expired. */
  seconds?: number;
  /** A count of rows (default 1), or one entry per (partition, group) row. */
  partitions?: number | PartitionSpec[];
  tenant?: string;
  /** Minted as a UUIDv7-looking id unless given. */
  leaseId?: string;
}

export interface LeaseRow {
  partition: string;
  group: string;
  /** Broker epoch ms. */
  expiresAt: number;
}

export interface LeaseView {
  leaseId: string;
  tenant: string | undefined;
  rows: LeaseRow[];
}

export type FaultAction =
  | { kind: 'latency'; ms: number }
  | { kind: 'drop' }
  | { kind: 'reset-mid-body' }
  | { kind: 'status'; status: number; body?: string; headers?: Record<string, string> }
  | { kind: 'body'; body: string | (() => string); status?: number }
  | { kind: 'hang' };

/**
 * A fault applies to broker requests (everything outside `/_sim/`, `/health` included). Faults are
 * tried in injection order and a request takes the first that matches; `times` counts down
 * (default: until `clearFaults()`); `leaseId` restricts a fault to requests for that decoded id.
 * `status` without a body answers `{"error":"<reason phrase>"}`. `reset-mid-body` runs the renewal
 * first (the broker committed, the answer was lost) and sends its status and half its body.
 */
export type Fault = { times?: number; leaseId?: string } & FaultAction;

/** A fault that survives JSON: what the control interface accepts. */
export type WireFault = Fault extends infer F
  ? F extends { kind: 'body' }
    ? Omit<F, 'body'> & { body: string }
    : F
  : never;

export interface LogEntry {
  /** Broker clock (epoch ms) when the request arrived. */
  at: number;
  method: string;
  /** The request target exactly as sent, query string included. */
  rawPath: string;
  /** Decoded lease id when the path is the extend route, else null. */
  leaseId: string | null;
  body: string;
  authorization: string | null;
  userAgent: string | null;
  /** Status sent; null while held by `hang`, or when dropped or the client went away. */
  status: number | null;
}

export interface SimulatorStats {
  extendRequests: number;
  renewedRows: number;
  lapses: number;
  /** The least time any row had left at the moment it was renewed (ms), null before any renewal. */
  minMarginMs: number | null;
}

export interface SimulatorConfig {
  shape?: Shape;
  clockOffsetMs?: number;
  tokens?: Record<string, TokenGrant> | null;
}

export interface Simulator {
  readonly url: string;
  readonly port: number;
  /** Entries of broker requests, oldest first (bounded by `logLimit`). */
  readonly log: readonly LogEntry[];
  mint(spec?: LeaseSpec): string;
  /** An ack or nack: the rows are gone. False when no such lease. */
  release(leaseId: string): boolean;
  /** Sets every row's expiry to the past. False when no such lease. */
  expire(leaseId: string): boolean;
  lease(leaseId: string): LeaseView | undefined;
  brokerNow(): number;
  setClockOffset(ms: number): void;
  setShape(shape: Shape): void;
  setTokens(tokens: Record<string, TokenGrant> | null): void;
  configure(config: SimulatorConfig): void;
  inject(fault: Fault): void;
  /** Removes every fault and answers (normally) the requests a `hang` is holding. */
  clearFaults(): void;
  resetLog(): void;
  stats(): SimulatorStats;
  /** Stops listening and destroys every connection, held and keep-alive ones included. */
  close(): Promise<void>;
}

/** Bad input to mint/inject/configure; the control interface answers it with `status`. */
export class SimulatorInputError extends Error {
  constructor(
    message: string,
    readonly status = 400,
  ) {
    super(message);
    this.name = 'SimulatorInputError';
  }
}

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/** lease-extend-route.md: a missing or malformed `seconds` means 60. So does `{}` on the old broker. */
const DEFAULT_EXTEND_SECONDS = 60;
const DEFAULT_MINT_SECONDS = 30;
/** Queen's consumer group for plain queue consumption. */
const DEFAULT_GROUP = '__QUEUE_MODE__';
/**
 * The older broker batches concurrent renewals into one database call and numbers the jobs of a
 * batch (BROKER-FACTS.md: `index` is not always 0). We hold array-shape renewals this long and
 * answer them together, so sequential requests get 0 and concurrent ones 0, 1, 2…
 */
const BATCH_WINDOW_MS = 5;
/** 9999-12-31T23:59:59.999Z: beyond it an ISO timestamp changes format; treat as a DB error. */
const MAX_EXPIRY_MS = 253402300799999;
/** Large enough for a 10 MB `body` fault sent through the control interface. */
const MAX_REQUEST_BYTES = 32 * 1024 * 1024;
const DEFAULT_LOG_LIMIT = 10_000;
const RENEWING_ROLES = new Set(['read-write', 'admin']);

/** Sent with every broker answer, as in the recording. */
const CORS_HEADERS: Readonly<Record<string, string>> = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, PUT, DELETE, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type, Authorization',
};
/** The recorded answer to a GET on the extend route (uWebSockets' own 404). */
const HTML_NOT_FOUND = '<html><body><h1>File Not Found</h1><hr><i>uWebSockets/20 Server</i></body></html>';

// ---------------------------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------------------------

/** The documented shape's timestamps: microsecond precision, `Z` (lease-extend-route.md). */
export function isoMicros(ms: number): string {
  const secondMs = Math.floor(ms / 1000) * 1000;
  const micros = Math.min(999_999, Math.floor((ms - secondMs) * 1000));
  const base = new Date(secondMs).toISOString().slice(0, 19);
  return `${base}.${String(micros).padStart(6, '0')}Z`;
}

/** The older broker's timestamps: millisecond precision (BROKER-FACTS.md). */
export function isoMillis(ms: number): string {
  return new Date(Math.floor(ms)).toISOString();
}

/** A `Date` header from the broker clock, truncated to the second like any HTTP date. */
function httpDate(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toUTCString();
}

/** Looks like the broker's ids (UUIDv7: 48-bit ms timestamp, version 7, RFC 4122 variant). */
function uuidV7Like(ms: number): string {
  const time = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0').slice(-12);
  const rand = randomBytes(10).toString('hex');
  const variant = ((parseInt(rand.slice(3, 4), 16) & 0x3) | 0x8).toString(16);
  return [
    time.slice(0, 8),
    time.slice(8, 12),
    `7${rand.slice(0, 3)}`,
    `${variant}${rand.slice(4, 7)}`,
    rand.slice(7, 19),
  ].join('-');
}

// ---------------------------------------------------------------------------------------------
// Request bodies of the extend route
// ---------------------------------------------------------------------------------------------

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function tryParseJson(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, message: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * lease-extend-route.md: "An empty body, a body that is not JSON, and a body without `seconds`
 * all fall back to 60 seconds. There is no 400 for a malformed body on this route." `seconds` is
 * an integer (fractions floored) and "values below 1 are clamped to 1".
 */
export function documentedSeconds(body: string): number {
  const parsed = tryParseJson(body);
  if (!parsed.ok || !isRecord(parsed.value)) return DEFAULT_EXTEND_SECONDS;
  const seconds = parsed.value.seconds;
  if (typeof seconds !== 'number') return DEFAULT_EXTEND_SECONDS;
  return Math.max(1, Math.floor(seconds));
}

/** nlohmann::json's type names, which the older broker's error messages quote. */
function jsonTypeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'object') return 'object';
  if (typeof value === 'boolean') return 'boolean';
  return typeof value; // 'number' | 'string'
}

type ArraySeconds = { ok: true; seconds: number } | { ok: false; status: number; error: string };

/**
 * The older broker (BROKER-FACTS.md, recording): empty → 400, non-JSON → 400, a body that is not
 * an object or a non-number `seconds` → 500 with the JSON library's message, `{}` → 60, and any
 * number passed through as is (no clamp, fractions kept).
 */
export function arraySeconds(body: string): ArraySeconds {
  if (body.length === 0) return { ok: false, status: 400, error: 'Empty request body' };
  const parsed = tryParseJson(body);
  if (!parsed.ok) {
    return {
      ok: false,
      status: 400,
      error: `Invalid JSON: [json.exception.parse_error.101] parse error: syntax error while parsing value - ${parsed.message}`,
    };
  }
  const value = parsed.value;
  if (!isRecord(value)) {
    const error = `[json.exception.type_error.306] cannot use value() with ${jsonTypeName(value)}`;
    return { ok: false, status: 500, error };
  }
  if (!('seconds' in value)) return { ok: true, seconds: DEFAULT_EXTEND_SECONDS };
  const seconds = value.seconds;
  if (typeof seconds !== 'number') {
    const error = `[json.exception.type_error.302] type must be number, but is ${jsonTypeName(seconds)}`;
    return { ok: false, status: 500, error };
  }
  return { ok: true, seconds };
}

// ---------------------------------------------------------------------------------------------
// Routing
// ---------------------------------------------------------------------------------------------

/**
 * Splits the raw request target on `/` BEFORE decoding, so `%2F` inside a lease id never makes a
 * new segment. A malformed escape keeps the segment raw (a lenient decoder, not a crash).
 */
function pathSegments(target: string): string[] {
  const end = target.search(/[?#]/);
  const path = end === -1 ? target : target.slice(0, end);
  return path.split('/').map(decodeSegment);
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

type BrokerRoute =
  | { kind: 'extend'; leaseId: string }
  | { kind: 'extend-other-method'; leaseId: string }
  | { kind: 'health' }
  | { kind: 'not-found' };

/** Only POST is routed on the extend path; any other method meets the server's HTML 404 (recorded for GET). */
function matchBrokerRoute(method: string, segments: readonly string[]): BrokerRoute {
  const [root, api, version, lease, leaseId, action] = segments;
  const isExtend =
    segments.length === 6 &&
    root === '' &&
    api === 'api' &&
    version === 'v1' &&
    lease === 'lease' &&
    action === 'extend' &&
    leaseId !== undefined &&
    leaseId !== '';
  if (isExtend) return { kind: method === 'POST' ? 'extend' : 'extend-other-method', leaseId };
  if (method === 'GET' && segments.length === 2 && segments[1] === 'health') return { kind: 'health' };
  return { kind: 'not-found' };
}

// ---------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------

interface Reply {
  status: number;
  statusMessage?: string;
  headers: Record<string, string>;
  body: string;
}

function jsonReply(status: number, value: unknown): Reply {
  // The recording shows Access-Control-Max-Age on error answers only.
  const maxAge: Record<string, string> = status >= 400 ? { 'Access-Control-Max-Age': '86400' } : {};
  return {
    status,
    headers: { ...CORS_HEADERS, ...maxAge, 'Content-Type': 'application/json' },
    body: JSON.stringify(value),
  };
}

const emptyReply = (status: number): Reply => ({ status, headers: {}, body: '' });

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

// ---------------------------------------------------------------------------------------------
// Input validation (shared by the in-process API and the control interface)
// ---------------------------------------------------------------------------------------------

function fail(message: string, status = 400): never {
  throw new SimulatorInputError(message, status);
}

function optional<T>(
  record: Record<string, unknown>,
  key: string,
  check: (v: unknown) => v is T,
  what: string,
): T | undefined {
  const value = record[key];
  if (value === undefined) return undefined;
  if (!check(value)) fail(`${key} must be ${what}`);
  return value;
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isFiniteNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isPositiveInt = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 1;
const isStatus = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 100 && (v as number) <= 599;
const isStringRecord = (v: unknown): v is Record<string, string> => isRecord(v) && Object.values(v).every(isString);

interface MintPlan {
  leaseId: string | undefined;
  tenant: string | undefined;
  rows: Array<{ partition: string; group: string; seconds: number }>;
}

function parseLeaseSpec(spec: unknown): MintPlan {
  if (!isRecord(spec)) fail('lease spec must be an object');
  const seconds = optional(spec, 'seconds', isFiniteNumber, 'a finite number') ?? DEFAULT_MINT_SECONDS;
  const tenant = optional(spec, 'tenant', isString, 'a string');
  const leaseId = optional(spec, 'leaseId', isString, 'a string');
  if (leaseId === '') fail('leaseId must not be empty');
  const partitions = spec.partitions ?? 1;
  let entries: unknown[];
  if (Array.isArray(partitions)) entries = partitions;
  else if (isPositiveInt(partitions)) entries = Array.from({ length: partitions }, () => ({}));
  else fail('partitions must be a positive integer or an array');
  if (entries.length === 0) fail('partitions must not be empty');
  const rows = entries.map((entry, i) => {
    if (!isRecord(entry)) fail(`partitions[${i}] must be an object`);
    return {
      partition: optional(entry, 'partition', isString, 'a string') ?? `p${i + 1}`,
      group: optional(entry, 'group', isString, 'a string') ?? DEFAULT_GROUP,
      seconds: optional(entry, 'seconds', isFiniteNumber, 'a finite number') ?? seconds,
    };
  });
  const keys = new Set(rows.map((r) => JSON.stringify([r.partition, r.group])));
  if (keys.size !== rows.length) fail('each (partition, group) may appear once');
  return { leaseId, tenant, rows };
}

/** Validates a fault; a function `body` is only possible in process (`allowFunctionBody`). */
export function parseFault(value: unknown, allowFunctionBody = false): Fault {
  if (!isRecord(value)) fail('fault must be an object');
  const times = optional(value, 'times', isPositiveInt, 'a positive integer');
  const leaseId = optional(value, 'leaseId', isString, 'a string');
  const common = { ...(times !== undefined && { times }), ...(leaseId !== undefined && { leaseId }) };
  switch (value.kind) {
    case 'latency': {
      const ms = value.ms;
      if (!isFiniteNumber(ms) || ms < 0) fail('ms must be a number ≥ 0');
      return { ...common, kind: 'latency', ms };
    }
    case 'drop':
    case 'reset-mid-body':
    case 'hang':
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
      return fail('kind must be latency, drop, reset-mid-body, status, body or hang');
  }
}

function parseShape(value: unknown): Shape {
  if (value !== 'documented' && value !== 'array') fail('shape must be documented or array');
  return value;
}

function parseClockOffset(value: unknown): number {
  if (!isFiniteNumber(value)) fail('clockOffsetMs must be a finite number');
  return value;
}

/** To a Map: a plain object would find `constructor` or `__proto__` as "tokens". */
function parseTokens(value: unknown): Map<string, TokenGrant> | null {
  if (value === null || value === undefined) return null;
  if (!isRecord(value)) fail('tokens must be an object or null');
  const tokens = new Map<string, TokenGrant>();
  for (const [token, grant] of Object.entries(value)) {
    if (!isRecord(grant) || !isString(grant.role)) fail(`tokens.${token}.role must be a string`);
    const tenant = optional(grant, 'tenant', isString, 'a string');
    tokens.set(token, { role: grant.role, ...(tenant !== undefined && { tenant }) });
  }
  return tokens;
}

// ---------------------------------------------------------------------------------------------
// The simulator
// ---------------------------------------------------------------------------------------------

interface LeaseState {
  leaseId: string;
  tenant: string | undefined;
  rows: LeaseRow[];
  /** Counted in `stats().lapses` already. */
  lapsed: boolean;
}

/** Who is asking: null when auth is off (every lease visible), else the token's tenant. */
type Scope = { tenant: string | undefined } | null;

interface BatchJob {
  leaseId: string;
  seconds: number;
  scope: Scope;
  index: number;
  resolve: (reply: Reply | null) => void;
}

type HoldOutcome = 'released' | 'closed' | 'gone';

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_REQUEST_BYTES) throw new SimulatorInputError('request body too large', 413);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

class BrokerSimulator implements Simulator {
  url = '';
  port = 0;

  private readonly server: http.Server;
  private readonly sockets = new Set<Socket>();
  private readonly leases = new Map<string, LeaseState>();
  private faults: Fault[] = [];
  private readonly held = new Set<(outcome: HoldOutcome) => void>();
  private batch: BatchJob[] = [];
  private batchTimer: NodeJS.Timeout | undefined;
  private readonly closing = new AbortController();
  private closed: Promise<void> | undefined;
  private entries: LogEntry[] = [];
  private readonly counters: SimulatorStats = { extendRequests: 0, renewedRows: 0, lapses: 0, minMarginMs: null };

  private shape: Shape;
  private tokens: Map<string, TokenGrant> | null;
  private clockOffsetMs: number;
  private readonly now: () => number;
  private readonly logLimit: number;

  constructor(private readonly opts: SimulatorOptions) {
    this.shape = parseShape(opts.shape ?? 'documented');
    this.tokens = parseTokens(opts.tokens);
    this.clockOffsetMs = parseClockOffset(opts.clockOffsetMs ?? 0);
    this.now = opts.now ?? Date.now;
    this.logLimit = opts.logLimit ?? DEFAULT_LOG_LIMIT;
    const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      this.handle(req, res).catch((err: unknown) => this.answerCrash(res, err));
    };
    this.server = opts.tls
      ? https.createServer({ key: opts.tls.key, cert: opts.tls.cert }, handler)
      : http.createServer(handler);
    // The real broker keeps connections open (BROKER-FACTS.md); Node's 5 s default would close
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
    return this.entries;
  }

  brokerNow(): number {
    return this.now() + this.clockOffsetMs;
  }

  mint(spec: LeaseSpec = {}): string {
    const plan = parseLeaseSpec(spec);
    const now = this.brokerNow();
    let leaseId = plan.leaseId;
    if (leaseId !== undefined && this.leases.has(leaseId)) fail(`lease ${leaseId} already exists`, 409);
    while (leaseId === undefined || this.leases.has(leaseId)) leaseId = uuidV7Like(now);
    const rows = plan.rows.map((r) => ({ partition: r.partition, group: r.group, expiresAt: now + r.seconds * 1000 }));
    if (rows.some((row) => row.expiresAt > MAX_EXPIRY_MS)) fail('seconds puts the expiry past year 9999');
    this.leases.set(leaseId, { leaseId, tenant: plan.tenant, rows, lapsed: false });
    return leaseId;
  }

  release(leaseId: string): boolean {
    return this.leases.delete(leaseId);
  }

  expire(leaseId: string): boolean {
    const lease = this.leases.get(leaseId);
    if (!lease) return false;
    const past = this.brokerNow() - 1;
    for (const row of lease.rows) row.expiresAt = Math.min(row.expiresAt, past);
    return true;
  }

  lease(leaseId: string): LeaseView | undefined {
    const lease = this.leases.get(leaseId);
    if (!lease) return undefined;
    return { leaseId, tenant: lease.tenant, rows: lease.rows.map((row) => ({ ...row })) };
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
    this.shape = shape;
    this.clockOffsetMs = offset;
    this.tokens = tokens;
  }

  inject(fault: Fault): void {
    this.faults.push(parseFault(fault, true));
  }

  clearFaults(): void {
    this.faults = [];
    for (const settle of [...this.held]) settle('released');
  }

  resetLog(): void {
    this.entries = [];
  }

  /**
   * `lapses` counts leases that ran out while nobody released them — the failure a renewing
   * client exists to prevent. Honest and cheap: a lease counts once, either when an extend
   * request arrives for it (it exists, was never released, every row expired), or when stats()
   * finds it in that state. Released leases are gone from the map and never count.
   */
  stats(): SimulatorStats {
    const now = this.brokerNow();
    for (const lease of this.leases.values()) this.noteLapse(lease, now);
    return { ...this.counters };
  }

  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  private async shutdown(): Promise<void> {
    this.closing.abort();
    for (const settle of [...this.held]) settle('closed');
    clearTimeout(this.batchTimer);
    for (const job of this.batch.splice(0)) job.resolve(null);
    const stopped = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await stopped;
  }

  private noteLapse(lease: LeaseState, now: number): void {
    if (lease.lapsed || lease.rows.some((row) => row.expiresAt > now)) return;
    lease.lapsed = true;
    this.counters.lapses++;
  }

  /**
   * The lease as `scope` may see it. lease-extend-route.md: another tenant's lease is
   * "deliberately indistinguishable from an expired lease"; the older broker says `Lease not found`.
   * A lease is visible to a token only when their tenants are equal (both unset included).
   */
  private lookup(leaseId: string, scope: Scope, now: number): LeaseState | undefined {
    const lease = this.leases.get(leaseId);
    if (!lease) return undefined;
    this.noteLapse(lease, now);
    if (scope !== null && scope.tenant !== lease.tenant) return undefined;
    return lease;
  }

  /**
   * The renewal of both brokers (lease-extend-route.md, BROKER-FACTS.md): every LIVE row (expiry
   * in the future) moves to the later of its expiry and `target`; expired rows stay expired.
   */
  private renew(lease: LeaseState, target: number, now: number): { renewed: number; earliest: number | null } {
    let renewed = 0;
    let earliest: number | null = null;
    for (const row of lease.rows) {
      if (row.expiresAt <= now) continue;
      const margin = row.expiresAt - now;
      if (this.counters.minMarginMs === null || margin < this.counters.minMarginMs) this.counters.minMarginMs = margin;
      row.expiresAt = Math.max(row.expiresAt, target);
      renewed++;
      earliest = earliest === null ? row.expiresAt : Math.min(earliest, row.expiresAt);
    }
    this.counters.renewedRows += renewed;
    return { renewed, earliest };
  }

  // --- HTTP ---------------------------------------------------------------------------------

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const target = req.url ?? '/';
    const segments = pathSegments(target);
    const body = await readBody(req);
    if (segments[1] === '_sim') {
      this.send(res, null, this.control(req.method ?? 'GET', segments.slice(2), body));
      return;
    }
    await this.serveBroker(req, res, target, segments, body);
  }

  private async serveBroker(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    target: string,
    segments: string[],
    body: string,
  ): Promise<void> {
    const route = matchBrokerRoute(req.method ?? 'GET', segments);
    const leaseId = route.kind === 'extend' || route.kind === 'extend-other-method' ? route.leaseId : null;
    const entry = this.record(req, target, leaseId, body);
    if (route.kind === 'extend') this.counters.extendRequests++;

    const fault = this.takeFault(leaseId);
    switch (fault?.kind) {
      case 'drop':
        res.destroy();
        return;
      case 'status':
      case 'body':
        this.send(res, entry, faultReply(fault));
        return;
      case 'latency':
        if (!(await this.sleep(fault.ms))) return;
        break;
      case 'hang':
        if ((await this.hold(res)) !== 'released') return;
        break;
      case 'reset-mid-body':
      case undefined:
        break;
    }
    const reply = await this.answer(route, req.headers.authorization, body);
    if (reply === null) return; // closed while a batch was pending
    if (fault?.kind === 'reset-mid-body') this.sendHalf(res, entry, reply);
    else this.send(res, entry, reply);
  }

  private record(req: http.IncomingMessage, rawPath: string, leaseId: string | null, body: string): LogEntry | null {
    if (this.logLimit <= 0) return null;
    const entry: LogEntry = {
      at: this.brokerNow(),
      method: req.method ?? '',
      rawPath,
      leaseId,
      body,
      authorization: req.headers.authorization ?? null,
      userAgent: req.headers['user-agent'] ?? null,
      status: null,
    };
    this.entries.push(entry);
    if (this.entries.length > this.logLimit) this.entries.shift();
    return entry;
  }

  /** The first fault that matches, in injection order; `times` counts down to removal. */
  private takeFault(leaseId: string | null): Fault | undefined {
    const i = this.faults.findIndex((f) => f.leaseId === undefined || f.leaseId === leaseId);
    const fault = this.faults[i];
    if (fault === undefined) return undefined;
    if (fault.times !== undefined) {
      if (fault.times <= 1) this.faults.splice(i, 1);
      else fault.times--;
    }
    return fault;
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

  /** The older broker with its database down: nothing at all until clearFaults() or close(). */
  private hold(res: http.ServerResponse): Promise<HoldOutcome> {
    return new Promise((resolve) => {
      const settle = (outcome: HoldOutcome): void => {
        this.held.delete(settle);
        res.off('close', gone);
        resolve(outcome);
      };
      const gone = (): void => settle('gone');
      this.held.add(settle);
      res.once('close', gone);
    });
  }

  private answer(route: BrokerRoute, authorization: string | undefined, body: string): Reply | Promise<Reply | null> {
    switch (route.kind) {
      case 'health':
        return jsonReply(200, { status: 'healthy' });
      case 'not-found':
        return jsonReply(404, { error: 'Not found' });
      case 'extend-other-method':
        return { status: 404, statusMessage: 'File Not Found', headers: {}, body: HTML_NOT_FOUND };
      case 'extend':
        return this.extend(route.leaseId, authorization, body);
    }
  }

  /** Recorded answers; auth is decided before the body is looked at ("auth checked first"). */
  private authorize(authorization: string | undefined): { scope: Scope } | { reply: Reply } {
    if (this.tokens === null) return { scope: null };
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    const token = match?.[1];
    if (token === undefined) return { reply: jsonReply(401, { error: 'Authentication required' }) };
    const grant = this.tokens.get(token);
    if (!grant) return { reply: jsonReply(401, { error: 'HS256 validation error: invalid signature' }) };
    if (!RENEWING_ROLES.has(grant.role)) return { reply: jsonReply(403, { error: 'Insufficient permissions' }) };
    return { scope: { tenant: grant.tenant } };
  }

  private extend(leaseId: string, authorization: string | undefined, body: string): Reply | Promise<Reply | null> {
    const auth = this.authorize(authorization);
    if ('reply' in auth) return auth.reply;
    if (this.shape === 'documented') return this.extendDocumented(leaseId, auth.scope, body);
    const parsed = arraySeconds(body);
    if (!parsed.ok) return jsonReply(parsed.status, { error: parsed.error });
    return this.enqueue(leaseId, parsed.seconds, auth.scope);
  }

  /** lease-extend-route.md, Response: 200 whether or not anything was renewed; keys in its order. */
  private extendDocumented(leaseId: string, scope: Scope, body: string): Reply {
    const now = this.brokerNow();
    const target = now + documentedSeconds(body) * 1000;
    // The doc's 500 `renew failed: …`: what PostgreSQL says to a timestamp out of range.
    if (target > MAX_EXPIRY_MS) return jsonReply(500, { error: 'renew failed: timestamp out of range' });
    const lease = this.lookup(leaseId, scope, now);
    const { renewed, earliest } = lease ? this.renew(lease, target, now) : { renewed: 0, earliest: null };
    const at = earliest === null ? null : isoMicros(earliest);
    return jsonReply(200, {
      leaseId,
      success: renewed > 0,
      renewed,
      newExpiresAt: at,
      expiresAt: at,
      lease_expires_at: at,
    });
  }

  /** Joins (or opens) the current batch; see BATCH_WINDOW_MS. */
  private enqueue(leaseId: string, seconds: number, scope: Scope): Promise<Reply | null> {
    return new Promise((resolve) => {
      this.batch.push({ leaseId, seconds, scope, index: this.batch.length, resolve });
      this.batchTimer ??= setTimeout(() => this.flushBatch(), BATCH_WINDOW_MS);
    });
  }

  private flushBatch(): void {
    this.batchTimer = undefined;
    for (const job of this.batch.splice(0)) job.resolve(this.extendArrayJob(job));
  }

  /** BROKER-FACTS.md: one result in an array, keys alphabetical, millisecond `expiresAt`. */
  private extendArrayJob(job: BatchJob): Reply {
    const now = this.brokerNow();
    const target = now + job.seconds * 1000;
    // BROKER-FACTS.md: a failing query comes back as a 200 object without `renewed`.
    if (target > MAX_EXPIRY_MS) return jsonReply(200, { success: false, error: 'timestamp out of range' });
    const result = (error: string | null, expiresAt: number | null): Reply =>
      jsonReply(200, [
        {
          error,
          expiresAt: expiresAt === null ? null : isoMillis(expiresAt),
          index: job.index,
          leaseId: job.leaseId,
          success: error === null,
        },
      ]);
    const lease = this.lookup(job.leaseId, job.scope, now);
    if (!lease) return result('Lease not found', null);
    const { earliest } = this.renew(lease, target, now);
    return earliest === null ? result('Lease already expired', null) : result(null, earliest);
  }

  // --- control interface --------------------------------------------------------------------

  /** `/_sim/…`: plainly not the broker API; no auth, no faults, no log. */
  private control(method: string, parts: string[], body: string): Reply {
    try {
      return this.route(method, parts, body);
    } catch (err) {
      if (err instanceof SimulatorInputError) return jsonReply(err.status, { error: err.message });
      throw err;
    }
  }

  private route(method: string, parts: string[], body: string): Reply {
    const [resource, id, action] = parts;
    const input = (): unknown => {
      const parsed = tryParseJson(body.length === 0 ? '{}' : body);
      return parsed.ok ? parsed.value : fail(`invalid JSON: ${parsed.message}`);
    };
    const shapes = ['', `${resource}`, `${resource}/:id`, `${resource}/:id/${action}`];
    switch (`${method} ${shapes[parts.length] ?? ''}`) {
      case 'POST leases': {
        const leaseId = this.mint(input() as LeaseSpec);
        return jsonReply(201, this.leaseWire(leaseId));
      }
      case 'GET leases/:id':
        return this.leases.has(id ?? '')
          ? jsonReply(200, this.leaseWire(id ?? ''))
          : jsonReply(404, { error: 'no such lease' });
      case 'DELETE leases/:id':
        return this.release(id ?? '') ? emptyReply(204) : jsonReply(404, { error: 'no such lease' });
      case 'POST leases/:id/expire':
        return this.expire(id ?? '') ? emptyReply(204) : jsonReply(404, { error: 'no such lease' });
      case 'POST faults':
        this.faults.push(parseFault(input()));
        return emptyReply(204);
      case 'DELETE faults':
        this.clearFaults();
        return emptyReply(204);
      case 'POST config': {
        const config = input();
        if (!isRecord(config)) fail('config must be an object');
        this.configure(config); // validates every field it reads
        return emptyReply(204);
      }
      case 'GET log':
        return jsonReply(200, this.entries);
      case 'DELETE log':
        this.resetLog();
        return emptyReply(204);
      case 'GET stats':
        return jsonReply(200, this.stats());
      default:
        return jsonReply(404, { error: 'Not found' });
    }
  }

  private leaseWire(leaseId: string): unknown {
    const lease = this.lease(leaseId);
    return lease && { ...lease, rows: lease.rows.map((row) => ({ ...row, expiresAt: isoMicros(row.expiresAt) })) };
  }

  // --- writing ------------------------------------------------------------------------------

  private writeHead(res: http.ServerResponse, reply: Reply, contentLength: number): void {
    // The broker's clock writes the Date header, not ours (BROKER-FACTS.md: broker clock decides).
    res.sendDate = false;
    res.setHeader('Date', httpDate(this.brokerNow()));
    for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
    if (reply.status !== 204 && reply.status !== 304) res.setHeader('Content-Length', contentLength);
    res.writeHead(reply.status, reply.statusMessage);
  }

  private send(res: http.ServerResponse, entry: LogEntry | null, reply: Reply): void {
    if (res.destroyed || res.headersSent) return;
    if (entry) entry.status = reply.status;
    const body = Buffer.from(reply.body, 'utf8');
    this.writeHead(res, reply, body.length);
    res.end(body);
  }

  /** Headers promising the whole body, half of it, then a reset: an answer lost mid-flight. */
  private sendHalf(res: http.ServerResponse, entry: LogEntry | null, reply: Reply): void {
    if (res.destroyed || res.headersSent) return;
    if (entry) entry.status = reply.status;
    const body = Buffer.from(reply.body, 'utf8');
    this.writeHead(res, reply, body.length);
    res.flushHeaders();
    res.write(body.subarray(0, Math.floor(body.length / 2)), () => res.destroy());
  }

  private answerCrash(res: http.ServerResponse, err: unknown): void {
    if (err instanceof SimulatorInputError && err.status === 413) {
      res.shouldKeepAlive = false;
      this.send(res, null, jsonReply(413, { error: err.message }));
      return;
    }
    if (res.destroyed) return; // the client went away while we read its body
    const message = err instanceof Error ? err.message : String(err);
    this.send(res, null, jsonReply(500, { error: `simulator: ${message}` }));
  }
}

/** Starts a simulator listening on `host:port` (default 127.0.0.1 and a free port). */
export async function startSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  const simulator = new BrokerSimulator(opts);
  await simulator.listen();
  return simulator;
}
