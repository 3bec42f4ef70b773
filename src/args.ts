/**
 * Validation of what users type: lease ids, --seconds and durations. Every rejection is a
 * UsageError (exit 1) raised before anything is sent to the broker.
 */
import { UsageError } from './exit.js';
import { quoteText } from './names.js';
import { hasUnsafeText } from './output/sanitise.js';
import { describeUtf8Fault, Utf8Checker } from './utf8.js';

export const MAX_SECONDS = 2_147_483_647;
/** Longer ids cannot be real (the broker mints 36-character UUIDs) and would not fit a URL. */
export const MAX_LEASE_ID_LENGTH = 2048;

/** `--seconds`: whole seconds, 1 to 2147483647 (docs/cli-contract.md). */
export function parseSeconds(text: string, flag = '--seconds'): number {
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1 || value > MAX_SECONDS) {
    throw new UsageError(`${flag} takes whole seconds from 1 to ${MAX_SECONDS}, not ${JSON.stringify(text)}`);
  }
  return value;
}

/** A small whole number such as --retries or --concurrency. */
export function parseCount(text: string, flag: string, min: number, max: number): number {
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!(value >= min && value <= max))
    throw new UsageError(`${flag} takes a whole number from ${min} to ${max}, not ${JSON.stringify(text)}`);
  return value;
}

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
/** setTimeout's ceiling: a longer timer would fire at once. */
const MAX_DURATION_MS = 2_147_483_647;

/** Durations: `250ms`, `30s`, `2m`, `1h`, or a bare number of seconds (docs/cli-contract.md), nothing else. */
export function parseDuration(text: string, flag: string): number {
  const match = DURATION.exec(text);
  const unit = (match?.[2] ?? 's') as keyof typeof UNIT_MS;
  const ms = match ? Math.round(Number(match[1]) * UNIT_MS[unit]) : Number.NaN;
  if (!Number.isFinite(ms) || ms < 1 || ms > MAX_DURATION_MS) {
    throw new UsageError(
      `${flag} takes a duration such as 250ms, 30s, 2m, 1h or a number of seconds, not ${JSON.stringify(text)}`,
    );
  }
  return ms;
}

// Control characters (C0, DEL, C1) never occur in a minted lease id; in a terminal they can
// hide what is being renewed.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
/** Half a surrogate pair: not text, and encodeURIComponent throws on it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * A lease id as it will be sent: trimmed of surrounding whitespace (an id copied from a table
 * comes with a space; standard input is split on whitespace anyway), then checked. Rejects ids no
 * broker could have minted; anything else travels percent-encoded as given. Every source of ids
 * (arguments, standard input, completion) goes through here (docs/cli-contract.md#lease-ids).
 */
export function checkLeaseId(text: string, where = 'lease id'): string {
  const leaseId = text.trim();
  if (leaseId === '') throw new UsageError(`${where} is empty`, 'give the leaseId the pop returned');
  if (CONTROL.test(leaseId)) throw new UsageError(`${where} ${quoteText(leaseId)} holds control characters`);
  // Whitespace is what separates ids on standard input: one inside is two ids pasted as one.
  if (/\s/.test(leaseId)) {
    throw new UsageError(
      `${where} ${quoteText(leaseId)} holds whitespace, which no lease id has`,
      'give each lease id as an argument of its own',
    );
  }
  // No encoding makes these one plain segment: %2E is the same unreserved "." (RFC 3986 2.3),
  // and URL parsers and proxies resolve it as a dot segment, i.e. another route.
  if (leaseId === '.' || leaseId === '..') {
    const means = leaseId === '.' ? 'this route' : 'the route above';
    throw new UsageError(
      `${where} ${JSON.stringify(leaseId)} cannot be sent: in a URL path it means ${means}, even percent-encoded`,
      'lease ids are the leaseId a pop returned',
    );
  }
  if (LONE_SURROGATE.test(leaseId)) throw new UsageError(`${where} ${quoteText(leaseId)} is not valid Unicode text`);
  if (leaseId.length > MAX_LEASE_ID_LENGTH) {
    throw new UsageError(
      `${where} is ${leaseId.length} characters long; no broker mints ids over ${MAX_LEASE_ID_LENGTH}`,
      'lease ids are the 36-character leaseId a pop returned',
    );
  }
  return leaseId;
}

/**
 * Whether a lease id from the broker (a pop's, a listed one) or a batch file is one plain id, as
 * it is: it passes checkLeaseId untrimmed, holds nothing a terminal would act on, and does not
 * begin with `-`, which a shell's word or `xargs` would hand to queenctl as an option
 * (`--token-file=/etc/…`). Only such ids are printed as names, offered by completion, probed,
 * renewed after a pop or acked (docs/security.md#outside-text-is-data).
 */
export function isPlainLeaseId(text: string): boolean {
  try {
    if (checkLeaseId(text) !== text) return false;
  } catch {
    return false;
  }
  return !text.startsWith('-') && !hasUnsafeText(text);
}

export interface LeaseIdSource {
  /** Every lease id in input order; stdin is read as it is consumed, never all at once. */
  ids: AsyncIterable<string>;
  /** One id given as an argument prints one object; several, or `-`, print a list. */
  single: boolean;
  /**
   * Stops reading standard input: a run that stopped early (a signal, a refusal) must not
   * wait for a producer that may never write again, nor keep the process alive for it.
   */
  cancel(): void;
}

export interface StdinLike extends AsyncIterable<Buffer | string> {
  isTTY?: boolean;
  destroy?(): unknown;
}

/**
 * Expands the `<leaseId...>` arguments: `-` reads whitespace-separated ids from stdin. The
 * arguments are checked before anything is sent; ids from stdin as they arrive.
 */
/** How a verb reads `-`: its name for hints, and whether empty standard input is no error. */
export interface LeaseIdReading {
  /** The verb a hint tells people to pipe into (default `extend`). */
  verb?: string;
  /** --allow-empty (docs/cli-contract.md): no id on standard input is nothing to do, not an error. */
  allowEmpty?: boolean;
}

export function leaseIdSource(
  args: readonly string[],
  openStdin: StdinLike | (() => StdinLike),
  reading: LeaseIdReading = {},
): LeaseIdSource {
  // Standard input is opened only for `-`: creating process.stdin costs start-up time.
  let opened: StdinLike | undefined;
  const stdinStream = (): StdinLike => (opened ??= typeof openStdin === 'function' ? openStdin() : openStdin);
  if (args.length === 0)
    throw new UsageError('missing lease id', 'give one or more lease ids, or - to read them from standard input');
  if (args.filter((arg) => arg === '-').length > 1) throw new UsageError('- (standard input) may be given once');
  // Every argument is checked before the first is sent; what is sent is the trimmed id.
  const ids = args.map((arg, index) => (arg === '-' ? arg : checkLeaseId(arg, `lease id #${index + 1}`)));
  const readsStdin = args.includes('-');
  if (readsStdin && stdinStream().isTTY) {
    throw new UsageError(
      '- reads lease ids from standard input, but it is a terminal',
      `pipe them in: cat ids.txt | queenctl lease ${reading.verb ?? 'extend'} -`,
    );
  }
  let cancelled = false;
  return {
    single: args.length === 1 && !readsStdin,
    cancel: () => {
      cancelled = true;
      if (readsStdin) stdinStream().destroy?.();
    },
    ids: (async function* () {
      for (const [index, arg] of args.entries()) {
        // Only a bare `-` reads standard input; " - " is an id (trimmed to "-").
        if (arg !== '-') {
          yield ids[index] as string;
          continue;
        }
        let count = 0;
        try {
          for await (const leaseId of splitWhitespace(stdinStream())) {
            count++;
            yield checkLeaseId(leaseId, `lease id #${count} on standard input`);
          }
        } catch (error) {
          if (error instanceof UsageError || cancelled) throw error;
          // EIO, EISDIR and the like: the input is unusable, which is the user's to fix.
          const code = (error as NodeJS.ErrnoException)?.code;
          throw new UsageError(
            `cannot read lease ids from standard input: ${code ?? (error as Error)?.message ?? String(error)}`,
          );
        }
        if (count === 0 && !reading.allowEmpty) {
          throw new UsageError(
            'no lease ids on standard input',
            'separate ids by spaces or newlines; --allow-empty makes an empty input nothing to do (exit 0)',
          );
        }
      }
    })(),
  };
}

/**
 * Whitespace-separated tokens of a stream, across chunk boundaries. Bytes must be UTF-8: at the
 * first that is not, the tokens wholly before it have been given and a UsageError names its
 * offset, however the bytes were chunked (docs/cli-contract.md#lease-ids). A fatal TextDecoder
 * would say that much, but not where.
 */
export async function* splitWhitespace(stream: AsyncIterable<Buffer | string>): AsyncGenerator<string> {
  let carry = '';
  // ignoreBOM: Node 24's streaming decoder drops a U+FEFF that follows a character split across
  // chunks, and 20/22 keep it; kept everywhere, it is whitespace (\s) like any BOM.
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true, fatal: true });
  const checker = new Utf8Checker();
  let fed = 0;
  let given = 0;
  for await (const chunk of stream) {
    let text = carry;
    let fault = null;
    if (typeof chunk === 'string') text += chunk;
    else {
      fault = checker.push(chunk);
      // Only the bytes before the fault are decoded: whatever precedes it is whole characters.
      text += decoder.decode(fault ? chunk.subarray(0, Math.max(0, fault.offset - fed)) : chunk, { stream: true });
      fed += chunk.length;
    }
    const tokens = text.split(/\s+/);
    carry = tokens.pop() ?? '';
    for (const token of tokens) {
      if (token === '') continue;
      given++;
      yield token;
    }
    // The token the fault is in is never given: carry holds its start.
    if (fault) throw notUtf8(describeUtf8Fault(fault, 'standard input'), given);
  }
  const fault = checker.end();
  if (fault) throw notUtf8(describeUtf8Fault(fault, 'standard input'), given);
  const rest = carry + decoder.decode();
  for (const token of rest.split(/\s+/)) if (token !== '') yield token;
}

function notUtf8(where: string, given: number): UsageError {
  return new UsageError(
    `lease id #${given + 1} on standard input is not valid UTF-8 text: ${where}`,
    'lease ids are text: check the file or the command that wrote them',
  );
}
