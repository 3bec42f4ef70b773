/** What every verb gets besides its options: streams, the broker client, time, cancellation. */
import type { BrokerClient } from '../broker/client.js';
import type { Clock } from '../clock.js';
import type { IO } from '../io.js';

/** `client` is what a verb uses of the broker; the real one (globals.ts) has every route. */
export interface Runtime<Client = Pick<BrokerClient, 'extend' | 'server'>> {
  io: IO;
  client: Client;
  clock: Clock;
  /** Aborted by SIGINT, SIGTERM or SIGHUP (its reason): verbs stop issuing requests and report what was done. */
  signal: AbortSignal;
}
