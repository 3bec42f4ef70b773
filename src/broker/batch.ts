/**
 * The batch record: what `lease acquire -o json` prints and `lease ack` (and `lease run`) read
 * (docs/cli-contract.md#batch-record). One place holds its shape and its validation, so a file
 * that is not a batch record is refused before anything is sent, and whatever a record says is
 * checked as hostile input: it may have been edited, truncated or written by something else.
 */
import { checkLeaseId, isPlainLeaseId } from '../args.js';
import { UsageError } from '../exit.js';
import { checkName } from '../names.js';
import { escapeText } from '../output/sanitise.js';

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

/**
 * A message's transaction id (the producer's choice), partition name and partition id are
 * whatever string the broker stores, control characters included: a consumer that refused one
 * would leave its lease to expire and every next consumer would meet it again, for ever. They are
 * acked exactly as given (inside JSON) and shown through escapeText wherever printed. Only their
 * length is bounded: the broker's columns hold at most 255 characters, which is at most 510 UTF-16
 * units; 1,024 is room enough and keeps a refusal's message and a table row of sane size.
 * (A lease id stays as strict as a pop gives it: args.ts, isPlainLeaseId.)
 */
export const MAX_ID_LENGTH = 1024;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A transaction id or partition id as the broker stores it: a non-empty string of a sane length. */
export function isMessageId(value: unknown): value is string {
  return typeof value === 'string' && value !== '' && value.length <= MAX_ID_LENGTH;
}

/** A partition name as the broker stores it: any string of a sane length. */
export function isPartitionName(value: unknown): value is string {
  return typeof value === 'string' && value.length <= MAX_ID_LENGTH;
}

/**
 * Each message's JSON text as the pop's answer gave it (compact: one line), by message object.
 * `data` may nest deeper than JSON.stringify can go (jsonb takes 10,000 levels; V8's stringify
 * throws past ~4,000): the text the broker sent is handed on instead of re-made.
 */
const messageTexts = new WeakMap<object, string>();

/** Remembers `text` as the compact JSON text of `message` (pop.ts, for each message it read). */
export function rememberMessageText(message: BatchMessage, text: string): void {
  messageTexts.set(message, text);
}

/**
 * The message's compact JSON text, one line without its newline: the text the pop gave when there
 * is one, else its stringification, which never throws for deep data.
 */
export function messageLine(message: BatchMessage): string {
  return messageTexts.get(message) ?? jsonText(message) ?? 'null';
}

/**
 * The record as `lease acquire -o json` prints it, without the trailing newline: its keys in
 * their order, each message as messageLine gives it. Never throws for deep data.
 */
export function batchRecordText(record: BatchRecord): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(record)) {
    if (key === 'messages' && Array.isArray(value)) {
      parts.push(`${JSON.stringify(key)}:[${(value as BatchMessage[]).map(messageLine).join(',')}]`);
      continue;
    }
    const text = jsonText(value);
    if (text !== undefined) parts.push(`${JSON.stringify(key)}:${text}`);
  }
  return `{${parts.join(',')}}`;
}

/**
 * JSON.stringify of a JSON value (what JSON.parse gives), at any depth: natively when it can,
 * else without recursion. `maxChars`: stop once the text is at least this long (for a shortened
 * display). Undefined for a value JSON.stringify would give undefined for.
 */
export function jsonText(value: unknown, maxChars = Infinity): string | undefined {
  if (maxChars === Infinity) {
    try {
      return JSON.stringify(value);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
    }
  }
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  type Frame = { close: string; entries: Array<[string | null, unknown]>; index: number; emitted: boolean };
  const out: string[] = [];
  let length = 0;
  const emit = (text: string): void => {
    out.push(text);
    length += text.length;
  };
  const open = (container: object): Frame => {
    if (Array.isArray(container)) {
      emit('[');
      return { close: ']', entries: container.map((item): [null, unknown] => [null, item]), index: 0, emitted: false };
    }
    emit('{');
    return { close: '}', entries: Object.entries(container), index: 0, emitted: false };
  };
  const stack: Frame[] = [open(value)];
  while (stack.length > 0 && length < maxChars) {
    const frame = stack[stack.length - 1]!;
    if (frame.index >= frame.entries.length) {
      emit(frame.close);
      stack.pop();
      continue;
    }
    const [key, item] = frame.entries[frame.index]!;
    frame.index++;
    const isContainer = typeof item === 'object' && item !== null;
    const scalar = isContainer ? undefined : JSON.stringify(item);
    // As JSON.stringify: an object drops a key whose value has no JSON; an array says null.
    if (key !== null && !isContainer && scalar === undefined) continue;
    if (frame.emitted) emit(',');
    frame.emitted = true;
    if (key !== null) emit(`${JSON.stringify(key)}:`);
    if (isContainer) stack.push(open(item));
    else emit(scalar ?? 'null');
  }
  return out.join('');
}

/** How deep a JSON value nests (a scalar: 0), counted without recursion, up to `max`. */
export function jsonDepth(value: unknown, max = Infinity): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (typeof item !== 'object' || item === null) continue;
    if (depth > deepest) deepest = depth;
    if (deepest >= max) return deepest;
    for (const child of Array.isArray(item) ? item : Object.values(item)) {
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
    }
  }
  return deepest;
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
  if (!Array.isArray(partitions) || !partitions.every(isPartitionName)) {
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
    if (!isPartitionName(message.partition)) return refuse(`${at} has no usable partition name`);
    // A repeated ack counts again and can release the lease under the rest of the batch
    // (docs/broker.md#ack): a record naming a message twice is not one acquire wrote.
    const key = `${message.partitionId}\u0000${message.transactionId}`;
    if (seen.has(key)) return refuse(`${at} repeats transactionId ${escapeText(message.transactionId)}`);
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
