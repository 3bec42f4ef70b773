/**
 * The broker client: one keep-alive connection pool (an undici Agent) for every request of a
 * run, a deadline per request, and strict parsing through contract.ts. Transport failures
 * become BrokerErrors here, so commands never see sockets or status numbers.
 *
 * The server may be several replicas of one broker (comma-separated; they share a database, so
 * any can renew a lease): a request that cannot reach one, or gets a 5xx from it, goes to the
 * next. Renewing takes the later deadline, so asking a second replica never shortens a lease.
 */
import type { Dispatcher } from 'undici';
// The Agent and its request API alone, not undici's index: the index also loads fetch,
// websockets, caches and mocks, ~60 ms of start-up per invocation that a lease command never
// uses (see undici-agent.d.ts). The index attaches the API to Dispatcher.prototype; we call it.
import Agent from 'undici/lib/dispatcher/agent.js';
import undiciRequest from 'undici/lib/api/api-request.js';
import { BrokerError, QueenctlError, UsageError } from '../exit.js';
import { excerpt, parseRenewal, type RawAnswer, type Renewal } from './contract.js';

export interface BrokerClientOptions {
  /** Base URL of the broker, e.g. http://localhost:6632; replicas separated by commas. */
  server: string;
  token?: string | undefined;
  /** Deadline of one request, connect to last byte, failovers included. */
  timeoutMs: number;
  userAgent: string;
  /** Connections kept open to each replica; bounds concurrency of bulk commands. */
  connections?: number;
  /** Skip TLS verification (https only). */
  insecure?: boolean;
  /** The CA certificates (PEM) to trust for https, instead of the system's. */
  ca?: string | undefined;
  /** HTTP(S)_PROXY and NO_PROXY, from proxySettings(); undefined: connect directly. */
  proxy?: ProxySettings | undefined;
  /** -v: one line per request; the token is never part of it. */
  trace?: ((line: string) => void) | undefined;
}

export interface RequestOptions {
  signal?: AbortSignal | undefined;
  /** Overrides the client's timeout for this request (watch cuts it to the lease's time left). */
  timeoutMs?: number;
}

export interface ProxySettings {
  httpProxy: string | undefined;
  httpsProxy: string | undefined;
  noProxy: string;
}

/** Answers larger than this are not a lease renewal; reading stops there. */
const MAX_BODY_BYTES = 1024 * 1024;

interface Replica {
  url: string;
  origin: string;
  basePath: string;
}

export class BrokerClient {
  private readonly replicas: Replica[];
  /** The replica that answered last: later requests start there instead of at a dead one. */
  private preferred = 0;
  private agent: Dispatcher | undefined;
  private agentReady: Promise<Dispatcher> | undefined;
  private readonly headers: Record<string, string>;

  constructor(private readonly options: BrokerClientOptions) {
    this.replicas = options.server
      .split(',')
      .map((entry) => entry.trim().replace(/\/+$/, ''))
      .filter((entry) => entry !== '')
      .map((url) => {
        const parsed = new URL(url);
        return { url, origin: parsed.origin, basePath: parsed.pathname.replace(/\/+$/, '') };
      });
    if (this.replicas.length === 0) throw new UsageError('no broker URL given', 'use --server http://localhost:6632');
    // The common path (no proxy) builds its Agent now; the proxy agent is loaded only when used.
    if (!options.proxy) this.agent = new Agent(this.agentOptions());
    this.headers = {
      'content-type': 'application/json',
      'user-agent': options.userAgent,
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
    };
  }

  /** The replica that answered last (the first one before any answer). */
  get server(): string {
    return this.replicas[this.preferred]!.url;
  }

  /** POST /api/v1/lease/:leaseId/extend with `{"seconds": n}`; see contract.ts for the rules. */
  async extend(leaseId: string, seconds: number, options: RequestOptions = {}): Promise<Renewal> {
    const path = `/api/v1/lease/${leaseIdSegment(leaseId)}/extend`;
    return this.failover(path, JSON.stringify({ seconds }), options, (answer, replica) =>
      parseRenewal(leaseId, answer, replica.url),
    );
  }

  async close(): Promise<void> {
    const agent = this.agent ?? (this.agentReady ? await this.agentReady.catch(() => undefined) : undefined);
    await agent?.close();
  }

  private agentOptions(): ConstructorParameters<typeof Agent>[0] {
    return {
      connections: this.options.connections ?? 16,
      keepAliveTimeout: 30_000,
      // The deadline is ours (--timeout, or the time a watched lease has left); undici's own
      // 300 s header and body timeouts would cut a longer one short.
      headersTimeout: 0,
      bodyTimeout: 0,
      connect: { rejectUnauthorized: !this.options.insecure, ...(this.options.ca ? { ca: this.options.ca } : {}) },
    };
  }

  private dispatcher(): Dispatcher | Promise<Dispatcher> {
    if (this.agent) return this.agent;
    this.agentReady ??= (async () => {
      const proxy = this.options.proxy!;
      // undici's whole index, on this path only: the proxy agent tunnels with Client#connect,
      // an API method the index attaches to every dispatcher.
      const { EnvHttpProxyAgent } = await import('undici');
      const tls = { rejectUnauthorized: !this.options.insecure, ...(this.options.ca ? { ca: this.options.ca } : {}) };
      this.options.trace?.(describeProxy(proxy));
      // requestTls: the broker's TLS inside the proxy's tunnel; the proxy's own TLS (an
      // https:// proxy) is checked against the system CAs.
      this.agent = new EnvHttpProxyAgent({ ...this.agentOptions(), requestTls: tls, ...proxy });
      return this.agent;
    })();
    return this.agentReady;
  }

  /**
   * Sends to the preferred replica and on to the next while one cannot be reached or answers
   * 5xx. Each replica but the last gets an equal share of the time left, so one that hangs
   * cannot use up the whole deadline; the last gets all that remains.
   */
  private async failover<T>(
    path: string,
    body: string,
    options: RequestOptions,
    judge: (answer: RawAnswer, replica: Replica) => T,
  ): Promise<T> {
    const timeoutMs = options.timeoutMs ?? this.options.timeoutMs;
    const request = requestSignal(timeoutMs, options.signal);
    const startedAt = monotonicMs();
    const failures: Array<{ replica: Replica; error: Error }> = [];
    const count = this.replicas.length;
    const first = this.preferred;
    try {
      for (let tried = 0; tried < count; tried++) {
        const index = (first + tried) % count;
        const replica = this.replicas[index]!;
        const left = count - tried;
        const shareMs = left > 1 ? Math.max(1, (timeoutMs - (monotonicMs() - startedAt)) / left) : undefined;
        const label = count > 1 ? ` (replica ${index + 1} of ${count})` : '';
        const outcome = await this.attempt(replica, path, body, options, request, shareMs, label, judge);
        if (outcome.ok) {
          this.preferred = index;
          return outcome.value;
        }
        // A refusal or an answer outside the contract is the broker's word: every replica
        // would say the same, and what other replicas said before no longer matters.
        if (!outcome.failover) throw outcome.error;
        failures.push({ replica, error: outcome.error });
        if (left === 1 || request.deadline.aborted) throw combine(failures);
        const next = this.replicas[(index + 1) % count]!;
        this.options.trace?.(`${replica.url} failed (${outcome.error.message}); trying the next replica, ${next.url}`);
      }
      throw new Error('unreachable: the last replica either answers or throws');
    } finally {
      request.release();
    }
  }

  private async attempt<T>(
    replica: Replica,
    path: string,
    body: string,
    options: RequestOptions,
    request: RequestSignal,
    shareMs: number | undefined,
    label: string,
    judge: (answer: RawAnswer, replica: Replica) => T,
  ): Promise<{ ok: true; value: T } | { ok: false; error: Error; failover: boolean }> {
    let answer: RawAnswer;
    try {
      answer = await this.send(replica, path, body, request, shareMs, label);
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      // An answer too large to be a renewal is judged, not a replica that failed.
      if (error instanceof QueenctlError) return { ok: false, error, failover: false };
      return {
        ok: false,
        error: this.failure(error, replica, request.deadline.aborted, timeoutMsOf(options, this.options), shareMs),
        failover: true,
      };
    }
    try {
      return { ok: true, value: judge(answer, replica) };
    } catch (error) {
      if (!(error instanceof QueenctlError)) throw error;
      // A 5xx is this replica's trouble: another may answer.
      return { ok: false, error, failover: error instanceof BrokerError && (error.status ?? 0) >= 500 };
    }
  }

  private failure(
    error: unknown,
    replica: Replica,
    overallTimedOut: boolean,
    timeoutMs: number,
    shareMs: number | undefined,
  ): Error {
    if (error instanceof AttemptTimeout) {
      return new BrokerError(
        `no answer from ${replica.url} within ${formatMs(Math.round(shareMs ?? timeoutMs))}, its share of --timeout`,
        true,
      );
    }
    if (overallTimedOut) {
      return new BrokerError(
        `no answer from ${replica.url} within ${formatMs(timeoutMs)}`,
        true,
        'raise --timeout, or check the broker and its database',
      );
    }
    const failure = transportError(error, replica.url);
    if (!this.options.proxy) return failure;
    // The address that failed may be the proxy's: say that it is in the way.
    return new BrokerError(
      failure.message,
      failure.transient,
      `requests go through the proxy of HTTPS_PROXY/HTTP_PROXY: check it is up, or list the broker's host in NO_PROXY`,
    );
  }

  /** One attempt on one replica; `shareMs` bounds it below the request's own deadline. */
  private async send(
    replica: Replica,
    path: string,
    body: string,
    request: RequestSignal,
    shareMs: number | undefined,
    label: string,
  ): Promise<RawAnswer> {
    const attempt = shareMs === undefined ? undefined : attemptSignal(request.signal, shareMs);
    const trace = this.options.trace;
    const startedAt = monotonicMs();
    const took = (): string => `${Math.round(monotonicMs() - startedAt)}ms`;
    trace?.(
      `POST ${replica.origin}${replica.basePath}${path}${label} ${body}${this.options.token ? ' (authorization: Bearer [redacted])' : ''}`,
    );
    try {
      const agent = await this.dispatcher();
      const response = await undiciRequest.call(agent, {
        origin: replica.origin,
        path: replica.basePath + path,
        method: 'POST',
        headers: this.headers,
        body,
        signal: attempt?.signal ?? request.signal,
      });
      const answer = { status: response.statusCode, headers: response.headers, body: await readCapped(response.body) };
      trace?.(`HTTP ${answer.status} from ${replica.origin}${label} in ${took()}: ${excerpt(answer.body)}`);
      return answer;
    } catch (error) {
      if (!(error instanceof BrokerError))
        trace?.(`no answer from ${replica.origin}${label} after ${took()}: ${(error as Error).message}`);
      if (attempt?.timedOut() && !request.deadline.aborted) throw new AttemptTimeout();
      throw error;
    } finally {
      attempt?.release();
    }
  }
}

function timeoutMsOf(options: RequestOptions, client: BrokerClientOptions): number {
  return options.timeoutMs ?? client.timeoutMs;
}

/** One replica used up its share of the deadline (not the request's own deadline). */
class AttemptTimeout extends Error {}

/** The error of the last replica alone, or of every replica when several were tried. */
function combine(failures: Array<{ replica: Replica; error: Error }>): Error {
  const last = failures[failures.length - 1]!;
  if (failures.length === 1 || !(last.error instanceof BrokerError)) return last.error;
  const errors = failures.map((failure) => failure.error as BrokerError);
  const said = failures.map(({ replica, error }) =>
    error.message.includes(replica.url) ? error.message : `${replica.url}: ${error.message}`,
  );
  return new BrokerError(
    `no replica of the broker could renew: ${said.join('; ')}`,
    errors.some((error) => error.transient),
    last.error.hint ?? 'check the replicas in --server, QUEEN_SERVER or the context',
    (last.error as BrokerError).status,
  );
}

/** HTTPS_PROXY, HTTP_PROXY and NO_PROXY (lower case first, as curl and undici read them). */
export function proxySettings(env: NodeJS.ProcessEnv): ProxySettings | undefined {
  const pick = (name: string): string | undefined => {
    const value = env[name.toLowerCase()] || env[name.toUpperCase()];
    if (!value) return undefined;
    try {
      new URL(value);
    } catch {
      throw new UsageError(
        `${name.toUpperCase()} is not a URL`,
        'set it to a proxy URL such as http://proxy.internal:3128, or unset it',
      );
    }
    return value;
  };
  const httpProxy = pick('http_proxy');
  const httpsProxy = pick('https_proxy');
  if (!httpProxy && !httpsProxy) return undefined;
  return { httpProxy, httpsProxy, noProxy: env.no_proxy ?? env.NO_PROXY ?? '' };
}

/** For -v: the proxies by origin only, so credentials in a proxy URL are never shown. */
function describeProxy(proxy: ProxySettings): string {
  const origin = (url: string | undefined): string | undefined => (url ? new URL(url).origin : undefined);
  const http = origin(proxy.httpProxy);
  const https = origin(proxy.httpsProxy) ?? http;
  const route =
    https === http
      ? `through the proxy ${http}`
      : http
        ? `through the proxy ${http} for http, ${https} for https`
        : `through the proxy ${https} for https (http goes direct)`;
  return `${route}${proxy.noProxy ? `, except NO_PROXY ${proxy.noProxy}` : ''}`;
}

interface RequestSignal {
  signal: AbortSignal;
  deadline: AbortSignal;
  release: () => void;
}

/** An attempt's own signal: the request's, or its share of the deadline, whichever ends first. */
function attemptSignal(
  parent: AbortSignal,
  ms: number,
): { signal: AbortSignal; timedOut: () => boolean; release: () => void } {
  const controller = new AbortController();
  let expired = false;
  const onParentAbort = (): void => controller.abort(parent.reason);
  const timer = setTimeout(
    () => {
      expired = true;
      controller.abort(new Error('replica deadline'));
    },
    Math.max(1, Math.round(ms)),
  );
  if (parent.aborted) onParentAbort();
  else parent.addEventListener('abort', onParentAbort, { once: true });
  return {
    signal: controller.signal,
    timedOut: () => expired,
    release: () => {
      clearTimeout(timer);
      parent.removeEventListener('abort', onParentAbort);
    },
  };
}

/**
 * One request's signal: the caller's (a signal, a watch stopping) or its own deadline. Not
 * AbortSignal.timeout/any: their timers and listeners outlive the request, and thousands of ids
 * in flight would hold memory for the whole timeout.
 */
function requestSignal(timeoutMs: number, outer: AbortSignal | undefined): RequestSignal {
  const controller = new AbortController();
  const deadline = new AbortController();
  const onOuterAbort = (): void => controller.abort(outer?.reason);
  const timer = setTimeout(
    () => {
      deadline.abort();
      controller.abort(new Error('deadline'));
    },
    Math.max(1, timeoutMs),
  );
  if (outer?.aborted) onOuterAbort();
  else outer?.addEventListener('abort', onOuterAbort, { once: true });
  return {
    signal: controller.signal,
    deadline: deadline.signal,
    release: () => {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onOuterAbort);
    },
  };
}

/**
 * The lease id as one path segment: percent-encoded, never interpreted (contract). Bare `.` and
 * `..` cannot be made one segment by any encoding, so args.ts refuses them before this.
 */
export function leaseIdSegment(leaseId: string): string {
  return encodeURIComponent(leaseId);
}

/** Milliseconds on a monotonic clock; process.hrtime, since the global `performance` loads perf_hooks. */
function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

async function readCapped(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > MAX_BODY_BYTES) {
      body.destroy();
      throw new BrokerError(`the broker's answer is larger than ${MAX_BODY_BYTES} bytes: not a lease renewal`, false);
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

const TLS_CODES = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL|EPROTO/;

/** Maps a transport failure to a BrokerError that says what happened and what to do. */
export function transportError(error: unknown, server: string): BrokerError {
  if (error instanceof BrokerError) return error;
  const err = error as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = err.code ?? err.cause?.code ?? '';
  const detail = err.message ?? String(error);
  if (TLS_CODES.test(code) || TLS_CODES.test(detail)) {
    return new BrokerError(
      `TLS connection to ${server} failed: ${detail}`,
      false,
      'trust its CA with --cacert <file>, or (not in production) --insecure',
    );
  }
  if (code === 'ECONNREFUSED') {
    return new BrokerError(
      `cannot reach the broker at ${server}: connection refused`,
      true,
      'is the broker running? check --server, QUEEN_SERVER or the context',
    );
  }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new BrokerError(
      `cannot reach the broker at ${server}: host not found`,
      true,
      'check --server, QUEEN_SERVER or the context',
    );
  }
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE') {
    return new BrokerError(`the connection to ${server} was closed before a full answer`, true);
  }
  if (code === 'UND_ERR_INVALID_ARG' || code === 'ERR_INVALID_URL') {
    return new BrokerError(`cannot use ${server} as a broker address: ${detail}`, false);
  }
  return new BrokerError(`request to ${server} failed: ${detail}${code ? ` (${code})` : ''}`, true);
}
