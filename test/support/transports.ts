/**
 * The implementations of the broker's transport (src/broker/transport.ts): undici for runs that
 * send many requests, node:net for a few to an http origin, node:http for a few to an https one
 * (src/commands/globals.ts chooses). Every behaviour test of a transport runs against each.
 */
import { NetTransport } from '../../src/broker/net-transport.js';
import { NodeHttpTransport, type NodeHttpTransportOptions } from '../../src/broker/node-http-transport.js';
import type { Transport } from '../../src/broker/transport.js';
import { UndiciTransport } from '../../src/broker/undici-transport.js';

export type TransportName = 'undici' | 'node:http' | 'node:net';
export const TRANSPORTS: readonly TransportName[] = ['undici', 'node:http', 'node:net'];

/** The options both take (undici's proxy is undici's own, tested on its own). */
export function makeTransport(name: TransportName, options: NodeHttpTransportOptions = {}): Transport {
  if (name === 'undici') return new UndiciTransport(options);
  return name === 'node:http' ? new NodeHttpTransport(options) : new NetTransport(options);
}
