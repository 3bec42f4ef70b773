/**
 * `queenctl lease run <queue> [acquire options] -- <command> [args...]`: a consumer in one line
 * (docs/cli-contract.md#lease-run). This file is the verb: its flags, help and wiring. The
 * consumer itself, a batch's life (take, deliver, settle), each message's outcome, the rule that
 * turns outcomes into acks and the retry policy, lives in src/consumer/.
 */
import { Command, Option } from 'commander';
import { parseCount } from '../../args.js';
import { monotonicClock } from '../../clock.js';
import { Consumer, type ConsumerOptions, type ConsumerRuntime } from '../../consumer/consumer.js';
import { INPUTS, type InputMode } from '../../consumer/delivery.js';
import {
  DEFAULT_GIVE_UP_AFTER,
  DEFAULT_RETRY_DELAY_MS,
  MAX_RETRY_DELAY_MS,
  ON_FAILURE,
  type OnFailure,
} from '../../consumer/retry-policy.js';
import { UsageError } from '../../exit.js';
import { checkName } from '../../names.js';
import { isJsonPath } from '../../output/format.js';
import { metricsServedNote, watchOutputMode } from '../../output/watch.js';
import { write } from '../../io.js';
import { parseMetricsAddress, type MetricsAddress } from '../../metrics/address.js';
import type { RunMetrics } from '../../metrics/run.js';
import { flagParser, type GlobalContext, type Settings, type VerbProcess } from '../globals.js';
import type { Runtime } from '../runtime.js';
import { acquireRequest, addAcquireOptions } from './acquire.js';
import { durationOption, exitCodesHelp, retriesOption, secondsOption } from './options.js';
import { DEFAULT_KILL_AFTER_MS } from './watch.js';

/** The most batches `--batches` takes; `--until-empty` and `--follow` have no limit. */
export const MAX_BATCHES = 1_000_000;
/** The most batches at once: each is a command, a lease and a guardian's watch. */
export const MAX_PARALLEL = 256;
/** --follow's long poll when --wait is not given: a pop that finds nothing waits this long. */
export const FOLLOW_WAIT_MS = 30_000;

interface RunFlags {
  group?: string;
  partition?: string;
  batch?: number;
  partitions?: number;
  wait?: number;
  seconds: number;
  every?: number;
  killAfter: number;
  onFailure: OnFailure;
  retryDelay: number;
  input: InputMode;
  batches?: number;
  untilEmpty?: boolean;
  follow?: boolean;
  parallel: number;
  drain?: number;
  metricsAddress?: MetricsAddress;
  giveUpAfter: number;
  retries: number;
}

export function runCommand(globals: GlobalContext): Command {
  const command = new Command('run')
    .description('a consumer in one line: take a batch, run a command on it with the lease renewed, ack it')
    .argument('<queue>', 'the queue to pop from')
    .argument('[command...]', 'after --: the command to run for each batch, and its arguments')
    .usage('<queue> [options] -- <command> [args...]');
  return addAcquireOptions(command)
    .addOption(secondsOption('60', 'each renewal extends to now + seconds on the broker clock (1 to 2147483647)'))
    .addOption(durationOption('--every <duration>', 'renew this often (default: a third of --seconds)'))
    .addOption(
      durationOption('--kill-after <duration>', 'SIGKILL the command this long after SIGTERM').default(
        DEFAULT_KILL_AFTER_MS,
        '10s',
      ),
    )
    .addOption(
      new Option('--input <mode>', 'stdin: the messages on standard input, one JSON line each; none: in the file only')
        .choices(INPUTS)
        .default('stdin'),
    )
    .addOption(
      durationOption(
        '--retry-delay <duration>',
        'wait before a retry, doubling per retry of a message up to 1m',
      ).default(DEFAULT_RETRY_DELAY_MS, '1s'),
    )
    .addOption(
      new Option(
        '--give-up-after <n>',
        'a message that failed alone n times in this run is acked as --on-failure says (1 to 1000)',
      )
        .default(DEFAULT_GIVE_UP_AFTER)
        .argParser(flagParser((text) => parseCount(text, '--give-up-after', 1, 1000))),
    )
    .addOption(
      new Option('--on-failure <status>', 'then: retry (pending; the run ends) or failed (to the dead-letter queue)')
        .choices(ON_FAILURE)
        .default('retry'),
    )
    .addOption(
      new Option('--batches <n>', `take this many batches, one after another (1 to ${MAX_BATCHES}; default 1)`)
        .argParser(flagParser((text) => parseCount(text, '--batches', 1, MAX_BATCHES)))
        .conflicts('untilEmpty'),
    )
    .addOption(new Option('--until-empty', 'take batches until a pop finds nothing to take').conflicts('follow'))
    .addOption(
      new Option(
        '--follow',
        'never end on an empty queue: a worker, until SIGTERM or SIGINT (--wait defaults to 30s)',
      ).conflicts(['batches', 'untilEmpty']),
    )
    .addOption(
      new Option(
        '--parallel <n>',
        `up to n batches at once, each with its own lease and command (1 to ${MAX_PARALLEL})`,
      )
        .default(1)
        .argParser(flagParser((text) => parseCount(text, '--parallel', 1, MAX_PARALLEL))),
    )
    .addOption(
      durationOption(
        '--drain <duration>',
        'on the first SIGTERM or SIGINT, let running commands end by themselves this long before forwarding it',
      ),
    )
    .addOption(
      new Option(
        '--metrics-address <[host]:port>',
        'serve Prometheus metrics, /livez and /readyz there (:9464 every interface, :0 a free port)',
      ).argParser(flagParser(parseMetricsAddress)),
    )
    .addOption(retriesOption('retries of a pop that never reached the broker (connection refused, host not found)'))
    .addHelpText(
      'after',
      `
How it works: a pop as lease acquire takes it (never autoAck), renewed at once to --seconds.
The command starts once the lease is renewed, in its own process group, with the messages on
its standard input, one JSON object per line, each as the broker sent it (--input none: nothing
on standard input). Its environment: QUEEN_LEASE_ID, QUEEN_QUEUE, QUEEN_CONSUMER_GROUP,
QUEEN_BATCH_FILE (the batch record, in a directory of its own only you can read, removed
afterwards), QUEEN_RESULTS_FILE and QUEEN_PARTITIONS (space-separated; unset when a name holds
spaces, quotes, glob or control characters). Never the token. While it runs the lease is renewed
exactly as lease watch renews it.

Each message's outcome: the command may append a line per message to QUEEN_RESULTS_FILE,
  {"transactionId":"...","status":"completed|retry|failed","error":"..."}
(the last line about a message wins). A message without one is completed when the command exited
0 and its line on standard input was written; otherwise it did not succeed.

How the broker is told, per partition in the broker's order: completed up to the first message
that did not succeed, that message's outcome, nothing after it (it comes back with it): the
broker's cursor would otherwise skip a retried message for good. A message that did not succeed
is acked retry after --retry-delay (doubling per retry, at most ${MAX_RETRY_DELAY_MS / 1000}s), the lease held
meanwhile; one the command reported failed is acked failed. A batch that failed without saying
which runs again in halves, under its lease, until the failing message is alone; one that failed
alone --give-up-after times is acked as --on-failure says. A lost lease stops the command
(SIGTERM, then SIGKILL after --kill-after) and acks nothing.

How long: one batch (--batches n: n), --until-empty, or --follow: a worker that never ends on an
empty queue (a pop long-polls --wait, 30s unless given), rides out broker outages, and counts a
lost lease or a failed command and goes on. --parallel n runs up to n batches at once, each with
its own lease and command; their output lines pass through whole, never cut into each other.

Signals: the first SIGINT, SIGTERM or SIGHUP takes no further batch and goes to the commands'
process groups: at once, or with --drain d once they had d to end by themselves. Every batch is
acked by its outcomes (retry for what the signal cut short) before queenctl exits; --follow then
exits 0. A second signal also abandons the acks in flight. Should queenctl die, even by SIGKILL,
a guardian stops the commands.

Metrics: --metrics-address serves /metrics (queenctl_run_batches_total,
queenctl_run_messages_total{status}, queenctl_run_leases_lost_total, queenctl_run_in_flight,
queenctl_run_command_seconds, queenctl_run_pops_total{result}, queenctl_run_broker_up), /livez
and /readyz (ready once the last pop was answered), as lease watch serves its own.

Output: -o json or -o ndjson streams lease watch's events on stdout, plus acquired (leaseId,
queue, partitions, messages), acked (leaseId, exitStatus, completed, retry, failed, dlq,
refused, pending) and empty (queue); the command's stdout then goes to stderr. Otherwise one line
per step on stderr. The command's own status is in the output, never queenctl's.

${exitCodesHelp({
  ok:
    'every message taken was acked completed (--until-empty: then a pop found nothing);\n' +
    '     --follow: stopped by a signal with every batch settled',
  broker: 'broker error, or an ack whose outcome is unknown (stderr says how to find out)',
  notHeld:
    'a lease was lost while its command ran (nothing acked), or an ack was refused for the\n' +
    '     lease; without --until-empty, a first pop that found nothing',
})}
  5  a message did not succeed: what was acked and what comes back is in the output
  126  the command cannot be executed (or its batch file written); 127 not found: batch acked retry

Examples:
  queenctl lease run orders --batch 10 -- ./process-orders.sh
  queenctl lease run orders --group billing --until-empty -- python3 handle.py
  queenctl lease run orders --batch 50 --on-failure failed -o ndjson -- ./job.sh > events.ndjson
  queenctl lease run orders --follow --parallel 4 --drain 60s -- ./worker.sh`,
    )
    .action(async (queue: string, _command: string[], flags: RunFlags, self: Command) => {
      await globals.run(
        self,
        (runtime, settings, proc) =>
          runConsumer(runOptions(queue, flags, settings, proc, runtime), flags, runtime as ConsumerRuntime, proc),
        // A run lasts as long as its batches: monotonic time, as watch (an NTP step moves no deadline).
        { requests: 'many', clock: monotonicClock, supervises: 'lease run' },
      );
    });
}

/** The options of a run from its command line; every usage error before anything is sent. */
function runOptions(
  queue: string,
  flags: RunFlags,
  settings: Settings,
  proc: VerbProcess,
  runtime: Runtime,
): ConsumerOptions {
  checkName(queue, 'queue', 'queue', true);
  const after = proc.argvAfterDashDash;
  if (after === null || after.length === 0 || after[0] === '') {
    throw new UsageError(
      'lease run needs the command to run for each batch after --',
      'queenctl lease run orders --batch 10 -- ./process-orders.sh',
    );
  }
  const { format } = settings;
  if (format === 'name' || format === 'yaml' || isJsonPath(format)) {
    throw new UsageError(
      `-o ${format === 'name' || format === 'yaml' ? format : 'jsonpath'} is not an output of lease run`,
      'use -o ndjson for one event per line',
    );
  }
  const output = watchOutputMode({
    format,
    outputGiven: settings.outputGiven,
    hasCommand: true,
    quiet: runtime.io.quiet,
    stderrIsTTY: Boolean(runtime.io.stderr.isTTY),
    term: proc.env.TERM,
  });
  return {
    acquire: {
      ...acquireRequest(queue, flags, settings.retry),
      // A worker waits on the broker for something to take, rather than asking again and again.
      ...(flags.follow && flags.wait === undefined && { waitMs: FOLLOW_WAIT_MS }),
      seconds: flags.seconds,
    },
    everyMs: flags.every,
    killAfterMs: flags.killAfter,
    retry: { retryDelayMs: flags.retryDelay, giveUpAfter: flags.giveUpAfter, onFailure: flags.onFailure },
    input: flags.input,
    batches: flags.follow ? 'follow' : flags.untilEmpty ? 'until-empty' : (flags.batches ?? 1),
    parallel: flags.parallel,
    drainMs: flags.drain,
    command: after as readonly [string, ...string[]],
    output,
    requestTimeoutMs: settings.timeoutMs,
    concurrency: settings.concurrency,
    concurrencyGiven: settings.concurrencyGiven,
    tokenOnCommandLine: settings.tokenOnCommandLine,
  };
}

/**
 * The run, with its metrics listener when asked: bound before anything is sent (a bad or busy
 * address ends the run as a usage error), closed once every batch is settled.
 */
async function runConsumer(
  options: ConsumerOptions,
  flags: RunFlags,
  runtime: ConsumerRuntime,
  proc: VerbProcess,
): Promise<number> {
  let metrics: RunMetrics | null = null;
  if (flags.metricsAddress) {
    const { serveRunMetrics } = await import('../../metrics/run.js');
    metrics = await serveRunMetrics({
      address: flags.metricsAddress,
      clock: runtime.clock,
      parallel: options.parallel,
    });
    // Said even with -q: with :0 it is the only way to know the port.
    await write(runtime.io.stderr, metricsServedNote(metrics.address));
  }
  try {
    return await new Consumer(options, runtime, proc, metrics).run();
  } finally {
    await metrics?.close();
  }
}
