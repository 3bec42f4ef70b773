/**
 * The pop routes (docs/broker.md#pop): the request `lease acquire` (and `lease run`) sends, and
 * what its answer means, as a typed outcome or a typed error. Never `autoAck`: a batch without a
 * lease cannot be renewed, acked with its lease, or given back.
 *
 * Like the renewal (contract.ts), an answer is checked against its shape: HTTP 200 and
 * `success: true` prove nothing by themselves, and anything outside the shape is a BrokerError
 * quoting what came back.
 */
import { BrokerError } from '../exit.js';
import { isPlainLeaseId } from '../args.js';
import { escapeText } from '../output/sanitise.js';
import {
  isMessageId,
  isPartitionName,
  partitionsOf,
  rememberMessageText,
  type BatchMessage,
  type BatchRecord,
} from './batch.js';
import { excerpt, FAILURE_HINTS, isObject, statusError, type RawAnswer, type RouteWords } from './contract.js';
import { QUEUE_MODE_GROUP } from './consumer-groups.js';
import { PopAnswerScanner, ScanRefusal } from './pop-scan.js';

/** The most messages one pop may ask for (`--batch`), and so the most its answer may hold. */
export const MAX_POP_BATCH = 10_000;

export interface PopRequest {
  queue: string;
  /** The partition route: this partition or nothing. */
  partition?: string | undefined;
  /** Default: queue mode (`__QUEUE_MODE__`), sent as the broker's default, i.e. not at all. */
  group?: string | undefined;
  /** The most messages; the broker's default when not given. */
  batch?: number | undefined;
  /** The most partitions one lease may claim (the broker's default is 1). */
  partitions?: number | undefined;
  /** A long poll: wait up to this long for something to take. */
  waitMs?: number | undefined;
}

/** What one pop came to. */
export type PopOutcome =
  /** A lease on at least one message; `expiresAt` is not in a pop's answer. */
  | { kind: 'lease'; batch: Omit<BatchRecord, 'expiresAt'>; brokerDateMs: number | null }
  /** A lease on no messages (docs/broker.md#pop): it holds its partition for the lease time. */
  | { kind: 'empty-lease'; leaseId: string; queue: string; consumerGroup: string; partitions: string[] }
  /** `no_available_partition`, or (`waited`) a long poll that found nothing by its timeout. */
  | { kind: 'nothing'; waited: boolean }
  /** The partition route's partition is held by another lease. */
  | { kind: 'lease-held' };

export const POP_WORDS: RouteWords = {
  action: 'the pop',
  roleHint: 'taking a batch needs a token with the read-write role',
  route: 'pop route',
};

/** The path and query of a pop; names percent-encoded, never interpreted; never autoAck. */
export function popPath(request: PopRequest): string {
  const queue = encodeURIComponent(request.queue);
  const path =
    request.partition === undefined
      ? `/api/v1/pop/queue/${queue}`
      : `/api/v1/pop/queue/${queue}/partition/${encodeURIComponent(request.partition)}`;
  const query = new URLSearchParams();
  if (request.batch !== undefined) query.set('batch', String(request.batch));
  if (request.partitions !== undefined) query.set('partitions', String(request.partitions));
  if (request.group !== undefined && request.group !== QUEUE_MODE_GROUP) query.set('consumerGroup', request.group);
  if (request.waitMs !== undefined) {
    query.set('wait', 'true');
    query.set('timeout', String(request.waitMs));
  }
  const text = query.toString();
  return text === '' ? path : `${path}?${text}`;
}

/**
 * A pop that got no usable answer after it may have been read: it may have taken a lease that
 * nobody knows the id of. Not sent again: a second pop would take another.
 */
export function popOutcomeUnknown(queue: string, cause: string): BrokerError {
  return new BrokerError(
    `the pop of queue ${queue} may or may not have taken a lease: ${cause}; it was not sent again`,
    false,
    `a lease it took holds its messages for the queue's lease time, then they come back; ` +
      `queenctl lease list --queue ${queue} shows the leases held now`,
  );
}

/** What to know about a lease an answer that is refused may have taken. */
function leaseHint(queue: string): string {
  return (
    `a lease the pop may have taken holds its messages for the queue's lease time, then they come back; ` +
    `queenctl lease list --queue ${escapeText(queue)} shows the leases held now`
  );
}

function outsideContract(request: PopRequest, what: string, body: string): BrokerError {
  return new BrokerError(
    `the broker's answer to the pop is outside the contract: ${what}; it sent ${excerpt(body)}`,
    false,
    leaseHint(request.queue),
  );
}

/** An answer refused by the scan (pop-scan.ts), before it was parsed: what limit it passed. */
function refusedAnswer(request: PopRequest, refusal: ScanRefusal): BrokerError {
  return new BrokerError(
    `the broker's answer to the pop of queue ${escapeText(request.queue)} is outside the contract: ` +
      `${refusal.what}; it was not read further`,
    false,
    leaseHint(request.queue),
  );
}

/** The scan of one pop's answer: the most messages it may hold is what the pop asked for. */
function scannerFor(request: PopRequest): PopAnswerScanner {
  return new PopAnswerScanner({ maxMessages: request.batch ?? MAX_POP_BATCH });
}

/**
 * Checks a pop's answer as its bytes arrive (the transport calls it with each chunk): an answer
 * past a limit of pop-scan.ts is refused, a BrokerError, before the rest is read or parsed.
 */
export function popBodyInspector(request: PopRequest): (chunk: Uint8Array) => void {
  const scanner = scannerFor(request);
  return (chunk) => {
    try {
      scanner.pushBytes(chunk);
    } catch (error) {
      if (error instanceof ScanRefusal) throw refusedAnswer(request, error);
      throw error;
    }
  };
}

function header(headers: RawAnswer['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Turns one answer of a pop route into a PopOutcome, or throws AuthError / BrokerError. */
export function parsePop(request: PopRequest, answer: RawAnswer, server: string): PopOutcome {
  // A 5xx may come after the broker took a lease (a proxy's 502/504): not a pop to repeat.
  if (answer.status >= 500) throw popOutcomeUnknown(request.queue, statusError(answer, server, POP_WORDS).message);
  if (answer.status !== 200) throw statusError(answer, server, POP_WORDS);
  const { body } = answer;
  // Scanned whole (also when no transport inspected it as it came): the limits, then each
  // message's own text, before JSON.parse builds anything.
  let messageTexts: Array<string | null>;
  try {
    messageTexts = scannerFor(request).scanText(body).messageTexts;
  } catch (error) {
    if (error instanceof ScanRefusal) throw refusedAnswer(request, error);
    throw error;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw outsideContract(request, 'HTTP 200 with a body that is not JSON', body);
  }
  if (!isObject(parsed)) throw outsideContract(request, 'HTTP 200 with JSON that is not an object', body);
  const { success, error, leaseId, messages } = parsed;
  if (success === false) {
    if (error === 'no_available_partition') return { kind: 'nothing', waited: false };
    if (error === 'lease_held') return { kind: 'lease-held' };
    if (typeof error === 'string') {
      throw new BrokerError(`the broker could not run the pop: ${error.slice(0, 200)}`, false, FAILURE_HINTS.database);
    }
    throw outsideContract(request, 'success is false without an error', body);
  }
  if (success !== true) throw outsideContract(request, 'success is not a boolean', body);
  if (!Array.isArray(messages)) throw outsideContract(request, 'messages is not a list', body);
  // A long poll's timeout with nothing to take (docs/broker.md#pop).
  if (leaseId === null && messages.length === 0) return { kind: 'nothing', waited: true };
  if (leaseId === '') throw outsideContract(request, 'a batch without a lease id, as autoAck delivers it', body);
  if (!isMessageId(leaseId)) throw outsideContract(request, 'leaseId is missing or not an id', body);
  // The id is renewed, printed with -o name and acked: it must be one plain id, as it is
  // (docs/security.md#taking-and-acking-batches-lease-acquire-lease-ack).
  if (!isPlainLeaseId(leaseId))
    throw outsideContract(request, 'leaseId is no lease id queenctl can send or print as one', body);
  const queue = typeof parsed.queue === 'string' ? parsed.queue : request.queue;
  const asked = request.group ?? QUEUE_MODE_GROUP;
  const consumerGroup = typeof parsed.consumerGroup === 'string' ? parsed.consumerGroup : asked;
  if (queue !== request.queue) throw outsideContract(request, `it is a batch of queue "${escapeText(queue)}"`, body);
  // Acked for another group, it would move that group's cursor: no batch of this pop.
  if (consumerGroup !== asked) {
    throw outsideContract(request, `it is a batch of consumer group "${escapeText(consumerGroup)}"`, body);
  }
  // A message named twice would be acked twice: a repeated ack counts again and can release the
  // lease under the rest of the batch (docs/broker.md#ack).
  const seen = new Set<string>();
  const checked = messages.map((message, index): BatchMessage => {
    const at = `message ${index + 1}`;
    if (!isObject(message)) throw outsideContract(request, `${at} is not an object`, body);
    if (!isMessageId(message.transactionId)) throw outsideContract(request, `${at} has no transactionId`, body);
    if (!isMessageId(message.partitionId)) throw outsideContract(request, `${at} has no partitionId`, body);
    if (!isPartitionName(message.partition)) throw outsideContract(request, `${at} has no usable partition name`, body);
    // Every message of one pop is under the pop's lease; one under another is no batch of ours.
    if (message.leaseId !== undefined && message.leaseId !== leaseId) {
      throw outsideContract(request, `${at} is under another lease id`, body);
    }
    const key = `${message.partitionId}\u0000${message.transactionId}`;
    if (seen.has(key)) throw outsideContract(request, `${at} repeats a message of the batch`, body);
    seen.add(key);
    const text = messageTexts.length === messages.length ? messageTexts[index] : null;
    if (typeof text === 'string') rememberMessageText(message as BatchMessage, text);
    return message as BatchMessage;
  });
  if (checked.length === 0) {
    const partition = typeof parsed.partition === 'string' && parsed.partition !== '' ? [parsed.partition] : [];
    return { kind: 'empty-lease', leaseId, queue, consumerGroup, partitions: partition };
  }
  const date = Date.parse(header(answer.headers, 'date') ?? '');
  return {
    kind: 'lease',
    batch: { leaseId, queue, consumerGroup, partitions: partitionsOf(checked), messages: checked },
    brokerDateMs: Number.isFinite(date) ? date : null,
  };
}
