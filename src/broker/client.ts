/**
 * The broker client: one keep-alive connection pool (an undici Agent) for every request of a
 * run, a deadline per request, and strict parsing through contract.ts. Transport failures
 * become BrokerErrors here, so commands never see sockets or status numbers.
 */
import type { Dispatcher } from 'undici';
// The Agent and its request API alone, not undici's index: the index also loads fetch,
// websockets, caches and mocks, ~60 ms of start-up per invocation that a lease command never
// uses (see undici-agent.d.ts). The index attaches the API to Dispatcher.prototype; we call it.
import Agent from 'undici/lib/dispatcher/agent.js';
import undiciRequest from 'undici/lib/api/api-request.js';
import { BrokerError } from '../exit.js';
import { excerpt, parseRenewal, type RawAnswer, type Renewal } from './contract.js';

export interface BrokerClientOptions {
  /** Base URL of the broker, e.g. http://localhost:6632 */
  server: string;
  token?: string | undefined;
  /** Deadline of one request, connect to last byte. */
  timeoutMs: number;
  userAgent: string;
  /** Connections kept open to the broker; bounds concurrency of bulk commands. */
  connections?: number;
  /** Skip TLS verification (https only). */
  insecure?: boolean;
  /** Extra CA certificates (PEM) to trust for https. */
  ca?: string | undefined;
  /** -v: one line per request; the token is never part of it. */
  trace?: ((line: string) => void) | undefined;
}

export interface RequestOptions {
  signal?: AbortSignal | undefined;
  /** Overrides the client's timeout for this request (watch cuts it to the lease's time left). */
  timeoutMs?: number;
}

/** Answers larger than this are not a lease renewal; reading stops there. */
const MAX_BODY_BYTES = 1024 * 1024;

export class BrokerClient {
  readonly server: string;
  private readonly origin: string;
  private readonly basePath: string;
  private readonly agent: Agent;
  private readonly headers: Record<string, string>;

  constructor(private readonly options: BrokerClientOptions) {
    this.server = options.server.replace(/\/+$/, '');
    const url = new URL(this.server);
    this.origin = url.origin;
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.agent = new Agent({
      connections: options.connections ?? 16,
      keepAliveTimeout: 30_000,
      connect: { rejectUnauthorized: !options.insecure, ...(options.ca ? { ca: options.ca } : {}) },
    });
    this.headers = {
      'content-type': 'application/json',
      'user-agent': options.userAgent,
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
    };
  }

  /** POST /api/v1/lease/:leaseId/extend with `{"seconds": n}`; see contract.ts for the rules. */
  async extend(leaseId: string, seconds: number, options: RequestOptions = {}): Promise<Renewal> {
    const path = `/api/v1/lease/${leaseIdSegment(leaseId)}/extend`;
    const answer = await this.post(path, JSON.stringify({ seconds }), options);
    return parseRenewal(leaseId, answer, this.server);
  }

  async close(): Promise<void> {
    await this.agent.close();
  }

  private async post(path: string, body: string, options: RequestOptions): Promise<RawAnswer> {
    const timeoutMs = options.timeoutMs ?? this.options.timeoutMs;
    const { signal, deadline, release } = requestSignal(timeoutMs, options.signal);
    const trace = this.options.trace;
    const startedAt = performance.now();
    const took = (): string => `${Math.round(performance.now() - startedAt)}ms`;
    trace?.(`POST ${this.origin}${this.basePath}${path} ${body}${this.options.token ? ' (authorization: Bearer [redacted])' : ''}`);
    try {
      const response = await undiciRequest.call(this.agent, {
        origin: this.origin,
        path: this.basePath + path,
        method: 'POST',
        headers: this.headers,
        body,
        signal,
      });
      const answer = { status: response.statusCode, headers: response.headers, body: await readCapped(response.body) };
      trace?.(`HTTP ${answer.status} from ${this.origin} in ${took()}: ${excerpt(answer.body)}`);
      return answer;
    } catch (error) {
      trace?.(`no answer from ${this.origin} after ${took()}: ${(error as Error).message}`);
      if (options.signal?.aborted) throw options.signal.reason;
      if (deadline.aborted) {
        throw new BrokerError(`no answer from ${this.server} within ${formatMs(timeoutMs)}`, true, 'raise --timeout, or check the broker and its database');
      }
      throw transportError(error, this.server);
    } finally {
      release();
    }
  }
}

/**
 * One request's signal: the caller's (a signal, a watch stopping) or its own deadline. Not
 * AbortSignal.timeout/any: their timers and listeners outlive the request, and thousands of ids
 * in flight would hold memory for the whole timeout.
 */
function requestSignal(timeoutMs: number, outer: AbortSignal | undefined): { signal: AbortSignal; deadline: AbortSignal; release: () => void } {
  const controller = new AbortController();
  const deadline = new AbortController();
  const onOuterAbort = (): void => controller.abort(outer?.reason);
  const timer = setTimeout(() => {
    deadline.abort();
    controller.abort(new Error('deadline'));
  }, Math.max(1, timeoutMs));
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
 * The lease id as one path segment: percent-encoded, never interpreted (contract). A bare `.`
 * or `..` is encoded too, or a proxy normalising the path would send it to another route.
 */
export function leaseIdSegment(leaseId: string): string {
  return leaseId === '.' || leaseId === '..' ? leaseId.replaceAll('.', '%2E') : encodeURIComponent(leaseId);
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
    return new BrokerError(`TLS connection to ${server} failed: ${detail}`, false, 'trust its CA with --cacert <file>, or (not in production) --insecure');
  }
  if (code === 'ECONNREFUSED') {
    return new BrokerError(`cannot reach the broker at ${server}: connection refused`, true, 'is the broker running? check --server, QUEEN_SERVER or the context');
  }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new BrokerError(`cannot reach the broker at ${server}: host not found`, true, 'check --server, QUEEN_SERVER or the context');
  }
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE') {
    return new BrokerError(`the connection to ${server} was closed before a full answer`, true);
  }
  if (code === 'UND_ERR_INVALID_ARG' || code === 'ERR_INVALID_URL') {
    return new BrokerError(`cannot use ${server} as a broker address: ${detail}`, false);
  }
  return new BrokerError(`request to ${server} failed: ${detail}${code ? ` (${code})` : ''}`, true);
}
