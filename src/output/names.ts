/**
 * `-o name` and shell completion print lease ids that came from the broker, one a line, for
 * `extend -`, `inspect -`, `watch -` or a shell to read (docs/cli-contract.md#name-output). An id
 * that those readers would not take as one id (a line break or a space makes two, a control
 * character is refused) is an answer outside the contract: it is never printed, and
 * `refusedLeaseIdMessage` names it, escaped, on stderr (docs/security.md#outside-text-is-data).
 */
import { checkLeaseId } from '../args.js';
import { escapeText, hasUnsafeText } from './sanitise.js';

/**
 * Whether `leaseId` may be printed as a name: it passes the lease-id rules of args.ts (what `-`
 * would accept), holds no whitespace (`-` splits ids on it) and nothing escapeText would escape.
 */
export function isNameable(leaseId: string): boolean {
  try {
    checkLeaseId(leaseId);
  } catch {
    return false;
  }
  return !/\s/u.test(leaseId) && !hasUnsafeText(leaseId);
}

/** The ids as `-o name` lines (each once, in order), and those left out. */
export function nameLines(leaseIds: Iterable<string>): { text: string; refused: string[] } {
  const printed: string[] = [];
  const refused: string[] = [];
  for (const leaseId of new Set(leaseIds)) (isNameable(leaseId) ? printed : refused).push(leaseId);
  return { text: printed.map((leaseId) => `${leaseId}\n`).join(''), refused };
}

/** The one stderr line for an id left out; at most 200 characters of it are quoted. */
export function refusedLeaseIdMessage(leaseId: string): string {
  const shown = leaseId.length > 200 ? `${leaseId.slice(0, 200)}...` : leaseId;
  return (
    `queenctl: skipped a lease id from the broker that is no lease id (an answer outside the contract): ` +
    `"${escapeText(shown)}"\n`
  );
}
