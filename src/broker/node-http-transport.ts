/**
 * The HTTP layer for runs that send a few requests (`lease extend <id>`, `inspect <id>`, `list`,
 * `ping`, `version`): Node's own node:http, already compiled into Node, instead of undici, whose
 * bundle a run must read, compile and set up (issue 19: ~+40 ms over bare Node for one undici
 * request, ~+13 ms for node:http). Runs that send an open-ended number of requests, and every
 * run behind a proxy, use undici-transport.ts: commands/globals.ts chooses (docs/architecture.md).
 * Both keep the contract of transport.ts: the same request on the wire, the same cap on an answer,
 * the same headers handed back, the same end on a deadline or a stop, the same failures.
 */
import http from 'node:http';
import type { Agent as HttpsAgent } from 'node:https';
import type { RawAnswer } from './contract.js';
import {
  MAX_BODY_BYTES,
  TransportFailure,
  classify,
  pickHeaders,
  refusedPart,
  whenEnded,
  type Transport,
  type TransportRequest,
} from './transport.js';

export interface NodeHttpTransportOptions {
  /** Sockets kept open to each origin; bounds the requests in flight to one. */
  connections?: number;
  /** Skip TLS verification (https only). */
  insecure?: boolean | undefined;
  /** The CA certificates (PEM) to trust for https, instead of the system's. */
  ca?: string | undefined;
  maxBodyBytes?: number;
}

export class NodeHttpTransport implements Transport {
  private readonly maxBodyBytes: number;
  private httpAgent: http.Agent | undefined;
  /** node:https (and node:tls) only for an https origin: a plain http run never loads them. */
  private httpsAgent: Promise<HttpsAgent> | undefined;

  constructor(private readonly options: NodeHttpTransportOptions = {}) {
    this.maxBodyBytes = options.maxBodyBytes ?? MAX_BODY_BYTES;
  }

  async send(request: TransportRequest): Promise<RawAnswer> {
    let url: URL;
    try {
      url = new URL(request.origin);
    } catch (error) {
      throw classify(error, false);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new TransportFailure('bad-address', `not an http or https origin: ${request.origin}`);
    const agent = url.protocol === 'https:' ? await this.secureAgent() : this.plainAgent();
    const maxBytes = request.maxBodyBytes ?? this.maxBodyBytes;
    return new Promise<RawAnswer>((resolve, reject) => {
      const exchange = new Exchange(request, maxBytes, resolve, reject);
      if (exchange.settled) return;
      exchange.start(url, agent);
    });
  }

  async close(): Promise<void> {
    // Every socket, idle or not, goes at once: the process exits without waiting for them.
    this.httpAgent?.destroy();
    const secure = this.httpsAgent && (await this.httpsAgent.catch(() => undefined));
    secure?.destroy();
  }

  private agentOptions(): http.AgentOptions {
    // The same pool as undici's: kept alive between requests, as many sockets as --concurrency.
    return { keepAlive: true, maxSockets: this.options.connections ?? 16 };
  }

  private plainAgent(): http.Agent {
    this.httpAgent ??= new http.Agent(this.agentOptions());
    return this.httpAgent;
  }

  private secureAgent(): Promise<HttpsAgent> {
    this.httpsAgent ??= import('node:https').then(
      ({ Agent }) =>
        new Agent({
          ...this.agentOptions(),
          // As undici's connector: NODE_EXTRA_CA_CERTS and the system CAs unless --cacert says.
          rejectUnauthorized: !this.options.insecure,
          ...(this.options.ca ? { ca: this.options.ca } : {}),
        }),
    );
    return this.httpsAgent;
  }
}

/**
 * One request and its answer: the status, the headers the client reads, and the body up to a cap,
 * as one string; ended at once by the caller (a deadline, a stop) as undici's AnswerHandler is.
 */
class Exchange {
  settled = false;
  private outgoing: http.ClientRequest | undefined;
  private stopListening: (() => void) | undefined;
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(
    private readonly request: TransportRequest,
    private readonly maxBytes: number,
    private readonly resolve: (answer: RawAnswer) => void,
    private readonly reject: (error: unknown) => void,
  ) {
    this.stopListening = whenEnded(request, (reason) => this.end(reason));
  }

  start(url: URL, agent: http.Agent): void {
    const { method, path, headers, body } = this.request;
    let outgoing: http.ClientRequest;
    try {
      // What undici sends: the caller's headers, Host, and a Content-Length for a body (never
      // chunked); node:http adds `Connection: keep-alive` as undici does.
      outgoing = http.request({
        protocol: url.protocol,
        hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
        port: url.port,
        method,
        path,
        agent,
        headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      });
    } catch (error) {
      // A header or a path node:http will not send (a character it refuses).
      this.fail(error);
      return;
    }
    this.outgoing = outgoing;
    outgoing.on('error', (error) => this.fail(error));
    outgoing.on('upgrade', (_answer, socket) => {
      socket.destroy();
      this.fail(new TransportFailure('other', 'the server switched protocols'));
    });
    // 1xx (100 Continue) come as 'information' events, before the answer itself: not read.
    outgoing.on('response', (answer) => this.receive(answer));
    outgoing.end(body);
  }

  private receive(answer: http.IncomingMessage): void {
    if (this.settled) {
      answer.destroy();
      return;
    }
    answer.on('data', (chunk: Buffer) => {
      if (this.settled) return;
      this.size += chunk.length;
      const refused = refusedPart(chunk, this.size, this.maxBytes, this.request.inspect);
      if (refused) return this.end(refused.reason);
      this.chunks.push(chunk);
    });
    answer.on('end', () => {
      if (this.settled) return;
      this.release();
      const { chunks } = this;
      const text = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8');
      this.resolve({ status: answer.statusCode ?? 0, headers: pickHeaders(answer.rawHeaders), body: text });
    });
    // The connection closed in the middle of the body: node:http's ECONNRESET "aborted".
    answer.on('error', (error) => this.fail(error));
    answer.on('close', () => {
      if (!this.settled && !answer.complete) this.fail(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
    });
  }

  private fail(error: unknown): void {
    if (this.settled) return;
    this.release();
    this.reject(error instanceof TransportFailure ? error : classify(error, false));
  }

  /** Ended from outside (a deadline, a stop) or by the size cap: rejects at once, and drops the socket. */
  private end(reason: unknown): void {
    if (this.settled) return;
    this.release();
    this.reject(reason);
    this.outgoing?.destroy();
  }

  private release(): void {
    this.settled = true;
    // Undefined while the constructor listens: a request ended already is ended from within it.
    this.stopListening?.();
  }
}
