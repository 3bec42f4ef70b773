/**
 * The HTTP layer, and the one module that knows undici: a keep-alive connection pool for every
 * request of a run, TLS settings, the proxy agent, and reading an answer up to a cap. It sends
 * one request to one origin and hands back whatever answered; which replica to ask, how long to
 * wait and what an answer means are the client's (client.ts). Loaded only where a request is
 * sent (commands/globals.ts), never at start-up.
 */
import type { Dispatcher } from 'undici';
// The Agent alone, not undici's index: the index also loads fetch, websockets, caches and mocks,
// ~60 ms of start-up per invocation that a lease command never uses (see undici-agent.d.ts).
import Agent from 'undici/lib/dispatcher/agent.js';
import type { ProxySettings } from '../config/proxy.js';
import { proxyFor } from '../config/proxy-route.js';
import type { RawAnswer } from './contract.js';
import {
  MAX_BODY_BYTES,
  PROXY_CLOSED_CODE,
  TransportFailure,
  classify,
  describeProxy,
  pickHeaders,
  refusedPart,
  whenEnded,
  type Transport,
  type TransportRequest,
} from './transport.js';

export interface UndiciTransportOptions {
  /** Connections kept open to each origin; bounds the concurrency of bulk commands. */
  connections?: number;
  /** Skip TLS verification (https only). */
  insecure?: boolean | undefined;
  /** The CA certificates (PEM) to trust for https, instead of the system's. */
  ca?: string | undefined;
  /**
   * From proxySettings() (config/proxy.ts), routed per origin by proxyFor (config/proxy-route.ts);
   * undefined: connect directly.
   */
  proxy?: ProxySettings | undefined;
  maxBodyBytes?: number;
  /** -v: says which proxy requests go through, once, when the proxy agent is set up. */
  trace?: ((line: string) => void) | undefined;
}

export class UndiciTransport implements Transport {
  /** Requests that go direct; made now when there is no proxy (the common path), else on first use. */
  private agent: Dispatcher | undefined;
  /** A proxy agent per proxy URL, loaded only when a request goes through one. */
  private readonly proxyAgents = new Map<string, Promise<Dispatcher>>();
  /** The proxy of each origin (proxy-route.ts), or null for direct; asked once per origin. */
  private readonly routes = new Map<string, string | null>();
  private readonly maxBodyBytes: number;

  constructor(private readonly options: UndiciTransportOptions = {}) {
    this.maxBodyBytes = options.maxBodyBytes ?? MAX_BODY_BYTES;
    if (!options.proxy) this.agent = new Agent(this.agentOptions());
  }

  async send(request: TransportRequest): Promise<RawAnswer> {
    const proxyUrl = this.options.proxy ? this.routeOf(request.origin) : null;
    const dispatcher = proxyUrl === null ? this.directAgent() : await this.proxyAgent(proxyUrl);
    const maxBytes = request.maxBodyBytes ?? this.maxBodyBytes;
    const viaProxy = proxyUrl !== null;
    return new Promise<RawAnswer>((resolve, reject) => {
      const handler = new AnswerHandler(request, maxBytes, viaProxy, resolve, reject);
      if (handler.settled) return;
      const { origin, path, method, headers, body } = request;
      dispatcher.dispatch({ origin, path, method, headers, body }, handler);
    });
  }

  async close(): Promise<void> {
    const proxies = await Promise.all([...this.proxyAgents.values()].map((ready) => ready.catch(() => undefined)));
    await Promise.all([this.agent, ...proxies].map((agent) => agent?.close()));
  }

  private directAgent(): Dispatcher {
    this.agent ??= new Agent(this.agentOptions());
    return this.agent;
  }

  private routeOf(origin: string): string | null {
    let route = this.routes.get(origin);
    if (route === undefined) {
      // Go's rules: localhost, loopback and NO_PROXY hosts go direct (config/proxy-route.ts).
      route = proxyFor(this.options.proxy as ProxySettings, origin) ?? null;
      this.routes.set(origin, route);
    }
    return route;
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

  private proxyAgent(uri: string): Promise<Dispatcher> {
    let ready = this.proxyAgents.get(uri);
    if (!ready) {
      // -v: said once, when the first request goes through a proxy.
      if (this.proxyAgents.size === 0) this.options.trace?.(describeProxy(this.options.proxy as ProxySettings));
      ready = (async () => {
        // undici's whole index, on this path only: the proxy agent tunnels with Client#connect,
        // an API method the index attaches to every dispatcher.
        const { Pool, ProxyAgent } = await import('undici');
        // requestTls: the broker's TLS inside the proxy's tunnel; the proxy's own TLS (an
        // https:// proxy) is checked against the system CAs.
        return new ProxyAgent({
          ...this.agentOptions(),
          uri,
          requestTls: this.tls(),
          clientFactory: (origin: URL, options: object) => tunnelFailsOnce(new Pool(origin, options)),
        });
      })();
      this.proxyAgents.set(uri, ready);
    }
    return ready;
  }
}

/**
 * The pool of connections to the proxy, whose tunnel, when the proxy closes the connection
 * before answering CONNECT, fails the request instead of being asked for again. undici 7's
 * ProxyAgent passes that socket error on as it is, and its client takes a socket error with no
 * request running for a connection to open again: it sends CONNECT again at once, without end
 * (about 1,500 a second against a proxy on loopback), until --timeout, with --retries 0 alike
 * (nodejs/undici#3897, fixed in undici 8, whose Node floor is 22). The request then fails as a
 * closed connection, retried on the client's backoff like any other (docs/architecture.md,
 * "Two transports").
 */
function tunnelFailsOnce<T extends Dispatcher>(pool: T): T {
  const connect = pool.connect.bind(pool) as (options: Dispatcher.ConnectOptions) => Promise<Dispatcher.ConnectData>;
  const tunnel = async (options: Dispatcher.ConnectOptions): Promise<Dispatcher.ConnectData> => {
    try {
      return await connect(options);
    } catch (error) {
      if ((error as { code?: string } | null)?.code !== 'UND_ERR_SOCKET') throw error;
      const detail = error instanceof Error ? error.message : String(error);
      throw Object.assign(new Error(`the proxy closed the connection before opening a tunnel: ${detail}`), {
        code: PROXY_CLOSED_CODE,
        cause: error,
      });
    }
  };
  // ProxyAgent asks for its tunnels in the promise form only.
  return Object.assign(pool, { connect: tunnel });
}

/**
 * One request's answer, read through undici's own handler interface: the status, the headers
 * the client reads, and the body up to a cap, as one string. Not undici's request() API, which
 * wraps every answer in a Readable stream read back through an async iterator and listens to an
 * AbortSignal per request: most of the transport's CPU in a bulk run (issue 19).
 */
class AnswerHandler {
  settled = false;
  private abort: ((reason?: Error) => void) | null = null;
  private status = 0;
  private headers: RawAnswer['headers'] = {};
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private stopListening: (() => void) | undefined;
  private readonly inspect: TransportRequest['inspect'];

  constructor(
    request: TransportRequest,
    private readonly maxBytes: number,
    private readonly viaProxy: boolean,
    private readonly resolve: (answer: RawAnswer) => void,
    private readonly reject: (error: unknown) => void,
  ) {
    this.inspect = request.inspect;
    this.stopListening = whenEnded(request, (reason) => this.end(reason));
  }

  onConnect(abort: (reason?: Error) => void): void {
    // Ended while it waited for a connection of the pool: it goes no further.
    if (this.settled) abort(new TransportFailure('other', 'the request ended before it was sent'));
    else this.abort = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    // 1xx (100 Continue) come before the answer itself.
    if (statusCode >= 200) {
      this.status = statusCode;
      this.headers = pickHeaders(rawHeaders);
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.size += chunk.length;
    const refused = refusedPart(chunk, this.size, this.maxBytes, this.inspect);
    if (refused) {
      this.end(refused.reason);
      return false;
    }
    this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    if (this.settled) return;
    this.release();
    const { chunks } = this;
    const body = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8');
    this.resolve({ status: this.status, headers: this.headers, body });
  }

  onError(error: Error): void {
    if (this.settled) return;
    this.release();
    this.reject(error instanceof TransportFailure ? error : classify(error, this.viaProxy));
  }

  onUpgrade(): void {
    this.onError(new TransportFailure('other', 'the server switched protocols'));
  }

  /** Ended from outside (a deadline, a stop) or by the size cap: rejects at once, and stops undici. */
  private end(reason: unknown): void {
    if (this.settled) return;
    this.release();
    this.reject(reason);
    this.abort?.(reason instanceof Error ? reason : new TransportFailure('other', String(reason)));
  }

  private release(): void {
    this.settled = true;
    // Undefined while the constructor listens: a request ended already is ended from within it.
    this.stopListening?.();
  }
}
