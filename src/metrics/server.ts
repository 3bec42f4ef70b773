/**
 * The HTTP listener of `--metrics-address`: a few GET routes, each answered from what the process
 * already holds, never by waiting on the broker (docs/metrics.md). It is bound before anything is
 * sent to the broker, so a bad address is a usage error with nothing done; it never keeps the
 * process alive by itself, and close() ends it with every connection.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UsageError } from '../exit.js';
import { formatHostPort, type MetricsAddress } from './address.js';

export interface Answer {
  status: number;
  contentType: string;
  body: string;
}

/** A route's answer, at once or soon: /livez waits for the renewal loop, bounded. */
export type Route = () => Answer | Promise<Answer>;

export interface MetricsServer {
  /** Where it listens, `host:port`, the port picked when 0 was asked for. */
  readonly address: string;
  close(): Promise<void>;
}

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

export async function serveMetrics(address: MetricsAddress, routes: Record<string, Route>): Promise<MetricsServer> {
  const server: Server = createServer((request, response) => answer(routes, request, response));
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

function answer(routes: Record<string, Route>, request: IncomingMessage, response: ServerResponse): void {
  const path = (request.url ?? '/').split('?', 1)[0] as string;
  const send = ({ status, contentType, body }: Answer): void => {
    if (response.destroyed) return;
    response.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
    response.end(request.method === 'HEAD' ? undefined : body);
  };
  const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
  if (!route) return send(text(404, `not found: ${path} (try ${Object.keys(routes).join(', ')})`));
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.setHeader('Allow', 'GET, HEAD');
    return send(text(405, `${request.method} is not allowed: GET ${path}`));
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
