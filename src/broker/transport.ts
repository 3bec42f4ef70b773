/**
 * The HTTP layer's port: what a request and a failure are, in words the client (client.ts) uses
 * without knowing undici, node:net or node:http. Three implementations, loaded only by a run
 * that sends a request, so `--version`, help, config and usage errors pay for none (issue 19):
 * undici-transport.ts (the one module that loads undici) for runs that send many requests, and
 * net-transport.ts for runs that send a few (issue 41), which hands an https origin to
 * node-http-transport.ts (commands/globals.ts chooses; docs/architecture.md). This module loads
 * none of them.
 */
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
  /**
   * Sees each chunk of the answer's body as it arrives (a pop's scan, pop.ts): when it throws,
   * the request ends at once with what it threw, and nothing more is read.
   */
  inspect?: ((chunk: Uint8Array) => void) | undefined;
  /** Ends the request: the caller's deadline, or its stop. */
  signal: AbortSignal;
  /**
   * The same end, without an AbortSignal: when given, the transport listens here and never reads
   * `signal`, which the client (client.ts) then makes only if something does read it (a fake of
   * the transport in tests). An AbortSignal per request, with its listeners, cost a bulk run of
   * 10,000 ids ~0.4 s of CPU (issue 19).
   */
  cancel?: Cancellation | undefined;
}

/** How a request is ended before its answer: its deadline passed, or the caller stopped it. */
export interface Cancellation {
  readonly cancelled: boolean;
  /** Why it ended (the caller's signal's reason, or the deadline's error); undefined before. */
  readonly reason: unknown;
  /**
   * Calls `listener` once when the request ends, at once if it has; null removes it. One
   * listener at a time: the transport that sends the request.
   */
  onCancel(listener: ((reason: unknown) => void) | null): void;
}

/**
 * Calls `end` once when the request is ended from outside: through `cancel` when it has one (and
 * then `signal` is never read), else through `signal`; at once if it already has. Returns what
 * stops listening, for when the request settles first. Both transports take requests this way.
 */
export function whenEnded(request: TransportRequest, end: (reason: unknown) => void): () => void {
  const { cancel } = request;
  if (cancel) {
    cancel.onCancel(end);
    return () => cancel.onCancel(null);
  }
  const { signal } = request;
  if (signal.aborted) {
    end(signal.reason);
    return () => {};
  }
  const onAbort = (): void => end(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}

/**
 * Sends one request. Resolves with the answer, whatever its status; rejects with a
 * TransportFailure when nothing usable came back, or with the reason of its end (`cancel`, else
 * `signal`) at once when that ends the request first.
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
    /** What undici, node:http or the system said (never a header of the request). */
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
 * A piece of an answer's body, as every transport takes it: refused (with the reason that ends
 * the request) when the body would pass its cap, or when the request's `inspect` throws; null
 * when it is taken.
 */
export function refusedPart(
  part: Uint8Array,
  sizeWith: number,
  maxBytes: number,
  inspect: TransportRequest['inspect'],
): { reason: unknown } | null {
  if (sizeWith > maxBytes) return { reason: new TransportFailure('too-large', `larger than ${maxBytes} bytes`) };
  try {
    inspect?.(part);
  } catch (error) {
    return { reason: error };
  }
  return null;
}

/**
 * The headers an answer carries over, by lower-case name: `date` (the broker's clock),
 * `location` (a redirect, reported), `retry-after` (how long a 429 or 503 asks to wait). Add
 * a name here before reading it elsewhere; fakes in tests set the same names.
 */
export const ANSWER_HEADERS = ['date', 'location', 'retry-after'] as const;

const ANSWER_HEADER_LENGTHS = new Set<number>(ANSWER_HEADERS.map((name) => name.length));

/**
 * ANSWER_HEADERS from a raw list (name, value, ...): undici's Buffers or node:http's strings,
 * named in lower case and valued in Latin-1 as both parsers do; a repeated one is an array.
 */
export function pickHeaders(rawHeaders: readonly (Buffer | string)[]): RawAnswer['headers'] {
  const picked: RawAnswer['headers'] = {};
  for (let index = 0; index + 1 < rawHeaders.length; index += 2) {
    const rawName = rawHeaders[index]!;
    // Most headers are none of these: their length says so without decoding them.
    if (!ANSWER_HEADER_LENGTHS.has(rawName.length)) continue;
    const name = (typeof rawName === 'string' ? rawName : rawName.toString('latin1')).toLowerCase();
    if (!(ANSWER_HEADERS as readonly string[]).includes(name)) continue;
    const rawValue = rawHeaders[index + 1]!;
    const value = typeof rawValue === 'string' ? rawValue : rawValue.toString('latin1');
    const seen = picked[name];
    picked[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return picked;
}

/** Answers larger than this are not an answer of the routes queenctl uses; reading stops there. */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * The code of a proxy that closed the connection before answering CONNECT (undici-transport.ts):
 * undici 8's own, which undici 7 does not have. Read as a closed connection.
 */
export const PROXY_CLOSED_CODE = 'UND_ERR_PRX_CONN';

const TLS_CODES = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL|EPROTO/;

/** What undici, node:http or the system threw, as a TransportFailure the client can word without knowing either. */
export function classify(error: unknown, viaProxy: boolean): TransportFailure {
  const err = error as { code?: string; message?: string; cause?: { code?: string } } | null | undefined;
  const code = err?.code ?? err?.cause?.code ?? '';
  const detail = err?.message ?? String(error);
  const failure = (kind: FailureKind): TransportFailure => new TransportFailure(kind, detail, code, viaProxy);
  if (TLS_CODES.test(code) || TLS_CODES.test(detail)) return failure('tls');
  if (code === 'ECONNREFUSED') return failure('refused');
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return failure('host-not-found');
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE' || code === PROXY_CLOSED_CODE) {
    return failure('reset');
  }
  if (code === 'UND_ERR_INVALID_ARG' || code === 'ERR_INVALID_URL') return failure('bad-address');
  return failure('other');
}

/**
 * For -v: the proxies by origin only, so credentials in a proxy URL are never shown. Each
 * carries its own scheme (Go's rules: HTTPS_PROXY never stands in for HTTP_PROXY, nor the other
 * way round); localhost and loopback always go direct.
 */
export function describeProxy(proxy: ProxySettings): string {
  const origin = (url: string | undefined): string | undefined => (url ? new URL(url).origin : undefined);
  const http = origin(proxy.httpProxy);
  const https = origin(proxy.httpsProxy);
  const route =
    https === http
      ? `through the proxy ${http}`
      : http && https
        ? `through the proxy ${http} for http, ${https} for https`
        : http
          ? `through the proxy ${http} for http (https goes direct)`
          : `through the proxy ${https} for https (http goes direct)`;
  return `${route}, except localhost and loopback${proxy.noProxy ? ` and NO_PROXY ${proxy.noProxy}` : ''}`;
}
