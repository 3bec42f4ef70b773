/**
 * The broker's queues, partitions and messages, and the pop and ack routes over them, as the real
 * broker answers them (docs/broker.md, "Pop and ack" and "One batch, several outcomes"; recorded
 * byte for byte in test/fixtures/real-broker-pop-ack.txt and
 * test/fixtures/real-broker-mixed-acks.txt). A pop mints its lease in the same LeaseStore the
 * extend and consumer-group routes read (leases.ts), so `lease extend`, `inspect`, `list` and
 * `watch` see the leases that pops took.
 *
 * The model, per (consumer group, partition):
 *   - one cursor, a high-water mark: the messages of a partition are in push order, and the
 *     cursor is just past the highest message acked `completed` (or dead-lettered by `failed`).
 *     Everything below it is consumed, whatever its own ack was: a `retry` or `failed` followed
 *     by a `completed` of a later message loses the earlier one silently (m1, m2, m4 of the
 *     mixed-acks recording). A pop hands out the messages at and after the cursor, in order;
 *   - `failures`: the `failed` acks counted against the queue's retry limit, per partition and
 *     not per message, once per lease: below the limit a `failed` ack releases the lease (the
 *     batch comes back); at the limit the message goes to the dead-letter queue, the cursor
 *     moves past it, and the answer says `dlq: true, leaseReleased: false` whatever became of
 *     the lease (m6: the rest of the batch stays under it);
 *   - a lease row's batch: how many messages it handed out and how many acks with its lease id
 *     landed, repeats and dead-letterings counted; as many acks as messages release the row;
 *   - per message, for the control interface: its acks, how it came below the cursor, and every
 *     delivery (lease id, broker time), so a test can prove a consumer lost nothing.
 *
 * The acks of one request are each checked against the state before any of them is applied;
 * an ack applied after an earlier one of the same request released the lease still lands, and
 * answers `leaseReleased: true` (m1 to m4). Recorded quirks kept: an ack without a lease id is
 * applied unchecked (it moves the cursor under whoever holds the partition now); an unknown
 * `status` and an ack without the pop's consumer group are `Invalid or expired lease`; `retry`
 * releases the lease and never counts toward the retry limit; once the cursor has passed a
 * message that was not completed (lost or dead-lettered), a pop of that partition by name with
 * nothing left hands out a lease on no messages (m1, m2, m4, p11); the partition route matches
 * its path segment undecoded (routes.ts), and a partition it does not know is
 * `partition_not_found`; `{"acknowledgments":[]}` is never answered.
 *
 * A message's data is kept as JSON text and spliced into a pop's answer as is (json-text.ts):
 * data nested deeper than V8's JSON.stringify reaches comes back unchanged.
 */
import { randomUUID } from 'node:crypto';
import type { Scope } from './auth.js';
import { fail, isFiniteNumber, isPositiveInt, isString, optional } from './input.js';
import { dataText } from './json-text.js';
import { DEFAULT_GROUP, type LeaseRow, type LeaseStore, type StoredLease, uuidV7Like } from './leases.js';
import { isoMicros, isRecord, jsonReply, jsonTextReply, type Reply, tryParseJson } from './wire.js';

/** What `createQueue` takes: the broker's `POST /api/v1/configure`, and the partitions to make. */
export interface QueueSpec {
  name: string;
  /** A count (p1, p2, …) or names (any characters); default one partition, `Default`, as the broker's push makes. */
  partitions?: number | string[];
  /** Seconds a pop's lease lasts (the broker's `leaseTime`; default 300). */
  leaseTime?: number;
  /** `failed` acks per partition before the dead-letter queue (the broker's `retryLimit`; default 3). */
  retryLimit?: number;
}

/** One message of a push: its data (any JSON value) and, when the producer chooses it, its transaction id. */
export interface PushItem {
  data: unknown;
  /** Unique within the partition; a random UUID when left out. */
  transactionId?: string;
}

/** A queue as `Simulator.queue` shows it: what is pending per group, and the dead letters. */
export interface QueueView {
  name: string;
  leaseTime: number;
  retryLimit: number;
  partitions: Array<{ name: string; partitionId: string; messages: number }>;
  /** Per consumer group that ever popped: pending messages per partition, failures counted. */
  groups: Record<string, Record<string, { pending: number; failures: number }>>;
  deadLetters: DeadLetter[];
}

export interface DeadLetter {
  transactionId: string;
  partition: string;
  consumerGroup: string;
  data: unknown;
  errorMessage: string | null;
  retryCount: number;
  /** Broker epoch ms. */
  failedAt: number;
}

/** One hand-out of a message by a pop. */
export interface Delivery {
  /** The pop's lease id; `''` for a pop with autoAck, as on the wire. */
  leaseId: string;
  /** Broker epoch ms. */
  at: number;
}

/**
 * Where one message stands for one consumer group: what a test of a consumer that must lose
 * nothing reads (`Simulator.messageStates`, `GET /_sim/queues/:name/messages`).
 */
export interface MessageState {
  transactionId: string;
  partition: string;
  partitionId: string;
  /** Below the cursor (`consumed`, or `dead-lettered` when its own `failed` sent it there), or not. */
  state: 'consumed' | 'pending' | 'dead-lettered';
  /**
   * How it came below the cursor: its own `completed` ack, a pop with autoAck, its own
   * dead-lettering, or `cursor`: a later message's ack moved the cursor past it, so it was
   * consumed without being completed (lost, as in m1, m2 and m4). Null while pending.
   */
  settledBy: 'completed' | 'auto-ack' | 'dead-letter' | 'cursor' | null;
  /** The acks applied to it for this group (refused ones not counted), by status. */
  acks: { completed: number; retry: number; failed: number };
  /** Every pop that handed it out to this group, oldest first. */
  deliveries: Delivery[];
}

/** `Simulator.messageStates`: the messages of a queue, by partition (name order) and push order. */
export interface MessageStatesView {
  queue: string;
  consumerGroup: string;
  messages: MessageState[];
}

interface StoredMessage {
  id: string;
  transactionId: string;
  data: unknown;
  /** `data` as JSON text, spliced into a pop's answer as is. */
  dataText: string;
  createdAt: number;
  /** Its place in the partition: the cursor is a count of messages from the first. */
  position: number;
}

interface Partition {
  readonly name: string;
  readonly id: string;
  readonly queue: Queue;
  readonly messages: StoredMessage[];
  readonly byTransaction: Map<string, StoredMessage>;
}

interface Queue {
  readonly name: string;
  leaseTime: number;
  retryLimit: number;
  readonly partitions: Map<string, Partition>;
  readonly deadLetters: DeadLetter[];
}

/** What one group did with one message. */
interface MessageRecord {
  completed: number;
  retry: number;
  failed: number;
  autoAcked: boolean;
  deadLettered: boolean;
  deliveries: Delivery[];
}

/** A consumer group's position in one partition. */
interface GroupPartition {
  /** The high-water mark: the messages before this position are consumed. */
  cursor: number;
  failures: number;
  /**
   * The cursor passed a message that was not completed (lost, or dead-lettered): recorded, a
   * pop of the partition by name with nothing left then hands out a lease on no messages.
   */
  passedUnfinished: boolean;
  readonly records: Map<string, MessageRecord>;
}

/** One partition of a popped lease: what it handed out, and the acks with its lease id. */
interface BatchRow {
  readonly row: LeaseRow;
  readonly partition: Partition;
  readonly size: number;
  acks: number;
}

export interface PopRequest {
  queue: string;
  /** The partition route names one (its path segment as sent, undecoded); the queue route takes any. */
  partition: string | undefined;
  group: string;
  batch: number;
  partitions: number;
  autoAck: boolean;
}

/** A pop's result before it is put on the wire. */
export type PopResult =
  | { kind: 'lease'; reply: Reply }
  | { kind: 'nothing'; reply: Reply }
  | { kind: 'lease-held'; reply: Reply };

const DEFAULT_LEASE_TIME = 300;
const DEFAULT_RETRY_LIMIT = 3;
/** The broker's own default batch when a pop gives none. */
export const DEFAULT_POP_BATCH = 1;
const STATUSES = new Set(['completed', 'success', 'retry', 'failed', 'dlq']);
const LEASE_REFUSED = 'Invalid or expired lease';

/** Code-unit order, as the recording lists partitions. */
const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** `{"key":text,…}` from texts already JSON: how a pop's answer carries its messages' data unchanged. */
function objectText(entries: Array<[string, string]>): string {
  return `{${entries.map(([key, text]) => `${JSON.stringify(key)}:${text}`).join(',')}}`;
}

export class Queues {
  private readonly queues = new Map<string, Queue>();
  private readonly partitionsById = new Map<string, Partition>();
  /** group → partition id → its cursor. */
  private readonly cursors = new Map<string, Map<string, GroupPartition>>();
  /** The batches of the leases pops minted, by lease id. */
  private readonly batches = new Map<string, BatchRow[]>();
  /** Called when something may have become available to a waiting pop (a push, a release). */
  onChange: () => void = () => {};

  constructor(private readonly store: LeaseStore) {}

  /** Creates a queue, or changes an existing one's settings and adds the partitions it lacks. */
  createQueue(spec: unknown): QueueView {
    if (!isRecord(spec)) fail('queue spec must be an object');
    const name = spec.name;
    if (!isString(name) || name === '') fail('name must be a non-empty string');
    const leaseTime = optional(spec, 'leaseTime', isFiniteNumber, 'a number of seconds');
    const retryLimit = optional(
      spec,
      'retryLimit',
      (v): v is number => Number.isInteger(v) && (v as number) >= 0,
      'a whole number',
    );
    const raw = spec.partitions;
    let names: string[];
    if (raw === undefined) names = [];
    else if (isPositiveInt(raw)) names = Array.from({ length: raw }, (_, i) => `p${i + 1}`);
    else if (Array.isArray(raw) && raw.every((p) => isString(p) && p !== '')) names = raw as string[];
    else fail('partitions must be a positive integer or an array of names');
    let queue = this.queues.get(name);
    if (queue === undefined) {
      queue = {
        name,
        leaseTime: DEFAULT_LEASE_TIME,
        retryLimit: DEFAULT_RETRY_LIMIT,
        partitions: new Map(),
        deadLetters: [],
      };
      this.queues.set(name, queue);
      if (names.length === 0) names = ['Default'];
    }
    if (leaseTime !== undefined) queue.leaseTime = leaseTime;
    if (retryLimit !== undefined) queue.retryLimit = retryLimit;
    for (const partition of names) this.partition(queue, partition);
    return this.view(name) as QueueView;
  }

  /** Appends messages (their `data`) to a partition, made if new; the queue must exist. */
  push(queueName: string, messages: unknown, partitionName: string | undefined, now: number): string[] {
    if (!Array.isArray(messages)) fail('messages must be an array of payloads');
    return this.pushItems(
      queueName,
      messages.map((data: unknown) => ({ data })),
      partitionName,
      now,
    );
  }

  /**
   * Appends messages with the transaction ids their producer chose (random ones where left out)
   * to a partition, made if new. Every item is checked before any is stored: a transaction id
   * already in the partition, or given twice, is refused (409).
   */
  pushItems(queueName: string, items: unknown, partitionName: string | undefined, now: number): string[] {
    const queue = this.queues.get(queueName);
    if (queue === undefined) fail(`no queue ${queueName}: create it first`, 404);
    if (!Array.isArray(items)) fail('items must be an array of {data, transactionId?}');
    if (partitionName !== undefined && (!isString(partitionName) || partitionName === '')) {
      fail('partition must be a non-empty string');
    }
    const name = partitionName ?? [...queue.partitions.keys()].sort(byName)[0] ?? 'Default';
    const existing = queue.partitions.get(name);
    const seen = new Set<string>();
    const checked = items.map((item: unknown) => {
      if (!isRecord(item) || !('data' in item)) fail('each item must be an object with data');
      const chosen = item.transactionId;
      if (chosen !== undefined && (!isString(chosen) || chosen === '')) {
        fail('transactionId must be a non-empty string');
      }
      const transactionId = chosen ?? randomUUID();
      if (seen.has(transactionId) || existing?.byTransaction.has(transactionId)) {
        fail(`transactionId ${JSON.stringify(transactionId)} is already in partition ${JSON.stringify(name)}`, 409);
      }
      seen.add(transactionId);
      return { data: item.data, transactionId, text: dataText(item.data) };
    });
    const partition = this.partition(queue, name);
    for (const { data, transactionId, text } of checked) {
      const message: StoredMessage = {
        id: uuidV7Like(now),
        transactionId,
        data,
        dataText: text,
        createdAt: now,
        position: partition.messages.length,
      };
      partition.messages.push(message);
      partition.byTransaction.set(transactionId, message);
    }
    this.onChange();
    return checked.map((item) => item.transactionId);
  }

  view(name: string): QueueView | undefined {
    const queue = this.queues.get(name);
    if (queue === undefined) return undefined;
    const partitions = this.sortedPartitions(queue);
    const groups: QueueView['groups'] = {};
    for (const [group, cursors] of this.cursors) {
      for (const partition of partitions) {
        const cursor = cursors.get(partition.id);
        if (cursor === undefined) continue;
        groups[group] ??= {};
        groups[group][partition.name] = {
          pending: partition.messages.length - cursor.cursor,
          failures: cursor.failures,
        };
      }
    }
    return {
      name,
      leaseTime: queue.leaseTime,
      retryLimit: queue.retryLimit,
      partitions: partitions.map((p) => ({ name: p.name, partitionId: p.id, messages: p.messages.length })),
      groups,
      deadLetters: queue.deadLetters.map((letter) => ({ ...letter })),
    };
  }

  /** Each message's state for `group` (a group that never popped: every message pending). */
  messageStates(queueName: string, group: string): MessageStatesView | undefined {
    const queue = this.queues.get(queueName);
    if (queue === undefined) return undefined;
    const messages: MessageState[] = [];
    for (const partition of this.sortedPartitions(queue)) {
      const cursor = this.cursors.get(group)?.get(partition.id);
      for (const message of partition.messages) {
        const record = cursor?.records.get(message.transactionId);
        const below = cursor !== undefined && message.position < cursor.cursor;
        const settledBy: MessageState['settledBy'] = !below
          ? null
          : record?.deadLettered
            ? 'dead-letter'
            : record !== undefined && record.completed > 0
              ? 'completed'
              : record?.autoAcked
                ? 'auto-ack'
                : 'cursor';
        messages.push({
          transactionId: message.transactionId,
          partition: partition.name,
          partitionId: partition.id,
          state: !below ? 'pending' : record?.deadLettered ? 'dead-lettered' : 'consumed',
          settledBy,
          acks: { completed: record?.completed ?? 0, retry: record?.retry ?? 0, failed: record?.failed ?? 0 },
          deliveries: (record?.deliveries ?? []).map((delivery) => ({ ...delivery })),
        });
      }
    }
    return { queue: queueName, consumerGroup: group, messages };
  }

  /**
   * One pop. The queue route claims up to `partitions` free partitions with pending messages,
   * `batch` messages in all; the partition route claims the one it names, or says `lease_held`.
   */
  pop(request: PopRequest, scope: Scope, now: number): PopResult {
    const nothing: PopResult = {
      kind: 'nothing',
      reply: jsonReply(200, { error: 'no_available_partition', messages: [], success: false }),
    };
    const queue = this.queues.get(request.queue);
    if (queue === undefined) return nothing;
    const taken: Array<{ partition: Partition; messages: StoredMessage[] }> = [];
    if (request.partition !== undefined) {
      const partition = queue.partitions.get(request.partition);
      // Observed: the route matches the name as sent, so `a%20b` does not find `a b`.
      if (partition === undefined) {
        return {
          kind: 'nothing',
          reply: jsonReply(200, { error: 'partition_not_found', messages: [], success: false }),
        };
      }
      if (this.isHeld(request.group, partition, now)) {
        return { kind: 'lease-held', reply: jsonReply(200, { error: 'lease_held', messages: [], success: false }) };
      }
      const cursor = this.cursor(request.group, partition);
      const pending = this.pending(partition, cursor, request.batch);
      // Recorded (m1, m2, m4, p11): once the cursor passed a message that was not completed,
      // the partition route hands out a lease on no messages.
      if (pending.length === 0 && !cursor.passedUnfinished) return nothing;
      taken.push({ partition, messages: pending });
    } else {
      let left = request.batch;
      for (const partition of this.sortedPartitions(queue)) {
        if (left === 0 || taken.length === request.partitions) break;
        if (this.isHeld(request.group, partition, now)) continue;
        const messages = this.pending(partition, this.cursor(request.group, partition), left);
        if (messages.length === 0) continue;
        left -= messages.length;
        taken.push({ partition, messages });
      }
      if (taken.length === 0) return nothing;
    }
    return { kind: 'lease', reply: this.lease(queue, request, taken, scope, now) };
  }

  /** The answer of a long poll that found nothing by its timeout (recorded). */
  static waitedForNothing(request: PopRequest): Reply {
    return jsonReply(200, {
      consumerGroup: request.group,
      leaseId: null,
      messages: [],
      partition: '',
      partitionId: null,
      queue: request.queue,
      success: true,
    });
  }

  /**
   * The acks of one request, in order, each checked against the state before any of them is
   * applied (recorded: in m1 the `completed` acks after a `retry` that released the lease still
   * land, and move the cursor past the retried message). `group` is the consumer group the
   * route reads: the batch route's top level, the single route's body.
   */
  ack(acks: AckElement[], now: number): Reply {
    const checked = acks.map((ack) => this.check(ack, now));
    const results = acks.map((ack, index) => {
      const check = checked[index] as AckCheck;
      const result = {
        dlq: false,
        error: null as string | null,
        index,
        leaseReleased: false,
        partitionName: check.partition?.name ?? null,
        queueName: check.partition?.queue.name ?? null,
        success: false,
        transactionId: ack.transactionId,
      };
      if ('error' in check) return { ...result, error: check.error };
      const applied = this.apply(ack, check, now);
      return { ...result, ...applied, success: true };
    });
    return jsonReply(200, results);
  }

  private check(ack: AckElement, now: number): AckCheck {
    const partition = this.partitionsById.get(ack.partitionId);
    const message = partition?.byTransaction.get(ack.transactionId);
    if (partition === undefined || message === undefined) return { error: 'Message not found', partition };
    if (!STATUSES.has(ack.status)) return { error: LEASE_REFUSED, partition };
    if (ack.leaseId === undefined) return { partition, message, batchRow: null };
    const holder = this.store.groups.holderOf(ack.group, partition.queue.name, partition.name);
    const batchRow = this.batches.get(ack.leaseId)?.find((row) => row.partition === partition);
    const held =
      holder !== null && holder.lease.leaseId === ack.leaseId && holder.row.expiresAt > now && batchRow !== undefined;
    if (!held) return { error: LEASE_REFUSED, partition };
    return { partition, message, batchRow };
  }

  private apply(
    ack: AckElement,
    check: Extract<AckCheck, { message: StoredMessage }>,
    now: number,
  ): { dlq: boolean; leaseReleased: boolean } {
    const { partition, message, batchRow } = check;
    const cursor = this.cursor(ack.group, partition);
    const record = this.record(cursor, message);
    const status = ack.status;
    if (status === 'completed' || status === 'success') {
      record.completed++;
      this.advance(cursor, partition, message);
      if (batchRow === null) return { dlq: false, leaseReleased: false };
      batchRow.acks++;
      // Recorded (m1 to m4): released by an earlier ack of the same request, it says so.
      if (!this.rowIsHeld(batchRow)) return { dlq: false, leaseReleased: true };
      return { dlq: false, leaseReleased: batchRow.acks >= batchRow.size && this.releaseRow(batchRow, now) };
    }
    if (status === 'retry') {
      record.retry++;
      // Recorded: every retry of the batch answers leaseReleased, the first having released it.
      if (batchRow !== null) this.releaseRow(batchRow, now);
      return { dlq: false, leaseReleased: batchRow !== null };
    }
    // failed, dlq: counted per partition against the retry limit.
    record.failed++;
    if (cursor.failures >= partition.queue.retryLimit) {
      this.deadLetter(partition, cursor, message, ack, now);
      // Recorded (m6): the dead-lettering counts as one of the batch's acks; the rest of the
      // batch stays under the lease. Observed: a one-message batch's lease is gone, though the
      // answer says leaseReleased false either way.
      if (batchRow !== null && this.rowIsHeld(batchRow) && ++batchRow.acks >= batchRow.size) {
        this.releaseRow(batchRow, now);
      }
      return { dlq: true, leaseReleased: false };
    }
    if (batchRow === null) {
      cursor.failures++;
      return { dlq: false, leaseReleased: false };
    }
    // Recorded: counted once per lease; a second `failed` of the same batch finds it released.
    if (this.releaseRow(batchRow, now)) cursor.failures++;
    return { dlq: false, leaseReleased: true };
  }

  /** The cursor, a high-water mark, moves just past `message` if it is not past it already. */
  private advance(cursor: GroupPartition, partition: Partition, message: StoredMessage): void {
    if (message.position < cursor.cursor) return;
    for (let position = cursor.cursor; position < message.position; position++) {
      const passed = cursor.records.get((partition.messages[position] as StoredMessage).transactionId);
      if (passed === undefined || (passed.completed === 0 && !passed.autoAcked)) cursor.passedUnfinished = true;
    }
    cursor.cursor = message.position + 1;
  }

  /** To the dead-letter queue; the cursor moves past it, consuming what was pending before it. */
  private deadLetter(
    partition: Partition,
    cursor: GroupPartition,
    message: StoredMessage,
    ack: AckElement,
    now: number,
  ): void {
    this.advance(cursor, partition, message);
    this.record(cursor, message).deadLettered = true;
    cursor.passedUnfinished = true;
    partition.queue.deadLetters.push({
      transactionId: message.transactionId,
      partition: partition.name,
      consumerGroup: ack.group,
      data: message.data,
      errorMessage: ack.error,
      retryCount: cursor.failures,
      failedAt: now,
    });
  }

  private rowIsHeld(batchRow: BatchRow): boolean {
    const holder = this.store.groups.holderOf(batchRow.row.group, batchRow.row.queue, batchRow.row.partition);
    return holder !== null && holder.row === batchRow.row;
  }

  /** Releases a lease's row (the partition is free again); false when it was no longer held. */
  private releaseRow(batchRow: BatchRow, now: number): boolean {
    if (!this.rowIsHeld(batchRow)) return false;
    const holder = this.store.groups.holderOf(batchRow.row.group, batchRow.row.queue, batchRow.row.partition);
    if (holder === null) return false;
    const gone = this.store.releaseRow(holder.lease, batchRow.row, now);
    if (gone) this.batches.delete(holder.lease.leaseId);
    this.onChange();
    return true;
  }

  private lease(
    queue: Queue,
    request: PopRequest,
    taken: Array<{ partition: Partition; messages: StoredMessage[] }>,
    scope: Scope,
    now: number,
  ): Reply {
    const leaseId = this.store.mint(
      {
        queue: queue.name,
        group: request.group,
        seconds: queue.leaseTime,
        ...(scope?.tenant !== undefined && { tenant: scope.tenant }),
        partitions: taken.map(({ partition }) => ({ partition: partition.name })),
      },
      now,
    );
    const lease = this.store.lookup(leaseId, scope, now) as StoredLease;
    const rows: BatchRow[] = taken.map(({ partition, messages }, i) => ({
      row: lease.rows[i] as LeaseRow,
      partition,
      size: messages.length,
      acks: 0,
    }));
    // autoAck (recorded): the messages are consumed at once and carry no lease id.
    const shownLeaseId = request.autoAck ? '' : leaseId;
    for (const { partition, messages } of taken) {
      const cursor = this.cursor(request.group, partition);
      for (const message of messages) {
        const record = this.record(cursor, message);
        record.deliveries.push({ leaseId: shownLeaseId, at: now });
        if (request.autoAck) {
          record.autoAcked = true;
          this.advance(cursor, partition, message);
        }
      }
    }
    if (request.autoAck) this.store.release(leaseId, now);
    else this.batches.set(leaseId, rows);
    const first = taken[0] as { partition: Partition };
    const text = (value: unknown): string => JSON.stringify(value);
    const messages = taken.flatMap(({ partition, messages }) =>
      messages.map((message) =>
        objectText([
          ['consumerGroup', text(request.group)],
          ['createdAt', text(isoMicros(message.createdAt))],
          ['data', message.dataText],
          ['id', text(message.id)],
          ['leaseId', text(shownLeaseId)],
          ['partition', text(partition.name)],
          ['partitionId', text(partition.id)],
          ['producerSub', 'null'],
          ['traceId', 'null'],
          ['transactionId', text(message.transactionId)],
        ]),
      ),
    );
    return jsonTextReply(
      200,
      objectText([
        ['consumerGroup', text(request.group)],
        ['leaseId', text(shownLeaseId)],
        ['messages', `[${messages.join(',')}]`],
        ['partition', text(first.partition.name)],
        ['partitionId', text(first.partition.id)],
        ['partitionsClaimed', text(taken.length)],
        ['queue', text(queue.name)],
        ['success', 'true'],
      ]),
    );
  }

  private isHeld(group: string, partition: Partition, now: number): boolean {
    const holder = this.store.groups.holderOf(group, partition.queue.name, partition.name);
    return holder !== null && holder.row.expiresAt > now;
  }

  /** Up to `limit` messages at and after the cursor, oldest first. */
  private pending(partition: Partition, cursor: GroupPartition, limit: number): StoredMessage[] {
    return partition.messages.slice(cursor.cursor, cursor.cursor + limit);
  }

  private sortedPartitions(queue: Queue): Partition[] {
    return [...queue.partitions.values()].sort((a, b) => byName(a.name, b.name));
  }

  private record(cursor: GroupPartition, message: StoredMessage): MessageRecord {
    let record = cursor.records.get(message.transactionId);
    if (record === undefined) {
      record = { completed: 0, retry: 0, failed: 0, autoAcked: false, deadLettered: false, deliveries: [] };
      cursor.records.set(message.transactionId, record);
    }
    return record;
  }

  private cursor(group: string, partition: Partition): GroupPartition {
    let cursors = this.cursors.get(group);
    if (cursors === undefined) {
      cursors = new Map();
      this.cursors.set(group, cursors);
    }
    let cursor = cursors.get(partition.id);
    if (cursor === undefined) {
      cursor = { cursor: 0, failures: 0, passedUnfinished: false, records: new Map() };
      cursors.set(partition.id, cursor);
    }
    return cursor;
  }

  private partition(queue: Queue, name: string): Partition {
    let partition = queue.partitions.get(name);
    if (partition === undefined) {
      partition = { name, id: randomUUID(), queue, messages: [], byTransaction: new Map() };
      queue.partitions.set(name, partition);
      this.partitionsById.set(partition.id, partition);
    }
    return partition;
  }
}

/** One acknowledgement as the route read it. */
export interface AckElement {
  transactionId: string;
  partitionId: string;
  /** Undefined (absent, null or empty): the broker applies the ack without checking any lease. */
  leaseId: string | undefined;
  status: string;
  group: string;
  error: string | null;
}

type AckCheck =
  | { error: string; partition: Partition | undefined }
  | { partition: Partition; message: StoredMessage; batchRow: BatchRow | null };

/** A request the ack routes refuse before acking anything: 400 and the broker's words. */
export type AckParse = { acks: AckElement[] } | { reply: Reply } | { never: true };

/**
 * The body of `POST /api/v1/ack` (`batch` false) or `/api/v1/ack/batch`: the acks, a 400, or
 * `never` for the empty batch the broker never answers (recorded).
 */
export function parseAckBody(body: string, batch: boolean): AckParse {
  if (body.length === 0) return { reply: jsonReply(400, { error: 'Empty request body' }) };
  const parsed = tryParseJson(body);
  if (!parsed.ok) {
    const syntax = 'Invalid JSON: [json.exception.parse_error.101] parse error: syntax error while parsing value';
    return { reply: jsonReply(400, { error: `${syntax} - ${parsed.message}` }) };
  }
  const value = parsed.value;
  if (!isRecord(value)) return { reply: jsonReply(400, { error: 'Request body must be a JSON object' }) };
  // The batch route reads the group at the top level only and overwrites any in an element.
  const topGroup = typeof value.consumerGroup === 'string' ? value.consumerGroup : DEFAULT_GROUP;
  const elements: unknown[] = batch ? (Array.isArray(value.acknowledgments) ? value.acknowledgments : []) : [value];
  if (batch && !Array.isArray(value.acknowledgments)) {
    return { reply: jsonReply(400, { error: 'acknowledgments array is required' }) };
  }
  if (elements.length === 0) return { never: true };
  const acks: AckElement[] = [];
  for (const element of elements) {
    if (!isRecord(element)) return { reply: jsonReply(400, { error: 'each acknowledgment must be an object' }) };
    if (typeof element.partitionId !== 'string' || element.partitionId === '') {
      return { reply: jsonReply(400, { error: 'partitionId is required to ensure message uniqueness' }) };
    }
    if (typeof element.transactionId !== 'string' || element.transactionId === '') {
      return { reply: jsonReply(400, { error: 'transactionId is required' }) };
    }
    const leaseId = typeof element.leaseId === 'string' && element.leaseId !== '' ? element.leaseId : undefined;
    const group = batch ? topGroup : typeof element.consumerGroup === 'string' ? element.consumerGroup : DEFAULT_GROUP;
    acks.push({
      transactionId: element.transactionId,
      partitionId: element.partitionId,
      leaseId,
      status: typeof element.status === 'string' ? element.status : 'completed',
      group,
      error: typeof element.error === 'string' ? element.error : null,
    });
  }
  return { acks };
}

/** The query of a pop: `batch`, `partitions`, `consumerGroup`, `wait`, `timeout`, `autoAck`. */
export function parsePopQuery(
  queue: string,
  partition: string | undefined,
  query: URLSearchParams,
): PopRequest & { waitMs: number | null } {
  const count = (key: string, fallback: number): number => {
    const value = Number(query.get(key));
    return Number.isInteger(value) && value >= 1 ? value : fallback;
  };
  const wait = query.get('wait') === 'true';
  return {
    queue,
    partition,
    group: query.get('consumerGroup') || DEFAULT_GROUP,
    batch: count('batch', DEFAULT_POP_BATCH),
    partitions: count('partitions', 1),
    autoAck: query.get('autoAck') === 'true',
    waitMs: wait ? count('timeout', 30_000) : null,
  };
}
