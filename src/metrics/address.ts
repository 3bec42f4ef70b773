/**
 * `--metrics-address <[host]:port>`, read as Go tools read a listen address: `:9464` listens on
 * every interface, `127.0.0.1:9464` on loopback only, `[::1]:9464` on IPv6's loopback, and port
 * 0 picks a free port (docs/metrics.md).
 */
import { UsageError } from '../exit.js';

export interface MetricsAddress {
  /** As given, for messages. */
  text: string;
  /** undefined: every interface. */
  host: string | undefined;
  port: number;
}

const ADDRESS = /^(?:\[([^\]]*)\]|([^:[\]]*)):([0-9]+)$/;

export function parseMetricsAddress(text: string): MetricsAddress {
  const match = ADDRESS.exec(text);
  const example = 'give [host]:port: :9464 (every interface), 127.0.0.1:9464 (loopback), :0 (a free port)';
  if (!match) throw new UsageError(`--metrics-address ${JSON.stringify(text)} is not [host]:port`, example);
  const [, bracketed, plain, digits] = match as unknown as [string, string | undefined, string | undefined, string];
  const port = Number(digits);
  if (digits.length > 5 || port > 65_535) {
    throw new UsageError(`--metrics-address ${JSON.stringify(text)}: port ${digits} is out of range (0 to 65535)`);
  }
  const host = bracketed ?? plain;
  if (bracketed !== undefined && !bracketed.includes(':')) {
    throw new UsageError(`--metrics-address ${JSON.stringify(text)}: brackets are for IPv6 addresses`, example);
  }
  return { text, host: host === '' ? undefined : host, port };
}

/** How the listener's own address is written: `127.0.0.1:9464`, `[::1]:9464`. */
export function formatHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
