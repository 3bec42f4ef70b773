/**
 * The two implementations of the broker's transport (src/broker/transport.ts): undici for runs
 * that send many requests, node:http for a few (src/commands/globals.ts chooses). Every behaviour
 * test of a transport runs against both.
 */
import { NodeHttpTransport, type NodeHttpTransportOptions } from '../../src/broker/node-http-transport.js';
import type { Transport } from '../../src/broker/transport.js';
import { UndiciTransport } from '../../src/broker/undici-transport.js';

export type TransportName = 'undici' | 'node:http';
export const TRANSPORTS: readonly TransportName[] = ['undici', 'node:http'];

/** The options both take (undici's proxy is undici's own, tested on its own). */
export function makeTransport(name: TransportName, options: NodeHttpTransportOptions = {}): Transport {
  return name === 'undici' ? new UndiciTransport(options) : new NodeHttpTransport(options);
}
