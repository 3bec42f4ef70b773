/**
 * The renewal rules, in one place: how an answer of POST /api/v1/lease/:leaseId/extend becomes
 * a RenewalResult, or a typed error. docs/broker.md#answer-shapes is the
 * reference: the documented object, and the older array shape this module also accepts.
 *
 * The rule that matters most: `renewed` decides. HTTP 200 and `success: true` are never taken
 * as evidence that a lease was renewed.
 */
import { formatCountdown } from '../output/duration.js';
import { AuthError, BrokerError } from '../exit.js';

/** The six documented keys, exactly as the contract prints them. */
export interface RenewalResult {
  leaseId: string;
  success: boolean;
  renewed: number;
  newExpiresAt: string | null;
  expiresAt: string | null;
  lease_expires_at: string | null;
}

export type ResponseShape = 'documented' | 'array';

/** A parsed renewal with what queenctl derived from it. */
export interface Renewal {
  result: RenewalResult;
  shape: ResponseShape;
  /** The older broker's reason when it renewed nothing (`Lease not found`, ...), else null. */
  reason: string | null;
  /** Earliest expiry of the renewed leases, epoch ms on the broker's clock; null when none. */
  expiresAtMs: number | null;
  /** The answer's Date header, epoch ms (one-second resolution, may lag by a second). */
  brokerDateMs: number | null;
}

/** What the HTTP layer hands over: enough to judge the answer, nothing transport-specific. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

const EXCERPT_LENGTH = 120;

/** A short, single-line, escaped excerpt of a body, for error messages. */
export function excerpt(body: string): string {
  const flat = JSON.stringify(body.length > EXCERPT_LENGTH ? body.slice(0, EXCERPT_LENGTH) : body);
  return body.length > EXCERPT_LENGTH ? `${flat.slice(0, -1)}…" (${body.length} bytes)` : flat;
}

function header(headers: RawAnswer['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function brokerErrorText(body: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body);
    if (isObject(parsed) && typeof parsed.error === 'string') return parsed.error;
  } catch {
    // Not JSON: the caller falls back to an excerpt of the raw body.
  }
  return undefined;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The answer's Retry-After in ms: delta-seconds, or an HTTP date measured against the answer's
 * own Date header (the broker's clock, not ours). Undefined when absent or unreadable.
 */
export function retryAfterMs(headers: RawAnswer['headers']): number | undefined {
  const value = header(headers, 'retry-after')?.trim();
  if (value === undefined || value === '') return undefined;
  if (/^\d+$/.test(value)) return Math.min(Number(value), 86_400) * 1000;
  const at = Date.parse(value);
  const date = Date.parse(header(headers, 'date') ?? '');
  if (!Number.isFinite(at) || !Number.isFinite(date)) return undefined;
  return Math.max(0, at - date);
}

/** What a route's failures are called: the renewal's words unless a route says otherwise. */
export interface RouteWords {
  /** "the renewal", "the listing of consumer groups" */
  action: string;
  /** What a 403 means for this route. */
  roleHint: string;
  /** "lease route", "consumer-group route": what a 404 says the server lacks. */
  route: string;
}

const RENEWAL_WORDS: RouteWords = {
  action: 'the renewal',
  roleHint: 'extending a lease needs a token with the read-write role',
  route: 'lease route',
};

/**
 * What to check when the broker, or what stands in front of it, keeps failing: the hint of the
 * final error once retries are spent, in the same words for every verb and route.
 */
export const FAILURE_HINTS = {
  /** 429: a rate limit, most often a proxy's or a load balancer's. */
  rateLimited: 'check the rate limits of the proxy or load balancer in front of the broker, or lower --concurrency',
  /** 502, 503, 504 and other 5xx: what a proxy says when the broker behind it does not answer. */
  unavailable: 'check the proxy or load balancer in front of the broker, and whether the broker is down or restarting',
  /** 500, `500 pool`, a failed query: the broker is up, its database is not keeping up. */
  database: "check the broker's database (down, or its connection pool exhausted) and the broker's log",
} as const;

/**
 * Judges a non-200 answer. Which failures are transient (safe and useful to retry) follows
 * the outcome table of docs/broker.md: a renewal takes the later of two deadlines, so repeating
 * one never shortens a lease.
 */
export function statusError(
  answer: RawAnswer,
  server: string,
  words: RouteWords = RENEWAL_WORDS,
): AuthError | BrokerError {
  const { status, body } = answer;
  const said = brokerErrorText(body);
  const saidText = said !== undefined ? `: ${said}` : body ? `: ${excerpt(body)}` : '';
  if (status === 401) {
    return new AuthError(
      `the broker refused the credentials (HTTP 401${saidText})`,
      status,
      "give a valid token with --token-file, QUEEN_TOKEN or the context's token-ref",
    );
  }
  if (status === 403) {
    return new AuthError(`the broker refused ${words.action} (HTTP 403${saidText})`, status, words.roleHint);
  }
  if (status >= 300 && status < 400) {
    const location = header(answer.headers, 'location');
    return new BrokerError(
      `the broker answered with a redirect (HTTP ${status}${location ? ` to ${location}` : ''})`,
      false,
      'queenctl does not follow redirects; point --server at the broker itself',
      status,
    );
  }
  if (status === 404) {
    return new BrokerError(
      `${server} has no ${words.route} (HTTP 404): is it a Queen broker?`,
      false,
      'check --server, QUEEN_SERVER or the context',
      status,
    );
  }
  // No Queen broker answers so on its routes: a web server that takes no POST (python's
  // http.server answers 501), or one that serves other methods only.
  if (status === 405 || status === 501) {
    return new BrokerError(
      `${server} does not take this request (HTTP ${status}${saidText}): is it a Queen broker?`,
      false,
      'check --server, QUEEN_SERVER or the context',
      status,
    );
  }
  if (status === 500 && said === 'pool') {
    return new BrokerError(
      'the broker had no database connection free (HTTP 500 pool)',
      true,
      FAILURE_HINTS.database,
      status,
    );
  }
  if (status === 500 && said?.startsWith('renew failed')) {
    return new BrokerError(
      `the broker's renewal query failed (HTTP 500: ${said})`,
      false,
      FAILURE_HINTS.database,
      status,
    );
  }
  // A rate limit or an overload with Retry-After says when to come back (see broker/retry.ts).
  const retryAfter = status === 429 || status === 503 ? retryAfterMs(answer.headers) : undefined;
  const asked = retryAfter === undefined ? '' : `; it asked to retry after ${formatCountdown(retryAfter)}`;
  if (status === 429) {
    return new BrokerError(
      `the broker, or a proxy in front of it, is rate-limiting requests (HTTP 429${saidText})${asked}`,
      true,
      FAILURE_HINTS.rateLimited,
      status,
      retryAfter,
    );
  }
  const transient = status === 502 || status === 503 || status === 504;
  const hint = status === 500 ? FAILURE_HINTS.database : status > 500 ? FAILURE_HINTS.unavailable : undefined;
  return new BrokerError(`the broker answered HTTP ${status}${saidText}${asked}`, transient, hint, status, retryAfter);
}

function outsideContract(what: string, body: string): BrokerError {
  return new BrokerError(
    `the broker's answer is outside the lease contract: ${what}; it sent ${excerpt(body)}`,
    false,
    'nothing is known about the lease; is --server a Queen broker of a supported version?',
  );
}

/**
 * An ISO-8601 instant as both brokers write it (docs/broker.md#documented-object: microseconds; #array-shape:
 * milliseconds), with a zone. Date.parse alone would take "1" or "July 4" for a date.
 */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;

function timestamp(value: unknown, key: string, body: string): number | null {
  if (value === null) return null;
  const ms = typeof value === 'string' && ISO_INSTANT.test(value) ? Date.parse(value) : Number.NaN;
  if (!Number.isFinite(ms)) throw outsideContract(`${key} is not a timestamp or null`, body);
  return ms;
}

const EXPIRY_KEYS = ['newExpiresAt', 'expiresAt', 'lease_expires_at'] as const;

function parseDocumented(
  leaseId: string,
  answer: Record<string, unknown>,
  body: string,
): Omit<Renewal, 'brokerDateMs'> {
  const { renewed, success } = answer;
  if (typeof renewed !== 'number' || !Number.isSafeInteger(renewed) || renewed < 0) {
    throw outsideContract('renewed is not a whole number', body);
  }
  if (typeof success !== 'boolean') throw outsideContract('success is not a boolean', body);
  if (answer.leaseId !== leaseId) {
    throw outsideContract(
      typeof answer.leaseId === 'string' ? 'it is about another lease id' : 'leaseId is missing or not a string',
      body,
    );
  }
  // docs/broker.md#documented-object says the three keys carry one value; if they do not, nothing
  // trustworthy is left to schedule the next renewal on. The same text is read once (issue 19:
  // the parser was a tenth of a bulk run's CPU).
  const first = answer[EXPIRY_KEYS[0]];
  const expiresAtMs = timestamp(first, EXPIRY_KEYS[0], body);
  let disagree = false;
  for (const key of EXPIRY_KEYS) {
    const value = answer[key];
    if (value !== first && timestamp(value, key, body) !== expiresAtMs) disagree = true;
  }
  if (disagree) throw outsideContract('the three expiry keys disagree', body);
  if (renewed > 0 && expiresAtMs === null) throw outsideContract('renewed leases without an expiry', body);
  return {
    result: {
      leaseId,
      success,
      renewed,
      newExpiresAt: answer.newExpiresAt as string | null,
      expiresAt: answer.expiresAt as string | null,
      lease_expires_at: answer.lease_expires_at as string | null,
    },
    shape: 'documented',
    reason: typeof answer.error === 'string' ? answer.error : null,
    expiresAtMs: renewed > 0 ? expiresAtMs : null,
  };
}

/** The older broker's array: one entry per batched job; ours is found by leaseId, not index. */
function parseArray(leaseId: string, answer: unknown[], body: string): Omit<Renewal, 'brokerDateMs'> {
  const entry = answer.find((item) => isObject(item) && item.leaseId === leaseId);
  if (!isObject(entry)) throw outsideContract('no entry for this lease id', body);
  if (typeof entry.success !== 'boolean') throw outsideContract('success is not a boolean', body);
  if (entry.error !== undefined && entry.error !== null && typeof entry.error !== 'string') {
    throw outsideContract('error is not a string', body);
  }
  const expiresAtMs = timestamp(entry.expiresAt ?? null, 'expiresAt', body);
  if (entry.success && expiresAtMs === null) throw outsideContract('success without an expiry', body);
  const expiresAt = entry.success ? (entry.expiresAt as string) : null;
  // Mapped as the contract fixes: renewed is 1 on success, the one expiry fills all three keys.
  return {
    result: {
      leaseId,
      success: entry.success,
      renewed: entry.success ? 1 : 0,
      newExpiresAt: expiresAt,
      expiresAt,
      lease_expires_at: expiresAt,
    },
    shape: 'array',
    reason: typeof entry.error === 'string' ? entry.error : null,
    expiresAtMs: entry.success ? expiresAtMs : null,
  };
}

/** The last Date header read, and its value: answers within one second carry the same one. */
let lastDate: { text: string; ms: number | null } = { text: '', ms: null };

/** A Date header in epoch ms; null when absent or not a date. */
function dateMs(text: string | undefined): number | null {
  if (text === undefined) return null;
  if (text !== lastDate.text) {
    const ms = Date.parse(text);
    lastDate = { text, ms: Number.isFinite(ms) ? ms : null };
  }
  return lastDate.ms;
}

/** Turns one answer of the extend route into a Renewal, or throws AuthError / BrokerError. */
export function parseRenewal(leaseId: string, answer: RawAnswer, server: string): Renewal {
  if (answer.status !== 200) throw statusError(answer, server);
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.body);
  } catch {
    throw outsideContract('HTTP 200 with a body that is not JSON', answer.body);
  }
  const brokerDateMs = dateMs(header(answer.headers, 'date'));
  if (Array.isArray(parsed)) return { ...parseArray(leaseId, parsed, answer.body), brokerDateMs };
  if (!isObject(parsed)) throw outsideContract('HTTP 200 with JSON that is not an object', answer.body);
  if ('renewed' in parsed) return { ...parseDocumented(leaseId, parsed, answer.body), brokerDateMs };
  if (parsed.success === false && typeof parsed.error === 'string') {
    // A failed database query comes back as 200 {success:false,error} without `renewed`
    // (docs/broker.md#query-failure-at-200): the broker failed, which says nothing about the lease.
    throw new BrokerError(`the broker could not run the renewal: ${parsed.error}`, false, FAILURE_HINTS.database);
  }
  throw outsideContract("neither renewed nor an older broker's array", answer.body);
}

/** True when the renewal renewed something. The one test of success, used everywhere. */
export function isHeld(renewal: Renewal): boolean {
  return renewal.result.renewed > 0;
}
