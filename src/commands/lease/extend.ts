/**
 * `queenctl lease extend <leaseId...> [--seconds n]`: renew, print the broker's six keys, and
 * exit 4 when nothing was renewed, whatever the HTTP status said (contract, "The renewal
 * result").
 */
import { remainingMs } from '../../broker/broker-clock.js';
import type { RenewalResult } from '../../broker/contract.js';
import type { ExitCode } from '../../exit.js';
import { formatDuration } from '../../output/duration.js';
import type { Runtime } from '../runtime.js';
import { runLeaseRequests, type LeaseRunOptions, type LeaseView } from './lease-run.js';
import type { LeaseOutcome } from '../../renewal/renew-all.js';

export type ExtendOptions = LeaseRunOptions;

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
  failure: 'was not renewed',
  record: extendRecord,
  headers: (wide) => {
    const headers = ['LEASE ID', 'RENEWED', 'newExpiresAt', 'expiresAt', 'lease_expires_at', 'LEFT'];
    return wide ? [...headers, 'BROKER SAID', 'SHAPE', 'CLOCK'] : headers;
  },
  row: (outcome, wide, nowMs, style) => {
    if ('error' in outcome) {
      const row = [outcome.leaseId, style.bad('error'), '-', '-', '-', '-'];
      return wide ? [...row, outcome.error.message, '-', '-'] : row;
    }
    const { result, reason, expiresAtMs, shape } = outcome.renewal;
    const held = result.renewed > 0;
    const left =
      held && expiresAtMs !== null ? formatDuration(remainingMs(expiresAtMs, nowMs, outcome.brokerClock)) : '-';
    const row = [
      outcome.leaseId,
      held ? style.ok(String(result.renewed)) : style.bad(`${result.renewed} NOT RENEWED`),
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
