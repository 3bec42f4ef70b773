/**
 * The consumer `lease run` is (docs/cli-contract.md#lease-run): a batch's life, take, deliver,
 * settle, one batch after another.
 *
 * - take: a pop as `lease acquire` takes it, renewed at once to --seconds; while a partition is
 *   bisected (retry-policy.ts) its next batch is taken through the partition route, smaller;
 * - deliver: the command runs on the messages (delivery.ts) while the lease is renewed and the
 *   command supervised exactly as `lease watch -- command` does; then each message's outcome is
 *   read from its results file and its end (outcomes.ts);
 * - settle: the outcomes become acks by the broker's cursor rule (ack-rule.ts): completions at
 *   once, the first message of a partition that did not succeed after its retry delay (the lease
 *   held and renewed meanwhile, while the next batches go on), then what a dead-lettering left
 *   under the lease, until nothing of the batch is left unsaid. Always with the lease id.
 *
 * Nothing between the pop and the ack may leave a lease to expire: a failure of queenctl's own
 * there (a batch file it cannot write, a command it cannot start) is a failure of the batch's
 * messages, acked `retry`, and the run says so. The command's own status is never queenctl's.
 */
import type { AckItem, AckResult } from '../broker/ack.js';
import { batchRecordText, messageLine, partitionsOf, type BatchMessage, type BatchRecord } from '../broker/batch.js';
import type { BrokerClient } from '../broker/client.js';
import { QUEUE_MODE_GROUP } from '../broker/consumer-groups.js';
import { isTransient } from '../broker/retry.js';
import type { Runtime } from '../commands/runtime.js';
import type { VerbProcess } from '../commands/globals.js';
import { ackMessages, ackRefusal, ackRecord, type AckRuntime } from '../commands/lease/ack.js';
import { acquireBatch, type AcquireOptions, type AcquireRuntime } from '../commands/lease/acquire.js';
import { watchWithCommand, type WatchOptions, type WatchPorts } from '../commands/lease/watch.js';
import { AuthError, ExitCode, QueenctlError, signalExitCode } from '../exit.js';
import { formatDuration } from '../output/duration.js';
import { escapeText } from '../output/sanitise.js';
import { tokenOnCommandLineHint, type WatchOutputMode } from '../output/watch.js';
import { loadTerminalText, writeMessage, writeMessageNow } from '../output/width.js';
import { errorMessage, listSome, warningMessage } from '../output/words.js';
import type { WatchEvent } from '../renewal/events.js';
import { defaultEveryMs, RenewalScheduler } from '../renewal/scheduler.js';
import { processGroupLauncher } from '../watch/process-group.js';
import type { ChildExit } from '../watch/supervisor.js';
import { ackRule } from './ack-rule.js';
import {
  prepareDelivery,
  removeStaleBatchDirectories,
  temporaryDirectory,
  type Delivery,
  type InputMode,
} from './delivery.js';
import { outcomesOf, type CommandEnd, type Outcome } from './outcomes.js';
import { readResults } from './results.js';
import { RetryPolicy, type RetryOptions } from './retry-policy.js';

export interface ConsumerOptions {
  /** The pop: acquire's flags; `seconds` is run's --seconds (the renewal right after the pop). */
  acquire: Omit<AcquireOptions, 'format' | 'noHeaders'> & { seconds: number };
  everyMs: number | undefined;
  killAfterMs: number;
  retry: RetryOptions;
  input: InputMode;
  /** How many batches; 'until-empty': until a pop finds nothing; 'follow': until a signal. */
  batches: number | 'until-empty' | 'follow';
  /** Batches at once, each with its own lease, command and guardian (1 to 256). */
  parallel: number;
  /** --drain: on the first signal, the commands running get this long to end by themselves. */
  drainMs: number | undefined;
  command: readonly [string, ...string[]];
  output: WatchOutputMode;
  requestTimeoutMs: number;
  concurrency: number;
  concurrencyGiven: boolean;
  tokenOnCommandLine: boolean;
}

export type ConsumerRuntime = Runtime<
  AcquireRuntime['client'] & AckRuntime['client'] & Pick<BrokerClient, 'consumerGroup'> & Runtime['client']
>;

/** What the acks of one batch came to (the `acked` event's counts). */
export interface BatchCounts {
  completed: number;
  retry: number;
  failed: number;
  dlq: number;
  refused: number;
  /** Not acked: they come back with the message before them that did not succeed. */
  pending: number;
}

/** Machine events of a run besides watch's (docs/cli-contract.md#lease-run). */
type RunEvent =
  | { event: 'acquired'; at: string; leaseId: string; queue: string; partitions: string[]; messages: number }
  | ({ event: 'acked'; at: string; leaseId: string } & CommandStatus & BatchCounts)
  | { event: 'empty'; at: string; queue: string };

type CommandStatus = { exitStatus: number | null } | { signal: string };

/** How a batch came to an end, and whether the run goes on. */
interface BatchEnd {
  /** 0: every message completed; else this batch's status (5, 4, 2, 126, a signal's...). */
  code: number;
  /** Take no further batch. */
  last: boolean;
}

/** A batch taken, as far as settling it needs. */
interface Taken {
  record: BatchRecord;
  /** The command's end in words, and its status for the `acked` event. */
  status: CommandStatus;
  words: string;
}

/**
 * A run's status from its batches': the first that applies of 3, 2, 4, 126/127 (the contract's
 * order), then the signal that stopped queenctl (what it cut short was acked retry: not a
 * failure of the messages), then 5, then 0.
 */
export function runExitStatus(codes: ReadonlySet<number>): number {
  const precedence = [ExitCode.Auth, ExitCode.Broker, ExitCode.NotHeld, 126, 127];
  const signal = [...codes].find((code) => code > 128);
  return (
    precedence.find((code) => codes.has(code)) ??
    signal ??
    (codes.has(ExitCode.MessageFailed) ? ExitCode.MessageFailed : undefined) ??
    [...codes].find((code) => code !== 0) ??
    ExitCode.Ok
  );
}

/** `exit status 1`, `killed by SIGTERM (143)`: the command's end, as recorded with an ack. */
export function exitWords(exit: ChildExit): string {
  if (exit.startError) {
    return `it could not be started (${exit.startError.code ?? exit.startError.message}, status ${exit.status})`;
  }
  if (exit.signal) return `it was ended by ${exit.signal} (status ${exit.status})`;
  return `it exited with status ${exit.status}`;
}

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

/** The series a run feeds (src/metrics/run.ts serves them); every call is a few additions. */
export interface ConsumerMetrics {
  batchTaken(): void;
  messages(status: 'completed' | 'retry' | 'failed' | 'dlq', count: number): void;
  leaseLost(): void;
  inFlight(batches: number): void;
  commandEnded(seconds: number): void;
  pop(result: 'batch' | 'empty' | 'held' | 'error'): void;
  outage(down: boolean): void;
}

/** --follow: a pop that failed is tried again after this, doubling up to the most. */
const POP_BACKOFF_MS = 1000;
const POP_BACKOFF_MAX_MS = 30_000;
/** --follow: pops that find nothing come back no faster than this, whatever the broker does. */
const EMPTY_POP_MIN_MS = 1000;

export class Consumer {
  /** The first signal queenctl got; no batch is taken after it, and retry waits end. */
  private signalled: NodeJS.Signals | null = null;
  /** A second signal: what is in flight (acks included) is abandoned. */
  private readonly hard = new AbortController();
  /** The first signal: a pop in flight is abandoned (a long poll of --follow among them). */
  private readonly popAbort = new AbortController();
  /** The supervisors' signal listeners of the commands running now (watch's relay goes to them). */
  private readonly forwarders = new Set<(signal: NodeJS.Signals) => void>();
  /** Aborted by the first signal: retry waits end, an ack that never reached the broker is not tried again. */
  private readonly soft = new AbortController();
  /** The watches of batches whose command has not started: a signal stops them from starting. */
  private readonly starting = new Set<AbortController>();
  private readonly policy: RetryPolicy;
  /** Batches still settling (a retry delay, a parked message), by lease id: their leases are held. */
  private readonly settling = new Map<string, { done: Promise<'settled'> }>();
  /** Batches whose command runs (or is about to): what --parallel counts. */
  private readonly active = new Set<Promise<unknown>>();
  /** The statuses of the batches so far. */
  private readonly codes = new Set<number>();
  /** The status of the last lost lease (4, or 3/2 when renewal was refused or failed). */
  private lostCode: number = ExitCode.NotHeld;
  private stopTaking = false;
  /** --follow: the broker stopped answering pops, since when (said once, and once when it is back). */
  private outageSince: number | null = null;
  /** --follow: the wait before the next pop while the broker does not answer them. */
  private popBackoffMs = POP_BACKOFF_MS;
  // One guardian for every batch's command (src/watch/process-group.ts).
  private readonly launch: ReturnType<typeof processGroupLauncher>;
  private readonly everyMs: number;
  private readonly follow: boolean;
  /** Ends the wait of --drain once the run is over. */
  private readonly over = new AbortController();

  constructor(
    private readonly options: ConsumerOptions,
    private readonly runtime: ConsumerRuntime,
    private readonly proc: VerbProcess,
    private readonly metrics: ConsumerMetrics | null = null,
  ) {
    this.policy = new RetryPolicy(options.retry);
    this.everyMs = options.everyMs ?? defaultEveryMs(options.acquire.seconds);
    this.follow = options.batches === 'follow';
    // Guardians are kept for reuse, one per command that may run at once.
    this.launch = processGroupLauncher({ reuse: true });
  }

  async run(): Promise<number> {
    const { options } = this;
    // For the whole run, signals are this run's to act on (cli.ts then never exits on its own).
    const release = this.proc.relaySignals((signal) => this.onSignal(signal));
    // On a terminal, the libraries that wrap its lines, loaded now: the run's lines are written
    // between the command's and the watch's, at once (writeMessageNow).
    if (this.runtime.io.stderrWidth !== undefined) await loadTerminalText();
    if (options.tokenOnCommandLine) this.warn(tokenOnCommandLineHint());
    // What a run of this user killed by SIGKILL left on disk (its batch, messages included).
    removeStaleBatchDirectories(temporaryDirectory(this.proc.env));
    try {
      let taken = 0;
      while (!this.stopTaking && !this.signalled) {
        if (typeof options.batches === 'number' && taken >= options.batches) break;
        // A batch is taken only when a slot is free: never one held that cannot start.
        while (this.active.size >= options.parallel) await Promise.race(this.active);
        if (this.stopTaking || this.signalled) break;
        const next = await this.take(taken === 0);
        if (next === 'again') continue;
        if (next === 'end') break;
        taken++;
        this.metrics?.batchTaken();
        const batch = this.deliverAndSettle(next);
        this.active.add(batch);
        this.metrics?.inFlight(this.active.size);
        void batch.finally(() => {
          this.active.delete(batch);
          this.metrics?.inFlight(this.active.size);
        });
      }
      await Promise.all(this.active);
      // Every batch settled before queenctl exits: the waits a signal cut short are acked now.
      await this.settled();
    } finally {
      this.over.abort();
      release();
    }
    return this.status();
  }

  /**
   * The run's exit status. --follow: a worker stopped by a signal with every batch settled exits
   * 0, whatever failed on the way (counted in the output and the metrics), unless the token was
   * refused (3), the command could not start (126/127) or an ack's outcome is unknown (2).
   */
  private status(): number {
    if (this.follow) {
      const final = [ExitCode.Auth, ExitCode.Broker, 126, 127].filter((code) => this.codes.has(code));
      return runExitStatus(new Set(final));
    }
    // Stopped by a signal, with every batch settled: 128 + n, as a shell reports it.
    if (this.signalled) this.codes.add(signalExitCode(this.signalled));
    return runExitStatus(this.codes);
  }

  private onSignal(signal: NodeJS.Signals): void {
    if (this.signalled !== null) {
      // A second signal: the commands get it at once, and what is in flight is abandoned.
      for (const forward of this.forwarders) forward(signal);
      this.hard.abort(signal);
      return;
    }
    this.signalled = signal;
    this.stopTaking = true;
    this.soft.abort(signal);
    this.popAbort.abort(signal);
    for (const watch of this.starting) watch.abort(signal);
    const { drainMs } = this.options;
    if (drainMs === undefined || this.forwarders.size === 0) {
      for (const forward of this.forwarders) forward(signal);
      return;
    }
    this.note(
      `${signal}: no further batch; ${plural(this.forwarders.size, 'command')} running get --drain ` +
        `${formatDuration(drainMs)} to end by themselves, then ${signal}`,
    );
    this.runtime.clock.sleep(drainMs, this.over.signal).then(
      () => {
        for (const forward of this.forwarders) forward(signal);
      },
      () => {}, // every command ended first
    );
  }

  /** Waits for every batch still settling. */
  private async settled(): Promise<void> {
    while (this.settling.size > 0) await Promise.all([...this.settling.values()].map((entry) => entry.done));
  }

  /** Waits for any batch in hand to end or settle: what it gives back may be taken again. */
  private async anyBatch(): Promise<void> {
    await Promise.race([...this.active, ...[...this.settling.values()].map((entry) => entry.done)]);
  }

  /** The pop of the next batch: a batch taken, or 'again' (pop once more), or 'end'. */
  private async take(first: boolean): Promise<Taken['record'] | 'again' | 'end'> {
    const { options, runtime } = this;
    const request = options.acquire;
    const signal = AbortSignal.any([this.hard.signal, this.popAbort.signal]);
    const sentAt = runtime.clock.now();
    let acquired: Awaited<ReturnType<typeof acquireBatch>>;
    try {
      acquired = await acquireBatch({ ...request, format: null, noHeaders: false }, { ...runtime, signal });
    } catch (error) {
      if (signal.aborted) {
        const abandoned =
          `the pop of queue ${escapeText(options.acquire.queue)} was abandoned: a lease it may have taken just ` +
          `then holds its messages for the queue's lease time`;
        // A worker's long poll, cut by the signal that stops it: the normal end, said as a step.
        if (this.follow && this.hard.signal.aborted === false) this.note(`${this.signalled}: ${abandoned}`);
        else await writeMessage(runtime.io, `queenctl: interrupted: ${abandoned}\n`);
        return 'end';
      }
      if (!(error instanceof QueenctlError)) throw error;
      this.metrics?.pop('error');
      if (this.follow && !(error instanceof AuthError)) return this.ridePopFailure(error);
      await writeMessage(runtime.io, errorMessage(error));
      this.codes.add(error.exitCode);
      return 'end';
    }
    if (this.outageSince !== null) {
      this.note(`the broker answers pops again, after ${formatDuration(runtime.clock.now() - this.outageSince)}`);
      this.outageSince = null;
      this.metrics?.outage(false);
    }
    if (acquired.kind === 'none') {
      this.metrics?.pop(acquired.message.includes('lease_held') ? 'held' : 'empty');
      this.emit({ event: 'empty', at: this.at(), queue: options.acquire.queue });
      if (this.follow) {
        // Never faster than a pop a second, whatever the broker answers (a long poll waits itself).
        const left = EMPTY_POP_MIN_MS - (runtime.clock.now() - sentAt);
        if (left > 0) await runtime.clock.sleep(left, this.popAbort.signal).catch(() => {});
        return 'again';
      }
      if (this.active.size > 0 || this.settling.size > 0) {
        // What the run's batches in hand give back (a retry after its delay) comes back: wait for
        // them, then look again (a pop finding nothing meanwhile does not end the run).
        await this.anyBatch();
        return 'again';
      }
      if (options.batches === 'until-empty') {
        this.note(`nothing more to take: ${acquired.message}`);
        await this.sayHeldByOthers();
        return 'end';
      }
      // The first pop finding nothing is acquire's exit 4; a later one ends --batches early.
      if (first) {
        await writeMessage(runtime.io, `queenctl: ${acquired.message}\n`);
        this.codes.add(acquired.code);
      } else this.note(`no further batch: ${acquired.message}`);
      return 'end';
    }
    this.metrics?.pop('batch');
    const { record, renewal } = acquired;
    this.emit({
      event: 'acquired',
      at: this.at(),
      leaseId: record.leaseId,
      queue: record.queue,
      partitions: record.partitions,
      messages: record.messages.length,
    });
    this.note(
      `took lease ${escapeText(record.leaseId)}: ${plural(record.messages.length, 'message')} of queue ` +
        `${escapeText(record.queue)}`,
    );
    if (!renewal.ok && 'lost' in renewal) {
      await writeMessage(
        runtime.io,
        `queenctl: lease ${escapeText(record.leaseId)} was taken, but the renewal right after the pop renewed ` +
          `nothing: it is gone already; the command was not started, nothing was acked, and its messages go to ` +
          `the next pop\n`,
      );
      this.metrics?.leaseLost();
      this.codes.add(ExitCode.NotHeld);
      return this.follow ? 'again' : 'end';
    }
    return record;
  }

  /**
   * --follow: a pop the broker did not answer (down, restarting, a 5xx) is tried again with
   * backoff, said once when it starts and once when it ends (take); the run goes on.
   */
  private async ridePopFailure(error: QueenctlError): Promise<'again'> {
    const { clock } = this.runtime;
    const now = clock.now();
    if (this.outageSince === null) {
      this.outageSince = now;
      this.popBackoffMs = POP_BACKOFF_MS;
      this.metrics?.outage(true);
      this.warn(`the pop failed (${escapeText(error.message)}); trying again with backoff until the broker answers`);
    } else {
      this.popBackoffMs = Math.min(POP_BACKOFF_MAX_MS, this.popBackoffMs * 2);
    }
    await clock.sleep(this.popBackoffMs, this.popAbort.signal).catch(() => {});
    return 'again';
  }

  /**
   * --until-empty ended on a pop that found nothing: not a drained queue when other consumers
   * hold some of its partitions. Said once, from the consumer-group route; a broker that cannot
   * tell (no read role, an error) leaves it unsaid.
   */
  private async sayHeldByOthers(): Promise<void> {
    const { options, runtime } = this;
    if (options.output !== 'log' || runtime.io.quiet) return;
    let held: string[];
    try {
      const group = options.acquire.group ?? QUEUE_MODE_GROUP;
      const partitions = await runtime.client.consumerGroup(group, { signal: this.hard.signal });
      held = partitions
        .filter((p) => p.queue === options.acquire.queue && p.leaseActive && !this.settling.has(p.leaseId ?? ''))
        .map((p) => p.partition);
    } catch {
      return;
    }
    if (held.length === 0) return;
    this.note(
      `the queue is not drained: ${plural(held.length, 'partition')} (${listSome(held.map(escapeText))}) ` +
        `${held.length === 1 ? 'is' : 'are'} held by other consumers, and their messages were not taken: ` +
        `queenctl lease list --queue ${escapeText(options.acquire.queue)} names the leases`,
    );
  }

  /**
   * Runs the command on a batch and settles it. 'waiting': its settling waits out a retry delay
   * (its status is added once it is done), and the run goes on meanwhile.
   */
  private async deliverAndSettle(record: BatchRecord): Promise<'settled' | 'waiting'> {
    let delivered: Awaited<ReturnType<Consumer['deliver']>>;
    let outcomes: Outcome[] | null;
    try {
      delivered = await this.deliver(record, record.messages);
      outcomes = delivered && delivered.startCode === null ? await this.halve(record, delivered.outcomes) : null;
    } catch (error) {
      // A bug of queenctl's own between the pop and the ack: the batch goes back at once before
      // the error ends the run, never left to expire under the lease.
      const words = `queenctl failed: ${escapeText(error instanceof Error ? error.message : String(error))}`;
      const back: Outcome[] = record.messages.map(() => ({ status: 'retry', cause: 'not-run', error: words }));
      await this.settle({ record, status: { exitStatus: null }, words }, back, () => {});
      throw error;
    }
    if (delivered === null || (delivered.startCode === null && outcomes === null)) {
      // The lease was lost under the command (or while it waited to run a half again).
      this.batchEnded({ code: this.lostCode, last: true });
      return 'settled';
    }
    const { end, startCode } = delivered;
    outcomes ??= delivered.outcomes;
    const taken: Taken = { record, ...this.statusOf(end) };
    let waiting: () => void = () => {};
    const waits = new Promise<'waiting'>((resolve) => (waiting = () => resolve('waiting')));
    const done = this.settle(taken, outcomes, waiting).then((ended) => {
      this.settling.delete(record.leaseId);
      // A command that could not start ends the run with 126/127 once its batch went back.
      this.batchEnded(startCode === null ? ended : { code: startCode, last: true });
      return 'settled' as const;
    });
    this.settling.set(record.leaseId, { done });
    return Promise.race([done, waits]);
  }

  /** A batch's status counts toward the run's; a last one stops the taking of batches. */
  private batchEnded(end: BatchEnd): void {
    this.codes.add(end.code);
    if (!end.last) return;
    // --follow survives a lost lease, a refused ack or a failed command (counted, said); not a
    // refused token, nor a command that cannot start: every batch would fail the same way.
    const fatal = end.code === ExitCode.Auth || end.code === 126 || end.code === 127;
    if (!this.follow || fatal) this.stopTaking = true;
  }

  /**
   * A batch whose command failed without naming the message that failed (AWS Lambda's
   * BisectBatchOnFunctionError): per partition, the command runs again on the first half of the
   * messages that failed together, then on the rest, halving a half that fails, until the failing
   * message is alone; the halves that succeed are completed. All of it under the batch's lease,
   * held and renewed throughout: a lease given back between two halves would go to whichever
   * consumer polls first, whole again, and the search would start over there for ever (seen with
   * three workers). Each run waits --retry-delay first. Null when the lease was lost meanwhile.
   */
  private async halve(record: BatchRecord, found: Outcome[]): Promise<Outcome[] | null> {
    const outcomes = [...found];
    for (const acks of ackRule(record.messages, outcomes)) {
      if (acks.decisive === null) continue;
      const first = outcomes[acks.decisive] as Exclude<Outcome, { status: 'completed' }>;
      if (first.cause !== 'command' || (first.tried ?? 1) <= 1) continue;
      const unnamed = (index: number): boolean => {
        const outcome = outcomes[index] as Outcome;
        return outcome.status !== 'completed' && outcome.cause === 'command';
      };
      let suspects = [acks.decisive, ...acks.comeBack].filter(unnamed);
      while (suspects.length > 0 && !this.signalled) {
        const run = suspects.slice(0, Math.ceil(suspects.length / 2));
        this.note(
          `lease ${escapeText(record.leaseId)}: ${plural(suspects.length, 'message')} failed together, none named; ` +
            `running the command again on ${run.length} of them to find the one that fails`,
        );
        const lost = await this.hold(record.leaseId, this.options.retry.retryDelayMs);
        if (lost !== null) {
          await writeMessage(this.runtime.io, `queenctl: ${lost.words}: nothing was acked\n`);
          this.lostCode = lost.code;
          return null;
        }
        const again = await this.deliver(
          record,
          run.map((index) => record.messages[index] as BatchMessage),
        );
        if (again === null) return null;
        run.forEach((index, at) => {
          outcomes[index] = again.outcomes[at] as Outcome;
        });
        if (again.startCode !== null) return outcomes;
        const failed = run.find((index) => (outcomes[index] as Outcome).status !== 'completed');
        if (failed === undefined) {
          suspects = suspects.slice(run.length);
          continue;
        }
        // Named, unread, or alone: found. Else the culprit is in this half: halve it.
        if (!unnamed(failed) || run.length === 1) break;
        suspects = run.slice(run.indexOf(failed)).filter(unnamed);
      }
    }
    return outcomes;
  }

  /**
   * Runs the command on the messages given it, with the lease renewed. Null when the lease was
   * lost meanwhile (nothing is acked: the batch is the redelivery's). `startCode`: 126/127 when
   * the command could not be started or its batch prepared.
   */
  private async deliver(
    record: BatchRecord,
    work: BatchMessage[],
  ): Promise<{ end: CommandEnd; outcomes: Outcome[]; startCode: number | null } | null> {
    const { options, runtime } = this;
    const given: BatchRecord = { ...record, partitions: partitionsOf(work), messages: work };
    let delivery: Delivery;
    try {
      // Each message's text as the broker sent it (data of any depth, never re-encoded).
      delivery = prepareDelivery(temporaryDirectory(this.proc.env), given, options.input, messageLine, batchRecordText);
    } catch (error) {
      const why = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      const where = escapeText(temporaryDirectory(this.proc.env));
      const words = `queenctl could not write the batch file in ${where} (${why})`;
      await writeMessage(
        runtime.io,
        `queenctl: ${words}: the command was not started, and the batch goes back at once; give TMPDIR a ` +
          `directory you can write to\n`,
      );
      const end: CommandEnd = { kind: 'not-run', words };
      return { end, outcomes: outcomesOf(work, end, new Map()), startCode: ExitCode.CannotExecute };
    }
    let watched: Awaited<ReturnType<typeof watchWithCommand>>;
    // Aborted by a signal before the command started: it never starts (once started, signals go
    // to it through the forwarders instead).
    const watchAbort = new AbortController();
    if (this.signalled) watchAbort.abort(this.signalled);
    this.starting.add(watchAbort);
    const forwarder: { listener: ((signal: NodeJS.Signals) => void) | null } = { listener: null };
    const began = runtime.clock.now();
    try {
      watched = await watchWithCommand(
        [record.leaseId],
        this.watchOptions(delivery),
        { ...runtime, signal: watchAbort.signal },
        this.watchPorts(forwarder),
      );
    } catch (error) {
      delivery.remove();
      throw error;
    } finally {
      this.starting.delete(watchAbort);
      if (forwarder.listener) this.forwarders.delete(forwarder.listener);
    }
    const { exit } = watched;
    if (exit !== null && !exit.startError) this.metrics?.commandEnded((runtime.clock.now() - began) / 1000);
    if (exit === null && !watchAbort.signal.aborted) {
      this.metrics?.leaseLost();
      delivery.remove();
      // Lost (or never renewed): watch said so; the batch is the redelivery's now.
      await writeMessage(
        runtime.io,
        `queenctl: nothing was acked: lease ${escapeText(record.leaseId)} is no longer this run's, and its ` +
          `messages go to the next pop\n`,
      );
      this.lostCode = watched.status;
      return null;
    }
    const end = this.endOf(exit, work.length);
    let reported = new Map();
    if (end.kind === 'exited') {
      const results = readResults(delivery.resultsFile, work);
      if (results.ok) {
        reported = results.reported;
        if (results.ignored > 0) {
          this.warn(
            `${plural(results.ignored, 'line')} of the results file named no message of lease ` +
              `${escapeText(record.leaseId)} or were not {"transactionId","status"} objects: ignored`,
          );
        }
      } else {
        delivery.remove();
        const words = `its results file could not be read: ${results.why}`;
        this.warn(`${words}; no message of lease ${escapeText(record.leaseId)} is taken as completed`);
        const outcomes = work.map((): Outcome => ({ status: 'retry', cause: 'command', error: words }));
        return { end, outcomes, startCode: null };
      }
    }
    delivery.remove();
    const startCode = exit?.startError ? exit.status : null;
    return { end, outcomes: outcomesOf(work, end, reported), startCode };
  }

  private endOf(exit: ChildExit | null, messages: number): CommandEnd {
    const command = escapeText(this.options.command[0]);
    if (exit === null) {
      return {
        kind: 'stopped',
        words: `queenctl was stopped by ${this.signalled ?? 'a signal'} before ${command} started`,
      };
    }
    const words = `${command}: ${exitWords(exit)}`;
    if (exit.startError) return { kind: 'not-run', words };
    const signal = exit.signal ?? undefined;
    // Ended after queenctl forwarded a signal: not the messages' failure; back at once.
    if (this.signalled && exit.status !== 0) return { kind: 'stopped', words, ...(signal && { signal }) };
    const inputWritten = this.options.input === 'none' ? messages : (exit.inputWritten ?? 0);
    return { kind: 'exited', status: exit.status, inputWritten, words, ...(signal && { signal }) };
  }

  private statusOf(end: CommandEnd): Pick<Taken, 'status' | 'words'> {
    // A signal ended it: the event names the signal, not 128 + its number (an exit 137 is no SIGKILL).
    if (end.signal) return { status: { signal: end.signal }, words: end.words };
    if (end.kind === 'exited') return { status: { exitStatus: end.status }, words: end.words };
    return { status: { exitStatus: null }, words: end.words };
  }

  /**
   * Acks a batch by its outcomes, as the cursor rule allows, in rounds: each round acks, per
   * partition, the completed messages first, then (after its retry delay, the lease held) the
   * first that did not succeed; a dead-lettering leaves the rest under the lease, which the next
   * round settles. `waiting` is called when a round begins a wait.
   */
  private async settle(taken: Taken, outcomes: readonly Outcome[], waiting: () => void): Promise<BatchEnd> {
    const { record } = taken;
    const counts: BatchCounts = { completed: 0, retry: 0, failed: 0, dlq: 0, refused: 0, pending: 0 };
    let givenUp = false;
    // Indexes into the batch's messages of those still to settle.
    let scope = record.messages.map((_, index) => index);
    while (scope.length > 0) {
      const messages = scope.map((index) => record.messages[index] as BatchMessage);
      const scoped = scope.map((index) => outcomes[index] as Outcome);
      const completions: AckItem[] = [];
      const decisive: Array<{ item: AckItem; delayMs: number; after: number[]; parks: boolean }> = [];
      for (const acks of ackRule(messages, scoped)) {
        for (const index of acks.completed) {
          completions.push({ message: messages[index] as BatchMessage, status: 'completed', error: null });
        }
        const decision = this.policy.decide(acks, messages, scoped);
        if (acks.decisive === null || decision === null) continue;
        const outcome = scoped[acks.decisive] as Exclude<Outcome, { status: 'completed' }>;
        const message = messages[acks.decisive] as BatchMessage;
        const after = acks.comeBack.map((index) => scope[index] as number);
        decisive.push({
          item: { message, status: decision.status, error: outcome.error },
          delayMs: decision.delayMs,
          after,
          parks: decision.givenUp,
        });
        if (decision.givenUp) givenUp = true;
      }
      // --follow parks a message given up with --on-failure retry: its partition's lease is held
      // until the run ends, so the worker takes no further batch of it, and nobody spins on it.
      const parks = this.follow && decisive.some((entry) => entry.parks);
      const delayMs = parks ? Number.POSITIVE_INFINITY : Math.max(0, ...decisive.map((entry) => entry.delayMs));
      const waits = delayMs > 0 && !this.soft.signal.aborted;
      if (parks && waits) this.sayParked(record, taken);
      // Completions at once; the rest after the wait, or with them when there is none.
      const first = waits ? completions : [...completions, ...decisive.map((entry) => entry.item)];
      // Messages of this round whose ack did not land (or may not have): they come back.
      const unsettled = (entries: typeof decisive): number =>
        entries.reduce((sum, entry) => sum + 1 + entry.after.length, 0);
      const sent = await this.sendAck(record, first);
      if (typeof sent === 'number') {
        counts.pending += messages.length;
        return this.ended(taken, counts, sent, true);
      }
      for (const { item, result } of sent) tally(counts, item, result);
      const acked = [...sent];
      if (waits) {
        waiting();
        this.sayWaiting(record, decisive.length, delayMs, parks);
        const lost = await this.hold(record.leaseId, delayMs);
        if (lost !== null) {
          counts.pending += unsettled(decisive);
          await writeMessage(
            this.runtime.io,
            `queenctl: ${lost.words}: nothing more was acked, and ${plural(unsettled(decisive), 'message')} of ` +
              `lease ${escapeText(record.leaseId)} come${unsettled(decisive) === 1 ? 's' : ''} back to the next pop ` +
              `once its lease is gone\n`,
          );
          return this.ended(taken, counts, lost.code, true);
        }
        const rest = await this.sendAck(
          record,
          decisive.map((entry) => entry.item),
        );
        if (typeof rest === 'number') {
          counts.pending += unsettled(decisive);
          return this.ended(taken, counts, rest, true);
        }
        for (const { item, result } of rest) tally(counts, item, result);
        acked.push(...rest);
      }
      const refusal = ackRefusal(
        ackRecord(
          record,
          'completed',
          acked.map((entry) => entry.result),
        ),
      );
      if (refusal !== null) {
        for (const entry of decisive) counts.pending += entry.after.length;
        await writeMessage(this.runtime.io, `queenctl: ${refusal}\n`);
        return this.ended(taken, counts, ExitCode.NotHeld, true);
      }
      // What a dead-lettering left under the lease (docs/broker.md, m6): the next round settles it.
      scope = [];
      for (const { item, after } of decisive) {
        const result = acked.find((entry) => entry.item === item)?.result;
        if (item.status === 'retry') this.policy.retried(item.message);
        if (item.status === 'failed' && result?.dlq === true) {
          this.policy.deadLettered(item.message);
          scope.push(...after);
        } else {
          counts.pending += after.length;
        }
      }
      scope.sort((a, b) => a - b);
    }
    if (givenUp && !this.follow) {
      const limit = this.options.retry.giveUpAfter;
      writeMessageNow(
        this.runtime.io,
        `queenctl: no further batch: a message of lease ${escapeText(record.leaseId)} has failed ${limit} ` +
          `times in this run (--give-up-after ${limit}; last: ${taken.words}); it was acked retry and is pending ` +
          `for the next consumer (--on-failure failed would hand it to the dead-letter queue instead)\n`,
      );
    }
    return this.ended(taken, counts, ExitCode.Ok, givenUp);
  }

  /** A retry waits its delay, the lease held: said, so that a quiet minute is not a hang. */
  private sayWaiting(record: BatchRecord, count: number, delayMs: number, parks: boolean): void {
    if (parks) return;
    this.note(
      `lease ${escapeText(record.leaseId)}: ${plural(count, 'message')} to ack retry or failed in ` +
        `${formatDuration(delayMs)} (--retry-delay, doubling per retry); the lease is held and renewed meanwhile`,
    );
  }

  private sayParked(record: BatchRecord, taken: Taken): void {
    const limit = this.options.retry.giveUpAfter;
    writeMessageNow(
      this.runtime.io,
      `queenctl: a message of lease ${escapeText(record.leaseId)} has failed ${limit} times in this run ` +
        `(--give-up-after ${limit}; last: ${taken.words}): its partition is held, renewed, and takes no further ` +
        `batch until the run ends, when the message is acked retry (--on-failure failed would hand it to the ` +
        `dead-letter queue instead)\n`,
    );
  }

  /** The batch's `acked` event and line, and its status. */
  private ended(taken: Taken, counts: BatchCounts, code: number, last: boolean): BatchEnd {
    const { record } = taken;
    this.emit({ event: 'acked', at: this.at(), leaseId: record.leaseId, ...taken.status, ...counts });
    if (this.metrics) {
      for (const status of ['completed', 'retry', 'failed', 'dlq'] as const)
        this.metrics.messages(status, counts[status]);
    }
    const done = counts.completed === record.messages.length;
    this.note(`acked lease ${escapeText(record.leaseId)}: ${countWords(counts)}${done ? '' : `; ${taken.words}`}`);
    if (code !== ExitCode.Ok) return { code, last };
    return { code: done ? ExitCode.Ok : ExitCode.MessageFailed, last };
  }

  /**
   * One ack request; the broker's results, or the batch's status when it could not be sent or
   * its outcome is unknown (never resent).
   */
  private async sendAck(
    record: BatchRecord,
    items: AckItem[],
  ): Promise<Array<{ item: AckItem; result: AckResult }> | number> {
    if (items.length === 0) return [];
    const { options, runtime } = this;
    const lease = escapeText(record.leaseId);
    try {
      return await ackMessages(
        record,
        items,
        {
          // Only an ack that never reached the broker is sent again: while the lease may still be held.
          retry: { ...options.acquire.retry, retries: Number.POSITIVE_INFINITY },
          deadline: runtime.clock.now() + Math.max(0, options.acquire.seconds * 1000 - this.everyMs),
          // A signal: the ack in flight may finish, but one that never reached the broker waits no more.
          stopRetries: this.soft.signal,
        },
        { ...runtime, signal: this.hard.signal },
        (line) => this.warn(line),
      ).then((results) => results.map((result, index) => ({ item: items[index] as AckItem, result })));
    } catch (caught) {
      if (this.hard.signal.aborted) {
        await writeMessage(
          runtime.io,
          `queenctl: interrupted: the ack of lease ${lease} may or may not have landed; it was not sent again: ` +
            `queenctl lease inspect ${lease} exits 0 while the lease is held\n`,
        );
        return signalExitCode(this.hard.signal.reason);
      }
      if (!(caught instanceof QueenctlError)) throw caught;
      if (this.soft.signal.aborted && isTransient(caught)) {
        await writeMessage(
          runtime.io,
          `queenctl: the ack of lease ${lease} never reached the broker (${escapeText(caught.message)}), and ` +
            `after ${this.signalled} it was not tried again: the batch comes back to the next pop once the lease ` +
            `has expired\n`,
        );
        return caught.exitCode;
      }
      await writeMessage(runtime.io, errorMessage(caught));
      return caught.exitCode;
    }
  }

  /**
   * Holds a lease for `ms` (Infinity: until a signal), renewing it as watch does, so that no
   * consumer is given its messages meanwhile; a signal ends the wait early. Null when it was held
   * throughout; else why not, and the status: 4 lost, 3 the token refused, 2 the broker failed.
   */
  private async hold(leaseId: string, ms: number): Promise<{ code: number; words: string } | null> {
    const { options, runtime } = this;
    let ended: 'lost' | 'error' | null = null;
    const over = new AbortController();
    const stopWaiting = (): void => over.abort();
    this.soft.signal.addEventListener('abort', stopWaiting, { once: true });
    if (this.soft.signal.aborted) over.abort();
    const scheduler = new RenewalScheduler(
      [leaseId],
      {
        seconds: options.acquire.seconds,
        everyMs: this.everyMs,
        requestTimeoutMs: options.requestTimeoutMs,
        concurrency: 1,
      },
      { client: runtime.client, clock: runtime.clock },
      {
        event: (event) => {
          // Its renewals and a loss are events of the run's stream, as those of the command's watch.
          if (event.event === 'renewed' || event.event === 'lost' || event.event === 'retry') {
            this.emitWatchEvent(event);
          }
          if (event.event === 'lost' || (event.event === 'stopped' && event.reason === 'error')) {
            ended = event.event === 'lost' ? 'lost' : 'error';
            over.abort();
          }
        },
        warn: (text) => this.warn(text),
        cannotKeepUp: () => {},
      },
    );
    const renewing = scheduler.run();
    try {
      if (Number.isFinite(ms)) await runtime.clock.sleep(ms, over.signal).catch(() => {});
      else if (!over.signal.aborted) {
        // Until the run ends (a signal): never a timer of Infinity, which Node.js makes 1 ms.
        await new Promise((resolve) => over.signal.addEventListener('abort', resolve, { once: true }));
      }
    } finally {
      this.soft.signal.removeEventListener('abort', stopWaiting);
      scheduler.stop('for');
      await renewing;
    }
    if (ended === null) return null;
    const lease = escapeText(leaseId);
    const refusal = scheduler.refusal;
    if (refusal) return { code: ExitCode.Auth, words: `${escapeText(refusal.message)} (renewing lease ${lease})` };
    if (ended === 'lost') {
      this.metrics?.leaseLost();
      return { code: ExitCode.NotHeld, words: `lease ${lease} was lost while a retry waited its delay` };
    }
    const failure = scheduler.failure;
    const why = failure ? escapeText(failure.message) : 'the broker did not answer';
    return { code: ExitCode.Broker, words: `lease ${lease} could not be renewed while a retry waited (${why})` };
  }

  private watchOptions(delivery: Delivery): WatchOptions & { command: readonly [string, ...string[]] } {
    const { options } = this;
    return {
      leaseIds: [],
      seconds: options.acquire.seconds,
      everyMs: this.everyMs,
      forMs: undefined,
      killAfterMs: options.killAfterMs,
      requestTimeoutMs: options.requestTimeoutMs,
      concurrency: options.concurrency,
      concurrencyGiven: options.concurrencyGiven,
      command: options.command,
      output: options.output,
      tokenOnCommandLine: false,
      // Never inherited: a QUEEN_PARTITIONS of queenctl's own environment would name other partitions.
      childEnv: { QUEEN_PARTITIONS: undefined, ...delivery.env },
      childInput: delivery.input,
      // Side by side, the commands' lines pass through queenctl whole, never cut into each other.
      ...(options.parallel > 1 && { childWholeLines: true }),
    };
  }

  /** One batch's ports: while its command runs, signals to queenctl reach it through `forwarder`. */
  private watchPorts(forwarder: { listener: ((signal: NodeJS.Signals) => void) | null }): WatchPorts {
    return {
      env: this.proc.env,
      argvAfterDashDash: this.proc.argvAfterDashDash,
      launch: this.launch,
      relaySignals: (listener) => {
        forwarder.listener = listener;
        this.forwarders.add(listener);
        return () => {
          this.forwarders.delete(listener);
          if (forwarder.listener === listener) forwarder.listener = null;
        };
      },
    };
  }

  private at(): string {
    return new Date(this.runtime.clock.now()).toISOString();
  }

  /** A renewal of a lease held for a retry, in the event stream as the watch's are. */
  private emitWatchEvent(event: WatchEvent): void {
    if (this.options.output === 'events') this.runtime.io.stdout.write(`${JSON.stringify(event)}\n`);
  }

  private emit(event: RunEvent): void {
    if (this.options.output === 'events') this.runtime.io.stdout.write(`${JSON.stringify(event)}\n`);
  }

  /** A step, for people (log mode only). */
  private note(text: string): void {
    if (this.options.output === 'log') writeMessageNow(this.runtime.io, `queenctl: ${text}\n`);
  }

  private warn(text: string): void {
    if (!this.runtime.io.quiet) writeMessageNow(this.runtime.io, warningMessage(text));
  }
}

/** `3 completed, 1 to retry, 1 dead-lettered, 2 pending (they come back)`. */
export function countWords(counts: BatchCounts): string {
  const parts = [`${counts.completed} completed`];
  if (counts.retry > 0) parts.push(`${counts.retry} acked retry (back at once)`);
  if (counts.failed > 0) parts.push(`${counts.failed} acked failed (counted against the retry limit)`);
  if (counts.dlq > 0) parts.push(`${counts.dlq} dead-lettered`);
  if (counts.refused > 0) parts.push(`${counts.refused} refused by the broker`);
  if (counts.pending > 0) parts.push(`${counts.pending} not acked (they come back with the one before them)`);
  return parts.join(', ');
}

/** Adds one acked message to the counts: what it was acked as, or that the broker refused it. */
function tally(counts: BatchCounts, item: AckItem, result: AckResult): void {
  if (!result.success) counts.refused++;
  else if (result.dlq) counts.dlq++;
  else counts[item.status]++;
}
