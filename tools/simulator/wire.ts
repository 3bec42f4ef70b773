/**
 * What the simulator puts on the wire and reads from it, whatever the route: timestamps in the
 * brokers' two formats, request bodies and paths, and answers with the broker's headers and a
 * `Date` header written by the broker's clock (docs/broker.md).
 */
import type http from 'node:http';
import { SimulatorInputError } from './input.js';
import { stringifyAnyDepth } from './json-text.js';

/** Large enough for a 10 MB `body` fault sent through the control interface. */
const MAX_REQUEST_BYTES = 32 * 1024 * 1024;

/** Sent with every broker answer, as in the recording. */
const CORS_HEADERS: Readonly<Record<string, string>> = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, PUT, DELETE, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type, Authorization',
};

// --- timestamps -------------------------------------------------------------------------------

/** The documented shape's timestamps: microsecond precision, `Z` (docs/broker.md). */
export function isoMicros(ms: number): string {
  const secondMs = Math.floor(ms / 1000) * 1000;
  const micros = Math.min(999_999, Math.floor((ms - secondMs) * 1000));
  const base = new Date(secondMs).toISOString().slice(0, 19);
  return `${base}.${String(micros).padStart(6, '0')}Z`;
}

/** The older broker's timestamps: millisecond precision (docs/broker.md). */
export function isoMillis(ms: number): string {
  return new Date(Math.floor(ms)).toISOString();
}

/** A `Date` header from the broker clock, truncated to the second like any HTTP date. */
function httpDate(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toUTCString();
}

// --- requests ---------------------------------------------------------------------------------

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function tryParseJson(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, message: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * The whole body as UTF-8; past MAX_REQUEST_BYTES a 413 (SimulatorInputError), the request
 * destroyed. Rejects when the request fails or closes before its end (the client went away).
 * Events, not `for await`: the async iterator cost every request a dozen promises.
 */
export function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (error: Error | null): void => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      if (error !== null) reject(error);
      else
        resolve(chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8'));
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= MAX_REQUEST_BYTES) {
        chunks.push(chunk);
        return;
      }
      settle(new SimulatorInputError('request body too large', 413));
      req.destroy();
    };
    const onEnd = (): void => settle(null);
    const onError = (err: Error): void => settle(err);
    const onClose = (): void => settle(new Error('the request closed before its end'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/**
 * Splits the raw request target on `/` BEFORE decoding, so `%2F` inside a lease id never makes a
 * new segment. A malformed escape keeps the segment raw (a lenient decoder, not a crash).
 */
export function pathSegments(target: string): string[] {
  return rawPathSegments(target).map(decodeSegment);
}

/**
 * The path's segments as sent, escapes kept: the broker's partition pop route matches its
 * partition segment without decoding it (docs/broker.md, "One batch, several outcomes").
 */
export function rawPathSegments(target: string): string[] {
  const end = target.search(/[?#]/);
  return (end === -1 ? target : target.slice(0, end)).split('/');
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

// --- answers ----------------------------------------------------------------------------------

export interface Reply {
  status: number;
  statusMessage?: string;
  headers: Record<string, string>;
  body: string;
}

/** A JSON answer with the broker's headers; data nested past V8's stringify depth included. */
export function jsonReply(status: number, value: unknown): Reply {
  return jsonTextReply(status, stringifyAnyDepth(value) as string);
}

/** `body` as is, with the headers of a JSON answer: the broker's empty body for an unknown group. */
export function jsonTextReply(status: number, body: string): Reply {
  // The recording shows Access-Control-Max-Age on error answers only.
  const maxAge: Record<string, string> = status >= 400 ? { 'Access-Control-Max-Age': '86400' } : {};
  return { status, headers: { ...CORS_HEADERS, ...maxAge, 'Content-Type': 'application/json' }, body };
}

export const emptyReply = (status: number): Reply => ({ status, headers: {}, body: '' });

function writeHead(res: http.ServerResponse, reply: Reply, contentLength: number, brokerNow: number): void {
  // The broker's clock writes the Date header, not ours (docs/broker.md: the broker clock decides).
  res.sendDate = false;
  res.setHeader('Date', httpDate(brokerNow));
  for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
  if (reply.status !== 204 && reply.status !== 304) res.setHeader('Content-Length', contentLength);
  res.writeHead(reply.status, reply.statusMessage);
}

/**
 * Large bodies, encoded once: a test sends the same 10 MB answer to many requests, and encoding
 * it for each one was most of the simulator's CPU. A string this long is looked up by identity
 * and length in practice (V8 does not hash its content), so the lookup costs nothing.
 */
const encodedBodies = new Map<string, Buffer>();
const ENCODE_ONCE_FROM = 64 * 1024;

function encodeBody(body: string): Buffer {
  if (body.length < ENCODE_ONCE_FROM) return Buffer.from(body, 'utf8');
  let encoded = encodedBodies.get(body);
  if (encoded === undefined) {
    if (encodedBodies.size >= 4) encodedBodies.clear();
    encoded = Buffer.from(body, 'utf8');
    encodedBodies.set(body, encoded);
  }
  return encoded;
}

/** Sends the whole answer; false (and nothing sent) when the response is gone or already begun. */
export function send(res: http.ServerResponse, reply: Reply, brokerNow: number): boolean {
  if (res.destroyed || res.headersSent) return false;
  const body = encodeBody(reply.body);
  writeHead(res, reply, body.length, brokerNow);
  res.end(body);
  return true;
}

/** Headers promising the whole body, half of it, then a reset: an answer lost mid-flight. */
export function sendHalf(res: http.ServerResponse, reply: Reply, brokerNow: number): boolean {
  if (res.destroyed || res.headersSent) return false;
  const body = encodeBody(reply.body);
  writeHead(res, reply, body.length, brokerNow);
  res.flushHeaders();
  res.write(body.subarray(0, Math.floor(body.length / 2)), () => res.destroy());
  return true;
}
