/** The simulator's record of broker requests: what a test asserts was (or was not) sent. */
import type http from 'node:http';

export interface LogEntry {
  /** Broker clock (epoch ms) when the request arrived. */
  at: number;
  method: string;
  /** The request target exactly as sent, query string included. */
  rawPath: string;
  /** Decoded lease id when the path is the extend route, else null. */
  leaseId: string | null;
  body: string;
  authorization: string | null;
  userAgent: string | null;
  /** Status sent; null while held by `hang`, or when dropped or the client went away. */
  status: number | null;
}

export const DEFAULT_LOG_LIMIT = 10_000;

/** At most `limit` entries, oldest dropped first; a limit of 0 keeps none. */
export class RequestLog {
  private entries: LogEntry[] = [];

  constructor(private readonly limit = DEFAULT_LOG_LIMIT) {}

  get all(): readonly LogEntry[] {
    return this.entries;
  }

  /** A new entry (status still null), or null when the log keeps nothing. */
  record(
    req: http.IncomingMessage,
    at: number,
    rawPath: string,
    leaseId: string | null,
    body: string,
  ): LogEntry | null {
    if (this.limit <= 0) return null;
    const entry: LogEntry = {
      at,
      method: req.method ?? '',
      rawPath,
      leaseId,
      body,
      authorization: req.headers.authorization ?? null,
      userAgent: req.headers['user-agent'] ?? null,
      status: null,
    };
    this.entries.push(entry);
    if (this.entries.length > this.limit) this.entries.shift();
    return entry;
  }

  reset(): void {
    this.entries = [];
  }
}
