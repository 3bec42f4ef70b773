/**
 * The broker client: which replica to ask, how long to wait, and what came back, as the typed
 * errors of exit.ts (through contract.ts for answers), so commands never see sockets or status
 * numbers. Sending one request is the Transport's job (transport.ts).
 *
 * The server may be several replicas of one broker (comma-separated; they share a database, so
 * any can renew a lease): a request that cannot reach one, or gets a 5xx from it, goes to the
 * next. Renewing takes the later deadline, so asking a second replica never shortens a lease
 * (docs/broker.md).
 */
import { systemClock, type Clock } from '../clock.js';
import { BrokerError, QueenctlError, UsageError } from '../exit.js';
import { formatDuration } from '../output/duration.js';
import {
  GROUPS_PATH,
  groupPath,
  parseGroupList,
  parseGroupPartitions,
  type GroupQueue,
  type PartitionHolder,
} from './consumer-groups.js';
import {
  ACK_BATCH_PATH,
  ackBatchBody,
  AckOutcomeUnknown,
  parseAckAnswer,
  type AckItem,
  type AckResult,
} from './ack.js';
import type { BatchRecord } from './batch.js';
import { excerpt, parseRenewal, type RawAnswer, type Renewal } from './contract.js';
import { parsePop, popBodyInspector, popOutcomeUnknown, popPath, type PopOutcome, type PopRequest } from './pop.js';
import { Deadlines, type Deadline } from './deadlines.js';
import { HEALTH_PATH, parseHealth, type Health } from './health.js';
import { TransportFailure, type Cancellation, type Transport } from './transport.js';

export interface BrokerClientOptions {
  /** Base URL of the broker, e.g. http://localhost:6632; replicas separated by commas. */
  server: string;
  token?: string | undefined;
  /** Deadline of one request, connect to last byte, failovers included. */
  timeoutMs: number;
  userAgent: string;
  /** Sends each request (undici's or node:http's transport; a fake in tests). The client closes it in close(). */
  transport: Transport;
  /** Deadlines and elapsed time; default: real timers on a monotonic clock. Tests pass a fake. */
  clock?: Clock;
  /** -v: one line per request; the token is never part of it. */
  trace?: ((line: string) => void) | undefined;
}

export interface RequestOptions {
  signal?: AbortSignal | undefined;
  /** Overrides the client's timeout for this request (watch cuts it to the lease's time left). */
  timeoutMs?: number;
}

/**
 * A busy group lists every partition it ever consumed (docs/broker.md): thousands of rows of
 * about 170 bytes. The transport's 1 MiB cap, right for a renewal, would cut such a listing off.
 */
const LISTING_MAX_BYTES = 64 * 1024 * 1024;

interface Replica {
  url: string;
  origin: string;
  basePath: string;
}

/** One request as a route method describes it to request(). */
interface Call<T> {
  method: 'GET' | 'POST';
  /** The route below the replica's base path, ids in it percent-encoded. */
  path: string;
  /** JSON; none for a GET. */
  body?: string;
  /** For messages: what the request does ("renew") and what its answer is ("a lease renewal"). */
  doing: string;
  answer: string;
  /** The answer as a result, or a QueenctlError (one with a 5xx status goes on to the next replica). */
  judge: (answer: RawAnswer, server: string) => T;
  /** A cap on the answer's size other than the transport's. */
  maxBodyBytes?: number;
  /** A fresh check of the body's chunks as they arrive, for each attempt (TransportRequest.inspect). */
  inspect?: () => (chunk: Uint8Array) => void;
  /**
   * A request that must not be repeated (an ack, a pop): sent once, to one replica. A failure
   * after it may have been written (no answer in time, a reset, an answer outside the
   * contract, a 5xx) becomes this error, never a failover or a retry; only a request that
   * never reached a broker (refused, host not found, TLS) goes on to the next replica and
   * stays transient, for the caller's retries (docs/broker.md#ack).
   */
  once?: (cause: string) => QueenctlError;
}

/** One try of a request on one replica. */
interface Attempt {
  replica: Replica;
  /** " (replica 2 of 3)" when there are several, for -v. */
  label: string;
  /** This replica's share of the time left; undefined for the last, which gets all that remains. */
  shareMs: number | undefined;
  timeoutMs: number;
  request: RequestEnd;
  outer: AbortSignal | undefined;
}

type Outcome<T> =
  | { ok: true; value: T }
  | { ok: false; error: BrokerError; failover: true }
  | { ok: false; error: QueenctlError; failover: false };

/** Shorter tokens are not real bearer tokens (globals.ts redacts output by the same rule). */
const MIN_SCRUBBED_LENGTH = 4;

/** Real timers; elapsed time on process.hrtime, as the global `performance` loads perf_hooks. */
const monotonicTimers: Clock = { now: () => Number(process.hrtime.bigint()) / 1e6, sleep: systemClock.sleep };

export class BrokerClient {
  private readonly replicas: Replica[];
  /** The replica that answered last: later requests start there instead of at a dead one. */
  private preferred = 0;
  private readonly clock: Clock;
  private readonly headers: Record<string, string>;
  private readonly jsonHeaders: Record<string, string>;
  /** One timer for the deadlines of every request in flight. */
  private readonly deadlines: Deadlines;
  /** The requests in flight by the caller's signal: one listener on each, not one per request. */
  private readonly stoppedBy = new Map<AbortSignal, { ends: Set<RequestEnd>; onAbort: () => void }>();

  constructor(private readonly options: BrokerClientOptions) {
    this.replicas = options.server
      .split(',')
      .map((entry) => entry.trim().replace(/\/+$/, ''))
      .filter((entry) => entry !== '')
      .map((url) => {
        const parsed = new URL(url);
        return { url, origin: parsed.origin, basePath: parsed.pathname.replace(/\/+$/, '') };
      });
    if (this.replicas.length === 0) throw new UsageError('no broker URL given', 'use --server http://localhost:6632');
    this.clock = options.clock ?? monotonicTimers;
    this.deadlines = new Deadlines(this.clock);
    this.headers = {
      'user-agent': options.userAgent,
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
    };
    this.jsonHeaders = { 'content-type': 'application/json', ...this.headers };
  }

  /** The replica that answered last (the first one before any answer). */
  get server(): string {
    return this.replicas[this.preferred]!.url;
  }

  /** POST /api/v1/lease/:leaseId/extend with `{"seconds": n}`; see contract.ts for the rules. */
  async extend(leaseId: string, seconds: number, options: RequestOptions = {}): Promise<Renewal> {
    return this.request(
      {
        method: 'POST',
        path: `/api/v1/lease/${leaseIdSegment(leaseId)}/extend`,
        body: JSON.stringify({ seconds }),
        doing: 'renew',
        answer: 'a lease renewal',
        judge: (answer, server) => parseRenewal(leaseId, answer, server),
      },
      options,
    );
  }

  /**
   * One pop (pop.ts): never autoAck, sent once (a pop that may have been read may have taken a
   * lease, and a second would take another). A long poll's deadline is the wait plus --timeout.
   */
  async pop(request: PopRequest, options: RequestOptions = {}): Promise<PopOutcome> {
    const timeoutMs = (options.timeoutMs ?? this.options.timeoutMs) + (request.waitMs ?? 0);
    return this.request(
      {
        method: 'GET',
        path: popPath(request),
        doing: 'pop',
        answer: 'a pop',
        judge: (answer, server) => parsePop(request, answer, server),
        maxBodyBytes: LISTING_MAX_BYTES,
        // Checked as it is read: a hostile answer is refused before it is all in memory.
        inspect: () => popBodyInspector(request),
        once: (cause) => popOutcomeUnknown(request.queue, cause),
      },
      { ...options, timeoutMs },
    );
  }

  /**
   * POST /api/v1/ack/batch (ack.ts): every message of the batch with its lease id, the group at
   * the top level; sent once. Never an empty batch: the broker never answers one.
   */
  async ackBatch(
    record: Pick<BatchRecord, 'leaseId' | 'consumerGroup'>,
    items: readonly AckItem[],
    options: RequestOptions = {},
  ): Promise<AckResult[]> {
    const acked = { leaseId: record.leaseId, messages: items.map((item) => item.message) };
    return this.request(
      {
        method: 'POST',
        path: ACK_BATCH_PATH,
        body: ackBatchBody(record, items),
        doing: 'ack',
        answer: 'an ack',
        judge: (answer, server) => parseAckAnswer(acked, answer, server),
        maxBodyBytes: LISTING_MAX_BYTES,
        once: (cause) => new AckOutcomeUnknown(record.leaseId, cause),
      },
      options,
    );
  }

  /** GET /api/v1/consumer-groups: every (group, queue) the broker knows (docs/broker.md). */
  async consumerGroups(options: RequestOptions = {}): Promise<GroupQueue[]> {
    return this.request(
      {
        method: 'GET',
        path: GROUPS_PATH,
        doing: 'list its consumer groups',
        answer: 'a list of consumer groups',
        judge: parseGroupList,
        maxBodyBytes: LISTING_MAX_BYTES,
      },
      options,
    );
  }

  /** GET /api/v1/consumer-groups/:group: each partition of the group with its holder. */
  async consumerGroup(group: string, options: RequestOptions = {}): Promise<PartitionHolder[]> {
    return this.request(
      {
        method: 'GET',
        path: groupPath(group),
        doing: `list consumer group ${JSON.stringify(group)}`,
        answer: "a consumer group's partitions",
        judge: (answer, server) => parseGroupPartitions(group, answer, server),
        maxBodyBytes: LISTING_MAX_BYTES,
      },
      options,
    );
  }

  /** GET /health (health.ts): 200 healthy and 503 unhealthy are both a Health. */
  async health(options: RequestOptions = {}): Promise<Health> {
    const call = { method: 'GET', path: HEALTH_PATH, doing: 'answer GET /health', answer: 'a health report' } as const;
    return this.request({ ...call, judge: parseHealth }, options);
  }

  async close(): Promise<void> {
    this.deadlines.clear();
    await this.options.transport.close();
  }

  /** Any route: failover, deadlines and the token kept out of every message it throws. */
  private async request<T>(call: Call<T>, options: RequestOptions): Promise<T> {
    try {
      return await this.failover(call, options);
    } catch (error) {
      // A broker or proxy that quotes the request's headers back in its error body must not
      // put the token into a message (globals.ts scrubs the streams too).
      if (error instanceof QueenctlError) error.message = this.scrub(error.message);
      throw error;
    }
  }

  /**
   * Sends to the preferred replica and on to the next while one cannot be reached or answers
   * 5xx. Each replica but the last gets an equal share of the time left, so one that hangs
   * cannot use up the whole deadline; the last gets all that remains.
   */
  private async failover<T>(call: Call<T>, options: RequestOptions): Promise<T> {
    const timeoutMs = options.timeoutMs ?? this.options.timeoutMs;
    const startedAt = this.clock.now();
    const request = this.begin(startedAt + Math.max(1, timeoutMs), 'deadline', options.signal);
    const failures: Array<{ replica: Replica; error: BrokerError }> = [];
    const count = this.replicas.length;
    const first = this.preferred;
    try {
      for (let tried = 0; tried < count; tried++) {
        const index = (first + tried) % count;
        const replica = this.replicas[index]!;
        const left = count - tried;
        const shareMs = left > 1 ? Math.max(1, (timeoutMs - (this.clock.now() - startedAt)) / left) : undefined;
        const label = count > 1 ? ` (replica ${index + 1} of ${count})` : '';
        const outer = options.signal;
        const outcome = await this.attempt(call, { replica, label, shareMs, timeoutMs, request, outer });
        if (outcome.ok) {
          this.preferred = index;
          return outcome.value;
        }
        // A refusal or an answer outside the contract is the broker's word: every replica
        // would say the same, and what other replicas said before no longer matters.
        if (!outcome.failover) throw outcome.error;
        failures.push({ replica, error: outcome.error });
        if (left === 1 || request.timedOut) throw combine(failures, call.doing);
        const next = this.replicas[(index + 1) % count]!;
        this.options.trace?.(
          this.scrub(`${replica.url} failed (${outcome.error.message}); trying the next replica, ${next.url}`),
        );
      }
      throw new Error('unreachable: the last replica either answers or throws');
    } finally {
      this.finish(request, options.signal);
    }
  }

  /** A request's end: at `at` on the clock (its deadline), or when `outer` aborts. */
  private begin(at: number, deadline: string, outer: AbortSignal | undefined): RequestEnd {
    const end = new RequestEnd(deadline);
    if (outer?.aborted) {
      end.end(outer.reason);
      return end;
    }
    if (outer) {
      let stopping = this.stoppedBy.get(outer);
      if (!stopping) {
        const ends = new Set<RequestEnd>();
        const onAbort = (): void => {
          for (const stopped of ends) stopped.end(outer.reason);
        };
        stopping = { ends, onAbort };
        this.stoppedBy.set(outer, stopping);
        outer.addEventListener('abort', onAbort, { once: true });
      }
      stopping.ends.add(end);
    }
    this.deadlines.add(end, at);
    return end;
  }

  private finish(end: RequestEnd, outer: AbortSignal | undefined): void {
    this.deadlines.remove(end);
    const stopping = outer && this.stoppedBy.get(outer);
    if (!stopping) return;
    stopping.ends.delete(end);
    if (stopping.ends.size > 0) return;
    this.stoppedBy.delete(outer);
    outer.removeEventListener('abort', stopping.onAbort);
  }

  private async attempt<T>(call: Call<T>, attempt: Attempt): Promise<Outcome<T>> {
    let answer: RawAnswer;
    try {
      answer = await this.send(call, attempt);
    } catch (error) {
      if (attempt.outer?.aborted) throw attempt.outer.reason;
      // The body's inspection refused the answer: the broker's word, as a judge's would be.
      if (error instanceof QueenctlError) return { ok: false, error, failover: false };
      const failed = failure(error, call, attempt);
      if (call.once && !neverSent(error) && !failed.ok) {
        return { ok: false, error: call.once(failed.error.message), failover: false };
      }
      return failed;
    }
    try {
      return { ok: true, value: call.judge(answer, attempt.replica.url) };
    } catch (error) {
      if (!(error instanceof QueenctlError)) throw error;
      // A 5xx is this replica's trouble: another may answer (not for a request sent once).
      if (!call.once && error instanceof BrokerError && (error.status ?? 0) >= 500) {
        return { ok: false, error, failover: true };
      }
      return { ok: false, error, failover: false };
    }
  }

  /** One attempt on one replica; its share of the time bounds it below the request's own deadline. */
  private async send<T>(call: Call<T>, attempt: Attempt): Promise<RawAnswer> {
    const { replica, label, request } = attempt;
    const share = attempt.shareMs === undefined ? undefined : this.share(request, attempt.shareMs);
    const trace = this.options.trace;
    const startedAt = this.clock.now();
    const took = (): string => `${Math.round(this.clock.now() - startedAt)}ms`;
    const path = replica.basePath + call.path;
    const body = call.body === undefined ? '' : ` ${call.body}`;
    const authorization = this.options.token ? ' (authorization: Bearer [redacted])' : '';
    trace?.(this.scrub(`${call.method} ${replica.origin}${path}${label}${body}${authorization}`));
    const end = share ?? request;
    try {
      const answer = this.scrubAnswer(
        await this.options.transport.send({
          method: call.method,
          origin: replica.origin,
          path,
          headers: call.body === undefined ? this.headers : this.jsonHeaders,
          body: call.body,
          maxBodyBytes: call.maxBodyBytes,
          inspect: call.inspect?.(),
          cancel: end,
          get signal() {
            return end.signal;
          },
        }),
      );
      trace?.(`HTTP ${answer.status} from ${replica.origin}${label} in ${took()}: ${excerpt(answer.body)}`);
      return answer;
    } catch (error) {
      if (!isTooLarge(error)) {
        trace?.(this.scrub(`no answer from ${replica.origin}${label} after ${took()}: ${(error as Error).message}`));
      }
      if (share?.timedOut && !request.timedOut) throw new AttemptTimeout();
      throw error;
    } finally {
      if (share) {
        this.deadlines.remove(share);
        request.onCancel(null);
      }
    }
  }

  /** An attempt's own end: the request's, or its share of the deadline, whichever comes first. */
  private share(request: RequestEnd, ms: number): RequestEnd {
    const share = new RequestEnd('replica deadline');
    request.onCancel((reason) => share.end(reason));
    if (!share.cancelled) this.deadlines.add(share, this.clock.now() + Math.max(1, Math.round(ms)));
    return share;
  }

  /** The token out of text the client hands on, should a broker or proxy echo it back. */
  private scrub(text: string): string {
    const token = this.options.token;
    return token !== undefined && token.length >= MIN_SCRUBBED_LENGTH ? text.replaceAll(token, '[redacted]') : text;
  }

  /**
   * An answer that quotes the token has it replaced before anything reads it: a message quotes
   * only the first bytes of a body, and a token cut in two there would no longer be found.
   */
  private scrubAnswer(answer: RawAnswer): RawAnswer {
    const body = this.scrub(answer.body);
    return body === answer.body ? answer : { ...answer, body };
  }
}

/**
 * The failures that prove a request never reached a broker: no connection was made, so nothing
 * was written. Anything else (a timeout, a reset, an answer cut short) may come after the
 * broker read the request.
 */
function neverSent(error: unknown): boolean {
  if (!(error instanceof TransportFailure)) return false;
  return (
    error.kind === 'refused' || error.kind === 'host-not-found' || error.kind === 'bad-address' || error.kind === 'tls'
  );
}

/** One replica used up its share of the deadline (not the request's own deadline). */
class AttemptTimeout extends Error {}

function isTooLarge(error: unknown): error is TransportFailure {
  return error instanceof TransportFailure && error.kind === 'too-large';
}

/** Why an attempt got no answer, as the BrokerError to report, and whether another replica may do better. */
function failure(error: unknown, call: Call<unknown>, attempt: Attempt): Outcome<never> {
  const { replica, timeoutMs, shareMs } = attempt;
  // An answer too large to be one of ours is judged, not a replica that failed.
  if (isTooLarge(error)) {
    const tooLarge = new BrokerError(`the broker's answer is ${error.message}: not ${call.answer}`, false);
    return { ok: false, error: tooLarge, failover: false };
  }
  let reported: BrokerError;
  if (error instanceof AttemptTimeout) {
    const share = formatMs(Math.round(shareMs ?? timeoutMs));
    reported = new BrokerError(`no answer from ${replica.url} within ${share}, its share of --timeout`, true);
  } else if (attempt.request.timedOut) {
    reported = new BrokerError(
      `no answer from ${replica.url} within ${formatMs(timeoutMs)}`,
      true,
      'raise --timeout, or check the broker and its database',
    );
  } else {
    const cause =
      error instanceof TransportFailure
        ? error
        : new TransportFailure('other', error instanceof Error ? error.message : String(error));
    reported = transportError(cause, replica.url);
  }
  return { ok: false, error: reported, failover: true };
}

/** The error of the last replica alone, or of every replica when several were tried. */
function combine(failures: Array<{ replica: Replica; error: BrokerError }>, doing: string): BrokerError {
  const last = failures[failures.length - 1]!;
  if (failures.length === 1) return last.error;
  const said = failures.map(({ replica, error }) =>
    error.message.includes(replica.url) ? error.message : `${replica.url}: ${error.message}`,
  );
  return new BrokerError(
    `no replica of the broker could ${doing}: ${said.join('; ')}`,
    failures.some(({ error }) => error.transient),
    last.error.hint ?? 'check the replicas in --server, QUEEN_SERVER or the context',
    last.error.status,
  );
}

/** Maps a transport failure to a BrokerError that says what happened and what to do. */
export function transportError(failure: TransportFailure, server: string): BrokerError {
  const hint =
    "requests go through the proxy of HTTPS_PROXY/HTTP_PROXY: check it is up, or list the broker's host in NO_PROXY";
  // Through a proxy, the connection that is refused or whose host is unknown is the proxy's
  // own: a working proxy that cannot reach the broker answers with an HTTP status (502) instead.
  if (failure.viaProxy && (failure.kind === 'refused' || failure.kind === 'host-not-found')) {
    const what = failure.kind === 'refused' ? 'connection refused' : 'host not found';
    return new BrokerError(`cannot reach the proxy in front of ${server}: ${what}`, true, hint);
  }
  const error = describeFailure(failure, server);
  if (!failure.viaProxy) return error;
  // The address that failed may be the proxy's: say that it is in the way.
  return new BrokerError(error.message, error.transient, hint);
}

function describeFailure({ kind, message: detail, code }: TransportFailure, server: string): BrokerError {
  switch (kind) {
    case 'tls':
      // OpenSSL's "wrong version number": the port speaks plain HTTP, and --insecure cannot help.
      if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || /wrong version number/i.test(detail)) {
        return new BrokerError(
          `TLS connection to ${server} failed: the server answered in plain HTTP, not TLS`,
          false,
          'use http:// instead of https:// (in --server, QUEEN_SERVER or the context)',
        );
      }
      return new BrokerError(
        `TLS connection to ${server} failed: ${detail}`,
        false,
        'trust its CA with --cacert <file>, or (not in production) --insecure',
      );
    case 'refused':
      return new BrokerError(
        `cannot reach the broker at ${server}: connection refused`,
        true,
        'is the broker running? check --server, QUEEN_SERVER or the context',
      );
    case 'host-not-found':
      return new BrokerError(
        `cannot reach the broker at ${server}: host not found`,
        true,
        'check --server, QUEEN_SERVER or the context',
      );
    case 'reset':
      return new BrokerError(`the connection to ${server} was closed before a full answer`, true);
    case 'bad-address':
      return new BrokerError(`cannot use ${server} as a broker address: ${detail}`, false);
    default:
      return new BrokerError(`request to ${server} failed: ${detail}${code ? ` (${code})` : ''}`, true);
  }
}

/**
 * How one request, or one attempt of it on a replica, ends early: its deadline (kept by the
 * client's Deadlines, one timer for all) or the caller's signal (one listener for all). A plain
 * object, not an AbortController per request (issue 19); the AbortSignal a transport may still
 * ask for is made only then.
 */
class RequestEnd implements Cancellation, Deadline {
  wakeAt = 0;
  heapIndex = -1;
  cancelled = false;
  reason: unknown = undefined;
  /** Ended by its own deadline, not the caller. */
  timedOut = false;
  private listener: ((reason: unknown) => void) | null = null;
  private controller: AbortController | undefined;

  /** `deadline`: the message of the error a passed deadline ends it with. */
  constructor(private readonly deadline: string) {}

  expire(): void {
    if (this.cancelled) return;
    this.timedOut = true;
    this.end(new Error(this.deadline));
  }

  end(reason: unknown): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.reason = reason;
    const listener = this.listener;
    this.listener = null;
    listener?.(reason);
    this.controller?.abort(reason);
  }

  onCancel(listener: ((reason: unknown) => void) | null): void {
    if (listener && this.cancelled) listener(this.reason);
    else this.listener = listener;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.cancelled) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }
}

/**
 * The lease id as one path segment: percent-encoded, never interpreted (docs/broker.md). Bare
 * `.` and `..` cannot be made one segment by any encoding, so args.ts refuses them before this.
 */
export function leaseIdSegment(leaseId: string): string {
  return encodeURIComponent(leaseId);
}

/** A deadline as people read it: 3999 ms (a renewal's deadline cut to its lease's expiry) is 4s. */
function formatMs(ms: number): string {
  return formatDuration(ms);
}
