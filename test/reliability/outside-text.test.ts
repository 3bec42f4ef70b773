/**
 * Outside text is data (docs/security.md#outside-text-is-data): whatever a broker puts in a field
 * (a queue, partition or group name, an error, a reason, a version) and whatever a producer names
 * a queue, no human output of queenctl carries a control character, DEL, a C1 control, a bidi
 * control or half a surrogate pair to the terminal, and no such text adds a line. Machine output
 * stays exact. Each property runs the command's own run function on a fake broker that fills
 * every field it sends with the arbitrary text.
 *
 * The check below is this file's own list, not the sanitiser's: were escapeText to let a character
 * through (or a renderer to skip it), these properties fail. Checked when they were written: with
 * escapeText made the identity every property but -o yaml's failed (yaml.ts escapes on its own);
 * with yaml.ts as it was before, -o yaml's failed; with names.ts printing every id, both -o name
 * properties failed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parse as parseYaml } from 'yaml';
import type { PartitionHolder } from '../../src/broker/consumer-groups.js';
import type { Renewal } from '../../src/broker/contract.js';
import type { Health } from '../../src/broker/health.js';
import { runExtend } from '../../src/commands/lease/extend.js';
import { runInspect } from '../../src/commands/lease/inspect.js';
import { runList, type ListClient, type ListOptions } from '../../src/commands/lease/list.js';
import { runListWatch } from '../../src/commands/lease/list-watch.js';
import { runPing } from '../../src/commands/ping.js';
import { runVersion } from '../../src/commands/version.js';
import type { Clock } from '../../src/clock.js';
import { BrokerError, ExitCode } from '../../src/exit.js';
import { parseJsonPath } from '../../src/output/jsonpath.js';
import { isNameable } from '../../src/output/names.js';
import { watchFailureMessage, watchRenderer, type WatchOutputMode } from '../../src/output/watch.js';
import { errorMessage, warningMessage } from '../../src/output/words.js';
import { yamlStringify } from '../../src/output/yaml.js';
import type { WatchEvent } from '../../src/renewal/events.js';
import type { WatchStatus } from '../../src/renewal/scheduler.js';
import { bufferIO, fakeRenewal, instantClock } from '../support/fakes.js';

const RUNS = { numRuns: 150 };
const LEASE = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';
const OTHER = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a91';
const THIRD = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92';
const SERVER = 'http://broker.test:6632';

// ---------------------------------------------------------------------------------------------
// Hostile text, and what may never come out raw
// ---------------------------------------------------------------------------------------------

/** A character or a sequence a terminal obeys, among plain text of every kind. */
const hostileUnit = fc.oneof(
  { arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }), weight: 4 },
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), weight: 2 },
  {
    arbitrary: fc.constantFrom(
      '\n',
      '\r',
      '\t',
      '\u0000',
      '\u0007',
      '\u0008',
      '\u001b',
      '\u001b]0;pwned\u0007',
      '\u001b[2J\u001b[H',
      '\u001b]8;;http://evil.test\u001b\\click\u001b]8;;\u001b\\',
      '\r\u001b[2K',
      '\u007f',
      '\u0085',
      '\u009b31m',
      '\u009d0;title\u009c',
      '\u202e',
      '\u202a',
      '\u2066',
      '\u2069',
      '\u200e',
      '\u200f',
      '\u061c',
      '\u2028',
      '\u2029',
      '\n  queenctl: lease renewed',
    ),
    weight: 4,
  },
  { arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code)), weight: 1 },
);
const hostile = fc.string({ unit: hostileUnit, minLength: 1, maxLength: 12 });

/**
 * What a terminal must never get from outside text: C0 controls but the line feed that ends
 * queenctl's own lines, DEL, C1, the bidi controls, the line and paragraph separators, and half a
 * surrogate pair. Colour is off in these runs, so no escape sequence of queenctl's own is expected.
 */
const RAW = new RegExp(
  [
    '[\\u0000-\\u0009\\u000b-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u2028-\\u202e\\u2066-\\u2069]',
    '[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])',
    '(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]',
  ].join('|'),
);

function assertShownAsText(text: string, where: string): void {
  const found = RAW.exec(text);
  assert.equal(found, null, `${where} printed ${JSON.stringify(found?.[0])} raw:\n${JSON.stringify(text)}`);
}

/** Every line of stderr is queenctl's own: `queenctl: …` or an indented explanation under it. */
function assertOwnLines(stderr: string, where: string): void {
  for (const line of stderr.split('\n').slice(0, -1)) {
    assert.match(line, /^(queenctl: | {2})/, `${where}: a line queenctl did not start:\n${JSON.stringify(stderr)}`);
  }
}

function assertHuman(io: { stdout: { text: string }; stderr: { text: string } }, where: string): void {
  assertShownAsText(io.stdout.text, `${where} (stdout)`);
  assertShownAsText(io.stderr.text, `${where} (stderr)`);
  assertOwnLines(io.stderr.text, where);
}

const signal = new AbortController().signal;

// ---------------------------------------------------------------------------------------------
// extend and inspect
// ---------------------------------------------------------------------------------------------

describe('outside text reaches people escaped', () => {
  it('extend and inspect: the reason after renewed 0, errors and retries, in tables and on stderr', async () => {
    await fc.assert(
      fc.asyncProperty(
        hostile,
        hostile,
        fc.constantFrom('table', 'wide'),
        fc.constantFrom('extend', 'inspect'),
        async (reason, failure, format, verb) => {
          const io = bufferIO({ tty: true });
          const attempts = new Map<string, number>();
          const extend = async (leaseId: string): Promise<Renewal> => {
            attempts.set(leaseId, (attempts.get(leaseId) ?? 0) + 1);
            if (leaseId === LEASE) return { ...fakeRenewal(leaseId, null, Date.now()), reason };
            if (leaseId === OTHER) throw new BrokerError(`the broker answered HTTP 500: ${failure}`, false, failure);
            // The third fails once, transiently (a retry line), then is renewed.
            if (attempts.get(leaseId) === 1) throw new BrokerError(`connection reset: ${failure}`, true);
            return fakeRenewal(leaseId, Date.now() + 60_000, Date.now());
          };
          const runtime = { io, client: { server: SERVER, extend }, clock: instantClock, signal };
          const options = {
            leaseIds: [LEASE, OTHER, THIRD],
            retry: { retries: 1, baseDelayMs: 0, maxDelayMs: 0 },
            concurrency: 1,
            format: format as 'table' | 'wide',
            noHeaders: false,
          };
          const code =
            verb === 'extend'
              ? await runExtend({ ...options, seconds: 60 }, runtime)
              : await runInspect(options, runtime);
          assert.equal(code, ExitCode.Broker);
          assertHuman(io, `${verb} -o ${format}`);
          // A header and one row per lease: no text of the broker's made a line of its own.
          assert.equal(io.stdout.text.split('\n').length - 1, 4, io.stdout.text);
        },
      ),
      RUNS,
    );
  });

  // -------------------------------------------------------------------------------------------
  // list, list -o name, list --expiry, list --watch
  // -------------------------------------------------------------------------------------------

  const listOptions = (format: ListOptions['format'], expiry = false): ListOptions => ({
    groups: [],
    queues: [],
    partitions: [],
    all: true,
    expiry,
    expiringWithinMs: undefined,
    retry: { retries: 0, baseDelayMs: 0, maxDelayMs: 0 },
    concurrency: 2,
    format,
    noHeaders: false,
  });

  /** A broker whose consumer groups are named by producers and consumers: every name is `text`. */
  function namingBroker(names: { group: string; queue: string; partition: string; leaseId: string; error: string }) {
    const holders: PartitionHolder[] = [
      { group: names.group, queue: names.queue, partition: names.partition, leaseId: names.leaseId, leaseActive: true },
      { group: names.group, queue: names.queue, partition: `${names.partition}2`, leaseId: LEASE, leaseActive: false },
    ];
    const client: ListClient = {
      consumerGroups: async () => [{ group: names.group, queue: names.queue }],
      consumerGroup: async () => holders,
      extend: async () => {
        throw new BrokerError(`the broker answered HTTP 503: ${names.error}`, false);
      },
    };
    return client;
  }

  const names = fc.record({ group: hostile, queue: hostile, partition: hostile, leaseId: hostile, error: hostile });

  it('lease list: group, queue, partition and lease id in the table, the wide table and --expiry errors', async () => {
    await fc.assert(
      fc.asyncProperty(names, fc.constantFrom('table', 'wide'), fc.boolean(), async (named, format, expiry) => {
        const io = bufferIO({ tty: true });
        const runtime = { io, client: namingBroker(named), clock: instantClock, signal };
        const code = await runList(listOptions(format as 'table' | 'wide', expiry), runtime);
        assert.equal(code, expiry ? ExitCode.Broker : ExitCode.Ok);
        assertHuman(io, `list -o ${format}${expiry ? ' --expiry' : ''}`);
        // A header and two rows (two lease ids, or one id in two records when they are the same).
        assert.equal(io.stdout.text.split('\n').length - 1, named.leaseId === LEASE ? 2 : 3, io.stdout.text);
      }),
      RUNS,
    );
  });

  it('lease list -o name prints only the ids `lease extend -` reads as one; the rest on stderr, exit 2', async () => {
    await fc.assert(
      fc.asyncProperty(names, async (named) => {
        const io = bufferIO();
        const runtime = { io, client: namingBroker(named), clock: instantClock, signal };
        const code = await runList(listOptions('name'), runtime);
        const printable = isNameable(named.leaseId);
        const expected = [...new Set(printable ? [named.leaseId, LEASE] : [LEASE])];
        assert.deepEqual(io.stdout.text.split('\n').slice(0, -1), expected);
        assert.equal(code, printable ? ExitCode.Ok : ExitCode.Broker);
        assertShownAsText(io.stderr.text, 'list -o name (stderr)');
        assertOwnLines(io.stderr.text, 'list -o name');
        assert.equal(io.stderr.text.split('\n').length - 1, printable ? 0 : 1, io.stderr.text);
        // What `extend -` would read: exactly the ids printed, none more (a line break made two).
        assert.deepEqual(io.stdout.text.split(/\s+/).filter(Boolean), expected);
      }),
      RUNS,
    );
  });

  it('lease list --watch: the growing table, -o name, and the notes of a broker down and back', async () => {
    await fc.assert(
      fc.asyncProperty(names, fc.constantFrom('table', 'wide', 'name'), async (named, format) => {
        const io = bufferIO({ tty: format !== 'name' });
        const broker = namingBroker(named);
        let polls = 0;
        const client: ListClient = {
          ...broker,
          // The first poll finds the broker down, the second lists, the third finds it down again.
          consumerGroups: async (options) => {
            polls++;
            if (polls !== 2) throw new BrokerError(`cannot reach the broker: ${named.error}`, true);
            return broker.consumerGroups(options);
          },
        };
        const stop = new AbortController();
        const clock: Clock = {
          now: () => 0,
          sleep: async () => {
            if (polls >= 3) stop.abort('SIGINT');
            if (stop.signal.aborted) throw new Error('stopped');
          },
        };
        const code = await runListWatch(
          { ...listOptions(format as 'table' | 'wide' | 'name'), intervalMs: 100 },
          { io, client, clock, signal: stop.signal },
        );
        assert.equal(code, 130);
        assertHuman(io, `list --watch -o ${format}`);
        if (format === 'name') {
          const expected = [...new Set(isNameable(named.leaseId) ? [named.leaseId, LEASE] : [LEASE])];
          assert.deepEqual(io.stdout.text.split(/\s+/).filter(Boolean), expected);
        }
      }),
      RUNS,
    );
  });

  // -------------------------------------------------------------------------------------------
  // watch
  // -------------------------------------------------------------------------------------------

  const status: WatchStatus = {
    watching: 2,
    held: 1,
    lost: 0,
    renewals: 1,
    earliestDeadline: null,
    nextRenewalAt: null,
    lastError: null,
    lastErrorAt: null,
    outage: null,
  };

  function watchEvents(text: string): WatchEvent[] {
    const at = '2026-01-01T00:00:00.000Z';
    return [
      { event: 'retry', leaseId: LEASE, at, error: text, attempt: 1, retryInMs: 10, remainingMs: 1000 },
      { event: 'lost', leaseId: LEASE, at, reason: 'not-renewed', detail: text },
      { event: 'lost', leaseId: OTHER, at, reason: 'expired', detail: text },
      { event: 'stopped', leaseId: LEASE, at, reason: 'error', error: text },
      { event: 'outage', at, error: text, leases: 2, remainingMs: 500 },
    ];
  }

  it('lease watch: every event line, warnings, notes and errors, in log, event and quiet modes', async () => {
    await fc.assert(
      fc.asyncProperty(hostile, fc.constantFrom('log', 'events', 'quiet'), async (text, mode) => {
        const io = bufferIO();
        const renderer = await watchRenderer({
          mode: mode as WatchOutputMode,
          stdout: io.stdout,
          stderr: io.stderr,
          clock: instantClock,
          color: false,
          quiet: false,
          leaseCount: 2,
          firstLeaseId: LEASE,
          status: () => status,
        });
        for (const event of watchEvents(text)) renderer.event(event);
        renderer.warn(text);
        renderer.note(text);
        renderer.error(errorMessage(new BrokerError(text, false, text)));
        renderer.error(watchFailureMessage({ leaseId: LEASE, message: text, hint: text } as never, 2));
        renderer.close();
        // -o json/ndjson events are machine output: exact, as JSON escapes them.
        if (mode === 'events') {
          const events = io.stdout.text
            .split('\n')
            .slice(0, -1)
            .map((line) => JSON.parse(line) as WatchEvent);
          assert.deepEqual(events, watchEvents(text));
        } else assertShownAsText(io.stdout.text, `watch ${mode} (stdout)`);
        assertShownAsText(io.stderr.text, `watch ${mode} (stderr)`);
        assertOwnLines(io.stderr.text, `watch ${mode}`);
      }),
      RUNS,
    );
  });

  // -------------------------------------------------------------------------------------------
  // ping and version
  // -------------------------------------------------------------------------------------------

  const health = fc.record({
    status: hostile,
    database: fc.option(hostile, { nil: null }),
    version: fc.option(hostile, { nil: null }),
    httpStatus: fc.constantFrom(200, 503),
  });

  it("ping and version: the broker's status, database and version, in the table, lines and errors", async () => {
    await fc.assert(
      fc.asyncProperty(health, fc.constantFrom('table', 'wide'), async (said, format) => {
        const answer: Health = { ...said, brokerDateMs: null };
        const client = {
          server: SERVER,
          health: async () => answer,
          consumerGroup: async () => [],
        };
        const pinged = bufferIO({ tty: true });
        try {
          await runPing(
            { timeoutMs: 1000, tokenInForce: false, format: format as 'table', noHeaders: false },
            { io: pinged, client, clock: instantClock, signal },
          );
        } catch (error) {
          // What cli.ts prints of an error that ends a run.
          pinged.stderr.write(errorMessage(error as Error));
        }
        assertHuman(pinged, `ping -o ${format}`);
        assert.equal(pinged.stdout.text.split('\n').length - 1, 2, pinged.stdout.text);

        const versioned = bufferIO({ tty: true });
        const build = {
          version: '0.1.0',
          info: { commit: null, date: null, standalone: false, platform: 'linux-x64' },
          node: 'v20.0.0',
        };
        await runVersion(
          {
            build,
            format: 'table',
            noHeaders: false,
            timeoutMs: 1000,
            context: { name: said.version, server: SERVER, serverFrom: 'context', contextServer: SERVER },
          },
          { io: versioned, client, clock: instantClock, signal },
        );
        assertHuman(versioned, 'version');
        assert.equal(versioned.stdout.text.split('\n').length - 1, 3, versioned.stdout.text);
      }),
      RUNS,
    );
  });

  // -------------------------------------------------------------------------------------------
  // The words of errors; machine formats
  // -------------------------------------------------------------------------------------------

  it('errors and warnings: one line of reason and the hint under it, whatever the message quotes', () => {
    fc.assert(
      fc.property(hostile, hostile, (message, hint) => {
        const text = errorMessage(new BrokerError(message, false, hint)) + warningMessage(message);
        assertShownAsText(text, 'errorMessage');
        // Two lines of queenctl's own (the error, the warning); a hint's lines are indented under it.
        assert.equal(text.split('\n').filter((line) => line.startsWith('queenctl: ')).length, 2, JSON.stringify(text));
        assertOwnLines(text, 'errorMessage');
      }),
      RUNS,
    );
  });

  it('-o jsonpath escapes the values it selects on a terminal, and prints them exact elsewhere', async () => {
    const onTerminal = await parseJsonPath('{.reason}{"\\n"}', { terminal: true });
    const inPipe = await parseJsonPath('{.reason}{"\\n"}');
    fc.assert(
      fc.property(hostile, (reason) => {
        const shown = onTerminal.render({ reason });
        assertShownAsText(shown, 'jsonpath on a terminal');
        assert.equal(shown.split('\n').length, 2, 'the template\'s own "\\n" is kept, the value\'s escaped');
        assert.equal(inPipe.render({ reason }), `${JSON.parse(JSON.stringify(reason))}\n`);
      }),
      RUNS,
    );
  });

  it('-o yaml quotes such strings with escapes, and parses back to the exact value', async () => {
    const stringify = await yamlStringify();
    fc.assert(
      fc.property(hostile, (reason) => {
        const value = { reason, [reason]: [reason] };
        const text = stringify(value);
        // Line feeds of a block scalar are its indented lines; every other character is escaped.
        assertShownAsText(text, '-o yaml');
        assert.deepEqual(parseYaml(text), JSON.parse(JSON.stringify(value)));
      }),
      RUNS,
    );
  });
});
