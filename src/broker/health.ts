/**
 * `GET /health`, the broker's word on itself (docs/broker.md#health): `ping` and `version` ask
 * it. It needs no token. The real broker answers 200 with `"status":"healthy"` and 503 with
 * `"status":"unhealthy","database":"disconnected"` when PostgreSQL is gone; both are answers
 * to report, not failures of the request. Anything else (a proxy's 502, a body that is not a
 * health report) is a BrokerError as on every route.
 */
import { BrokerError } from '../exit.js';
import { dateHeaderSkew } from './broker-clock.js';
import { excerpt, isObject, statusError, type RawAnswer, type RouteWords } from './contract.js';

export const HEALTH_PATH = '/health';

/**
 * The consumer group `ping` reads to prove a token: the lightest read a read-only token may make
 * (docs/broker.md#consumer-groups). No group has this name, and the broker answers an unknown
 * group with an empty 200 once the token is accepted, 401 or 403 when it is not.
 */
export const TOKEN_PROBE_GROUP = 'queenctl-token-check';

export interface Health {
  /** The broker's `status`: `healthy`, `unhealthy`, or whatever a newer broker says. */
  status: string;
  /** The broker's `database`: `connected`, `disconnected`; null when it did not say. */
  database: string | null;
  /** The broker's `version`; null when it did not say. */
  version: string | null;
  /** The answer's HTTP status: 200 healthy, 503 unhealthy. */
  httpStatus: number;
  /** The Date header, epoch ms (whole seconds, possibly a second stale); null without one. */
  brokerDateMs: number | null;
}

const HEALTH_WORDS: RouteWords = {
  action: 'GET /health',
  roleHint: 'GET /health needs no token; something in front of the broker refused it',
  route: 'health route',
};

function header(answer: RawAnswer, name: string): string | undefined {
  const value = answer.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Judges an answer of GET /health: a Health for 200 and 503 with the broker's report, else an error. */
export function parseHealth(answer: RawAnswer, server: string): Health {
  if (answer.status !== 200 && answer.status !== 503) throw statusError(answer, server, HEALTH_WORDS);
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.body);
  } catch {
    parsed = undefined;
  }
  if (!isObject(parsed) || typeof parsed.status !== 'string') {
    // A 503 without the broker's report is what a proxy says when the broker behind it is gone.
    if (answer.status === 503) throw statusError(answer, server, HEALTH_WORDS);
    throw new BrokerError(
      `the broker's answer to GET /health is not a health report: it sent ${excerpt(answer.body)}`,
      false,
      'is --server a Queen broker?',
      answer.status,
    );
  }
  const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);
  const date = Date.parse(header(answer, 'date') ?? '');
  return {
    status: parsed.status,
    database: text(parsed.database),
    version: text(parsed.version),
    httpStatus: answer.status,
    brokerDateMs: Number.isFinite(date) ? date : null,
  };
}

/** Healthy as the broker means it: 200 and `"status":"healthy"`. */
export function isHealthy(health: Health): boolean {
  return health.httpStatus === 200 && health.status === 'healthy';
}

/**
 * The broker's clock minus ours, as a Date header tells it: `ms` the middle of the range it
 * allows, and the true skew within `ms ± errorMs`. The header has whole seconds and may lag by
 * up to one more, so errorMs is at least a second (docs/broker.md#date-header-lag).
 */
export interface ClockSkew {
  ms: number;
  errorMs: number;
}

/**
 * The clock skew of an answer sent and received at these local times; null without a Date
 * header. Whole milliseconds, rounded outward: ms ± errorMs always holds the range.
 */
export function clockSkew(health: Health, sentAtMs: number, receivedAtMs: number): ClockSkew | null {
  if (health.brokerDateMs === null) return null;
  const { minMs, maxMs } = dateHeaderSkew(health.brokerDateMs, sentAtMs, receivedAtMs);
  const ms = Math.round((minMs + maxMs) / 2) || 0; // never -0, which JSON would print as 0 anyway
  return { ms, errorMs: Math.ceil(Math.max(ms - minMs, maxMs - ms)) };
}
