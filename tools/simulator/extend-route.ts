/**
 * `POST /api/v1/lease/:leaseId/extend` in both of the broker's shapes (docs/broker.md):
 * - `documented`: the documented object of docs/broker.md, the authority;
 * - `array`: the older open-source broker as observed and recorded byte for byte
 *   (test/fixtures/real-broker-extend.txt), one result in an array.
 * Authentication is decided before this (routes.ts); here the body is read and the lease renewed.
 */
import type { Scope } from './auth.js';
import { fail } from './input.js';
import { type LeaseStore, MAX_EXPIRY_MS } from './leases.js';
import { isoMicros, isoMillis, isRecord, jsonReply, type Reply, tryParseJson } from './wire.js';

/** `documented` object (docs/broker.md#documented-object) or the older broker's one-element array. */
export type Shape = 'documented' | 'array';

/** docs/broker.md: a missing or malformed `seconds` means 60. So does `{}` on the old broker. */
const DEFAULT_EXTEND_SECONDS = 60;
/**
 * The older broker batches concurrent renewals into one database call and numbers the jobs of a
 * batch (docs/broker.md: `index` is not always 0). We hold array-shape renewals this long and
 * answer them together, so sequential requests get 0 and concurrent ones 0, 1, 2…
 */
const BATCH_WINDOW_MS = 5;

export function parseShape(value: unknown): Shape {
  if (value !== 'documented' && value !== 'array') fail('shape must be documented or array');
  return value;
}

/**
 * docs/broker.md: "An empty body, a body that is not JSON, and a body without `seconds` all fall
 * back to 60 seconds. There is no 400 for a malformed body on this route." `seconds` is an
 * integer (fractions floored) and "values below 1 are clamped to 1".
 */
export function documentedSeconds(body: string): number {
  const parsed = tryParseJson(body);
  if (!parsed.ok || !isRecord(parsed.value)) return DEFAULT_EXTEND_SECONDS;
  const seconds = parsed.value.seconds;
  if (typeof seconds !== 'number') return DEFAULT_EXTEND_SECONDS;
  return Math.max(1, Math.floor(seconds));
}

/** nlohmann::json's type names, which the older broker's error messages quote. */
function jsonTypeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'object') return 'object';
  if (typeof value === 'boolean') return 'boolean';
  return typeof value; // 'number' | 'string'
}

type ArraySeconds = { ok: true; seconds: number } | { ok: false; status: number; error: string };

/**
 * The older broker (docs/broker.md, the recording): empty → 400, non-JSON → 400, a body that is
 * not an object or a non-number `seconds` → 500 with the JSON library's message, `{}` → 60, and
 * any number passed through as is (no clamp, fractions kept).
 */
export function arraySeconds(body: string): ArraySeconds {
  if (body.length === 0) return { ok: false, status: 400, error: 'Empty request body' };
  const parsed = tryParseJson(body);
  if (!parsed.ok) {
    const syntax = 'Invalid JSON: [json.exception.parse_error.101] parse error: syntax error while parsing value';
    return { ok: false, status: 400, error: `${syntax} - ${parsed.message}` };
  }
  const value = parsed.value;
  if (!isRecord(value)) {
    const error = `[json.exception.type_error.306] cannot use value() with ${jsonTypeName(value)}`;
    return { ok: false, status: 500, error };
  }
  if (!('seconds' in value)) return { ok: true, seconds: DEFAULT_EXTEND_SECONDS };
  const seconds = value.seconds;
  if (typeof seconds !== 'number') {
    const error = `[json.exception.type_error.302] type must be number, but is ${jsonTypeName(seconds)}`;
    return { ok: false, status: 500, error };
  }
  return { ok: true, seconds };
}

interface BatchJob {
  leaseId: string;
  seconds: number;
  scope: Scope;
  index: number;
  resolve: (reply: Reply | null) => void;
}

export class ExtendRoute {
  private batch: BatchJob[] = [];
  private batchTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: LeaseStore,
    private readonly brokerNow: () => number,
  ) {}

  /** The answer of the broker of `shape`; null when the simulator closed while it waited. */
  answer(shape: Shape, leaseId: string, scope: Scope, body: string): Reply | Promise<Reply | null> {
    if (shape === 'documented') return this.extendDocumented(leaseId, scope, body);
    const parsed = arraySeconds(body);
    if (!parsed.ok) return jsonReply(parsed.status, { error: parsed.error });
    return this.enqueue(leaseId, parsed.seconds, scope);
  }

  /** Answers every renewal still waiting for its batch with null. */
  close(): void {
    clearTimeout(this.batchTimer);
    for (const job of this.batch.splice(0)) job.resolve(null);
  }

  /** docs/broker.md#documented-object: 200 whether or not anything was renewed; keys in its order. */
  private extendDocumented(leaseId: string, scope: Scope, body: string): Reply {
    const now = this.brokerNow();
    const target = now + documentedSeconds(body) * 1000;
    // The document's 500 `renew failed: …`: what PostgreSQL says to a timestamp out of range.
    if (target > MAX_EXPIRY_MS) return jsonReply(500, { error: 'renew failed: timestamp out of range' });
    const lease = this.store.lookup(leaseId, scope, now);
    const { renewed, earliest } = lease ? this.store.renew(lease, target, now) : { renewed: 0, earliest: null };
    const at = earliest === null ? null : isoMicros(earliest);
    return jsonReply(200, {
      leaseId,
      success: renewed > 0,
      renewed,
      newExpiresAt: at,
      expiresAt: at,
      lease_expires_at: at,
    });
  }

  /** Joins (or opens) the current batch; see BATCH_WINDOW_MS. */
  private enqueue(leaseId: string, seconds: number, scope: Scope): Promise<Reply | null> {
    return new Promise((resolve) => {
      this.batch.push({ leaseId, seconds, scope, index: this.batch.length, resolve });
      this.batchTimer ??= setTimeout(() => this.flushBatch(), BATCH_WINDOW_MS);
    });
  }

  private flushBatch(): void {
    this.batchTimer = undefined;
    for (const job of this.batch.splice(0)) job.resolve(this.extendArrayJob(job));
  }

  /** docs/broker.md: one result in an array, keys alphabetical, millisecond `expiresAt`. */
  private extendArrayJob(job: BatchJob): Reply {
    const now = this.brokerNow();
    const target = now + job.seconds * 1000;
    // docs/broker.md: a failing query comes back as a 200 object without `renewed`.
    if (target > MAX_EXPIRY_MS) return jsonReply(200, { success: false, error: 'timestamp out of range' });
    const result = (error: string | null, expiresAt: number | null): Reply =>
      jsonReply(200, [
        {
          error,
          expiresAt: expiresAt === null ? null : isoMillis(expiresAt),
          index: job.index,
          leaseId: job.leaseId,
          success: error === null,
        },
      ]);
    const lease = this.store.lookup(job.leaseId, job.scope, now);
    if (!lease) return result('Lease not found', null);
    const { earliest } = this.store.renew(lease, target, now);
    return earliest === null ? result('Lease already expired', null) : result(null, earliest);
  }
}
