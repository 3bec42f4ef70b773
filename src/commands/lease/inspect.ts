/**
 * `queenctl lease inspect <leaseId...>`: is a lease held, by how many (partition, group)
 * leases, and for how long, without shortening it. The documented API has no read-only
 * lookup, so inspect asks the extend route for one second: the broker takes the later of the
 * current deadline and now + 1 s (docs/broker.md), which leaves a live lease's deadline where
 * it was and never resurrects an expired one.
 */
import { Command } from 'commander';
import { remainingMs } from '../../broker/broker-clock.js';
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
import { allowEmptyOption, exitCodesHelp, LEASE_IDS_ARGUMENT, retriesOption } from './options.js';
import type { LeaseOutcome } from '../../renewal/renew-all.js';

/** The probe: the least a renewal can ask for. */
export const INSPECT_SECONDS = 1;

export type InspectOptions = Omit<LeaseRunOptions, 'seconds'>;

export function inspectCommand(globals: GlobalContext): Command {
  return new Command('inspect')
    .description('say whether leases are held, by how many partitions and for how long, without shortening them')
    .argument(...LEASE_IDS_ARGUMENT)
    .addOption(retriesOption())
    .addOption(allowEmptyOption())
    .addHelpText(
      'after',
      `
How it works: the broker has no read-only lease lookup, so inspect asks the extend route for
{"seconds": 1}. The broker sets the deadline to the later of the current one and now + 1 s, so a
live lease keeps the deadline it had and an expired one is not brought back. The one edge: a
lease in its very last second gets at most one more second.

Remaining time is measured on the broker's clock, not this machine's: it is the expiry minus the
broker's time taken from its Date header (whole seconds, so within about a second). A local
clock that is minutes or hours off changes nothing. Older brokers do not report how many
partitions a lease holds: HELD is then ? (null in JSON).

${exitCodesHelp({
  ok: 'every lease is live',
  notHeld: "a lease is not held (expired, released by an ack or nack, or another tenant's)",
})}

Examples:
  queenctl lease inspect "$LEASE"
  queenctl lease inspect "$LEASE" -o json | jq .remainingMs
  queenctl lease inspect - -o ndjson < leases.txt`,
    )
    .action(async (leaseIds: string[], options: { retries: number; allowEmpty?: boolean }, command: Command) => {
      await globals.run(
        command,
        (runtime, settings) => runInspect(leaseRunOptions(leaseIds, options, settings), runtime),
        { requests: requestsFor(leaseIds) },
      );
    });
}

/** The inspect record of docs/cli-contract.md, plus the older broker's reason or a request's error. */
export interface InspectRecord {
  leaseId: string;
  live: boolean | null;
  held: number | null;
  expiresAt: string | null;
  remainingMs: number | null;
  reason?: string;
  error?: string;
}

export function inspectRecord(outcome: LeaseOutcome, nowMs: number): InspectRecord {
  if ('error' in outcome) {
    // Unknown, not "not live": the request failed, so nothing is claimed about the lease.
    return {
      leaseId: outcome.leaseId,
      live: null,
      held: null,
      expiresAt: null,
      remainingMs: null,
      error: outcome.error.message,
    };
  }
  const { result, reason, expiresAtMs, shape } = outcome.renewal;
  const live = result.renewed > 0 && expiresAtMs !== null;
  const record: InspectRecord = {
    leaseId: outcome.leaseId,
    live,
    // The older array shape says whether, not how many (docs/cli-contract.md: null there).
    held: !live ? 0 : shape === 'array' ? null : result.renewed,
    expiresAt: live ? result.expiresAt : null,
    remainingMs: live && expiresAtMs !== null ? remainingMs(expiresAtMs, nowMs, outcome.brokerClock) : null,
  };
  return reason ? { ...record, reason } : record;
}

export const inspectView: LeaseView<InspectRecord> = {
  verb: 'inspect',
  failure: 'is not held',
  record: inspectRecord,
  headers: (wide) => {
    // On a narrow terminal (output/fit.ts): the count of partitions goes first, the time left last.
    const headers: ColumnSpec[] = [
      { header: 'LEASE ID', keep: 'always' },
      { header: 'LIVE', keep: 'always' },
      { header: 'HELD', keep: 1 },
      { header: 'EXPIRES AT', keep: 2, shrink: 'time' },
      { header: 'REMAINING', keep: 3 },
    ];
    return wide ? [...headers, 'BROKER SAID', 'CLOCK'] : headers;
  },
  row: (outcome, wide, nowMs) => {
    const record = inspectRecord(outcome, nowMs);
    const live = record.live === null ? bad('error') : record.live ? ok('yes') : bad('NO');
    const row: Cell[] = [
      record.leaseId,
      live,
      record.held === null ? (record.live ? '?' : '-') : String(record.held),
      record.expiresAt ?? '-',
      record.remainingMs === null ? '-' : formatDuration(record.remainingMs),
    ];
    if (!wide) return row;
    const said = record.error ?? record.reason ?? '-';
    return [...row, said, 'brokerClock' in outcome ? outcome.brokerClock.source : '-'];
  },
};

export function runInspect(options: InspectOptions, runtime: Runtime): Promise<ExitCode> {
  return runLeaseRequests({ ...options, seconds: INSPECT_SECONDS }, inspectView, runtime);
}
