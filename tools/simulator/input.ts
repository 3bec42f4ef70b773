/**
 * Checking what callers hand the simulator, in process or through the control interface: one
 * error type, answered by the control interface with its `status`, and the checks they share.
 */

/** Bad input to mint/inject/configure; the control interface answers it with `status`. */
export class SimulatorInputError extends Error {
  constructor(
    message: string,
    readonly status = 400,
  ) {
    super(message);
    this.name = 'SimulatorInputError';
  }
}

export function fail(message: string, status = 400): never {
  throw new SimulatorInputError(message, status);
}

/** `record[key]` when it passes `check`, undefined when absent; anything else fails. */
export function optional<T>(
  record: Record<string, unknown>,
  key: string,
  check: (v: unknown) => v is T,
  what: string,
): T | undefined {
  const value = record[key];
  if (value === undefined) return undefined;
  if (!check(value)) fail(`${key} must be ${what}`);
  return value;
}

export const isString = (v: unknown): v is string => typeof v === 'string';
export const isFiniteNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
export const isPositiveInt = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 1;
