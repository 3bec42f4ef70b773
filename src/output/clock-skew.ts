/**
 * The broker's clock minus this machine's, in words: a Date header tells it only to within a
 * second or two (docs/broker.md#date-header-lag), so people get the range it allows, in whole
 * seconds rounded outward, never a precise-looking "300ms".
 */
import type { ClockSkew } from '../broker/health.js';

/** A bound of a skew, at the resolution people read: 5s, 1m58s, 1h01m; rounded down or up. */
function formatBound(ms: number, round: 'down' | 'up'): string {
  const whole = round === 'down' ? Math.floor : Math.ceil;
  const seconds = whole(ms / 1000);
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
  const minutes = whole(ms / 60_000);
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`;
}

/** How far off the broker's clock is known to be: 3s..6s, or up to 3s when it may be under 1s. */
function formatRange(lowMs: number, highMs: number): string {
  const low = formatBound(lowMs, 'down');
  return low === '0s' ? `up to ${formatBound(highMs, 'up')}` : `${low}..${formatBound(highMs, 'up')}`;
}

/** How far off the broker's clock is known to be, and which way; null when it may be in sync. */
export interface KnownClockSkew {
  /** The least it is off by, ms: a warning is judged by this, never by a middle that may be wrong. */
  leastMs: number;
  /** The range in words: 3s..6s, 3m58s..4m02s, or up to 2s when it may be under a second. */
  range: string;
  /** The broker's clock is ahead of this machine's (else behind). */
  ahead: boolean;
}

export function knownClockSkew(skew: ClockSkew | null): KnownClockSkew | null {
  if (skew === null) return null;
  const lowMs = skew.ms - skew.errorMs;
  const highMs = skew.ms + skew.errorMs;
  if (lowMs > 0) return { leastMs: lowMs, range: formatRange(lowMs, highMs), ahead: true };
  if (highMs < 0) return { leastMs: -highMs, range: formatRange(-highMs, -lowMs), ahead: false };
  return null;
}

/**
 * The CLOCK SKEW cell of ping: `in sync (within 2s)` when the skew may be none, else `ahead by
 * 3s..6s` or `behind by 3m58s..4m02s` (the broker's clock against this machine's); `-` without
 * a Date header.
 */
export function formatClockSkew(skew: ClockSkew | null): string {
  if (skew === null) return '-';
  const known = knownClockSkew(skew);
  if (known) return `${known.ahead ? 'ahead' : 'behind'} by ${known.range}`;
  return `in sync (within ${formatBound(Math.abs(skew.ms) + skew.errorMs, 'up')})`;
}
