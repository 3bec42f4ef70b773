/**
 * The words queenctl prints to people: what happened, what it means for the batch, and what
 * to do. Commands decide what happened; this module says it.
 */
import { QueenctlError } from '../exit.js';

/** Why renewed: 0 happens and what to do about it (docs/broker.md#lost-lease). */
export function lostLeaseMeaning(several: boolean): string {
  return (
    `${several ? 'Each' : 'It'} expired, was released by an ack or nack, or belongs to another tenant\n` +
    '  (the broker makes these look the same on purpose); another worker may already have the batch.'
  );
}
export const LOST_LEASE_ACTION =
  'Stop work that is not idempotent and let the redelivery own the batch.\n' +
  '  Do not ack without the lease id: that can move the cursor under the other worker.';

export function listSome(items: readonly string[], max = 5): string {
  return items.length <= max ? items.join(', ') : `${items.slice(0, max).join(', ')} and ${items.length - max} more`;
}

export function errorMessage(error: QueenctlError | Error): string {
  const hint = error instanceof QueenctlError && error.hint ? `\n  ${error.hint}` : '';
  return `queenctl: ${error.message}${hint}\n`;
}

export function warningMessage(text: string): string {
  return `queenctl: warning: ${text}\n`;
}
