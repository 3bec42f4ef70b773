/**
 * A TCP relay in front of a broker (the simulator) that can refuse connections for a while, as a
 * broker that is down does: it stops listening, so connecting gets ECONNREFUSED from the kernel,
 * and the connections open at that moment are cut. Then it listens again on the same port.
 */
import net, { type Server, type Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';

export interface TcpFront {
  readonly url: string;
  /** Connections accepted so far (refused ones never reach it). */
  readonly accepted: number;
  /**
   * Refuses connections for `ms` (or until the promise settles: an outage that lasts until a
   * test has seen what it waits for) and cuts the open ones; resolves once it listens again.
   */
  refuse(ms: number | Promise<unknown>): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpFront(target: { host: string; port: number }): Promise<TcpFront> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let closing = false;
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  const newServer = (): Server =>
    net.createServer((client) => {
      accepted++;
      const upstream = net.connect(target.port, target.host);
      track(client);
      track(upstream);
      client.pipe(upstream).pipe(client);
      const cut = (): void => {
        client.destroy();
        upstream.destroy();
      };
      client.once('error', cut).once('close', cut);
      upstream.once('error', cut).once('close', cut);
    });
  let server = newServer();
  const listen = (port: number): Promise<void> =>
    new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  const stop = (): Promise<void> => {
    const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    return stopped;
  };
  await listen(0);
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    get accepted() {
      return accepted;
    },
    async refuse(ms) {
      await stop();
      if (typeof ms === 'number') await delay(ms);
      else await ms.catch(() => {});
      // The port was free for a while: an outgoing connection may hold it as its own for a moment.
      for (;;) {
        if (closing) return;
        server = newServer();
        try {
          return await listen(port);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
          await delay(100);
        }
      }
    },
    async close() {
      closing = true;
      await stop();
    },
  };
}
