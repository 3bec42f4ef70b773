/**
 * The broker's clock decides when a lease expires (PostgreSQL's now(), docs/broker.md#broker-clock), so
 * time left is measured on it, never on the local clock. Two sources give its time:
 *
 * - a renewal that moved the deadline set it to exactly brokerNow + seconds, so
 *   expiresAt - seconds is the broker's time of the renewal, to the millisecond;
 * - otherwise the Date header, whole seconds and possibly a second stale: the middle of the
 *   range it allows (dateHeaderSkew).
 *
 * The offset is broker time minus local time; remaining time is then
 * expiresAt - (localNow + offset), whatever the local clock says.
 */
import type { Renewal } from './contract.js';

export type ClockSource = 'renewal' | 'date-header' | 'local';

export interface BrokerClockEstimate {
  /** Broker time minus local time, ms. */
  offsetMs: number;
  source: ClockSource;
}

/**
 * How far the Date header may sit behind the broker's clock: whole seconds, truncated, and
 * cached for up to a second more (docs/broker.md#date-header-lag).
 */
export const DATE_HEADER_LAG_MS = 2_000;

/** The broker's clock minus ours, ms: at least minMs, at most maxMs. */
export interface SkewRange {
  minMs: number;
  maxMs: number;
}

/**
 * What one Date header tells of the broker's clock minus ours, for an answer sent and received
 * at these local times. The header was written between the two, at a broker time in
 * [Date, Date + DATE_HEADER_LAG_MS): so the skew is at least Date - receivedAt and at most
 * Date + DATE_HEADER_LAG_MS - sentAt, a range 2 s wide plus the round trip, whatever the
 * clocks say (docs/broker.md#date-header-lag).
 */
export function dateHeaderSkew(brokerDateMs: number, sentAtMs: number, receivedAtMs: number): SkewRange {
  return { minMs: brokerDateMs - receivedAtMs, maxMs: brokerDateMs + DATE_HEADER_LAG_MS - sentAtMs };
}

/**
 * How far a renewal's implied time may sit from the middle of the Date header's own second and
 * still be taken for the time of this renewal (docs/broker.md#date-header-lag: within 2 s).
 */
const DATE_HEADER_SLACK_MS = 2_000;

export function estimateBrokerClock(
  renewal: Renewal,
  requestedSeconds: number,
  sentAtMs: number,
  receivedAtMs: number,
): BrokerClockEstimate {
  const localMidMs = (sentAtMs + receivedAtMs) / 2;
  const { brokerDateMs, expiresAtMs } = renewal;
  if (brokerDateMs === null) return { offsetMs: 0, source: 'local' };
  if (expiresAtMs !== null) {
    const renewedAtMs = expiresAtMs - requestedSeconds * 1000;
    if (Math.abs(renewedAtMs - (brokerDateMs + 500)) <= DATE_HEADER_SLACK_MS) {
      return { offsetMs: renewedAtMs - localMidMs, source: 'renewal' };
    }
  }
  const { minMs, maxMs } = dateHeaderSkew(brokerDateMs, sentAtMs, receivedAtMs);
  return { offsetMs: (minMs + maxMs) / 2, source: 'date-header' };
}

export function remainingMs(expiresAtMs: number, localNowMs: number, clock: BrokerClockEstimate): number {
  return Math.max(0, Math.round(expiresAtMs - (localNowMs + clock.offsetMs)));
}

/**
 * The broker writes PostgreSQL's local time with a literal Z (docs/broker.md#expiry-time-zone). A renewal
 * never leaves a deadline earlier than brokerNow + seconds, so an expiry well before that,
 * by the broker's own Date header, means the database does not run in UTC.
 */
export function timeZoneSuspicion(renewal: Renewal, requestedSeconds: number): string | null {
  const { brokerDateMs, expiresAtMs } = renewal;
  if (brokerDateMs === null || expiresAtMs === null) return null;
  const shortByMs = brokerDateMs + requestedSeconds * 1000 - expiresAtMs;
  if (shortByMs < 60_000) return null;
  const hours = shortByMs / 3_600_000;
  const gap = hours >= 1 ? `${Math.round(hours * 10) / 10}h` : `${Math.round(shortByMs / 60_000)}m`;
  // The header has whole seconds: printed with them alone, not a precise-looking .000.
  const date = new Date(brokerDateMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const said = `the broker reported an expiry ${gap} earlier than its own clock allows (Date: ${date})`;
  // Time zones are whole or half hours, at most 14 from UTC; anything else is another fault.
  const halfHours = shortByMs / 1_800_000;
  const zoneLike = hours <= 14.5 && Math.abs(halfHours - Math.round(halfHours)) < 0.1;
  return zoneLike
    ? `${said}: its database probably does not run in UTC, so expiry times are shifted by its time zone`
    : `${said}: its clock or its answer is wrong; do not trust the time left it implies`;
}

/**
 * When a renewed lease expires, on the local clock, erring early: a watch schedules renewals
 * and declares a lease lost by it, so a late estimate could let the lease lapse unnoticed.
 *
 * - The broker renewed after the request was sent, to at least its now + seconds, and both
 *   clocks run at the same rate: the lease lasts until sentAt + seconds or later. This needs
 *   no agreement between the clocks at all, so a local clock hours off changes nothing.
 * - A later reported expiry (the lease already had a longer deadline) is placed through the
 *   Date header: the broker's clock at sentAt was at most Date + DATE_HEADER_LAG_MS.
 * - When the expiry moved since the previous renewal, this renewal set it to brokerNow +
 *   seconds, so only the first bound holds. That also covers a database whose time zone puts
 *   its expiries hours ahead of its Date header (timeZoneSuspicion covers hours behind).
 */
export function localDeadline(
  renewal: Renewal,
  requestedSeconds: number,
  sentAtMs: number,
  previousExpiresAtMs: number | null,
): number {
  const guaranteed = sentAtMs + requestedSeconds * 1000;
  const { expiresAtMs, brokerDateMs } = renewal;
  if (expiresAtMs === null || brokerDateMs === null) return guaranteed;
  if (previousExpiresAtMs !== null && expiresAtMs > previousExpiresAtMs) return guaranteed;
  return Math.max(guaranteed, sentAtMs + (expiresAtMs - (brokerDateMs + DATE_HEADER_LAG_MS)));
}
