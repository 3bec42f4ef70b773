/**
 * A forward proxy for tests: CONNECT tunnels (what undici uses for http and https targets) and
 * plain absolute-URI requests; a tunnel to a target it cannot reach is refused with a 502. It
 * records every target it was asked for, and can send every tunnel to one place (`divert`), so a
 * broker URL with a name that resolves nowhere still reaches the simulator: proof that the
 * request went through the proxy and not around it.
 */
import http from 'node:http';
import net, { type Socket } from 'node:net';

export interface TestProxy {
  url: string;
  /** `host:port` of each CONNECT, or the absolute URI of each forwarded request. */
  readonly targets: string[];
  /** How many connections were made to the proxy. */
  readonly connections: number;
  /**
   * What clients sent the proxy, as Latin-1: each request line and its headers, bodies and the
   * bytes of every tunnel (a token sent through the proxy, in clear text, shows here).
   */
  received(): string;
  close(): Promise<void>;
}

export async function startProxy(divert?: { host: string; port: number }): Promise<TestProxy> {
  const targets: string[] = [];
  const sockets = new Set<Socket>();
  const chunks: Buffer[] = [];
  let connections = 0;
  const server = http.createServer((req, res) => {
    targets.push(req.url ?? '');
    chunks.push(Buffer.from(`${req.method} ${req.url}\n${req.rawHeaders.join('\n')}\n`, 'latin1'));
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    const target = new URL(req.url ?? '');
    const upstream = http.request(
      {
        host: divert?.host ?? target.hostname,
        port: divert?.port ?? target.port,
        path: target.pathname + target.search,
        method: req.method,
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.on('connection', (socket: Socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('connect', (req, client: Socket, head: Buffer) => {
    targets.push(req.url ?? '');
    chunks.push(Buffer.from(`CONNECT ${req.url}\n${req.rawHeaders.join('\n')}\n`, 'latin1'), head);
    client.on('data', (chunk: Buffer) => chunks.push(chunk));
    const [host, port] = (req.url ?? '').split(':');
    let established = false;
    const upstream = net.connect(divert?.port ?? Number(port), divert?.host ?? host, () => {
      established = true;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    // A target it cannot reach (a name that resolves nowhere, a closed port) is answered 502, as
    // a forward proxy does; hanging up instead left the client waiting out its whole --timeout.
    upstream.on('error', () => {
      if (established) client.destroy();
      else client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
    });
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    targets,
    get connections() {
      return connections;
    },
    received: () => Buffer.concat(chunks).toString('latin1'),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
