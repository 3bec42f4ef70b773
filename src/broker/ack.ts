/**
 * The batch ack route (docs/broker.md#ack): the request `lease ack` (and `lease run`) sends,
 * and what its answer says of each message, as typed results or a typed error.
 *
 * Three rules come from the recordings and are kept here, not in each caller:
 * - every acknowledgement carries the batch's lease id, and the consumer group goes at the top
 *   level, the only place the batch route reads it: an ack without the lease id is not checked
 *   and can move the cursor under the worker that re-claimed the batch;
 * - an empty batch is never sent: the broker never answers it;
 * - an ack is sent once. A repeated ack counts again and can release the lease under the rest of
 *   the batch, so one whose outcome is unknown (no answer after the request may have been
 *   written: a timeout, a reset, a 5xx) is an AckOutcomeUnknown, never resent (client.ts).
 */
import { BrokerError, QueenctlError } from '../exit.js';
import { shellWord } from '../output/words.js';
import type { BatchMessage, BatchRecord } from './batch.js';
import { excerpt, isObject, statusError, type RawAnswer, type RouteWords } from './contract.js';

export const ACK_BATCH_PATH = '/api/v1/ack/batch';

export const ACK_STATUSES = ['completed', 'retry', 'failed'] as const;
export type AckStatus = (typeof ACK_STATUSES)[number];

/** The broker's reason for an ack refused for its lease (expired, released, another group's). */
export const LEASE_REFUSED = 'Invalid or expired lease';

/** What the broker said of one message. */
export interface AckResult {
  transactionId: string;
  partitionId: string;
  success: boolean;
  error: string | null;
  /** The message went to the dead-letter queue (a `failed` ack at the retry limit). */
  dlq: boolean;
  /** This ack released the lease (every message acked, or a retry or failed). */
  leaseReleased: boolean;
}

export const ACK_WORDS: RouteWords = {
  action: 'the ack',
  roleHint: 'acking needs a token with the read-write role',
  route: 'ack route',
};

/** One message of an ack, and what it is acked as: `lease run` acks each message by its own outcome. */
export interface AckItem {
  message: BatchMessage;
  status: AckStatus;
  error: string | null;
}

/** Every message of a record acked alike (`lease ack --status`). */
export function ackItems(record: Pick<BatchRecord, 'messages'>, status: AckStatus, error: string | null): AckItem[] {
  return record.messages.map((message) => ({ message, status, error }));
}

/**
 * The body of one batch ack: each message with the lease id and its own status, the group at
 * the top level. The ids go as the broker gave them, whatever their characters.
 */
export function ackBatchBody(
  record: Pick<BatchRecord, 'leaseId' | 'consumerGroup'>,
  items: readonly AckItem[],
): string {
  if (items.length === 0) throw new Error('an empty batch ack is never sent: the broker never answers it');
  return JSON.stringify({
    acknowledgments: items.map(({ message, status, error }) => ({
      transactionId: message.transactionId,
      partitionId: message.partitionId,
      leaseId: record.leaseId,
      status,
      error,
    })),
    consumerGroup: record.consumerGroup,
  });
}

/**
 * An ack that may or may not have landed: exit 2, and what to do instead of sending it again.
 * `cause` says what happened (no answer within --timeout, the connection reset, a 5xx).
 */
export class AckOutcomeUnknown extends BrokerError {
  constructor(leaseId: string, cause: string) {
    super(
      `the ack of lease ${leaseId} may or may not have landed: ${cause}; it was not sent again`,
      false,
      `do not resend it blindly (a repeated ack counts again and can release the lease under the rest of the batch): ` +
        `queenctl lease inspect ${shellWord(leaseId)} exits 0 while the lease is held (the ack did not release it); ` +
        `the next lease acquire of the queue hands out what was not acked once the lease is gone`,
    );
  }
}

function outsideContract(leaseId: string, what: string, body: string): BrokerError {
  // The broker answered, so the ack reached it: what it did with each message is what is unknown.
  return new AckOutcomeUnknown(
    leaseId,
    `the broker's answer is outside the contract (${what}; it sent ${excerpt(body)})`,
  );
}

/** Turns the answer of one batch ack into a result per message, in the record's order. */
export function parseAckAnswer(
  record: {
    leaseId: string;
    messages: ReadonlyArray<Pick<BatchMessage, 'transactionId' | 'partitionId' | 'partition'>>;
  },
  answer: RawAnswer,
  server: string,
): AckResult[] {
  const { leaseId } = record;
  // A 5xx, or a success that is not the route's 200 (201, 204: no broker answers so), may have
  // come after the ack was applied: its outcome is unknown, never "nothing was acked".
  if (answer.status >= 500 || (answer.status > 200 && answer.status < 300)) {
    const said = statusError(answer, server, ACK_WORDS);
    throw new AckOutcomeUnknown(leaseId, said.message);
  }
  if (answer.status !== 200) {
    // The broker refused the request as a whole (400, 401, 403, 429, ...): nothing was acked.
    const said = statusError(answer, server, ACK_WORDS);
    if (!(said instanceof BrokerError)) throw said;
    throw new BrokerError(`${said.message}; nothing was acked`, false, said.hint, said.status);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.body);
  } catch {
    throw outsideContract(leaseId, 'HTTP 200 with a body that is not JSON', answer.body);
  }
  if (!Array.isArray(parsed)) throw outsideContract(leaseId, 'not a list of results', answer.body);
  const byTransaction = new Map<string, Record<string, unknown>[]>();
  for (const entry of parsed) {
    if (!isObject(entry) || typeof entry.transactionId !== 'string') {
      throw outsideContract(leaseId, 'a result without a transactionId', answer.body);
    }
    byTransaction.set(entry.transactionId, [...(byTransaction.get(entry.transactionId) ?? []), entry]);
  }
  return record.messages.map((message) => {
    // A transaction id is unique within its partition only: the result naming this message's
    // partition (`partitionName`), else the next for its id, in order.
    const entries = byTransaction.get(message.transactionId);
    const at = entries?.findIndex((candidate) => candidate.partitionName === message.partition) ?? -1;
    const entry = at >= 0 ? entries?.splice(at, 1)[0] : entries?.shift();
    if (entry === undefined) {
      throw outsideContract(leaseId, `no result for message ${message.transactionId}`, answer.body);
    }
    const { success, error, dlq, leaseReleased } = entry;
    if (typeof success !== 'boolean') throw outsideContract(leaseId, 'success is not a boolean', answer.body);
    if (error !== null && error !== undefined && typeof error !== 'string') {
      throw outsideContract(leaseId, 'error is not a string', answer.body);
    }
    return {
      transactionId: message.transactionId,
      partitionId: message.partitionId,
      success,
      error: typeof error === 'string' ? error : null,
      dlq: dlq === true,
      leaseReleased: leaseReleased === true,
    };
  });
}

/** True when a result means the message was not acked because of the lease. */
export function refusedForLease(result: AckResult): boolean {
  return !result.success && result.error === LEASE_REFUSED;
}

export function isAckOutcomeUnknown(error: unknown): error is AckOutcomeUnknown {
  return error instanceof QueenctlError && error instanceof AckOutcomeUnknown;
}
