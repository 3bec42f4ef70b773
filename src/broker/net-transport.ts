/**
 * The HTTP layer for runs that send a few requests (`lease extend <id>`, `inspect <id>`, `list`,
 * `ping`, `version`) to a plain http origin: HTTP/1.1 written and read over node:net, one
 * connection per request (`Connection: close`), at most `connections` at once. node:http costs
 * such a run ~7 ms more than this (issue 41: its modules, its agent and parser for one request;
 * docs/performance.md). An https origin goes over node-http-transport.ts, loaded then. It keeps
 * the contract of transport.ts as the other two do: the same request on the wire (Host, the
 * caller's headers, a Content-Length, never chunked), the same cap on an answer, the same headers
 * handed back, the same end on a deadline or a stop, the same failures. What node:http's parser
 * refuses in an answer is refused here too: a status line that is not HTTP/1.x, a header name
 * that is not a token or a value with control characters, a folded header, a head over 16 KiB,
 * two lengths that differ, a chunk size that is not hexadecimal.
 */
import { connect, type Socket } from 'node:net';
import type { RawAnswer } from './contract.js';
import type { NodeHttpTransportOptions } from './node-http-transport.js';
import {
  MAX_BODY_BYTES,
  TransportFailure,
  classify,
  pickHeaders,
  whenEnded,
  type Transport,
  type TransportRequest,
} from './transport.js';

/** node:http's default limit on an answer's head (--max-http-header-size). */
export const MAX_HEAD_BYTES = 16 * 1024;

/** What node:http refuses to send (its checkIsHttpToken, checkInvalidHeaderChar, path check). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const BAD_PATH = /[^\u0021-\u00ff]/;
const STATUS_LINE = /^HTTP\/1\.[01] ([1-9]\d\d)(?: [^\0-\x08\x0a-\x1f\x7f]*)?$/;
const CHUNK_SIZE = /^([0-9A-Fa-f]{1,8})[ \t]*(?:;.*)?$/;

export class NetTransport implements Transport {
  private readonly maxBodyBytes: number;
  private readonly connections: number;
  private active = 0;
  private readonly waiting: Exchange[] = [];
  private readonly live = new Set<Exchange>();
  /** node:http for an https origin, loaded then only. */
  private secure: Promise<Transport> | undefined;

  constructor(private readonly options: NodeHttpTransportOptions = {}) {
    this.maxBodyBytes = options.maxBodyBytes ?? MAX_BODY_BYTES;
    this.connections = Math.max(1, options.connections ?? 16);
  }

  async send(request: TransportRequest): Promise<RawAnswer> {
    let url: URL;
    try {
      url = new URL(request.origin);
    } catch (error) {
      throw classify(error, false);
    }
    if (url.protocol === 'https:') return (await this.secureTransport()).send(request);
    if (url.protocol !== 'http:')
      throw new TransportFailure('bad-address', `not an http or https origin: ${request.origin}`);
    const maxBytes = request.maxBodyBytes ?? this.maxBodyBytes;
    return new Promise<RawAnswer>((resolve, reject) => {
      const exchange = new Exchange(request, maxBytes, resolve, reject, (ended) => this.settled(ended));
      if (exchange.settled) return;
      let wire: Buffer;
      try {
        wire = requestBytes(request, url);
      } catch (error) {
        exchange.fail(error);
        return;
      }
      exchange.prepare(url, wire);
      if (this.active < this.connections) this.begin(exchange);
      else this.waiting.push(exchange);
    });
  }

  async close(): Promise<void> {
    // Every connection goes at once: the process exits without waiting for them.
    for (const exchange of this.live) exchange.destroy();
    this.live.clear();
    const secure = this.secure && (await this.secure.catch(() => undefined));
    await secure?.close();
  }

  private begin(exchange: Exchange): void {
    this.active++;
    this.live.add(exchange);
    exchange.start();
  }

  /** A request ended: the next one waiting and not ended meanwhile takes its place. */
  private settled(exchange: Exchange): void {
    if (!this.live.delete(exchange)) return;
    this.active--;
    while (this.waiting.length > 0 && this.active < this.connections) {
      const next = this.waiting.shift() as Exchange;
      if (!next.settled) this.begin(next);
    }
  }

  private secureTransport(): Promise<Transport> {
    this.secure ??= import('./node-http-transport.js').then(
      ({ NodeHttpTransport }) => new NodeHttpTransport(this.options),
    );
    return this.secure;
  }
}

/** The request as it goes on the wire; throws what node:http would for what it refuses to send. */
function requestBytes(request: TransportRequest, url: URL): Buffer {
  const { method, path, headers, body } = request;
  if (BAD_PATH.test(path)) throw refused('ERR_UNESCAPED_CHARACTERS', 'Request path contains unescaped characters');
  let head = `${method} ${path} HTTP/1.1\r\n`;
  let hasHost = false;
  for (const [name, value] of Object.entries(headers)) {
    if (!TOKEN.test(name)) throw refused('ERR_INVALID_HTTP_TOKEN', 'Header name must be a valid HTTP token');
    if (BAD_VALUE.test(value)) throw refused('ERR_INVALID_CHAR', `Invalid character in header content ["${name}"]`);
    const lower = name.toLowerCase();
    if (lower === 'content-length' || lower === 'connection' || lower === 'transfer-encoding') continue;
    if (lower === 'host') hasHost = true;
    head += `${name}: ${value}\r\n`;
  }
  if (!hasHost) head += `Host: ${url.host}\r\n`;
  const payload = body === undefined ? undefined : Buffer.from(body, 'utf8');
  if (payload) head += `content-length: ${payload.length}\r\n`;
  head += 'Connection: close\r\n\r\n';
  const bytes = Buffer.from(head, 'latin1');
  return payload ? Buffer.concat([bytes, payload]) : bytes;
}

/** node:http's error for a request it will not send, with its code. */
function refused(code: string, message: string): Error {
  return Object.assign(new TypeError(message), { code });
}

type BodyMode = { kind: 'none' } | { kind: 'length'; left: number } | { kind: 'chunked' } | { kind: 'close' };

const notHttp = (why: string): TransportFailure =>
  new TransportFailure('other', `the answer is not valid HTTP: ${why}`, 'HPE_INVALID');

/**
 * One request and its answer on a connection of its own: the status, the headers the client
 * reads, and the body up to a cap, as one string; ended at once by the caller (a deadline, a
 * stop), the connection dropped.
 */
class Exchange {
  settled = false;
  private socket: Socket | undefined;
  private stopListening: (() => void) | undefined;
  private url: URL | undefined;
  private wire: Buffer | undefined;
  /** Bytes read and not yet parsed: the head, then a chunked body's framing. */
  private pending: Buffer = Buffer.alloc(0);
  private status = 0;
  private rawHeaders: string[] = [];
  private mode: BodyMode | undefined;
  /** In a chunked body: the bytes of the current chunk still to come, or -1 between chunks. */
  private chunkLeft = -1;
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(
    private readonly request: TransportRequest,
    private readonly maxBytes: number,
    private readonly resolve: (answer: RawAnswer) => void,
    private readonly reject: (error: unknown) => void,
    private readonly onSettled: (exchange: Exchange) => void,
  ) {
    this.stopListening = whenEnded(request, (reason) => this.end(reason));
  }

  prepare(url: URL, wire: Buffer): void {
    this.url = url;
    this.wire = wire;
  }

  start(): void {
    const url = this.url as URL;
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    let socket: Socket;
    try {
      socket = connect({ host, port: url.port === '' ? 80 : Number(url.port) });
    } catch (error) {
      this.fail(error);
      return;
    }
    this.socket = socket;
    socket.setNoDelay(true);
    socket.on('error', (error) => this.fail(error));
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('end', () => {
      // The server closed its side: the end of a body read to the close, else too soon.
      if (this.mode?.kind === 'close' && this.pending.length === 0) this.finish();
      else this.cutShort();
    });
    socket.on('close', () => this.cutShort());
    socket.write(this.wire as Buffer);
    this.wire = undefined;
  }

  destroy(): void {
    this.socket?.destroy();
  }

  fail(error: unknown): void {
    if (this.settled) return;
    this.release();
    this.reject(error instanceof TransportFailure ? error : classify(error, false));
  }

  /** The connection ended before the answer did: node:http's ECONNRESET, "socket hang up" or "aborted". */
  private cutShort(): void {
    if (this.settled) return;
    const message = this.mode === undefined ? 'socket hang up' : 'aborted';
    this.fail(Object.assign(new Error(message), { code: 'ECONNRESET' }));
  }

  private read(chunk: Buffer): void {
    if (this.settled) return;
    try {
      if (this.mode === undefined) {
        this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
        if (!this.readHead()) return;
        const rest = this.pending;
        this.pending = Buffer.alloc(0);
        this.readBody(rest);
      } else this.readBody(chunk);
    } catch (error) {
      this.end(error);
    }
  }

  /** Parses heads (1xx ones are skipped) until the answer's own; false until it is all here. */
  private readHead(): boolean {
    for (;;) {
      const at = this.pending.indexOf('\r\n\r\n');
      // Something else than HTTP is refused as soon as its first bytes say so, as llhttp does.
      const prefix = this.pending.toString('latin1', 0, Math.min(5, this.pending.length));
      if (!'HTTP/'.startsWith(prefix)) throw notHttp('no HTTP/1.x status line');
      if (at === -1) {
        if (this.pending.length > MAX_HEAD_BYTES) throw notHttp(`a head larger than ${MAX_HEAD_BYTES} bytes`);
        return false;
      }
      if (at > MAX_HEAD_BYTES) throw notHttp(`a head larger than ${MAX_HEAD_BYTES} bytes`);
      const lines = this.pending.toString('latin1', 0, at).split('\r\n');
      this.pending = this.pending.subarray(at + 4);
      const status = STATUS_LINE.exec(lines[0] as string);
      if (!status) throw notHttp('no HTTP/1.x status line');
      const code = Number(status[1]);
      const rawHeaders: string[] = [];
      let length: number | undefined;
      let chunked = false;
      let encoded = false;
      for (let index = 1; index < lines.length; index++) {
        const line = lines[index] as string;
        const colon = line.indexOf(':');
        const name = colon === -1 ? '' : line.slice(0, colon);
        if (!TOKEN.test(name)) throw notHttp('a header line that is not a name and a value');
        const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
        if (BAD_VALUE.test(value)) throw notHttp(`a control character in header ${name}`);
        rawHeaders.push(name, value);
        const lower = name.toLowerCase();
        if (lower === 'content-length') {
          if (!/^\d{1,15}$/.test(value)) throw notHttp('a Content-Length that is not a number');
          if (length !== undefined && length !== Number(value)) throw notHttp('two Content-Lengths that differ');
          length = Number(value);
        } else if (lower === 'transfer-encoding') {
          encoded = true;
          chunked = /(?:^|,)[ \t]*chunked[ \t]*$/i.test(value);
        }
      }
      if (code === 101) throw new TransportFailure('other', 'the server switched protocols');
      if (code < 200) continue;
      this.status = code;
      this.rawHeaders = rawHeaders;
      if (code === 204 || code === 304) this.mode = { kind: 'none' };
      else if (encoded) {
        if (length !== undefined) throw notHttp('both Transfer-Encoding and Content-Length');
        this.mode = chunked ? { kind: 'chunked' } : { kind: 'close' };
      } else if (length !== undefined) this.mode = { kind: 'length', left: length };
      else this.mode = { kind: 'close' };
      return true;
    }
  }

  private readBody(chunk: Buffer): void {
    const mode = this.mode as BodyMode;
    switch (mode.kind) {
      case 'none':
        this.finish();
        return;
      case 'close':
        if (chunk.length > 0) this.take(chunk);
        return;
      case 'length': {
        const part = chunk.length > mode.left ? chunk.subarray(0, mode.left) : chunk;
        mode.left -= part.length;
        if (part.length > 0) this.take(part);
        if (!this.settled && mode.left === 0) this.finish();
        return;
      }
      case 'chunked':
        this.readChunked(chunk);
    }
  }

  /** A chunked body: each chunk's data to `take`, its framing through `pending`. */
  private readChunked(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    while (!this.settled) {
      if (this.chunkLeft > 0) {
        if (this.pending.length === 0) return;
        const part = this.pending.subarray(0, Math.min(this.chunkLeft, this.pending.length));
        this.pending = this.pending.subarray(part.length);
        this.chunkLeft -= part.length;
        this.take(part);
        continue;
      }
      if (this.chunkLeft === 0) {
        // The CRLF after a chunk's data.
        if (this.pending.length < 2) return;
        if (this.pending[0] !== 13 || this.pending[1] !== 10) throw notHttp('a chunk not ended by CRLF');
        this.pending = this.pending.subarray(2);
        this.chunkLeft = -1;
        continue;
      }
      const eol = this.pending.indexOf('\r\n');
      if (eol === -1) {
        if (this.pending.length > MAX_HEAD_BYTES) throw notHttp('a chunk size line too long');
        return;
      }
      const size = CHUNK_SIZE.exec(this.pending.toString('latin1', 0, eol));
      if (!size) throw notHttp('a chunk size that is not hexadecimal');
      const bytes = Number.parseInt(size[1] as string, 16);
      if (bytes > 0) {
        this.pending = this.pending.subarray(eol + 2);
        this.chunkLeft = bytes;
        continue;
      }
      // The last chunk: trailers, then an empty line; their content is not read.
      if (this.pending.indexOf('\r\n\r\n', eol) === -1) {
        if (this.pending.length > MAX_HEAD_BYTES) throw notHttp('trailers larger than 16384 bytes');
        return;
      }
      this.finish();
      return;
    }
  }

  /** A piece of the body: counted against the cap, shown to `inspect`, kept. */
  private take(part: Buffer): void {
    this.size += part.length;
    if (this.size > this.maxBytes) {
      this.end(new TransportFailure('too-large', `larger than ${this.maxBytes} bytes`));
      return;
    }
    if (this.request.inspect) {
      try {
        this.request.inspect(part);
      } catch (error) {
        this.end(error);
        return;
      }
    }
    this.chunks.push(part);
  }

  private finish(): void {
    if (this.settled) return;
    this.release();
    this.socket?.destroy();
    const { chunks } = this;
    const text = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8');
    this.resolve({ status: this.status, headers: pickHeaders(this.rawHeaders), body: text });
  }

  /** Ended from outside (a deadline, a stop), by the cap or by an answer that is not HTTP: connection dropped. */
  private end(reason: unknown): void {
    if (this.settled) return;
    this.release();
    this.reject(reason);
    this.socket?.destroy();
  }

  private release(): void {
    this.settled = true;
    // Undefined while the constructor listens: a request ended already is ended from within it.
    this.stopListening?.();
    this.onSettled(this);
  }
}
