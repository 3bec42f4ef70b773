/**
 * The HTTP layer, and the one module that knows undici: a keep-alive connection pool for every
 * request of a run, TLS settings, the proxy agent, and reading an answer up to a cap. It sends
 * one request to one origin and hands back whatever answered; which replica to ask, how long to
 * wait and what an answer means are the client's (client.ts). Loaded only where a request is
 * sent (commands/globals.ts), never at start-up.
 */
import type { Dispatcher } from 'undici';
// The Agent and its request API alone, not undici's index: the index also loads fetch,
// websockets, caches and mocks, ~60 ms of start-up per invocation that a lease command never
// uses (see undici-agent.d.ts). The index attaches the API to Dispatcher.prototype; we call it.
import Agent from 'undici/lib/dispatcher/agent.js';
import undiciRequest from 'undici/lib/api/api-request.js';
import type { ProxySettings } from '../config/proxy.js';
import type { RawAnswer } from './contract.js';
import {
  ANSWER_HEADERS,
  MAX_BODY_BYTES,
  TransportFailure,
  classify,
  describeProxy,
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
