/**
 * The batch record: what `lease acquire -o json` prints and `lease ack` (and `lease run`) read
 * (docs/cli-contract.md#batch-record). One place holds its shape and its validation, so a file
 * that is not a batch record is refused before anything is sent, and whatever a record says is
 * checked as hostile input: it may have been edited, truncated or written by something else.
 */
import { checkLeaseId, isPlainLeaseId } from '../args.js';
import { UsageError } from '../exit.js';
import { checkName } from '../names.js';

/** One message as the pop delivered it: every key the broker sent, these three at least. */
export interface BatchMessage {
  transactionId: string;
  partitionId: string;
  partition: string;
  [key: string]: unknown;
}

export interface BatchRecord {
  leaseId: string;
  queue: string;
  consumerGroup: string;
  /** The partitions the lease holds, in the order their messages came. */
  partitions: string[];
  /** The lease's expiry as the broker reported it right after the pop; null when unknown. */
  expiresAt: string | null;
  messages: BatchMessage[];
}

/**
 * The largest batch record `lease ack` reads. A pop's answer is read up to 64 MiB (client.ts);
 * its record, keys renamed and a message's `data` kept as sent, is about as large, so twice that
 * is room enough, and a file of gigabytes is refused before it fills memory.
 */
export const MAX_BATCH_RECORD_BYTES = 128 * 1024 * 1024;

/** Identifiers of a message: non-empty, no controls, of a sane length (the broker mints UUIDs). */
const MAX_ID_LENGTH = 256;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function isMessageId(value: unknown): value is string {
  return typeof value === 'string' && value !== '' && value.length <= MAX_ID_LENGTH && !CONTROL.test(value);
}

/** The partitions of a batch's messages, each once, in the order they first appear. */
export function partitionsOf(messages: readonly Pick<BatchMessage, 'partition'>[]): string[] {
  return [...new Set(messages.map((message) => message.partition))];
}

/**
 * A batch record from text: a file's or standard input's (`source` names it in messages).
 * Anything else is a UsageError (exit 1) saying what is wrong; nothing has been sent then.
 */
export function parseBatchRecord(text: string, source: string): BatchRecord {
  const refuse = (what: string): never => {
    throw new UsageError(
      `${source} is not a batch record: ${what}; nothing was sent`,
      'give the file that queenctl lease acquire -o json wrote, unchanged',
    );
  };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    refuse(`it is not JSON (${(error as Error).message.slice(0, 120)})`);
  }
  if (!isObject(parsed)) return refuse('it is not a JSON object');
  const { leaseId, queue, consumerGroup, partitions, expiresAt, messages } = parsed;
  if (typeof leaseId !== 'string') return refuse('leaseId is missing or not a string');
  const named = <T>(check: () => T): T => {
    try {
      return check();
    } catch (error) {
      return refuse((error as Error).message);
    }
  };
  named(() => checkLeaseId(leaseId, 'its leaseId'));
  // As the pop gave it: an id edited to hold spaces or to begin with `-` is no pop's.
  if (!isPlainLeaseId(leaseId)) return refuse('its leaseId is not one plain lease id as a pop gives it');
  if (typeof queue !== 'string') return refuse('queue is missing or not a string');
  named(() => checkName(queue, 'queue', 'its queue', true));
  if (typeof consumerGroup !== 'string') return refuse('consumerGroup is missing or not a string');
  named(() => checkName(consumerGroup, 'group', 'its consumerGroup', true));
  if (!Array.isArray(partitions) || !partitions.every((p) => typeof p === 'string')) {
    return refuse('partitions is not a list of names');
  }
  if (expiresAt !== null && expiresAt !== undefined && typeof expiresAt !== 'string') {
    return refuse('expiresAt is neither a timestamp nor null');
  }
  if (!Array.isArray(messages)) return refuse('messages is missing or not a list');
  // An empty batch ack is never answered by the broker (docs/broker.md#ack): never sent.
  if (messages.length === 0) return refuse('it holds no messages, and an empty batch is never acked');
  const seen = new Set<string>();
  for (const [index, message] of messages.entries()) {
    const at = `message ${index + 1}`;
    if (!isObject(message)) return refuse(`${at} is not an object`);
    if (!isMessageId(message.transactionId)) return refuse(`${at} has no usable transactionId`);
    if (!isMessageId(message.partitionId)) return refuse(`${at} has no usable partitionId`);
    if (typeof message.partition !== 'string') return refuse(`${at} has no partition name`);
    // A repeated ack counts again and can release the lease under the rest of the batch
    // (docs/broker.md#ack): a record naming a message twice is not one acquire wrote.
    const key = `${message.partitionId}\u0000${message.transactionId}`;
    if (seen.has(key)) return refuse(`${at} repeats transactionId ${message.transactionId}`);
    seen.add(key);
  }
  return {
    leaseId,
    queue,
    consumerGroup,
    partitions: partitions as string[],
    expiresAt: (expiresAt as string | null | undefined) ?? null,
    messages: messages as BatchMessage[],
  };
}
