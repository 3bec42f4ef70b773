/**
 * How `lease run` retries what did not succeed (docs/cli-contract.md#lease-run, "Failures"):
 *
 * - a retry waits `--retry-delay`, each next retry of the same message in this run twice as long,
 *   at most a minute (the lease held and renewed meanwhile, so no consumer takes it early);
 * - only a message that failed alone, or that the command named, is counted as poison (a batch
 *   that failed without naming any is halved under its lease until one is alone: consumer.ts);
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

export class RetryPolicy {
  /** Retries acked per message in this run: the doubling counts them. */
  private readonly retries = new Map<string, number>();
  /** Failures per message that failed alone or was named by the command. */
  private readonly failures = new Map<string, number>();

  constructor(private readonly options: RetryOptions) {}

  /** Decides the decisive message of one partition's acks (the first that did not succeed). */
  decide(acks: PartitionAcks, messages: readonly BatchMessage[], outcomes: readonly Outcome[]): Decision | null {
    for (const index of acks.completed) {
      const key = messageKey(messages[index] as BatchMessage);
      this.retries.delete(key);
      this.failures.delete(key);
    }
    if (acks.decisive === null) return null;
    const message = messages[acks.decisive] as BatchMessage;
    const outcome = outcomes[acks.decisive] as Exclude<Outcome, Completed>;
    const key = messageKey(message);
    // What queenctl did, not the message: back at once, counting nothing.
    if (outcome.cause === 'stopped' || outcome.cause === 'not-run') {
      return { status: 'retry', delayMs: 0, failures: 0, givenUp: false };
    }
    const delayMs = this.delayFor(key);
    // Failed among others, none named, and the halving cut short (a signal, a lost lease): it
    // comes back, counted nowhere. Only a message that failed alone, that the command named, or
    // the first line a command that exited 0 never took, counts.
    if (outcome.cause === 'command' && (outcome.tried ?? 1) > 1) {
      return { status: 'retry', delayMs, failures: 0, givenUp: false };
    }
    const failures = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, failures);
    if (outcome.status === 'failed') return { status: 'failed', delayMs, failures, givenUp: false };
    if (failures < this.options.giveUpAfter) return { status: 'retry', delayMs, failures, givenUp: false };
    if (this.options.onFailure === 'failed') return { status: 'failed', delayMs, failures, givenUp: false };
    return { status: 'retry', delayMs: 0, failures, givenUp: true };
  }

  /** The message went to the dead-letter queue: nothing of it is remembered. */
  deadLettered(message: BatchMessage): void {
    const key = messageKey(message);
    this.retries.delete(key);
    this.failures.delete(key);
  }

  /** A retry of the message was acked: the next one waits twice as long. */
  retried(message: BatchMessage): void {
    const key = messageKey(message);
    this.retries.set(key, (this.retries.get(key) ?? 0) + 1);
  }

  private delayFor(key: string): number {
    const retries = this.retries.get(key) ?? 0;
    // 2 ** 30 and more: capped long before, and never Infinity.
    return Math.min(MAX_RETRY_DELAY_MS, this.options.retryDelayMs * 2 ** Math.min(retries, 30));
  }
}
