/**
 * The outcome of each message of a batch `lease run` took (docs/cli-contract.md#lease-run, "What
 * the command says"): what the command reported in its results file, else what its end says.
 * A message is completed only when the command said so, or exited 0 after its line on standard
 * input was written; anything else did not succeed, and why decides how it is retried
 * (retry-policy.ts) and what is said of it.
 */
import type { BatchMessage } from '../broker/batch.js';

/** Why a message did not succeed. */
export type Cause =
  /** The command named it in its results file (`retry` or `failed`). */
  | 'reported'
  /** The command failed (a non-zero status, a signal it did not get from queenctl) without naming it. */
  | 'command'
  /** The command exited 0, but the message's line on standard input was never written to it. */
  | 'unread'
  /** queenctl stopped the command: a signal to queenctl, forwarded. */
  | 'stopped'
  /** The command never ran on it: it could not be started, or queenctl could not prepare the batch. */
  | 'not-run';

export type Outcome =
  | { status: 'completed' }
  | {
      status: 'retry' | 'failed';
      cause: Cause;
      error: string;
      /**
       * `command`: how many messages of its partition the command was given in the run that
       * failed; 1 when it failed alone, the one a batch that failed without naming any is halved
       * down to (consumer.ts).
       */
      tried?: number;
    };

export const COMPLETED: Outcome = { status: 'completed' };

/** What the command's results file says of one message. */
export interface Reported {
  status: 'completed' | 'retry' | 'failed';
  error: string | null;
}

/** How the command ended, as far as the outcomes care. */
export type CommandEnd =
  /** It ran and exited (or a signal it did not get from queenctl ended it: `signal`). */
  | { kind: 'exited'; status: number; inputWritten: number; words: string; signal?: string }
  /** queenctl forwarded a signal to it, or it never started, or queenctl failed before it ran. */
  | { kind: 'stopped' | 'not-run'; words: string; signal?: string };

/** One key per message: a transaction id is unique within its partition only. */
export function messageKey(message: Pick<BatchMessage, 'partitionId' | 'transactionId'>): string {
  return `${message.partitionId}\u0000${message.transactionId}`;
}

/**
 * Each message's outcome, in the batch's order. `reported` maps a message's index to what the
 * command said of it; the last word the command wrote about a message is the one given here.
 */
export function outcomesOf(
  messages: readonly BatchMessage[],
  end: CommandEnd,
  reported: ReadonlyMap<number, Reported>,
): Outcome[] {
  const perPartition = new Map<string, number>();
  for (const message of messages)
    perPartition.set(message.partitionId, (perPartition.get(message.partitionId) ?? 0) + 1);
  return messages.map((message, index): Outcome => {
    const said = reported.get(index);
    if (said !== undefined) {
      if (said.status === 'completed') return COMPLETED;
      return { status: said.status, cause: 'reported', error: said.error ?? `the command reported ${said.status}` };
    }
    if (end.kind !== 'exited') return { status: 'retry', cause: end.kind, error: end.words };
    if (end.status !== 0) {
      return { status: 'retry', cause: 'command', error: end.words, tried: perPartition.get(message.partitionId) ?? 1 };
    }
    if (index < end.inputWritten) return COMPLETED;
    return {
      status: 'retry',
      cause: 'unread',
      error: `${end.words}, before its line on standard input was written: it cannot have read it`,
    };
  });
}
