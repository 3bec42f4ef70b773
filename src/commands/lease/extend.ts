/**
 * `queenctl lease extend <leaseId...> [--seconds n]`: renew, print the broker's six keys, and
 * exit 4 when nothing was renewed, whatever the HTTP status said (docs/cli-contract.md, "The
 * renewal result").
 */
import { Command } from 'commander';
import { remainingMs } from '../../broker/broker-clock.js';
import type { RenewalResult } from '../../broker/contract.js';
import type { ExitCode } from '../../exit.js';
import { formatDuration } from '../../output/duration.js';
import type { ColumnSpec } from '../../output/fit.js';
import { bad, ok, type Cell } from '../../output/table.js';
import type { GlobalContext } from '../globals.js';
import type { Runtime } from '../runtime.js';
import {
  leaseRunOptions,
  requestsFor,
  runLeaseRequests,
  type LeaseRunOptions,
  type LeaseView,
} from './lease-requests.js';
import { allowEmptyOption, exitCodesHelp, LEASE_IDS_ARGUMENT, retriesOption, secondsOption } from './options.js';
import type { LeaseOutcome } from '../../renewal/renew-all.js';

export type ExtendOptions = LeaseRunOptions;

export function extendCommand(globals: GlobalContext): Command {
  return new Command('extend')
    .description('renew leases; exit 4 when the broker renewed nothing, whatever its HTTP status')
    .argument(...LEASE_IDS_ARGUMENT)
    .addOption(secondsOption('60', 'extend to now + seconds on the broker clock (1 to 2147483647)'))
    .addOption(retriesOption())
    .addOption(allowEmptyOption())
    .addHelpText(
      'after',
      `
Retries: connection refused or reset, timeouts, 502/503/504 and 500 {"error":"pool"} are retried
with backoff (renewing takes the later deadline, so a repeat never shortens a lease). 401/403,
other 4xx, other 500s ("renew failed") and answers outside the contract are not.

${exitCodesHelp({
  ok: 'every lease renewed',
  notHeld: 'a lease was not renewed (renewed: 0), even though the broker said HTTP 200',
})}
With several ids the status is the first that applies of 3, 2, 4, 0.

Examples:
  queenctl lease extend 0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90 --seconds 120
  queenctl lease extend "$LEASE" -o json | jq -r .lease_expires_at
  cut -f1 leases.txt | queenctl lease extend - -o ndjson
  queenctl lease extend "$LEASE" -q || echo "lease lost: stop the job"`,
    )
    .action(
      async (
        leaseIds: string[],
        options: { seconds: number; retries: number; allowEmpty?: boolean },
        command: Command,
      ) => {
        await globals.run(
          command,
          (runtime, settings) =>
            runExtend({ ...leaseRunOptions(leaseIds, options, settings), seconds: options.seconds }, runtime),
          { requests: requestsFor(leaseIds) },
        );
      },
    );
}

/** One lease's JSON record: the six keys as the broker sent them, plus what went wrong. */
export type ExtendRecord = Omit<RenewalResult, 'renewed'> & { renewed: number | null; reason?: string; error?: string };

export function extendRecord(outcome: LeaseOutcome): ExtendRecord {
  if ('error' in outcome) {
    // No key of a failed request may read as a renewal: renewed is null, not a count.
    const { leaseId, error } = outcome;
    return {
      leaseId,
      success: false,
      renewed: null,
      newExpiresAt: null,
      expiresAt: null,
      lease_expires_at: null,
      error: error.message,
    };
  }
  const { result, reason } = outcome.renewal;
  return reason ? { ...result, reason } : { ...result };
}

export const extendView: LeaseView<ExtendRecord> = {
  verb: 'extend',
  failure: 'was not renewed',
  record: extendRecord,
  headers: (wide) => {
    // On a narrow terminal (output/fit.ts): the three expiry keys carry one value, so two go
    // first; the time left, on the broker's clock, goes last.
    const headers: ColumnSpec[] = [
      { header: 'LEASE ID', keep: 'always' },
      { header: 'RENEWED', keep: 'always' },
      { header: 'newExpiresAt', keep: 3, shrink: 'time' },
      { header: 'expiresAt', keep: 1, shrink: 'time' },
      { header: 'lease_expires_at', keep: 2, shrink: 'time' },
      { header: 'LEFT', keep: 4 },
    ];
    return wide ? [...headers, 'BROKER SAID', 'SHAPE', 'CLOCK'] : headers;
  },
  row: (outcome, wide, nowMs) => {
    if ('error' in outcome) {
      const row: Cell[] = [outcome.leaseId, bad('error'), '-', '-', '-', '-'];
      return wide ? [...row, outcome.error.message, '-', '-'] : row;
    }
    const { result, reason, expiresAtMs, shape } = outcome.renewal;
    const held = result.renewed > 0;
    const left =
      held && expiresAtMs !== null ? formatDuration(remainingMs(expiresAtMs, nowMs, outcome.brokerClock)) : '-';
    const row: Cell[] = [
      outcome.leaseId,
      held ? ok(String(result.renewed)) : bad(`${result.renewed} NOT RENEWED`),
      String(result.newExpiresAt),
      String(result.expiresAt),
      String(result.lease_expires_at),
      left,
    ];
    return wide ? [...row, reason ?? '-', shape, outcome.brokerClock.source] : row;
  },
};

export function runExtend(options: ExtendOptions, runtime: Runtime): Promise<ExitCode> {
  return runLeaseRequests(options, extendView, runtime);
}
