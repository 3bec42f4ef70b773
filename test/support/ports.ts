import net from 'node:net';

/**
 * Ports with nothing listening: connections to them are refused at once. The ports are held
 * together before any is let go, so two of them are never the same port (the kernel hands a port
 * just closed to the next listen(0) more often than one might think).
 */
export async function deadPorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => net.createServer());
  await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))));
  const ports = servers.map((server) => (server.address() as net.AddressInfo).port);
  await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  return ports;
}

/** One port with nothing listening. */
export async function deadPort(): Promise<number> {
  const [port] = await deadPorts(1);
  return port as number;
}
