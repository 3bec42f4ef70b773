/**
 * The HTTP layer for runs that send a few requests (`lease extend <id>`, `inspect <id>`, `list`,
 * `ping`, `version`) to a plain http origin: HTTP/1.1 written and read over node:net, one
 * connection per request (`Connection: close`), at most `connections` at once. node:http costs
 * such a run ~7 ms more than this (issue 41: its modules, its agent and parser for one request;
 * docs/performance.md). An https origin goes over node-http-transport.ts, loaded then; requests
 * beyond the first few go over the pooled transport given as `overflow` (src/commands/globals.ts).
 * It keeps the contract of transport.ts as the other two do: the same request on the wire (Host,
 * the caller's headers, a Content-Length, never chunked), the same cap on an answer, the same
 * headers handed back, the same end on a deadline or a stop, the same failures. What llhttp
 * (node:http's parser) refuses in an answer is refused here too, as soon as it shows: a first
 * line that is not an HTTP/1.x status line, a LF without its CR, a header name that is not a
 * token or a value with control characters (trailers included), a folded header, a head over
 * 16 KiB, two Content-Lengths, a body after a 204 or 304, a chunk size that is not hexadecimal or
 * is followed by blanks, chunk extensions with control characters or over 16 KiB in all. Where
 * llhttp is laxer, this is stricter on purpose: a status under 100, control characters in the
 * reason phrase (never kept nor shown). The memory an answer holds stays in proportion to its
 * body (Exchange).
 */
import { connect, type Socket } from 'node:net';
import type { RawAnswer } from './contract.js';
import type { NodeHttpTransportOptions } from './node-http-transport.js';
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

/** node:http's default limit on an answer's head (--max-http-header-size). */
export const MAX_HEAD_BYTES = 16 * 1024;

/** What node:http refuses to send (its checkIsHttpToken, checkInvalidHeaderChar, path check). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const BAD_PATH = /[^\u0021-\u00ff]/;
const STATUS_LINE = /^HTTP\/1\.[01] ([1-9]\d\d)(?: [^\0-\x08\x0a-\x1f\x7f]*)?$/;
/** Hex digits, then nothing or extensions without control characters: no blank after the size (llhttp). */
const CHUNK_SIZE = /^([0-9A-Fa-f]+)(?:;[\t\x20-\x7e\x80-\xff]*)?$/;
/** node:http's bound on a message's chunk extensions (HPE_CHUNK_EXTENSIONS_OVERFLOW). */
const MAX_EXTENSION_BYTES = 16 * 1024;
const EMPTY = Buffer.alloc(0);

/**
 * What a run of many requests goes over once the first few have gone over node:net: a connection
 * per request, and a socket in TIME_WAIT each, cost more than loading a pooled transport once
 * beyond a few dozen (src/commands/globals.ts says how many).
 */
export interface Overflow {
  /** Requests sent over node:net before the rest go over `open()`'s transport. */
  after: number;
  open(): Promise<Transport>;
}

export interface NetTransportOptions extends NodeHttpTransportOptions {
  overflow?: Overflow | undefined;
}

export class NetTransport implements Transport {
  private readonly maxBodyBytes: number;
  private readonly connections: number;
  private active = 0;
  private readonly waiting: Exchange[] = [];
  private readonly live = new Set<Exchange>();
  /** Requests to an http origin sent over node:net so far. */
  private sent = 0;
  /** node:http for an https origin, loaded then only. */
  private secure: Promise<Transport> | undefined;
  /** The pooled transport beyond `overflow.after` requests, loaded then only. */
  private pooled: Promise<Transport> | undefined;

  constructor(private readonly options: NetTransportOptions = {}) {
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
    const { overflow } = this.options;
    if (overflow !== undefined && this.sent >= overflow.after) {
      this.pooled ??= overflow.open();
      return (await this.pooled).send(request);
    }
    this.sent++;
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
    for (const other of [this.secure, this.pooled]) {
      const transport = other && (await other.catch(() => undefined));
      await transport?.close();
    }
  }

  /** What the answers being read hold now, all together (see Exchange). */
  held(): Held {
    const held = { buffers: 0, bytes: 0 };
    for (const exchange of this.live) {
      const one = exchange.held();
      held.buffers += one.buffers;
      held.bytes += one.bytes;
    }
    return held;
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

/** What a kept part of an answer costs: the Buffers held and the bytes of memory they keep alive. */
export interface Held {
  buffers: number;
  bytes: number;
}

/**
 * One request and its answer on a connection of its own: the status, the headers the client
 * reads, and the body up to a cap, as one string; ended at once by the caller (a deadline, a
 * stop), the connection dropped. What it holds stays in proportion to the body: the body is
 * copied into one buffer that grows by doubling, never kept as views of what the socket read
 * (a view keeps its whole read alive), and the framing of a chunked body is bounded too.
 */
class Exchange {
  settled = false;
  private socket: Socket | undefined;
  private stopListening: (() => void) | undefined;
  private url: URL | undefined;
  private wire: Buffer | undefined;
  /** Bytes read and not yet parsed: the head, then a chunked body's framing; a copy between reads. */
  private pending: Buffer = EMPTY;
  /** Bytes of the head read so far, CR/LF skipped before a status line included. */
  private headBytes = 0;
  /** Where the search for a LF without its CR goes on in `pending`. */
  private scanned = 0;
  /** The status line was read and found valid. */
  private statusRead = false;
  private status = 0;
  private rawHeaders: string[] = [];
  private mode: BodyMode | undefined;
  /** In a chunked body: the bytes of the chunk still to come; 0: its CRLF; -1: a size line; -2: trailers. */
  private chunkLeft = -1;
  /** A chunked body's framing so far: size lines, extensions, CRLFs, trailers. */
  private framing = 0;
  private extensions = 0;
  private trailers = 0;
  /** The body so far: `size` bytes of a buffer that grows by doubling, up to the cap. */
  private body: Buffer = EMPTY;
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

  /**
   * The memory this answer holds now, the read being parsed aside (`pending` may be a view of it
   * while it is parsed, a copy after): tests see that it stays in proportion to the body.
   */
  held(): Held {
    const buffers = (this.body.length > 0 ? 1 : 0) + (this.pending.length > 0 ? 1 : 0);
    return { buffers, bytes: this.body.buffer.byteLength + this.pending.length };
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
        if (!this.readHead()) {
          this.keepPending();
          return;
        }
        const rest = this.pending;
        this.pending = EMPTY;
        this.readBody(rest);
      } else this.readBody(chunk);
      this.keepPending();
    } catch (error) {
      this.end(error);
    }
  }

  /** What is left unparsed is copied out of the read it came in, so as not to keep that read alive. */
  private keepPending(): void {
    if (this.pending.length > 0 && this.pending.length < this.pending.buffer.byteLength)
      this.pending = Buffer.from(this.pending);
  }

  /**
   * Parses heads (1xx ones are skipped) until the answer's own; false until it is all here. As
   * llhttp does, CR and LF before a status line are skipped, and what cannot be HTTP is refused
   * as soon as it shows: first bytes other than `HTTP/`, a first line that is not an HTTP/1.x
   * status line, a LF without its CR.
   */
  private readHead(): boolean {
    for (;;) {
      if (!this.statusRead) {
        let skip = 0;
        while (skip < this.pending.length && (this.pending[skip] === 13 || this.pending[skip] === 10)) skip++;
        this.headBytes += skip;
        this.pending = this.pending.subarray(skip);
        if (this.headBytes > MAX_HEAD_BYTES) throw notHttp(`a head larger than ${MAX_HEAD_BYTES} bytes`);
        const prefix = this.pending.toString('latin1', 0, Math.min(5, this.pending.length));
        if (!'HTTP/'.startsWith(prefix)) throw notHttp('no HTTP/1.x status line');
      }
      const end = this.pending.indexOf('\r\n\r\n');
      const scanTo = end === -1 ? this.pending.length : end + 4;
      for (let at = this.scanned; at < scanTo; at++)
        if (this.pending[at] === 10 && (at === 0 || this.pending[at - 1] !== 13))
          throw notHttp('a line ended by LF alone');
      this.scanned = Math.max(0, scanTo - 1);
      if (!this.statusRead) {
        const eol = this.pending.indexOf('\r\n');
        if (eol !== -1) {
          if (!STATUS_LINE.test(this.pending.toString('latin1', 0, eol))) throw notHttp('no HTTP/1.x status line');
          this.statusRead = true;
        }
      }
      if (end === -1) {
        if (this.headBytes + this.pending.length > MAX_HEAD_BYTES)
          throw notHttp(`a head larger than ${MAX_HEAD_BYTES} bytes`);
        return false;
      }
      if (this.headBytes + end > MAX_HEAD_BYTES) throw notHttp(`a head larger than ${MAX_HEAD_BYTES} bytes`);
      const lines = this.pending.toString('latin1', 0, end).split('\r\n');
      this.pending = this.pending.subarray(end + 4);
      this.headBytes = 0;
      this.scanned = 0;
      this.statusRead = false;
      const code = Number((STATUS_LINE.exec(lines[0] as string) as RegExpExecArray)[1]);
      const rawHeaders: string[] = [];
      let length: number | undefined;
      let chunked = false;
      let encoded = false;
      for (let index = 1; index < lines.length; index++) {
        const [name, value] = headerLine(lines[index] as string);
        rawHeaders.push(name, value);
        const lower = name.toLowerCase();
        if (lower === 'content-length') {
          if (!/^\d{1,15}$/.test(value)) throw notHttp('a Content-Length that is not a number');
          // llhttp refuses a second one even when it says the same.
          if (length !== undefined) throw notHttp('two Content-Lengths');
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
      if (code === 204 || code === 304) {
        // No body, whatever the head says. node:http reads what follows as the next answer and
        // refuses it unless it starts as one: so here, where it is not read, but not the connection.
        const next = this.pending.toString('latin1', 0, Math.min(5, this.pending.length));
        if (!'HTTP/'.startsWith(next)) throw notHttp(`bytes after a ${code} answer, which has no body`);
        this.mode = { kind: 'none' };
      } else if (encoded) {
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

  /**
   * A chunked body: each chunk's data to `take`, its framing through `pending`, counted: all of
   * it against a bound as large as the body's cap (16 KiB at least), the extensions against
   * node:http's 16 KiB, the trailers against the head's.
   */
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
        this.consume(2);
        this.chunkLeft = -1;
        continue;
      }
      const eol = this.pending.indexOf('\r\n');
      const line = eol === -1 ? this.pending.length : eol;
      if (this.chunkLeft === -2) {
        // Trailers: header lines, read as a head's are and not kept, then an empty line.
        if (this.trailers + line > MAX_HEAD_BYTES) throw notHttp(`trailers larger than ${MAX_HEAD_BYTES} bytes`);
        if (eol === -1) return;
        const text = this.pending.toString('latin1', 0, eol);
        this.trailers += eol + 2;
        this.consume(eol + 2);
        if (text === '') {
          this.finish();
          return;
        }
        headerLine(text);
        continue;
      }
      // A size line: hexadecimal digits, then extensions (`;...`) or nothing.
      const semicolon = this.pending.subarray(0, line).indexOf(';');
      const extension = semicolon === -1 ? 0 : line - semicolon;
      if (this.extensions + extension > MAX_EXTENSION_BYTES)
        throw notHttp(`chunk extensions larger than ${MAX_EXTENSION_BYTES} bytes`);
      if (line > MAX_HEAD_BYTES + MAX_EXTENSION_BYTES) throw notHttp('a chunk size line too long');
      if (eol === -1) {
        this.checkFraming(this.pending.length);
        return;
      }
      const sizeLine = this.pending.toString('latin1', 0, eol);
      const size = CHUNK_SIZE.exec(sizeLine);
      if (!size)
        throw notHttp(
          /^[0-9A-Fa-f]+;/.test(sizeLine)
            ? 'a control character in chunk extensions'
            : 'a chunk size that is not hexadecimal',
        );
      this.extensions += extension;
      this.consume(eol + 2);
      // Leading zeros are allowed, as llhttp allows them; more than 8 digits after them is over any cap.
      const digits = (size[1] as string).replace(/^0+(?=.)/, '');
      if (digits.length > 8) throw new TransportFailure('too-large', `larger than ${this.maxBytes} bytes`);
      const bytes = Number.parseInt(digits, 16);
      this.chunkLeft = bytes > 0 ? bytes : -2;
    }
  }

  /** Framing bytes parsed and dropped from `pending`. */
  private consume(bytes: number): void {
    this.pending = this.pending.subarray(bytes);
    this.checkFraming(bytes);
    this.framing += bytes;
  }

  /** A chunked body's framing is bounded as its data is: a flood of tiny chunks ends, as data would. */
  private checkFraming(more: number): void {
    const bound = Math.max(this.maxBytes, MAX_HEAD_BYTES);
    if (this.framing + more > bound)
      throw new TransportFailure('too-large', `larger than ${this.maxBytes} bytes (chunked framing over ${bound})`);
  }

  /** A piece of the body: counted against the cap, shown to `inspect`, copied into the body. */
  private take(part: Buffer): void {
    const needed = this.size + part.length;
    const refused = refusedPart(part, needed, this.maxBytes, this.request.inspect);
    if (refused) return this.end(refused.reason);
    if (needed > this.body.length) {
      const grown = Buffer.allocUnsafeSlow(Math.min(this.maxBytes, Math.max(needed, 2 * this.body.length, 1024)));
      this.body.copy(grown, 0, 0, this.size);
      this.body = grown;
    }
    part.copy(this.body, this.size);
    this.size = needed;
  }

  private finish(): void {
    if (this.settled) return;
    this.release();
    this.socket?.destroy();
    const text = this.body.toString('utf8', 0, this.size);
    this.body = EMPTY;
    this.pending = EMPTY;
    this.resolve({ status: this.status, headers: pickHeaders(this.rawHeaders), body: text });
  }

  /** Ended from outside (a deadline, a stop), by the cap or by an answer that is not HTTP: connection dropped. */
  private end(reason: unknown): void {
    if (this.settled) return;
    this.release();
    this.body = EMPTY;
    this.pending = EMPTY;
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

/** A header or trailer line: a name that is a token, a value without control characters. */
function headerLine(line: string): [string, string] {
  const colon = line.indexOf(':');
  const name = colon === -1 ? '' : line.slice(0, colon);
  if (!TOKEN.test(name)) throw notHttp('a header line that is not a name and a value');
  const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
  if (BAD_VALUE.test(value)) throw notHttp(`a control character in header ${name}`);
  return [name, value];
}
