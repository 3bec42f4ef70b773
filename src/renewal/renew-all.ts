/**
 * The loop shared by `extend` and `inspect`: one renewal per lease id, a bounded number in
 * flight over the client's one connection pool, outcomes handed on in input order as soon as
 * they are known (so output streams and memory stays flat for thousands of ids).
 */
import type { LeaseIdSource } from '../args.js';
import { estimateBrokerClock, type BrokerClockEstimate } from '../broker/broker-clock.js';
import type { BrokerClient } from '../broker/client.js';
import { isHeld, type Renewal } from '../broker/contract.js';
import { withRetries, type RetryPolicy } from '../broker/retry.js';
import type { Clock } from '../clock.js';
import { AuthError, BrokerError, ExitCode, QueenctlError, UsageError } from '../exit.js';

export type LeaseOutcome =
  | { leaseId: string; code: ExitCode; renewal: Renewal; brokerClock: BrokerClockEstimate; receivedAtMs: number }
  | { leaseId: string; code: ExitCode; error: QueenctlError };

export interface RenewAllOptions {
  seconds: number;
  retry: RetryPolicy;
  concurrency: number;
  /** Called before a retry's wait, for the one-line notice on stderr. */
  onRetry?: (leaseId: string, error: BrokerError, attempt: number, delayMs: number) => void;
}

export interface RenewAllContext {
  client: Pick<BrokerClient, 'extend'>;
  clock: Clock;
  signal: AbortSignal;
}

export interface RenewAllSummary {
  /** Why issuing stopped early, if it did. */
  stoppedBy: 'auth' | 'broker' | 'signal' | null;
  /** A bad id on standard input: ids before it were renewed, none after it. */
  inputError: UsageError | null;
  /**
   * Whether lease ids were left unsent when it stopped early: `none` when every id had been
   * sent (in flight already, with --concurrency above 1), `unknown` when standard input had
   * nothing more to read yet. Meaningless when it did not stop early.
   */
  unsent: 'none' | 'some' | 'unknown';
}

/**
 * A Retry-After is the broker's word to this client, not to one lease: until it has passed, no
 * request of the run is sent (the ones already waiting for it included).
 */
interface RetryAfterGate {
  until: number;
}

async function renewOne(
  leaseId: string,
  options: RenewAllOptions,
  context: RenewAllContext,
  gate: RetryAfterGate,
): Promise<LeaseOutcome> {
  const { client, clock, signal } = context;
  try {
    let sentAtMs = clock.now();
    const renewal = await withRetries(
      async () => {
        if (gate.until > clock.now()) await clock.sleep(gate.until - clock.now(), signal);
        sentAtMs = clock.now();
        return client.extend(leaseId, options.seconds, { signal });
      },
      options.retry,
      {
        clock,
        signal,
        onRetry: (error, attempt, delayMs) => {
          if (error.retryAfterMs !== undefined) gate.until = Math.max(gate.until, clock.now() + delayMs);
          options.onRetry?.(leaseId, error, attempt, delayMs);
        },
      },
    );
    const receivedAtMs = clock.now();
    return {
      leaseId,
      code: isHeld(renewal) ? ExitCode.Ok : ExitCode.NotHeld,
      renewal,
      brokerClock: estimateBrokerClock(renewal, options.seconds, sentAtMs, receivedAtMs),
      receivedAtMs,
    };
  } catch (error) {
    if (error instanceof QueenctlError) return { leaseId, code: error.exitCode, error };
    if (signal.aborted) {
      return {
        leaseId,
        code: ExitCode.Broker,
        error: new BrokerError('interrupted before the broker answered', false),
      };
    }
    throw error;
  }
}

/**
 * Whether a read of the next id, once a run stopped early, finds one: arguments answer at once;
 * standard input that has nothing ready is `unknown` (nobody waits for a producer then).
 */
async function anyLeft(read: Promise<Step>): Promise<'none' | 'some' | 'unknown'> {
  const step = await Promise.race([read, new Promise<null>((resolve) => setImmediate(resolve, null))]);
  if (step === null) return 'unknown';
  // A bad id after the stop is still an id that was not sent.
  return step.kind === 'id' && step.next.done ? 'none' : 'some';
}

function readStep(ids: AsyncIterator<string>): Promise<Step> {
  return ids.next().then(
    (next): Step => ({ kind: 'id', next }),
    (error: unknown): Step => ({ kind: 'input-error', error }),
  );
}

type Step =
  | { kind: 'id'; next: IteratorResult<string> }
  | { kind: 'input-error'; error: unknown }
  | { kind: 'answered' }
  | { kind: 'aborted' };

export async function renewAll(
  source: LeaseIdSource,
  options: RenewAllOptions,
  context: RenewAllContext,
  onOutcome: (outcome: LeaseOutcome) => Promise<void>,
): Promise<RenewAllSummary> {
  const ids = source.ids[Symbol.asyncIterator]();
  const inFlight: Promise<LeaseOutcome>[] = [];
  const summary: RenewAllSummary = { stoppedBy: null, inputError: null, unsent: 'none' };
  let consecutiveFailures = 0;
  const gate: RetryAfterGate = { until: 0 };
  const { signal } = context;
  let exhausted = false;
  /** A read of the next id still waiting for standard input. */
  let reading: Promise<Step> | null = null;
  // Wakes the current wait on a signal. (Racing one long-lived promise instead would keep a
  // reaction per lease id alive on it for the whole run.)
  let wake: ((step: Step) => void) | null = null;
  const onAbort = (): void => wake?.({ kind: 'aborted' });
  signal.addEventListener('abort', onAbort, { once: true });
  const stopIssuing = (): boolean => {
    if (signal.aborted) summary.stoppedBy ??= 'signal';
    return summary.stoppedBy !== null || summary.inputError !== null;
  };

  try {
    for (;;) {
      if (!exhausted && !stopIssuing() && inFlight.length < options.concurrency) {
        // Standard input may be slow (a producer still working) or never end: wait for the next
        // id, but hand on answers meanwhile and stop at once on a signal.
        reading ??= readStep(ids);
        const pending = reading;
        const head = inFlight[0];
        const step = await new Promise<Step>((resolve) => {
          wake = resolve;
          void pending.then(resolve);
          const answered = (): void => resolve({ kind: 'answered' });
          // A rejection is awaited (and thrown) below, where the head is handed on.
          void head?.then(answered, answered);
          if (signal.aborted) resolve({ kind: 'aborted' });
        });
        wake = null;
        if (step.kind === 'id') {
          reading = null;
          if (step.next.done) exhausted = true;
          else inFlight.push(renewOne(step.next.value, options, context, gate));
          continue;
        }
        if (step.kind === 'input-error') {
          reading = null;
          if (!(step.error instanceof UsageError)) throw step.error;
          summary.inputError = step.error;
          continue;
        }
        if (step.kind === 'aborted') continue;
      }
      const head = inFlight.shift();
      if (!head) break;
      const outcome = await head;
      // A refused token is refused for every lease: sending the rest would only repeat it.
      if ('error' in outcome && outcome.error instanceof AuthError) summary.stoppedBy ??= 'auth';
      // A whole window of leases unreachable, hanging or 5xx even after retries: the broker is
      // down, and every further id would wait out the same timeouts (an hour for thousands of
      // ids at the defaults). Stop and say so; a lease that merely fails alone does not count.
      const brokerDown = 'error' in outcome && outcome.error instanceof BrokerError && outcome.error.transient;
      consecutiveFailures = brokerDown ? consecutiveFailures + 1 : 0;
      if (consecutiveFailures >= options.concurrency) summary.stoppedBy ??= 'broker';
      await onOutcome(outcome);
    }
    if (!exhausted && summary.stoppedBy !== null) {
      reading ??= readStep(ids);
      summary.unsent = await anyLeft(reading);
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    // Stopped while waiting for input: nobody will read the rest of it.
    if (reading) source.cancel();
  }
  return summary;
}
