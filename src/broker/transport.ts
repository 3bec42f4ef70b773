/**
 * The HTTP layer, and the one module that knows undici: a keep-alive connection pool for every
 * request of a run, TLS settings, the proxy agent, and reading an answer up to a cap. It sends
 * one request to one origin and hands back whatever answered; which replica to ask, how long to
 * wait and what an answer means are the client's (client.ts).
 */
import type { Dispatcher } from 'undici';
// The Agent and its request API alone, not undici's index: the index also loads fetch,
// websockets, caches and mocks, ~60 ms of start-up per invocation that a lease command never
// uses (see undici-agent.d.ts). The index attaches the API to Dispatcher.prototype; we call it.
import Agent from 'undici/lib/dispatcher/agent.js';
import undiciRequest from 'undici/lib/api/api-request.js';
import type { ProxySettings } from '../config/proxy.js';
import type { RawAnswer } from './contract.js';

export interface TransportRequest {
  method: 'GET' | 'POST';
  /** scheme://host[:port] of the replica. */
  origin: string;
  /** Everything after the origin (the replica's base path included), already percent-encoded. */
  path: string;
  headers: Readonly<Record<string, string>>;
  body?: string | undefined;
  /** This route's cap on the answer's size, when it is not the transport's (a long listing). */
  maxBodyBytes?: number | undefined;
  /** Ends the request: the caller's deadline, or its stop. */
  signal: AbortSignal;
}

/**
 * Sends one request. Resolves with the answer, whatever its status; rejects with a
 * TransportFailure when nothing usable came back, or with the signal's reason (or undici's
 * abort error) once the signal has ended the request.
 */
export interface Transport {
  send(request: TransportRequest): Promise<RawAnswer>;
  close(): Promise<void>;
}

/**
 * Why no answer came back, in words the client maps to its errors; `too-large` is an answer
 * read up to the cap and dropped (its message: "larger than N bytes").
 */
export type FailureKind = 'tls' | 'refused' | 'host-not-found' | 'reset' | 'bad-address' | 'too-large' | 'other';

export class TransportFailure extends Error {
  constructor(
    readonly kind: FailureKind,
    /** What undici or the system said (never a header of the request). */
    message: string,
    /** The system's or undici's code (ECONNREFUSED, UND_ERR_SOCKET); '' when there was none. */
    readonly code = '',
    /** Settings for a proxy were in force: the address that failed may be the proxy's. */
    readonly viaProxy = false,
  ) {
    super(message);
    this.name = 'TransportFailure';
  }
}

/**
 * The headers an answer carries over, by lower-case name: `date` (the broker's clock),
 * `location` (a redirect, reported), `retry-after` (how long a 429 or 503 asks to wait). Add
 * a name here before reading it elsewhere; fakes in tests set the same names.
 */
export const ANSWER_HEADERS = ['date', 'location', 'retry-after'] as const;

/** Answers larger than this are not an answer of the routes queenctl uses; reading stops there. */
export const MAX_BODY_BYTES = 1024 * 1024;

export interface UndiciTransportOptions {
  /** Connections kept open to each origin; bounds the concurrency of bulk commands. */
  connections?: number;
  /** Skip TLS verification (https only). */
  insecure?: boolean | undefined;
  /** The CA certificates (PEM) to trust for https, instead of the system's. */
  ca?: string | undefined;
  /** From proxySettings() (config/proxy.ts); undefined: connect directly. */
  proxy?: ProxySettings | undefined;
  maxBodyBytes?: number;
  /** -v: says which proxy requests go through, once, when the proxy agent is set up. */
  trace?: ((line: string) => void) | undefined;
}

export class UndiciTransport implements Transport {
  private agent: Dispatcher | undefined;
  private agentReady: Promise<Dispatcher> | undefined;
  private readonly maxBodyBytes: number;

  constructor(private readonly options: UndiciTransportOptions = {}) {
    this.maxBodyBytes = options.maxBodyBytes ?? MAX_BODY_BYTES;
    // The common path (no proxy) builds its Agent now; the proxy agent is loaded only when used.
    if (!options.proxy) this.agent = new Agent(this.agentOptions());
  }

  async send(request: TransportRequest): Promise<RawAnswer> {
    try {
      const agent = await this.dispatcher();
      const response = await undiciRequest.call(agent, {
        origin: request.origin,
        path: request.path,
        method: request.method,
        headers: request.headers,
        body: request.body,
        signal: request.signal,
      });
      return {
        status: response.statusCode,
        headers: pickHeaders(response.headers),
        body: await this.readCapped(response.body, request.maxBodyBytes),
      };
    } catch (error) {
      if (error instanceof TransportFailure || request.signal.aborted) throw error;
      throw classify(error, this.options.proxy !== undefined);
    }
  }

  async close(): Promise<void> {
    const agent = this.agent ?? (this.agentReady ? await this.agentReady.catch(() => undefined) : undefined);
    await agent?.close();
  }

  private agentOptions(): ConstructorParameters<typeof Agent>[0] {
    return {
      connections: this.options.connections ?? 16,
      keepAliveTimeout: 30_000,
      // The deadline is the caller's (--timeout, or the time a watched lease has left); undici's
      // own 300 s header and body timeouts would cut a longer one short.
      headersTimeout: 0,
      bodyTimeout: 0,
      connect: this.tls(),
    };
  }

  private tls(): { rejectUnauthorized: boolean; ca?: string } {
    return { rejectUnauthorized: !this.options.insecure, ...(this.options.ca ? { ca: this.options.ca } : {}) };
  }

  private dispatcher(): Dispatcher | Promise<Dispatcher> {
    if (this.agent) return this.agent;
    this.agentReady ??= (async () => {
      const proxy = this.options.proxy!;
      // undici's whole index, on this path only: the proxy agent tunnels with Client#connect,
      // an API method the index attaches to every dispatcher.
      const { EnvHttpProxyAgent } = await import('undici');
      this.options.trace?.(describeProxy(proxy));
      // requestTls: the broker's TLS inside the proxy's tunnel; the proxy's own TLS (an
      // https:// proxy) is checked against the system CAs.
      this.agent = new EnvHttpProxyAgent({ ...this.agentOptions(), requestTls: this.tls(), ...proxy });
      return this.agent;
    })();
    return this.agentReady;
  }

  private async readCapped(body: Dispatcher.ResponseData['body'], maxBytes = this.maxBodyBytes): Promise<string> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of body) {
      const buffer = chunk as Buffer;
      size += buffer.length;
      if (size > maxBytes) {
        body.destroy();
        throw new TransportFailure('too-large', `larger than ${maxBytes} bytes`);
      }
      chunks.push(buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  }
}

function pickHeaders(headers: Dispatcher.ResponseData['headers']): RawAnswer['headers'] {
  const picked: RawAnswer['headers'] = {};
  for (const name of ANSWER_HEADERS) if (headers[name] !== undefined) picked[name] = headers[name];
  return picked;
}

const TLS_CODES = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL|EPROTO/;

/** What undici or the system threw, as a TransportFailure the client can word without knowing undici. */
export function classify(error: unknown, viaProxy: boolean): TransportFailure {
  const err = error as { code?: string; message?: string; cause?: { code?: string } } | null | undefined;
  const code = err?.code ?? err?.cause?.code ?? '';
  const detail = err?.message ?? String(error);
  const failure = (kind: FailureKind): TransportFailure => new TransportFailure(kind, detail, code, viaProxy);
  if (TLS_CODES.test(code) || TLS_CODES.test(detail)) return failure('tls');
  if (code === 'ECONNREFUSED') return failure('refused');
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return failure('host-not-found');
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE') return failure('reset');
  if (code === 'UND_ERR_INVALID_ARG' || code === 'ERR_INVALID_URL') return failure('bad-address');
  return failure('other');
}

/** For -v: the proxies by origin only, so credentials in a proxy URL are never shown. */
export function describeProxy(proxy: ProxySettings): string {
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
