/**
 * `queenctl lease watch <leaseId...> [-- command args...]`: keep leases renewed
 * (renewal/scheduler.ts), and supervise the command that needs them (watch/supervisor.ts). This
 * module decides how a watch ends and with which status (docs/cli-contract.md, "watch" and "Exit
 * codes").
 *
 * Without a command the watch goes on with the leases still held; it ends when none is left,
 * at --for, or on SIGINT, SIGTERM or SIGHUP. With one, the command starts after the first
 * renewal of every lease, and the watch ends with it: its status passes through, or 4 when a
 * lease was lost and the command was stopped for that.
 */
import { Command, Option } from 'commander';
import { leaseIdSource } from '../../args.js';
import { monotonicClock } from '../../clock.js';
import { ExitCode, UsageError, combineExitCodes, signalExitCode } from '../../exit.js';
import {
  cannotKeepUpWarning,
  metricsServedNote,
  childExitedNote,
  childNotStartedNote,
  childStartedNote,
  childStartFailed,
  everyTooLongWarning,
  forwardedNote,
  killedAfterNote,
  leftoverNote,
  printsEvents,
  stoppingChildOnLoss,
  stoppingChildOnRefusal,
  tokenOnCommandLineHint,
  watchFailureMessage,
  watchOutputMode,
  watchRenderer,
  type WatchOutputMode,
  type WatchRenderer,
} from '../../output/watch.js';
import { isJsonPath } from '../../output/format.js';
import type { JsonPathTemplate } from '../../output/jsonpath.js';
import { errorMessage } from '../../output/words.js';
import { write } from '../../io.js';
import { parseMetricsAddress, type MetricsAddress } from '../../metrics/address.js';
import type { WatchMetrics } from '../../metrics/watch.js';
import { CONCURRENCY_CEILING } from '../../renewal/concurrency.js';
import type { WatchEvent } from '../../renewal/events.js';
import { RenewalScheduler, defaultEveryMs, safetyMarginMs, type WatchSummary } from '../../renewal/scheduler.js';
import { processGroupLauncher } from '../../watch/process-group.js';
import { CommandSupervisor, type ChildExit, type Launch, type SupervisorNotice } from '../../watch/supervisor.js';
import { flagParser, type GlobalContext, type Settings, type VerbProcess } from '../globals.js';
import type { Runtime } from '../runtime.js';
import { allowEmptyOption, durationOption, exitCodesHelp, LEASE_IDS_ARGUMENT, secondsOption } from './options.js';

export interface WatchOptions {
  /** As given; `-` reads ids from standard input. */
  leaseIds: readonly string[];
  seconds: number;
  /** --every; default a third of --seconds. */
  everyMs: number | undefined;
  forMs: number | undefined;
  killAfterMs: number;
  requestTimeoutMs: number;
  concurrency: number;
  /** --concurrency was given: the most in flight; else the watch adapts up to its own ceiling. */
  concurrencyGiven?: boolean;
  /** What followed `--`: the command and its arguments; null without one. */
  command: readonly string[] | null;
  output: WatchOutputMode;
  /** -o jsonpath=: each event through this template, one line an event. */
  jsonpath?: JsonPathTemplate | undefined;
  /** A --token flag, visible in ps for as long as the watch runs. */
  tokenOnCommandLine: boolean;
  /** --metrics-address: serve /metrics, /livez and /readyz there (docs/metrics.md). */
  metricsAddress?: MetricsAddress | undefined;
  /** --metrics-per-lease: a series per lease too. */
  metricsPerLease?: boolean;
  /** --allow-empty: `-` reading no id is nothing to watch (exit 0, no command started). */
  allowEmpty?: boolean;
  /** Set in the command's environment too (`lease run`: the queue, group, partitions, batch file). */
  childEnv?: Readonly<Record<string, string | undefined>>;
  /** The command's standard input, chunk by chunk (`lease run`: the messages); else inherited. */
  childInput?: readonly string[];
  /** The command's output a whole line at a time through queenctl (`lease run --parallel`). */
  childWholeLines?: boolean;
}

/** How a watch with a command ended: its status, and how the command ended if it did by itself. */
export interface WatchedCommand {
  status: number;
  /**
   * The command's own end (its exit, or why it could not start); null when it was stopped for a
   * lost lease, or never started (the lease was gone first, or a signal came before it).
   */
  exit: ChildExit | null;
}

export const DEFAULT_KILL_AFTER_MS = 10_000;

/** The process bits a watch needs beside its Runtime; `launch` starts the command. */
export type WatchPorts = VerbProcess & { launch: Launch };

export function watchCommand(globals: GlobalContext): Command {
  return new Command('watch')
    .description('keep leases renewed through broker faults, and run a command only while they are held')
    .argument(...LEASE_IDS_ARGUMENT)
    .addOption(secondsOption('60', 'each renewal extends to now + seconds on the broker clock (1 to 2147483647)'))
    .addOption(durationOption('--every <duration>', 'renew this often (default: a third of --seconds)'))
    .addOption(durationOption('--for <duration>', 'stop watching after this long (without a command)'))
    .addOption(
      durationOption('--kill-after <duration>', 'SIGKILL the command this long after SIGTERM').default(
        DEFAULT_KILL_AFTER_MS,
        '10s',
      ),
    )
    .addOption(
      new Option(
        '--metrics-address <[host]:port>',
        'serve Prometheus metrics, /livez and /readyz there ' +
          '(:9464 every interface, 127.0.0.1:9464 loopback, :0 a free port)',
      ).argParser(flagParser(parseMetricsAddress)),
    )
    .option('--metrics-per-lease', "with --metrics-address: also each lease's time left, one series per lease")
    .addOption(allowEmptyOption())
    .usage('[options] <leaseId...> [-- <command> [args...]]')
    .addHelpText(
      'after',
      `
Renewals: at once, then every --every, and always before the expiry the broker reported, less a
safety margin. Deadlines are measured without trusting this machine's clock to agree with the
broker's. Failures that may pass (unreachable, reset, timeout, 429, 5xx) are retried with
backoff, or after the broker's Retry-After, for as long as the lease has time left; each
request's timeout is cut to that time.

A lease is lost when the broker renews nothing (renewed: 0), or when its expiry passes with no
successful renewal. Without a command the watch goes on with the leases still held, until none
is left, --for, or SIGINT, SIGTERM or SIGHUP.

When requests for several leases fail as they do with the broker down, that is an outage: the
leases wait while one request at a time probes the broker, and once it answers they are renewed,
least time left first. Renewals in flight adapt to the broker's latency, up to --concurrency when
given, else up to 256; if even that cannot renew every lease in time, a warning says so once,
with the numbers and what to change.

With -- <command>: it starts once every lease has been renewed, in its own process group, with
QUEEN_LEASE_ID, QUEEN_LEASE_IDS and QUEEN_LEASE_EXPIRES_AT set and QUEEN_TOKEN removed. SIGINT,
SIGTERM and SIGHUP go to its whole group and queenctl waits for it; when it exits, renewal stops.
A command still running --kill-after after SIGINT or SIGTERM gets SIGKILL. When a lease is lost,
its group gets SIGTERM, then SIGKILL after --kill-after; so it does, from a guardian process, when
queenctl itself dies, even by SIGKILL or the OOM killer. It runs outside the terminal's
foreground job: Ctrl+C reaches it through queenctl. With -o json, ndjson, yaml or jsonpath= its
stdout goes to stderr, so stdout stays the event stream.

Metrics: --metrics-address <[host]:port> serves Prometheus metrics on /metrics while the watch
runs, /livez (200 while the renewal loop answers) and /readyz (200 once every lease has been
renewed and none is lost; else 503 and why); :0 picks a free port, printed on stderr. One series
per lease only with --metrics-per-lease. See docs/metrics.md.

Output: -o json or -o ndjson streams events on stdout, one per line: renewed, retry, lost and
stopped for a lease, outage and recovered for the broker; also the default in a pipe without a
command. -o yaml prints each event as one YAML document, --- between them; -o jsonpath=<expr>
each event through the expression, one line an event. Otherwise: a spinner
on a terminal, one line per event on stderr when not on one or when a command shares the
terminal; -q only errors.

${exitCodesHelp({
  ok: '--for elapsed and no lease was lost',
  broker: 'broker error: a lease could not be renewed even once',
  notHeld: 'a lease was lost (without a command: once none is left, or at --for)',
})}
  129/130/143  stopped by SIGHUP/SIGINT/SIGTERM (without a command)
With a command: its own exit status (128 + signal number when a signal ended it), or 4 when a
lease was lost and the command was stopped for that.

Examples:
  queenctl lease watch "$LEASE" -- ./reprocess.sh --batch 7
  queenctl lease watch "$LEASE" -q & WATCH=$!       # keep it alive while working by hand;
  ...; kill $WATCH                                   # -q: only a loss is printed
  queenctl lease watch - --for 30m -o ndjson < leases.txt | jq -c 'select(.event == "lost")'`,
    )
    .action(
      async (
        operands: string[],
        options: {
          seconds: number;
          every?: number;
          for?: number;
          killAfter: number;
          metricsAddress?: MetricsAddress;
          metricsPerLease?: boolean;
          allowEmpty?: boolean;
        },
        command: Command,
      ) => {
        const run = (runtime: Runtime, settings: Settings, proc: VerbProcess): Promise<number> => {
          // Commander puts what follows `--` among the operands: it is the command, not lease ids.
          const after = proc.argvAfterDashDash;
          const leaseIds = after === null ? operands : operands.slice(0, Math.max(0, operands.length - after.length));
          if (settings.format === 'name') {
            throw new UsageError(
              '-o name prints lease ids, and watch prints events',
              'use -o ndjson for one event per line, or lease list -o name to find lease ids',
            );
          }
          const output = watchOutputMode({
            format: settings.format,
            outputGiven: settings.outputGiven,
            hasCommand: after !== null,
            quiet: runtime.io.quiet,
            stderrIsTTY: Boolean(runtime.io.stderr.isTTY),
            term: proc.env.TERM,
          });
          const watch: WatchOptions = {
            leaseIds,
            seconds: options.seconds,
            everyMs: options.every,
            forMs: options.for,
            killAfterMs: options.killAfter,
            requestTimeoutMs: settings.timeoutMs,
            concurrency: settings.concurrency,
            concurrencyGiven: settings.concurrencyGiven,
            command: after,
            output,
            jsonpath: isJsonPath(settings.format) ? settings.format.template : undefined,
            tokenOnCommandLine: settings.tokenOnCommandLine,
            metricsAddress: options.metricsAddress,
            metricsPerLease: Boolean(options.metricsPerLease),
            allowEmpty: options.allowEmpty === true,
          };
          return runWatch(watch, runtime, { ...proc, launch: processGroupLauncher() });
        };
        if (options.metricsPerLease && options.metricsAddress === undefined) {
          throw new UsageError(
            '--metrics-per-lease adds series to --metrics-address',
            'add --metrics-address 127.0.0.1:9464, or drop --metrics-per-lease',
          );
        }
        // A long watch measures on monotonic time: an NTP step must not move every deadline.
        await globals.run(command, run, {
          requests: 'many',
          clock: monotonicClock,
          supervises: 'lease watch -- <command>',
        });
      },
    );
}

/**
 * One watch of leases already taken with a command (`lease run`, a batch at a time): the same
 * renewal and supervision as `lease watch -- command`, and how the command ended.
 */
export async function watchWithCommand(
  leaseIds: string[],
  options: WatchOptions & { command: readonly [string, ...string[]] },
  runtime: Runtime,
  ports: WatchPorts,
): Promise<WatchedCommand> {
  const watch = new Watch(leaseIds, options, runtime, ports);
  const status = await watch.run();
  return { status, exit: watch.childExit };
}

/** Everything `--` must not be, checked before anything is sent. */
export function checkCommand(options: Pick<WatchOptions, 'command' | 'forMs'>): void {
  if (options.command === null) return;
  if (options.command.length === 0 || options.command[0] === '') {
    throw new UsageError(
      '-- must be followed by the command to run',
      'queenctl lease watch "$LEASE" -- ./reprocess.sh',
    );
  }
  if (options.forMs !== undefined) {
    throw new UsageError(
      '--for ends a watch without a command; with a command the watch lasts as long as it does',
      'to bound the command, run it under timeout(1): queenctl lease watch "$LEASE" -- timeout 10m ./job.sh',
    );
  }
}

async function readLeaseIds(
  args: readonly string[],
  stdin: () => Runtime['io']['stdin'],
  allowEmpty: boolean,
): Promise<string[]> {
  const ids = new Set<string>();
  // Watching the same lease twice would only renew it twice.
  for await (const leaseId of leaseIdSource(args, stdin, { verb: 'watch', allowEmpty }).ids) ids.add(leaseId);
  return [...ids];
}

function summaryCode(summary: Pick<WatchSummary, 'lost' | 'failed' | 'refused'>): ExitCode {
  const codes: ExitCode[] = [];
  if (summary.refused) codes.push(ExitCode.Auth);
  if (summary.failed > 0) codes.push(ExitCode.Broker);
  if (summary.lost > 0) codes.push(ExitCode.NotHeld);
  return combineExitCodes(codes);
}

export async function runWatch(options: WatchOptions, runtime: Runtime, ports: WatchPorts): Promise<number> {
  checkCommand(options);
  const leaseIds = await readLeaseIds(options.leaseIds, () => runtime.io.stdin, options.allowEmpty === true);
  if (leaseIds.length === 0) {
    // --allow-empty, as `xargs -r`: nothing to keep alive, so the command does not run either.
    const command = options.command === null ? '' : `; ${options.command[0]} was not started`;
    if (!runtime.io.quiet)
      await write(runtime.io.stderr, `queenctl: no lease ids on standard input: nothing to watch${command}\n`);
    return ExitCode.Ok;
  }
  // Listening before anything is sent: a bad or busy address ends the run as a usage error.
  const metrics = options.metricsAddress ? await serveMetrics(options, leaseIds.length, runtime) : null;
  try {
    const watch = new Watch(leaseIds, options, runtime, ports, metrics);
    return await watch.run();
  } finally {
    // With a command, the watch ends once the command has ended: the listener lives that long.
    await metrics?.close();
  }
}

async function serveMetrics(options: WatchOptions, leaseCount: number, runtime: Runtime): Promise<WatchMetrics> {
  const { serveWatchMetrics } = await import('../../metrics/watch.js');
  const metrics = await serveWatchMetrics({
    address: options.metricsAddress as MetricsAddress,
    perLease: Boolean(options.metricsPerLease),
    leaseCount,
    everyMs: options.everyMs ?? defaultEveryMs(options.seconds),
    command: options.command !== null,
    clock: runtime.clock,
  });
  // Said even with -q: with :0 it is the only way to know the port.
  await write(runtime.io.stderr, metricsServedNote(metrics.address));
  return metrics;
}

class Watch {
  private readonly scheduler: RenewalScheduler;
  private readonly supervisor: CommandSupervisor | null = null;
  private renderer!: WatchRenderer;
  private readonly everyMs: number;
  private exitCode: number | null = null;
  private settle!: (code: number) => void;
  private readonly finished = new Promise<number>((resolve) => (this.settle = resolve));
  private crashed: { error: unknown } | null = null;
  private readonly forTimer = new AbortController();
  private readonly env: NodeJS.ProcessEnv;
  /** How the command ended by itself, or could not start; null otherwise. */
  childExit: ChildExit | null = null;

  constructor(
    private readonly leaseIds: string[],
    private readonly options: WatchOptions,
    private readonly runtime: Runtime,
    ports: WatchPorts,
    private readonly metrics: WatchMetrics | null = null,
  ) {
    this.everyMs = options.everyMs ?? defaultEveryMs(options.seconds);
    this.env = ports.env;
    this.scheduler = new RenewalScheduler(
      leaseIds,
      {
        seconds: options.seconds,
        everyMs: this.everyMs,
        requestTimeoutMs: options.requestTimeoutMs,
        concurrency: options.concurrency,
        maxConcurrency: options.concurrencyGiven === false ? CONCURRENCY_CEILING : options.concurrency,
        concurrencyGiven: options.concurrencyGiven !== false,
      },
      { client: runtime.client, clock: runtime.clock },
      {
        event: (event) => this.onEvent(event),
        warn: (text) => this.renderer.warn(text),
        cannotKeepUp: (shortfall) => this.renderer.warn(cannotKeepUpWarning(shortfall)),
        ...(metrics ? { attempt: (outcome) => metrics.attempt(outcome) } : {}),
      },
    );
    metrics?.attach(this.scheduler);
    if (options.command !== null) {
      this.supervisor = new CommandSupervisor(
        {
          argv: options.command as [string, ...string[]],
          leaseIds,
          env: ports.env,
          killAfterMs: options.killAfterMs,
          stdoutToStderr: printsEvents(options.output),
          ...(options.childEnv && { extraEnv: options.childEnv }),
          ...(options.childInput && { input: options.childInput }),
          ...(options.childWholeLines && { wholeLines: true }),
        },
        { launch: ports.launch, clock: runtime.clock, relaySignals: ports.relaySignals },
        this.scheduler,
        {
          notice: (notice) => this.onNotice(notice),
          ended: (status) => this.finish(status),
          crashed: (error) => this.crash(error),
        },
      );
    }
  }

  async run(): Promise<number> {
    const { io, clock, signal } = this.runtime;
    const { options } = this;
    this.renderer = await watchRenderer({
      mode: options.output,
      jsonpath: options.jsonpath,
      stdout: io.stdout,
      stderr: io.stderr,
      clock,
      color: io.color,
      quiet: io.quiet,
      leaseCount: this.leaseIds.length,
      firstLeaseId: this.leaseIds[0] as string,
      status: () => this.scheduler.status(),
      commandStarted: () => this.supervisor?.started ?? false,
      env: this.env,
    });
    if (options.tokenOnCommandLine) this.renderer.warn(tokenOnCommandLineHint());
    const marginMs = safetyMarginMs(options.seconds);
    if (this.everyMs > options.seconds * 1000 - marginMs)
      this.renderer.warn(everyTooLongWarning(this.everyMs, options.seconds, marginMs));

    const onSignal = (): void => {
      // Only acted on without a command started: with one, cli.ts relays signals to it instead.
      if (this.supervisor?.started) return;
      this.scheduler.stop('signal');
      this.finish(signalExitCode(signal.reason));
    };
    if (signal.aborted) onSignal();
    else signal.addEventListener('abort', onSignal, { once: true });
    if (options.forMs !== undefined) {
      clock.sleep(options.forMs, this.forTimer.signal).then(
        () => this.scheduler.stop('for'),
        () => {}, // cancelled: the watch ended first
      );
    }

    let summary: WatchSummary | null = null;
    const scheduled = this.scheduler.run().then(
      (result) => {
        summary = result;
        // With a command started, its supervisor decides the end; otherwise nothing is left.
        if (!this.supervisor?.started) this.finish(summaryCode(result));
      },
      (error: unknown) => this.crash(error),
    );
    const code = await this.finished;
    this.scheduler.stop('signal'); // a no-op unless a crash left leases in it
    await scheduled;
    this.forTimer.abort();
    signal.removeEventListener('abort', onSignal);
    this.reportErrors(summary);
    this.renderer.close();
    if (this.crashed) throw this.crashed.error;
    return code;
  }

  private finish(code: number): void {
    if (this.exitCode !== null) return;
    this.exitCode = code;
    this.settle(code);
  }

  /** A bug, not an outcome: end now, and take the command down with us rather than leave it. */
  private crash(error: unknown): void {
    this.crashed ??= { error };
    try {
      this.supervisor?.kill();
    } catch {
      // The exit guard of the process group tries again.
    }
    this.finish(ExitCode.Broker);
  }

  private onEvent(event: WatchEvent): void {
    this.metrics?.event(event);
    this.renderer.event(event);
    // Once the watch has its status, nothing may start or stop the command any more.
    if (this.exitCode === null) this.supervisor?.onEvent(event);
  }

  /** The supervisor's notices, in words (output/watch.ts). */
  private onNotice(notice: SupervisorNotice): void {
    this.metrics?.notice(notice);
    const { renderer } = this;
    const command = (this.options.command as readonly string[])[0] as string;
    const { killAfterMs } = this.options;
    switch (notice.kind) {
      case 'started':
        return renderer.note(childStartedNote(command, notice.pid, this.leaseIds.length));
      case 'not-started':
        return renderer.note(childNotStartedNote(command));
      case 'start-failed':
        this.childExit = notice.exit;
        return renderer.error(childStartFailed(command, notice.exit));
      case 'forwarded':
        return renderer.note(forwardedNote(notice.signal, command, killAfterMs));
      case 'stopping':
        return renderer.error((notice.refused ? stoppingChildOnRefusal : stoppingChildOnLoss)(command, killAfterMs));
      case 'killed':
        return renderer.error(killedAfterNote(command, killAfterMs));
      case 'exited':
        this.childExit = notice.exit;
        return renderer.note(childExitedNote(command, notice.exit));
      case 'leftover':
        return renderer.note(leftoverNote(command, killAfterMs));
    }
  }

  /** One message per kind of failure, not one per lease: thousands may share it. */
  private reportErrors(summary: WatchSummary | null): void {
    const refused = this.scheduler.refusal;
    if (refused) return this.renderer.error(errorMessage(refused));
    const failure = this.scheduler.failure;
    if (failure) this.renderer.error(watchFailureMessage(failure, summary?.failed ?? 1));
  }
}
