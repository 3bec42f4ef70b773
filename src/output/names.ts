/**
 * `-o name` and shell completion print lease ids that came from the broker, one a line, for
 * `extend -`, `inspect -`, `watch -` or a shell to read (docs/cli-contract.md#name-output). An id
 * that those readers would not take as one id (a line break or a space makes two, a control
 * character is refused) is an answer outside the contract: it is never printed, and
 * `refusedLeaseIdMessage` names it, escaped, on stderr (docs/security.md#outside-text-is-data).
 */
import { isPlainLeaseId } from '../args.js';
import { escapeText } from './sanitise.js';

/**
 * Whether `leaseId` may be printed as a name: isPlainLeaseId of args.ts (the lease-id rules of
 * what `-` would accept, untrimmed, so no whitespace, which `-` splits ids on; nothing escapeText
 * would escape; no leading `-`, which `xargs` or a shell would pass on as an option).
 */
export function isNameable(leaseId: string): boolean {
  return isPlainLeaseId(leaseId);
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
