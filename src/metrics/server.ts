/**
 * The HTTP listener of `--metrics-address`: a few GET routes, each answered from what the process
 * already holds, never by waiting on the broker (docs/metrics.md). It is bound before anything is
 * sent to the broker, so a bad address is a usage error with nothing done; it never keeps the
 * process alive by itself, and close() ends it with every connection.
 *
 * It shares the process, and its file descriptors, with the renewals: it holds a few dozen
 * connections at most and none for long, so no client of the port can starve the renewals; and
 * it answers only requests addressed to it by IP address, localhost or the name it listens on,
 * which is what DNS rebinding cannot forge (docs/metrics.md, "Who may connect"; docs/security.md).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo, isIP } from 'node:net';
import { UsageError } from '../exit.js';
import { formatHostPort, type MetricsAddress } from './address.js';

export interface Answer {
  status: number;
  contentType: string;
  body: string;
  /** More headers: `Allow` on a 405. */
  headers?: Record<string, string>;
}

/** A route's answer, at once or soon: /livez waits for the renewal loop, bounded. */
export type Route = () => Answer | Promise<Answer>;

export interface MetricsServer {
  /** Where it listens, `host:port`, the port picked when 0 was asked for. */
  readonly address: string;
  close(): Promise<void>;
}

/** What the listener lets a client hold (docs/metrics.md, "Who may connect"). */
export interface ListenerLimits {
  /** Open connections at most; one more is closed as soon as it is accepted. */
  maxConnections: number;
  /** A connection must have sent a request's headers within this, from its start or its last answer. */
  headersTimeoutMs: number;
  /** And the whole request within this (a GET has no body: the headers are the request). */
  requestTimeoutMs: number;
  /** How often those two are checked: a connection outlives them by up to this. */
  checkIntervalMs: number;
  /** An idle connection between requests is closed after this. */
  keepAliveTimeoutMs: number;
  /** An answer the client does not read: the connection is closed after this without progress. */
  answerTimeoutMs: number;
}

/**
 * A few Prometheus servers and a kubelet need a handful of connections; a scrape's headers take
 * a packet. Under these, a client of the port holds at most 32 descriptors, none of them for more
 * than about 6 s unless it is being answered (docs/metrics.md).
 */
export const LISTENER_LIMITS: Readonly<ListenerLimits> = {
  maxConnections: 32,
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  checkIntervalMs: 1_000,
  keepAliveTimeoutMs: 2_000,
  answerTimeoutMs: 10_000,
};

const TEXT = 'text/plain; charset=utf-8';

export const text = (status: number, body: string): Answer => ({ status, contentType: TEXT, body: `${body}\n` });

/** Why a listen failed, in words; the address is named by the caller. */
function listenFailure(error: NodeJS.ErrnoException): string {
  switch (error.code) {
    case 'EADDRINUSE':
      return 'the port is in use';
    case 'EACCES':
      return 'permission denied (ports below 1024 need privileges)';
    case 'EADDRNOTAVAIL':
      return 'no interface of this machine has that address';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'the host name does not resolve';
    default:
      return error.message;
  }
}

/**
 * Whether a request's Host names this listener in a way DNS rebinding cannot: an IP literal,
 * `localhost`, or the host name it was told to listen on. A page of another site that made its
 * name resolve to this machine sends that name as Host; refusing it keeps /metrics (lease ids
 * included, with --metrics-per-lease) out of the page's reach. A request with no Host (HTTP/1.0)
 * does not come from a browser; node refuses an HTTP/1.1 one itself.
 */
export function isAllowedHost(host: string | undefined, listenHost: string | undefined): boolean {
  if (host === undefined) return true;
  const bracketed = /^\[([^\]]*)\](?::[0-9]*)?$/.exec(host);
  if (bracketed) return isIP(bracketed[1] as string) === 6;
  const named = /^([^:]*)(?::[0-9]*)?$/.exec(host);
  if (!named) return false;
  const name = (named[1] as string).toLowerCase();
  if (name === '') return false;
  if (isIP(name) === 4 || name === 'localhost') return true;
  return listenHost !== undefined && isIP(listenHost) === 0 && name === listenHost.toLowerCase();
}

export async function serveMetrics(
  address: MetricsAddress,
  routes: Record<string, Route>,
  limits: Readonly<ListenerLimits> = LISTENER_LIMITS,
): Promise<MetricsServer> {
  const server: Server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: limits.checkIntervalMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
    },
    (request, response) => {
      const send = (answered: Answer): void => sendAnswer(request, response, answered, limits.answerTimeoutMs);
      if (!isAllowedHost(request.headers.host, address.host)) return send(text(421, MISDIRECTED));
      answer(routes, request, send);
    },
  );
  // Past the cap node closes a new connection as it accepts it: one descriptor for a moment.
  server.maxConnections = limits.maxConnections;
  // A scrape's keep-alive connection must not hold the process after the watch ends.
  server.unref();
  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException): void => {
      reject(
        new UsageError(
          `--metrics-address ${address.text}: cannot listen: ${listenFailure(error)}`,
          'choose another [host]:port, or :0 for a free port',
        ),
      );
    };
    server.once('error', onError);
    server.listen({ host: address.host, port: address.port }, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  return {
    address: formatHostPort(bound.address, bound.port),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const MISDIRECTED =
  'misdirected request: this listener answers requests addressed to an IP address, to localhost or to the host ' +
  'name given to --metrics-address; scrape it by address (docs/metrics.md)';

function sendAnswer(
  request: IncomingMessage,
  response: ServerResponse,
  { status, contentType, body, headers }: Answer,
  answerTimeoutMs: number,
): void {
  if (response.destroyed) return;
  // From the answer on, not before: /livez may wait a renewal interval for the loop. Once the
  // answer is handed to the system, node's keep-alive timeout takes over.
  response.setTimeout(answerTimeoutMs);
  response.writeHead(status, { ...headers, 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  response.end(request.method === 'HEAD' ? undefined : body);
}

function answer(routes: Record<string, Route>, request: IncomingMessage, send: (answered: Answer) => void): void {
  const path = (request.url ?? '/').split('?', 1)[0] as string;
  const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
  if (!route) return send(text(404, `not found: ${path} (try ${Object.keys(routes).join(', ')})`));
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    return send({ ...text(405, `${request.method} is not allowed: GET ${path}`), headers: { Allow: 'GET, HEAD' } });
  }
  try {
    const answered = route();
    if (answered instanceof Promise) {
      answered.then(send, (error: unknown) => send(text(500, `internal error: ${String(error)}`)));
    } else {
      send(answered);
    }
  } catch (error) {
    send(text(500, `internal error: ${String(error)}`));
  }
}
