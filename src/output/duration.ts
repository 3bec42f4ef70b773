/**
 * A duration for people: 250ms below a second, 2.5s below ten, else 5s, 1m58s or 1h01m, rounded
 * to the unit shown (1989 ms is 2s, 3999 ms is 4s: docs/cli-contract.md#durations-for-people).
 */
export function formatDuration(ms: number): string {
  return format(ms, Math.round);
}

/**
 * The time until something queenctl will do (the next renewal, a retry, a probe, SIGKILL),
 * rounded up: never shown below the truth, so nothing seems late that is not.
 */
export function formatCountdown(ms: number): string {
  return format(ms, Math.ceil);
}

function format(ms: number, round: (value: number) => number): string {
  if (!(ms > 0)) return '0ms';
  // The unit is chosen after rounding: 999.6 ms is 1s, 59.6 s is 1m00s.
  const millis = round(ms);
  if (millis < 1000) return `${millis}ms`;
  const tenths = round(ms / 100);
  if (tenths < 100) return tenths % 10 === 0 ? `${tenths / 10}s` : `${(tenths / 10).toFixed(1)}s`;
  const totalSeconds = round(ms / 1000);
  if (totalSeconds < 3600) {
    const minutes = Math.floor(totalSeconds / 60);
    const seconds = totalSeconds - minutes * 60;
    return minutes > 0 ? `${minutes}m${String(seconds).padStart(2, '0')}s` : `${seconds}s`;
  }
  const totalMinutes = round(ms / 60_000);
  const hours = Math.floor(totalMinutes / 60);
  return `${hours}h${String(totalMinutes - hours * 60).padStart(2, '0')}m`;
}
