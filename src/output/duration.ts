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

/**
 * `ms` to the precision formatDuration shows it at (ms, tenths of a second, seconds, minutes):
 * two durations shown alike are equal here, so that what is ordered by it (the rows of a live
 * view) does not swap places for a difference the screen does not show.
 */
export function shownDurationMs(ms: number): number {
  if (!(ms > 0)) return 0;
  const { units, unitMs } = inShownUnit(ms, Math.round);
  return units * unitMs;
}

/** The unit a duration is shown in, chosen after rounding (999.6 ms is 1s, 59.6 s is 1m00s). */
function inShownUnit(ms: number, round: (value: number) => number): { units: number; unitMs: number } {
  const millis = round(ms);
  if (millis < 1000) return { units: millis, unitMs: 1 };
  const tenths = round(ms / 100);
  if (tenths < 100) return { units: tenths, unitMs: 100 };
  const totalSeconds = round(ms / 1000);
  if (totalSeconds < 3600) return { units: totalSeconds, unitMs: 1000 };
  return { units: round(ms / 60_000), unitMs: 60_000 };
}

function format(ms: number, round: (value: number) => number): string {
  if (!(ms > 0)) return '0ms';
  const { units, unitMs } = inShownUnit(ms, round);
  if (unitMs === 1) return `${units}ms`;
  if (unitMs === 100) return units % 10 === 0 ? `${units / 10}s` : `${(units / 10).toFixed(1)}s`;
  if (unitMs === 1000) {
    const minutes = Math.floor(units / 60);
    const seconds = units - minutes * 60;
    return minutes > 0 ? `${minutes}m${String(seconds).padStart(2, '0')}s` : `${seconds}s`;
  }
  const hours = Math.floor(units / 60);
  return `${hours}h${String(units - hours * 60).padStart(2, '0')}m`;
}
