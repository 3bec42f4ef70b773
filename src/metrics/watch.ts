/**
 * `lease watch --metrics-address`: the series of a watch, fed by the scheduler's events and
 * attempts (renewal/events.ts, renewal/scheduler.ts) and the supervisor's notices, and the
 * probes /livez and /readyz (docs/metrics.md). Nothing here waits on the broker: a scrape in an
 * outage answers at once from what the watch already knows.
 */
import type { Clock } from '../clock.js';
import { formatDuration } from '../output/duration.js';
import type { WatchEvent } from '../renewal/events.js';
import type { AttemptOutcome, WatchStatus } from '../renewal/scheduler.js';
import type { SupervisorNotice } from '../watch/supervisor.js';
import type { MetricsAddress } from './address.js';
import { baseRegistry, Buckets, loadPromClient, metricsRoute, registerComputed, type Sample } from './registry.js';
import { serveMetrics, text, type Answer } from './server.js';

/** What the probes and the gauges read of the watch: the scheduler, structurally. */
export interface WatchSource {
  status(): WatchStatus;
  /** The loop has started and not ended. */
  readonly running: boolean;
  /** Resolves at the loop's next turn (RenewalScheduler.heartbeat). */
  heartbeat(): Promise<void>;
}

export interface WatchMetricsOptions {
  address: MetricsAddress;
  /** --metrics-per-lease: one series per lease (a watch may hold 10,000). */
  perLease: boolean;
  leaseCount: number;
  /** The renewal interval: /livez's deadline for the loop to answer. */
  everyMs: number;
  /** A command is supervised: its series are served. */
  command: boolean;
  clock: Clock;
}

export interface WatchMetrics {
  readonly address: string;
  /** The scheduler, once made; the probes answer 503 before. */
  attach(source: WatchSource): void;
  event(event: WatchEvent): void;
  attempt(outcome: AttemptOutcome): void;
  notice(notice: SupervisorNotice): void;
  close(): Promise<void>;
}

/** Renewals take milliseconds on a healthy broker, up to --timeout (10s) on a failing one. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export async function serveWatchMetrics(options: WatchMetricsOptions): Promise<WatchMetrics> {
  const prom = await loadPromClient();
  const { clock } = options;
  const registry = baseRegistry(prom);
  let source: WatchSource | null = null;

  // Counted in plain numbers, read when scraped: a renewal costs additions, not prom-client calls.
  const renewals = { renewed: 0, not_renewed: 0, error: 0 };
  const durations = new Buckets(DURATION_BUCKETS);
  let retries = 0;
  let outages = 0;
  registerComputed(
    registry,
    {
      name: 'queenctl_renewals_total',
      help: 'Renewal requests by result: renewed, not_renewed (the broker renewed nothing: the lease is lost), error.',
      type: 'counter',
    },
    () => Object.entries(renewals).map(([result, value]) => ({ labels: { result }, value })),
  );
  registerComputed(
    registry,
    {
      name: 'queenctl_renewal_duration_seconds',
      help: 'Time from sending a renewal request to its answer or failure.',
      type: 'histogram',
    },
    () => durations.samples('queenctl_renewal_duration_seconds'),
  );
  registerComputed(
    registry,
    {
      name: 'queenctl_retries_total',
      help: 'Renewals retried after a failure (not the outage probes, which retry for every lease at once).',
      type: 'counter',
    },
    () => [{ labels: {}, value: retries }],
  );
  registerComputed(
    registry,
    {
      name: 'queenctl_outages_total',
      help: 'Outages: the broker failed every lease at once, and renewals waited for it.',
      type: 'counter',
    },
    () => [{ labels: {}, value: outages }],
  );
  let brokerUp = 0;
  new prom.Gauge({
    name: 'queenctl_broker_up',
    help: '1 once the broker has answered a renewal, 0 before and during an outage.',
    registers: [registry],
    collect() {
      this.set(brokerUp);
    },
  });
  new prom.Gauge({
    name: 'queenctl_leases',
    help: 'Leases by state: held (renewed and in time), lost, outage (held, waiting out an outage).',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const status = source?.status();
      const outage = Boolean(status?.outage);
      this.set({ state: 'held' }, status && !outage ? status.held : 0);
      this.set({ state: 'outage' }, status && outage ? status.held : 0);
      this.set({ state: 'lost' }, status?.lost ?? 0);
    },
  });
  registerComputed(
    registry,
    {
      name: 'queenctl_lease_min_remaining_seconds',
      help: 'The least time left across held leases, in seconds; absent while none is held.',
      type: 'gauge',
    },
    () => {
      const earliest = source?.status().earliestDeadline ?? null;
      return earliest === null ? [] : [{ labels: {}, value: Math.max(0, (earliest - clock.now()) / 1000) }];
    },
  );

  /** --metrics-per-lease: each held lease's local deadline, from its renewed events. */
  const deadlines = options.perLease ? new Map<string, number>() : null;
  if (deadlines) {
    registerComputed(
      registry,
      {
        name: 'queenctl_lease_remaining_seconds',
        help: 'Time left of each held lease, in seconds (--metrics-per-lease).',
        type: 'gauge',
      },
      () => {
        const now = clock.now();
        const samples: Sample[] = [];
        for (const [leaseId, deadline] of deadlines)
          samples.push({ labels: { lease_id: leaseId }, value: Math.max(0, (deadline - now) / 1000) });
        return samples;
      },
    );
  }

  let commandRunning = 0;
  let commandExit: number | null = null;
  if (options.command) {
    new prom.Gauge({
      name: 'queenctl_command_running',
      help: '1 while the command given after -- runs, else 0.',
      registers: [registry],
      collect() {
        this.set(commandRunning);
      },
    });
    registerComputed(
      registry,
      {
        name: 'queenctl_command_exit_code',
        help: "The command's exit status once it has ended (128 + the signal's number when a signal ended it).",
        type: 'gauge',
      },
      () => (commandExit === null ? [] : [{ labels: {}, value: commandExit }]),
    );
  }

  const livez = async (): Promise<Answer> => {
    if (!source?.running) return text(503, 'the renewal loop is not running');
    const deadline = new AbortController();
    const answered = await Promise.race([
      source.heartbeat().then(() => true),
      clock.sleep(options.everyMs, deadline.signal).then(
        () => false,
        () => false,
      ),
    ]);
    deadline.abort();
    return answered
      ? text(200, 'ok: the renewal loop answered')
      : text(503, `the renewal loop did not answer within a renewal interval (${formatDuration(options.everyMs)})`);
  };
  const readyz = (): Answer => {
    const status = source?.status();
    if (!status) return text(503, 'the watch has not started');
    const total = options.leaseCount;
    if (status.lost > 0) return text(503, `${status.lost} of ${total} leases lost`);
    if (status.watching < total) return text(503, `${total - status.watching} of ${total} leases no longer watched`);
    if (status.held < total) return text(503, `${total - status.held} of ${total} leases not renewed yet`);
    return text(200, `ok: ${total} of ${total} leases held`);
  };

  const server = await serveMetrics(options.address, {
    '/metrics': metricsRoute(registry, clock),
    '/livez': livez,
    '/readyz': readyz,
  });
  return {
    address: server.address,
    attach(watched) {
      source = watched;
    },
    event(event) {
      switch (event.event) {
        case 'renewed':
          deadlines?.set(event.leaseId, clock.now() + event.remainingMs);
          return;
        case 'retry':
          retries++;
          return;
        case 'lost':
        case 'stopped':
          deadlines?.delete(event.leaseId);
          return;
        case 'outage':
          brokerUp = 0;
          outages++;
          return;
        case 'recovered':
          brokerUp = 1;
          return;
      }
    },
    attempt(outcome) {
      renewals[outcome.result]++;
      durations.observe(outcome.durationMs / 1000);
      if (outcome.result !== 'error') brokerUp = 1;
    },
    notice(notice) {
      if (notice.kind === 'started') commandRunning = 1;
      if (notice.kind === 'exited' || notice.kind === 'start-failed') {
        commandRunning = 0;
        commandExit = notice.exit.status;
      }
    },
    close: () => server.close(),
  };
}
