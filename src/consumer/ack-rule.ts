/**
 * The rule that turns the outcomes of a batch's messages into acks, and the one place that knows
 * why (docs/broker.md, "One batch, several outcomes"; recorded in
 * test/fixtures/real-broker-mixed-acks.txt). The broker keeps one cursor per partition and
 * consumer group, a high-water mark: the highest message acked `completed` or `failed` moves it,
 * and everything below it counts as consumed. A `retry` or `failed` followed by a `completed` in
 * the same partition therefore loses the message silently, and every answer says success.
 *
 * So, per partition, in the order the broker gave the messages: `completed` for the messages
 * before the first that did not succeed, then that message's own outcome, and nothing for the
 * messages after it: they come back with it. `failed` is thus only ever sent for one message of
 * a partition at a time. Pure: no broker, no clock.
 */
import type { BatchMessage } from '../broker/batch.js';
import type { Outcome } from './outcomes.js';

/** The acks of one partition's messages of a batch, as indexes into the messages given. */
export interface PartitionAcks {
  partitionId: string;
  /** Acked `completed`: the messages before the first that did not succeed, in order. */
  completed: number[];
  /** The first message that did not succeed, acked by its outcome; null when all succeeded. */
  decisive: number | null;
  /** Not acked: they come back with the decisive message, the cursor never passing them. */
  comeBack: number[];
}

/** The acks of a batch, partition by partition in the order the partitions first appear. */
export function ackRule(messages: readonly BatchMessage[], outcomes: readonly Outcome[]): PartitionAcks[] {
  if (messages.length !== outcomes.length) throw new Error('an outcome per message');
  const partitions = new Map<string, PartitionAcks>();
  messages.forEach((message, index) => {
    let acks = partitions.get(message.partitionId);
    if (acks === undefined) {
      acks = { partitionId: message.partitionId, completed: [], decisive: null, comeBack: [] };
      partitions.set(message.partitionId, acks);
    }
    if (acks.decisive !== null) acks.comeBack.push(index);
    else if ((outcomes[index] as Outcome).status === 'completed') acks.completed.push(index);
    else acks.decisive = index;
  });
  return [...partitions.values()];
}
