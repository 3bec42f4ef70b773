/**
 * Exit codes and the typed errors that carry them: the one place that maps an outcome to a
 * process status (see "Exit codes" in the CLI contract). Scripts branch on these numbers, so
 * they never change meaning.
 */
export const ExitCode = {
  /** Every lease renewed (extend), live (inspect); a watch ended by --for. */
  Ok: 0,
  /** Usage or configuration error: nothing was sent to the broker. */
  Usage: 1,
  /** Broker error: unreachable, timed out, 5xx, or an answer outside the contract. */
  Broker: 2,
  /** Authentication or authorization refused (401 or 403). */
  Auth: 3,
  /** Lease not held: the broker answered and renewed nothing, even at HTTP 200. */
  NotHeld: 4,
  /** `lease run`: a message did not succeed (the command failed, reported a failure, or could not read it). */
  MessageFailed: 5,
  /**
   * queenctl could not write its output to stdout (a full disk, an I/O error): what the run did
   * (a renewal, an ack) is not all in its output. 74 is sysexits.h's EX_IOERR.
   */
  OutputFailed: 74,
  /** `lease run`: the command could not be executed, or queenctl could not prepare its batch. */
  CannotExecute: 126,
  /** `lease run`: the command was not found. */
  CommandNotFound: 127,
  /** Stopped by SIGHUP: the terminal or session went away (a lease verb; a watch without a command). */
  HungUp: 129,
  /** Stopped by SIGINT. */
  Interrupted: 130,
  /** Stopped by SIGTERM. */
  Terminated: 143,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** 128 + the signal's number, as a shell reports a process a signal ended (contract, Exit codes). */
export function signalExitCode(signal: unknown): ExitCode {
  if (signal === 'SIGTERM') return ExitCode.Terminated;
  if (signal === 'SIGHUP') return ExitCode.HungUp;
  return ExitCode.Interrupted;
}

/** An error whose message is meant for people and whose exit code is meant for scripts. */
export class QueenctlError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    readonly hint?: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** Bad flag, bad argument, bad config: raised before anything is sent. */
export class UsageError extends QueenctlError {
  constructor(message: string, hint?: string) {
    super(message, ExitCode.Usage, hint);
  }
}

/** The broker could not be reached, failed, or answered outside the contract. */
export class BrokerError extends QueenctlError {
  constructor(
    message: string,
    /** True when retrying cannot make things worse and may help (see broker/retry.ts). */
    readonly transient: boolean,
    hint?: string,
    readonly status?: number,
    /** The answer's Retry-After (429, 503), in ms: how long the broker asked us to wait. */
    readonly retryAfterMs?: number,
  ) {
    super(message, ExitCode.Broker, hint);
  }
}

/** 401 or 403: retrying will not help, the credentials must change. */
export class AuthError extends QueenctlError {
  constructor(
    message: string,
    readonly status: number,
    hint?: string,
  ) {
    super(message, ExitCode.Auth, hint);
  }
}

/**
 * The status of several outcomes: "the first that applies of 3, 2, 4, 0" (contract, Exit codes).
 * Usage errors end a run before any outcome exists, so they are not ranked here.
 */
const PRECEDENCE: readonly ExitCode[] = [ExitCode.Auth, ExitCode.Broker, ExitCode.NotHeld];

export function combineExitCodes(codes: Iterable<ExitCode>): ExitCode {
  const seen = new Set(codes);
  return PRECEDENCE.find((code) => seen.has(code)) ?? ExitCode.Ok;
}

const SIGNAL_CODES: readonly ExitCode[] = [ExitCode.HungUp, ExitCode.Interrupted, ExitCode.Terminated];

/**
 * The status of a run over several leases: a signal first, then 3, 2, 4 as the contract ranks
 * them. A bad id read from standard input (after some leases were sent) only replaces 0: a
 * lease found lost must never hide behind "usage error".
 */
export function runExitCode(codes: ReadonlySet<ExitCode>): ExitCode {
  const signalled = SIGNAL_CODES.find((code) => codes.has(code));
  if (signalled !== undefined) return signalled;
  const outcome = combineExitCodes(codes);
  return codes.has(ExitCode.Usage) && outcome === ExitCode.Ok ? ExitCode.Usage : outcome;
}
