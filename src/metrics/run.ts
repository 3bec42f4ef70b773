/**
 * `lease run --metrics-address`: the series of a consumer and its probes (docs/metrics.md, "Series
 * of lease run"). Built as the watch's are (watch.ts): the same listener, prom-client loaded only
 * here, counts kept in plain numbers and read when scraped, and nothing served waits on the broker.
 * The run tells it what happened (a batch taken, messages acked, a pop answered or not); it
 * decides nothing.
 */
import type { Clock } from '../clock.js';
import type { MetricsAddress } from './address.js';
import { Buckets, baseRegistry, loadPromClient, metricsRoute, registerComputed } from './registry.js';
import { serveMetrics, text, type Answer } from './server.js';

export interface RunMetricsOptions {
  address: MetricsAddress;
  clock: Clock;
  /** --parallel: served as queenctl_run_parallel, the most batches the run holds at once. */
  parallel: number;
}

/** What came of one pop: a batch, nothing to take, every partition held by others, no answer. */
export type RunPopResult = 'batch' | 'empty' | 'held' | 'error';

export type RunMessageStatus = 'completed' | 'retry' | 'failed' | 'dlq';

export interface RunMetrics {
  readonly address: string;
  /** A pop handed the run a batch, under a lease of its own. */
  batchTaken(): void;
  /** Messages the broker acked with this status (`dlq`: it dead-lettered them). */
  messages(status: RunMessageStatus, count: number): void;
  /** A lease was lost while its command ran. */
  leaseLost(): void;
  /** Commands running now, one per batch. */
  inFlight(batches: number): void;
  /** A command ended, after this many seconds. */
  commandEnded(seconds: number): void;
  /** A pop's result; `error`: the broker did not answer it. */
  pop(result: RunPopResult): void;
  /** The run waits out an outage of the broker (true), or it has ended (false). */
  outage(down: boolean): void;
  close(): Promise<void>;
}

/** A command runs for a fraction of a second (a webhook) to an hour (a report). */
const COMMAND_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

const POP_RESULTS: readonly RunPopResult[] = ['batch', 'empty', 'held', 'error'];
const MESSAGE_STATUSES: readonly RunMessageStatus[] = ['completed', 'retry', 'failed', 'dlq'];

export async function serveRunMetrics(options: RunMetricsOptions): Promise<RunMetrics> {
  const prom = await loadPromClient();
  const registry = baseRegistry(prom);

  // Every label value from the start at 0: a rate over a series that appears with its first
  // increment misses that increment, and an alert on dlq must see the step from 0 to 1.
  const pops: Record<RunPopResult, number> = { batch: 0, empty: 0, held: 0, error: 0 };
  const acked: Record<RunMessageStatus, number> = { completed: 0, retry: 0, failed: 0, dlq: 0 };
  const commandSeconds = new Buckets(COMMAND_BUCKETS);
  let batches = 0;
  let leasesLost = 0;
  let inFlight = 0;
  let brokerUp = 0;
  /** The last pop's result; null before the first. */
  let lastPop: RunPopResult | null = null;
  let failedPops = 0;
  let down = false;

  registerComputed(
    registry,
    { name: 'queenctl_run_batches_total', help: 'Batches taken: pops that handed the run a batch.', type: 'counter' },
    () => [{ labels: {}, value: batches }],
  );
  registerComputed(
    registry,
    {
      name: 'queenctl_run_messages_total',
      help: 'Messages acked, by status: completed, retry, failed, dlq (the broker dead-lettered them).',
      type: 'counter',
    },
    () => MESSAGE_STATUSES.map((status) => ({ labels: { status }, value: acked[status] })),
  );
  registerComputed(
    registry,
    {
      name: 'queenctl_run_leases_lost_total',
      help: 'Leases lost while their command ran (the command was stopped, nothing acked: the batch comes back).',
      type: 'counter',
    },
    () => [{ labels: {}, value: leasesLost }],
  );
  registerComputed(
    registry,
    {
      name: 'queenctl_run_pops_total',
      help: 'Pops by result: batch, empty (nothing to take), held (other consumers hold the partitions), error.',
      type: 'counter',
    },
    () => POP_RESULTS.map((result) => ({ labels: { result }, value: pops[result] })),
  );
  registerComputed(
    registry,
    {
      name: 'queenctl_run_command_seconds',
      help: 'How long each command ran, from its start to its end.',
      type: 'histogram',
    },
    () => commandSeconds.samples('queenctl_run_command_seconds'),
  );
  registerComputed(
    registry,
    { name: 'queenctl_run_in_flight', help: 'Commands running now, one per batch.', type: 'gauge' },
    () => [{ labels: {}, value: inFlight }],
  );
  registerComputed(
    registry,
    { name: 'queenctl_run_parallel', help: 'The most batches the run holds at once (--parallel).', type: 'gauge' },
    () => [{ labels: {}, value: options.parallel }],
  );
  registerComputed(
    registry,
    {
      name: 'queenctl_run_broker_up',
      help: '1 once the broker has answered a pop, 0 before that and while the run waits out an outage.',
      type: 'gauge',
    },
    () => [{ labels: {}, value: brokerUp }],
  );

  // The process answers: the run is alive. A consumer's loop waits on pops and commands that
  // may each take minutes, so there is no turn of it to wait for here, unlike a watch's.
  const livez = (): Answer => text(200, `ok: the run is alive, ${inFlight} of ${options.parallel} batches running`);
  const readyz = (): Answer => {
    if (lastPop === null) return text(503, 'no pop has been answered yet');
    if (lastPop === 'error') {
      return text(503, `the broker did not answer the last ${failedPops === 1 ? 'pop' : `${failedPops} pops`}`);
    }
    if (down) return text(503, 'the broker is down: the run waits out the outage');
    return text(200, `ok: the broker answered the last pop (${lastPop})`);
  };

  const server = await serveMetrics(options.address, {
    '/metrics': metricsRoute(registry, options.clock),
    '/livez': livez,
    '/readyz': readyz,
  });
  return {
    address: server.address,
    batchTaken() {
      batches++;
    },
    messages(status, count) {
      if (count > 0) acked[status] += count;
    },
    leaseLost() {
      leasesLost++;
    },
    inFlight(running) {
      inFlight = Math.max(0, running);
    },
    commandEnded(seconds) {
      commandSeconds.observe(Math.max(0, seconds));
    },
    pop(result) {
      pops[result]++;
      lastPop = result;
      if (result === 'error') {
        failedPops++;
        return;
      }
      // An answer is the broker up, whatever outage was reported before it.
      failedPops = 0;
      down = false;
      brokerUp = 1;
    },
    outage(isDown) {
      down = isDown;
      brokerUp = isDown ? 0 : 1;
    },
    close: () => server.close(),
  };
}
