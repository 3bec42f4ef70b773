/**
 * Properties that must hold for every input, not just the ones someone thought of: the renewal
 * parser, the --seconds and duration parsers, lease id handling, and the records printed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parse as parseYaml } from 'yaml';
import {
  checkLeaseId,
  leaseIdSource,
  MAX_LEASE_ID_LENGTH,
  MAX_SECONDS,
  parseDuration,
  parseSeconds,
  splitWhitespace,
  type StdinLike,
} from '../../src/args.js';
import { estimateBrokerClock } from '../../src/broker/broker-clock.js';
import { leaseIdSegment } from '../../src/broker/client.js';
import { isHeld, parseRenewal, type RawAnswer, type Renewal } from '../../src/broker/contract.js';
import { DEFAULT_RETRY } from '../../src/broker/retry.js';
import { extendRecord, runExtend } from '../../src/commands/lease/extend.js';
import { inspectRecord, runInspect } from '../../src/commands/lease/inspect.js';
import type { LeaseOutcome } from '../../src/renewal/renew-all.js';
import { AuthError, BrokerError, ExitCode, UsageError } from '../../src/exit.js';
import { recordSink } from '../../src/output/records.js';
import { bufferIO, Collector, instantClock } from '../support/fakes.js';

const SERVER = 'http://broker.test:6632';
const RUNS = { numRuns: 300 };

// ---------------------------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------------------------

/** One UTF-16 unit or code point, biased towards what breaks URLs, terminals and parsers. */
const trickyUnit = fc.oneof(
  { arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }), weight: 6 },
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), weight: 4 },
  {
    arbitrary: fc.constantFrom(
      '/',
      '?',
      '#',
      '%',
      '.',
      '..',
      ' ',
      '\t',
      '\n',
      '\r',
      '\u0000',
      '\u0007',
      '\u001b',
      '\u007f',
      '\u009b',
      '\u00a0',
      '\u2028',
      '\u3000',
      '\ufeff',
      '+',
      '&',
      '\\',
      '%2F',
      '%2e',
    ),
    weight: 4,
  },
  // Half a surrogate pair: cannot come from argv or a decoded pipe, but can from any caller.
  { arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code)), weight: 1 },
);
const trickyText = fc.string({ unit: trickyUnit, maxLength: 24 });
const leaseIdLike = fc.oneof(
  { arbitrary: trickyText, weight: 8 },
  { arbitrary: fc.uuid(), weight: 2 },
  {
    arbitrary: fc.integer({ min: MAX_LEASE_ID_LENGTH - 2, max: MAX_LEASE_ID_LENGTH + 2 }).map((n) => 'a'.repeat(n)),
    weight: 1,
  },
);

/** An ISO-8601 instant in either broker's precision. */
const instant = fc
  .tuple(
    fc.integer({ min: Date.parse('2000-01-01T00:00:00Z'), max: Date.parse('2199-12-31T00:00:00Z') }),
    fc.option(fc.nat(999), { nil: null }),
  )
  .map(([ms, micros]) => {
    const iso = new Date(ms).toISOString();
    return micros === null ? iso : iso.replace(/Z$/, `${String(micros).padStart(3, '0')}Z`);
  });

const dateHeader = fc.option(
  fc.oneof(
    fc
      .date({ min: new Date('2000-01-01'), max: new Date('2199-01-01'), noInvalidDate: true })
      .map((date) => date.toUTCString()),
    fc.string(),
  ),
  { nil: undefined },
);

/** A documented answer that keeps the rules of docs/broker.md#documented-object; `success` is free to disagree. */
const documentedAnswer = (leaseId: string) =>
  fc
    .record({
      renewed: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 64 }), fc.constant(Number.MAX_SAFE_INTEGER)),
      success: fc.boolean(),
      expiry: instant,
      expiryWhenNothingRenewed: fc.boolean(),
      error: fc.option(fc.string(), { nil: undefined }),
    })
    .map(({ renewed, success, expiry, expiryWhenNothingRenewed, error }) => {
      const at = renewed > 0 || expiryWhenNothingRenewed ? expiry : null;
      return {
        leaseId,
        success,
        renewed,
        newExpiresAt: at,
        expiresAt: at,
        lease_expires_at: at,
        ...(error !== undefined && { error }),
      };
    });

/** An older broker's array: our entry among others, at any index. */
const arrayAnswer = (leaseId: string) =>
  fc
    .record({
      success: fc.boolean(),
      expiresAt: instant,
      error: fc.option(fc.constantFrom('Lease not found', 'Lease already expired', 'Lease not active'), { nil: null }),
      index: fc.nat(1000),
      others: fc.array(
        fc.record({ leaseId: fc.string(), success: fc.boolean(), expiresAt: fc.option(instant, { nil: null }) }),
        { maxLength: 3 },
      ),
      position: fc.nat(),
    })
    .map(({ success, expiresAt, error, index, others, position }) => {
      const ours = { error: success ? null : error, expiresAt: success ? expiresAt : null, index, leaseId, success };
      const entries: unknown[] = others.filter((other) => other.leaseId !== leaseId);
      entries.splice(position % (entries.length + 1), 0, ours);
      return entries;
    });

/** Anything at all a server might send back. */
const anyAnswer: fc.Arbitrary<RawAnswer> = fc.record({
  status: fc.oneof(
    { arbitrary: fc.constant(200), weight: 4 },
    { arbitrary: fc.integer({ min: 100, max: 599 }), weight: 1 },
  ),
  headers: fc.record({ date: dateHeader, location: fc.option(fc.string(), { nil: undefined }) }, { requiredKeys: [] }),
  body: fc.oneof(
    fc.string(),
    fc.json(),
    // A documented answer with one key of any JSON type, or missing.
    fc
      .tuple(
        documentedAnswer('L'),
        fc.constantFrom('leaseId', 'success', 'renewed', 'newExpiresAt', 'expiresAt', 'lease_expires_at'),
        fc.option(fc.jsonValue(), { nil: undefined }),
      )
      .map(([answer, key, value]) => JSON.stringify({ ...answer, [key]: value })),
    arrayAnswer('L').map((answer) => JSON.stringify(answer)),
    fc.jsonValue().map((value) => JSON.stringify([{ leaseId: 'L', success: true, expiresAt: value }])),
  ),
});

function raw(body: unknown, date?: string): RawAnswer {
  return { status: 200, headers: date === undefined ? {} : { date }, body: JSON.stringify(body) };
}

// ---------------------------------------------------------------------------------------------
// The response parser
// ---------------------------------------------------------------------------------------------

describe('parseRenewal, for any answer at all', () => {
  it('returns a renewal or throws AuthError/BrokerError, and nothing else', () => {
    fc.assert(
      fc.property(anyAnswer, (answer) => {
        let renewal: Renewal;
        try {
          renewal = parseRenewal('L', answer, SERVER);
        } catch (error) {
          if (answer.status === 401 || answer.status === 403) assert.ok(error instanceof AuthError, String(error));
          else assert.ok(error instanceof BrokerError, String(error));
          // Messages are one line: they go to stderr as the reason.
          assert.doesNotMatch((error as Error).message, /\n/);
          return;
        }
        assert.equal(answer.status, 200, 'only a 200 can be a renewal');
        const { result, shape, expiresAtMs } = renewal;
        assert.equal(result.leaseId, 'L');
        assert.ok(Number.isSafeInteger(result.renewed) && result.renewed >= 0, `renewed ${result.renewed}`);
        if (shape === 'array') assert.ok(result.renewed === 0 || result.renewed === 1);
        assert.equal(isHeld(renewal), result.renewed > 0);
        assert.equal(expiresAtMs !== null, result.renewed > 0, 'an expiry exactly when something was renewed');
        if (result.renewed > 0) {
          assert.equal(typeof result.expiresAt, 'string');
          assert.equal(Date.parse(result.expiresAt as string), expiresAtMs);
          assert.equal(Date.parse(result.newExpiresAt as string), expiresAtMs);
          assert.equal(Date.parse(result.lease_expires_at as string), expiresAtMs);
        }
      }),
      // Half the cases of before: each is a random answer (random seed every run), and the
      // kinds of answer the arbitrary makes all come up within a few hundred.
      { numRuns: 500 },
    );
  });

  it('never takes a non-200 for a renewal, whatever its body says', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 599 }).filter((status) => status !== 200),
        documentedAnswer('L'),
        (status, body) => {
          assert.throws(
            () => parseRenewal('L', { status, headers: {}, body: JSON.stringify(body) }, SERVER),
            (error) => (status === 401 || status === 403 ? error instanceof AuthError : error instanceof BrokerError),
          );
        },
      ),
      RUNS,
    );
  });
});

describe('renewed decides', () => {
  it('a documented answer is held exactly when renewed > 0, whatever success says', () => {
    fc.assert(
      fc.property(documentedAnswer('L'), dateHeader, (body, date) => {
        const renewal = parseRenewal('L', raw(body, date), SERVER);
        assert.equal(isHeld(renewal), body.renewed > 0);
        assert.equal(renewal.result.renewed, body.renewed);
        assert.equal(renewal.result.success, body.success, 'success is printed as the broker sent it');
        const flipped = parseRenewal('L', raw({ ...body, success: !body.success }, date), SERVER);
        assert.equal(isHeld(flipped), isHeld(renewal), 'success never changes the verdict');
      }),
      RUNS,
    );
  });

  it("an older broker's array maps to renewed 1 or 0 by success, its expiry in all three keys", () => {
    fc.assert(
      fc.property(arrayAnswer('L'), (body) => {
        const ours = body.find((entry) => (entry as { leaseId: string }).leaseId === 'L') as {
          success: boolean;
          expiresAt: string | null;
          error: string | null;
        };
        const renewal = parseRenewal('L', raw(body), SERVER);
        assert.equal(renewal.shape, 'array');
        assert.equal(renewal.result.renewed, ours.success ? 1 : 0);
        assert.ok(renewal.result.renewed === 0 || renewal.result.renewed === 1);
        assert.equal(renewal.result.newExpiresAt, ours.expiresAt);
        assert.equal(renewal.result.expiresAt, ours.expiresAt);
        assert.equal(renewal.result.lease_expires_at, ours.expiresAt);
        assert.equal(renewal.reason, ours.error);
      }),
      RUNS,
    );
  });

  it('extend and inspect exit 0 exactly when renewed > 0, and 4 otherwise', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(documentedAnswer('L'), arrayAnswer('L')),
        dateHeader,
        fc.constantFrom('extend', 'inspect'),
        async (body, date, verb) => {
          const renewal = parseRenewal('L', raw(body, date), SERVER);
          const io = bufferIO();
          const runtime = {
            io,
            client: { server: SERVER, extend: async () => renewal },
            clock: instantClock,
            signal: new AbortController().signal,
          };
          const options = {
            leaseIds: ['L'],
            retry: DEFAULT_RETRY,
            concurrency: 1,
            format: 'json' as const,
            noHeaders: false,
          };
          const code =
            verb === 'extend'
              ? await runExtend({ ...options, seconds: 60 }, runtime)
              : await runInspect(options, runtime);
          assert.equal(code, renewal.result.renewed > 0 ? ExitCode.Ok : ExitCode.NotHeld);
          const printed = JSON.parse(io.stdout.text) as Record<string, unknown>;
          if (verb === 'extend') assert.equal(printed.renewed, renewal.result.renewed);
          else assert.equal(printed.live, renewal.result.renewed > 0);
        },
      ),
      { numRuns: 200 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// --seconds and durations
// ---------------------------------------------------------------------------------------------

/** Strings near the grammar: digits, signs, dots, exponents, units, spaces. */
const numberish = fc.string({
  unit: fc.constantFrom('0', '1', '2', '5', '9', '.', '-', '+', 'e', ' ', 'm', 's', 'h', 'd', 'x', '\t', '٣'),
  maxLength: 12,
});
const anyFlagText = fc.oneof(
  numberish,
  fc.string(),
  fc.integer({ min: -5, max: MAX_SECONDS + 5 }).map(String),
  fc.bigInt({ min: 0n, max: 10n ** 30n }).map(String),
);

/** Calls a parser; anything thrown must be a UsageError. */
function attempt<T>(parse: () => T): T | UsageError {
  try {
    return parse();
  } catch (error) {
    assert.ok(error instanceof UsageError, `threw ${String(error)}`);
    return error;
  }
}

describe('--seconds', () => {
  it('accepts exactly the whole numbers 1 to 2147483647 and rejects the rest with a UsageError', () => {
    fc.assert(
      fc.property(anyFlagText, (text) => {
        const documented = /^\d+$/.test(text) && Number(text) >= 1 && Number(text) <= MAX_SECONDS;
        const outcome = attempt(() => parseSeconds(text));
        if (documented) assert.equal(outcome, Number(text));
        else assert.ok(outcome instanceof UsageError, `${JSON.stringify(text)} was accepted`);
      }),
      { numRuns: 2000 },
    );
  });
});

const MAX_DURATION_MS = 2_147_483_647;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, '': 1000 };
/** The contract's grammar: `250ms`, `30s`, `2m`, `1h`, or a bare number of seconds. */
const DURATION_GRAMMAR = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/;

describe('durations', () => {
  it('accept only the documented grammar, in range, and reject the rest with a UsageError', () => {
    fc.assert(
      fc.property(anyFlagText, (text) => {
        const outcome = attempt(() => parseDuration(text, '--timeout'));
        if (outcome instanceof UsageError) {
          assert.match(outcome.message, /^--timeout takes a duration/);
          return;
        }
        const match = DURATION_GRAMMAR.exec(text);
        assert.ok(match, `${JSON.stringify(text)} is outside the grammar but was accepted`);
        assert.ok(Number.isInteger(outcome) && outcome >= 1 && outcome <= MAX_DURATION_MS);
        assert.equal(outcome, Math.round(Number(match[1]) * (UNIT_MS[match[2] ?? ''] as number)));
      }),
      { numRuns: 2000 },
    );
  });

  it('accept every in-range whole number with each unit, and refuse it past the timer limit', () => {
    fc.assert(
      fc.property(fc.constantFrom('ms', 's', 'm', 'h', ''), fc.integer({ min: 0, max: 3_000_000_000 }), (unit, n) => {
        const ms = n * (UNIT_MS[unit] as number);
        const outcome = attempt(() => parseDuration(`${n}${unit}`, '--every'));
        if (ms >= 1 && ms <= MAX_DURATION_MS) assert.equal(outcome, ms);
        else assert.ok(outcome instanceof UsageError);
      }),
      { numRuns: 1000 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Lease ids
// ---------------------------------------------------------------------------------------------

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

describe('lease ids', () => {
  it('are trimmed, then accepted unless empty, too long, not text, a dot segment, with whitespace or controls', () => {
    fc.assert(
      fc.property(leaseIdLike, (given) => {
        const leaseId = given.trim();
        const acceptable =
          leaseId !== '' &&
          !CONTROL.test(leaseId) &&
          !/\s/.test(leaseId) &&
          !LONE_SURROGATE.test(leaseId) &&
          leaseId.length <= MAX_LEASE_ID_LENGTH &&
          leaseId !== '.' &&
          leaseId !== '..';
        const outcome = attempt(() => checkLeaseId(given));
        if (acceptable) assert.equal(outcome, leaseId);
        else assert.ok(outcome instanceof UsageError, `${JSON.stringify(given.slice(0, 40))} was accepted`);
      }),
      { numRuns: 3000 },
    );
  });

  it('every id accepted travels as one percent-encoded path segment that decodes back to itself', () => {
    fc.assert(
      fc.property(leaseIdLike, (leaseId) => {
        if (attempt(() => checkLeaseId(leaseId)) instanceof UsageError) return;
        const segment = leaseIdSegment(leaseId);
        assert.match(segment, /^[A-Za-z0-9\-_.!~*'()%]+$/, 'only unreserved characters and escapes');
        assert.notEqual(segment, '.');
        assert.notEqual(segment, '..');
        assert.equal(decodeURIComponent(segment), leaseId);
        const path = `/api/v1/lease/${segment}/extend`;
        assert.equal(new URL(path, SERVER).pathname, path, 'a URL parser leaves the route as it is');
      }),
      { numRuns: 3000 },
    );
  });

  it('arguments and standard input, split anywhere, give the ids in order or a UsageError, nothing else', async () => {
    const argument = fc.oneof({ arbitrary: fc.constant('-'), weight: 1 }, { arbitrary: leaseIdLike, weight: 4 });
    const input = fc.string({ unit: fc.oneof(trickyUnit, fc.constantFrom(' ', '\n', '\r\n', '\t')), maxLength: 80 });
    await fc.assert(
      fc.asyncProperty(
        fc.array(argument, { maxLength: 4 }),
        input,
        fc.array(fc.nat(), { maxLength: 6 }),
        fc.boolean(),
        async (args, text, cuts, isTTY) => {
          const bytes = Buffer.from(text);
          const stdin = Object.assign(chunked(bytes, cuts), { isTTY }) as StdinLike;
          let ids: string[];
          try {
            ids = [];
            for await (const leaseId of leaseIdSource(args, stdin).ids) ids.push(leaseId);
          } catch (error) {
            assert.ok(error instanceof UsageError, `threw ${String(error)}`);
            return;
          }
          const fromStdin = new TextDecoder()
            .decode(bytes)
            .split(/\s+/)
            .filter((token) => token !== '');
          assert.deepEqual(
            ids,
            args.flatMap((arg) => (arg === '-' ? fromStdin : [arg.trim()])),
          );
          for (const leaseId of ids) assert.equal(checkLeaseId(leaseId), leaseId);
          assert.ok(!(isTTY && args.includes('-')), 'a terminal is never read as a list of ids');
        },
      ),
      { numRuns: 500 },
    );
  });

  it('splitWhitespace gives the same tokens however the bytes are chunked', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: fc.oneof(trickyUnit, fc.constantFrom(' ', '\n', 'é', '€', '🦀')), maxLength: 60 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        async (text, cuts) => {
          const bytes = Buffer.from(text);
          const tokens: string[] = [];
          for await (const token of splitWhitespace(chunked(bytes, cuts))) tokens.push(token);
          assert.deepEqual(
            tokens,
            new TextDecoder()
              .decode(bytes)
              .split(/\s+/)
              .filter((token) => token !== ''),
          );
        },
      ),
      RUNS,
    );
  });
});

/** The bytes as a stream cut at the given offsets, even inside a multibyte character. */
function chunked(bytes: Buffer, cuts: number[]): AsyncIterable<Buffer> {
  const offsets = [...new Set(cuts.map((cut) => (bytes.length === 0 ? 0 : cut % bytes.length)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let start = 0;
  for (const offset of [...offsets, bytes.length]) {
    if (offset > start) chunks.push(bytes.subarray(start, offset));
    start = Math.max(start, offset);
  }
  return (async function* () {
    yield* chunks;
  })();
}

// ---------------------------------------------------------------------------------------------
// What is printed
// ---------------------------------------------------------------------------------------------

const errorOutcome = fc
  .tuple(
    trickyText,
    fc.string({ unit: trickyUnit, maxLength: 60 }),
    fc.constantFrom<'broker' | 'auth' | 'usage'>('broker', 'auth', 'usage'),
  )
  .map(([leaseId, message, kind]): LeaseOutcome => {
    const error =
      kind === 'auth'
        ? new AuthError(message, 403)
        : kind === 'usage'
          ? new UsageError(message)
          : new BrokerError(message, false);
    return { leaseId, code: error.exitCode, error };
  });

const renewalOutcome = fc
  .tuple(
    fc.oneof(documentedAnswer('L'), arrayAnswer('L')),
    dateHeader,
    fc.integer({ min: 1, max: MAX_SECONDS }),
    fc.integer({ min: 0, max: 4_102_444_800_000 }),
  )
  .map(([body, date, seconds, nowMs]): { outcome: LeaseOutcome; nowMs: number } => {
    const renewal = parseRenewal('L', raw(body, date), SERVER);
    const brokerClock = estimateBrokerClock(renewal, seconds, nowMs - 5, nowMs);
    return {
      outcome: {
        leaseId: 'L',
        code: isHeld(renewal) ? ExitCode.Ok : ExitCode.NotHeld,
        renewal,
        brokerClock,
        receivedAtMs: nowMs,
      },
      nowMs,
    };
  });

const anyOutcome = fc.oneof(
  renewalOutcome,
  errorOutcome.map((outcome) => ({ outcome, nowMs: Date.now() })),
);

describe('records', () => {
  it('every extend and inspect record survives JSON as it is, and a failed request never reads as held', () => {
    fc.assert(
      fc.property(anyOutcome, ({ outcome, nowMs }) => {
        const extend = extendRecord(outcome);
        const inspect = inspectRecord(outcome, nowMs);
        assert.deepEqual(JSON.parse(JSON.stringify(extend)), extend);
        assert.deepEqual(JSON.parse(JSON.stringify(inspect)), inspect);
        if ('error' in outcome) {
          assert.equal(extend.renewed, null);
          assert.equal(extend.success, false);
          assert.equal(inspect.live, null);
          assert.equal(inspect.held, null);
        } else {
          assert.equal(inspect.live, outcome.renewal.result.renewed > 0);
          if (inspect.remainingMs !== null)
            assert.ok(Number.isInteger(inspect.remainingMs) && inspect.remainingMs >= 0);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('-o json, ndjson and yaml parse back to the records, for one lease or many', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(anyOutcome, { minLength: 1, maxLength: 5 }),
        fc.constantFrom('json', 'ndjson', 'yaml'),
        fc.boolean(),
        async (outcomes, format, inspect) => {
          const records = outcomes.map(({ outcome, nowMs }) =>
            inspect ? inspectRecord(outcome, nowMs) : extendRecord(outcome),
          );
          const single = records.length === 1;
          const stream = new Collector();
          const sink = await recordSink<object>(stream, format, single);
          for (const record of records) await sink.add(record);
          await sink.end();
          const parsed: unknown =
            format === 'ndjson'
              ? stream.text
                  .trimEnd()
                  .split('\n')
                  .map((line) => JSON.parse(line))
              : format === 'json'
                ? JSON.parse(stream.text)
                : parseYaml(stream.text);
          const expected = JSON.parse(JSON.stringify(records)) as unknown[];
          assert.deepEqual(single && format !== 'ndjson' ? [parsed] : parsed, expected);
        },
      ),
      // YAML is the costly format: 150 random cases (fresh seed each run) cover the three
      // formats, one lease and many, extend and inspect, dozens of times each.
      { numRuns: 150 },
    );
  });
});
