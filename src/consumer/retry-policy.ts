/**
 * How `lease run` retries what did not succeed (docs/cli-contract.md#lease-run, "Failures"):
 *
 * - a retry waits `--retry-delay`, each next retry of the same message in this run twice as long,
 *   at most a minute (the lease held and renewed meanwhile, so no consumer takes it early);
 * - a batch of several messages that failed without saying which is taken again in halves, its
 *   partition in smaller batches, until the failing message is alone (AWS Lambda's
 *   BisectBatchOnFunctionError): the messages that succeed are completed, and only a message that
 *   failed alone, or that the command named, is counted as poison;
 * - a message that failed alone `--give-up-after` times is acked as `--on-failure` says.
 *
 * State of one run, in one place; no clock and no broker (the consumer waits and acks).
 */
import type { BatchMessage } from '../broker/batch.js';
import type { PartitionAcks } from './ack-rule.js';
import { messageKey, type Outcome } from './outcomes.js';

type Completed = { status: 'completed' };

export const ON_FAILURE = ['retry', 'failed'] as const;
export type OnFailure = (typeof ON_FAILURE)[number];

export const DEFAULT_RETRY_DELAY_MS = 1000;
export const MAX_RETRY_DELAY_MS = 60_000;
export const DEFAULT_GIVE_UP_AFTER = 3;

export interface RetryOptions {
  retryDelayMs: number;
  giveUpAfter: number;
  onFailure: OnFailure;
}

/** What becomes of the first message of a partition that did not succeed. */
export interface Decision {
  status: 'retry' | 'failed';
  /** Wait this long before the ack, the lease held. */
  delayMs: number;
  /** It failed alone (or was named) this many times in this run; 0 when not counted. */
  failures: number;
  /** It reached --give-up-after with --on-failure retry: the run takes no further batch. */
  givenUp: boolean;
}

/** A partition taken in smaller batches: the sizes still to take, the next first. */
interface Bisection {
  name: string;
  sizes: number[];
}

export class RetryPolicy {
  /** Retries acked per message in this run: the doubling counts them. */
  private readonly retries = new Map<string, number>();
  /** Failures per message that failed alone or was named by the command. */
  private readonly failures = new Map<string, number>();
  /** Partitions being bisected, by partition id. */
  private readonly bisections = new Map<string, Bisection>();

  constructor(private readonly options: RetryOptions) {}

  /**
   * The messages of a batch to give the command, and those held back: while its partition is
   * bisected, only the first `size` of its messages; the rest go back unread.
   */
  work(messages: readonly BatchMessage[]): { given: boolean[] } {
    const seen = new Map<string, number>();
    const given = messages.map((message) => {
      const bisection = this.bisections.get(message.partitionId);
      const count = (seen.get(message.partitionId) ?? 0) + 1;
      seen.set(message.partitionId, count);
      return bisection === undefined || count <= (bisection.sizes[0] as number);
    });
    return { given };
  }

  /**
   * Decides the decisive message of one partition's acks, and learns from the partition's batch:
   * success ends a step of its bisection; a failure of several unnamed messages halves it.
   */
  decide(acks: PartitionAcks, messages: readonly BatchMessage[], outcomes: readonly Outcome[]): Decision | null {
    const bisection = this.bisections.get(acks.partitionId);
    for (const index of acks.completed) {
      const key = messageKey(messages[index] as BatchMessage);
      this.retries.delete(key);
      this.failures.delete(key);
    }
    const decisive = acks.decisive === null ? null : (outcomes[acks.decisive] as Exclude<Outcome, Completed>);
    // Every message the command was given succeeded: this step of a bisection is done.
    if (bisection && (decisive === null || decisive.cause === 'held-back')) this.nextStep(acks.partitionId, bisection);
    if (acks.decisive === null || decisive === null) return null;
    const message = messages[acks.decisive] as BatchMessage;
    const outcome = decisive;
    const key = messageKey(message);
    // What queenctl did, not the message: back at once, counting nothing.
    if (outcome.cause === 'stopped' || outcome.cause === 'not-run' || outcome.cause === 'held-back') {
      return { status: 'retry', delayMs: 0, failures: 0, givenUp: false };
    }
    const delayMs = this.delayFor(key);
    // The messages of this partition the command failed on without naming any: from the
    // decisive one on, those it was given (the held back ones were never tried). The first line
    // a command that exited 0 never took is named by that (`unread`), as is a reported one.
    const unnamed = outcome.cause === 'command' ? this.triedFrom(acks, outcomes) : 1;
    if (unnamed > 1) {
      this.split(acks.partitionId, message.partition, unnamed, bisection);
      return { status: 'retry', delayMs, failures: 0, givenUp: false };
    }
    const failures = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, failures);
    if (outcome.status === 'failed') return { status: 'failed', delayMs, failures, givenUp: false };
    if (failures < this.options.giveUpAfter) return { status: 'retry', delayMs, failures, givenUp: false };
    if (this.options.onFailure === 'failed') return { status: 'failed', delayMs, failures, givenUp: false };
    return { status: 'retry', delayMs: 0, failures, givenUp: true };
  }

  /**
   * The message went to the dead-letter queue: a bisection of its partition moves past it, unless
   * the rest of its batch (`rest`), still under the lease, is settled next and moves it then.
   */
  deadLettered(message: BatchMessage, rest: boolean): void {
    const key = messageKey(message);
    this.retries.delete(key);
    this.failures.delete(key);
    const bisection = this.bisections.get(message.partitionId);
    if (bisection && !rest) this.nextStep(message.partitionId, bisection);
  }

  /** A retry of the message was acked: the next one waits twice as long. */
  retried(message: BatchMessage): void {
    const key = messageKey(message);
    this.retries.set(key, (this.retries.get(key) ?? 0) + 1);
  }

  /** The partitions being bisected: the next batch of each is taken through the partition route. */
  bisected(): Array<{ partitionId: string; name: string; size: number }> {
    return [...this.bisections].map(([partitionId, { name, sizes }]) => ({
      partitionId,
      name,
      size: sizes[0] as number,
    }));
  }

  /** Another consumer has the partition now, or it is empty: its bisection is over for this run. */
  forget(partitionId: string): void {
    this.bisections.delete(partitionId);
  }

  private delayFor(key: string): number {
    const retries = this.retries.get(key) ?? 0;
    // 2 ** 30 and more: capped long before, and never Infinity.
    return Math.min(MAX_RETRY_DELAY_MS, this.options.retryDelayMs * 2 ** Math.min(retries, 30));
  }

  private triedFrom(acks: PartitionAcks, outcomes: readonly Outcome[]): number {
    let tried = 1;
    for (const index of acks.comeBack) {
      const outcome = outcomes[index] as Outcome;
      if (outcome.status !== 'completed' && outcome.cause === 'held-back') break;
      tried++;
    }
    return tried;
  }

  private split(partitionId: string, name: string, count: number, bisection: Bisection | undefined): void {
    const first = Math.ceil(count / 2);
    const halves = [first, count - first];
    // The step that failed is replaced by its halves; the steps after it stay.
    const rest = bisection ? bisection.sizes.slice(1) : [];
    this.bisections.set(partitionId, { name, sizes: [...halves, ...rest] });
  }

  private nextStep(partitionId: string, bisection: Bisection): void {
    bisection.sizes.shift();
    if (bisection.sizes.length === 0) this.bisections.delete(partitionId);
  }
}
