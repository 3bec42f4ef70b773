/** What every verb gets besides its options: streams, the broker client, time, cancellation. */
import type { BrokerClient } from '../broker/client.js';
import type { Clock } from '../clock.js';
import type { IO } from '../io.js';

export interface Runtime {
  io: IO;
  client: Pick<BrokerClient, 'extend' | 'server'>;
  clock: Clock;
  /** Aborted by SIGINT/SIGTERM: verbs stop issuing requests and report what was done. */
  signal: AbortSignal;
}
