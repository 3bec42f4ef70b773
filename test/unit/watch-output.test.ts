/**
 * What `lease watch` prints, and where: the event stream for programs, lines and a spinner for
 * people, errors only with -q.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import {
  lostMeaning,
  printsEvents,
  spinnerText,
  watchOutputMode,
  watchRenderer,
  type WatchOutputMode,
} from '../../src/output/watch.js';
import type { WatchEvent } from '../../src/renewal/events.js';
import type { WatchStatus } from '../../src/renewal/scheduler.js';
import { Collector, FakeClock } from '../support/fakes.js';

const AT = '2026-12-02T10:00:01.250Z';
const events: WatchEvent[] = [
  {
    event: 'renewed',
    leaseId: 'L1',
    at: AT,
    renewed: 2,
    expiresAt: '2026-12-02T10:01:01.000000Z',
    remainingMs: 59_000,
    nextRenewalInMs: 20_000,
  },
  {
    event: 'retry',
    leaseId: 'L1',
    at: AT,
    error: 'cannot reach the broker: connection refused',
    attempt: 1,
    retryInMs: 250,
    remainingMs: 40_000,
  },
  { event: 'lost', leaseId: 'L1', at: AT, reason: 'not-renewed', detail: 'Lease not found' },
  { event: 'stopped', leaseId: 'L2', at: AT, reason: 'for' },
];

const status: WatchStatus = {
  watching: 1,
  held: 1,
  lost: 0,
  renewals: 4,
  earliestDeadline: 0,
  nextRenewalAt: 0,
  lastError: null,
  lastErrorAt: null,
};

async function render(
  mode: WatchOutputMode,
  quiet = false,
  stream: readonly WatchEvent[] = events,
): Promise<{ stdout: string; stderr: string }> {
  const stdout = new Collector();
  const stderr = new Collector();
  const renderer = await watchRenderer({
    mode,
    stdout,
    stderr,
    clock: new FakeClock(),
    color: false,
    quiet,
    leaseCount: 1,
    firstLeaseId: 'L1',
    status: () => status,
  });
  renderer.warn('the broker clock is odd');
  renderer.note('started ./job.sh');
  for (const event of stream) renderer.event(event);
  renderer.close();
  return { stdout: stdout.text, stderr: stderr.text };
}

describe('watch output: which kind, decided once', () => {
  const base = {
    format: 'json',
    outputGiven: false,
    hasCommand: false,
    quiet: false,
    stderrIsTTY: false,
    term: 'xterm',
  } as const;
  it('streams events in a pipe without a command, and when -o json or ndjson is asked for', () => {
    assert.equal(watchOutputMode(base), 'events');
    assert.equal(watchOutputMode({ ...base, format: 'ndjson', outputGiven: true, hasCommand: true }), 'events');
    assert.equal(watchOutputMode({ ...base, quiet: true, outputGiven: true }), 'events', '-o still prints under -q');
  });
  it('leaves stdout to a command unless -o was asked for', () => {
    assert.equal(watchOutputMode({ ...base, hasCommand: true }), 'log');
  });
  it('-q without -o prints errors only', () => {
    assert.equal(watchOutputMode({ ...base, format: null, quiet: true }), 'quiet');
    assert.equal(watchOutputMode({ ...base, format: 'table', outputGiven: true, quiet: true }), 'quiet');
  });
  it('a spinner only on a terminal that can show one, with no command sharing it', () => {
    const people = { ...base, format: 'table', stderrIsTTY: true } as const;
    assert.equal(watchOutputMode(people), 'spinner');
    assert.equal(watchOutputMode({ ...people, term: 'dumb' }), 'log');
    assert.equal(watchOutputMode({ ...people, stderrIsTTY: false }), 'log');
    assert.equal(watchOutputMode({ ...people, hasCommand: true }), 'log');
  });
});

describe('watch output: renderers', () => {
  it('events: one JSON object per line on stdout, the contract keys first; stderr only for a loss', async () => {
    const { stdout, stderr } = await render('events');
    const lines = stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.deepEqual(lines, events);
    for (const line of lines) assert.deepEqual(Object.keys(line).slice(0, 3), ['event', 'leaseId', 'at']);
    assert.match(stderr, /^queenctl: warning: the broker clock is odd\n/);
    assert.match(stderr, /lease L1 is LOST: the broker renewed nothing \(broker said: Lease not found\)/);
    assert.match(stderr, /Stop work that is not idempotent/);
    assert.doesNotMatch(stderr, /retry|renewed \(|started/);
  });

  it('yaml: each event one YAML document, --- between them, the same keys and values as its JSON line', async () => {
    // Every kind of event, and values YAML could misread: null, a colon and quotes, a number-like id.
    const every: WatchEvent[] = [
      ...events,
      {
        event: 'retry',
        leaseId: '0123',
        at: AT,
        error: 'HTTP 503: "busy"',
        attempt: 2,
        retryInMs: 5,
        remainingMs: null,
      },
      { event: 'stopped', leaseId: 'L2', at: AT, reason: 'error', error: 'no renewal succeeded within 3s' },
      { event: 'outage', at: AT, error: 'connection refused', leases: 2, remainingMs: 30_000 },
      { event: 'recovered', at: AT, downMs: 12_500, leases: 2 },
    ];
    const ndjson = await render('events', false, every);
    const yaml = await render('yaml', false, every);
    const documents = parseAllDocuments(yaml.stdout);
    assert.ok(Array.isArray(documents), 'a stream of documents');
    for (const document of documents) assert.deepEqual(document.errors, []);
    const fromYaml = documents.map((document) => document.toJS() as Record<string, unknown>);
    const fromJson = ndjson.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.deepEqual(fromYaml, fromJson);
    assert.deepEqual(fromYaml.map(Object.keys), fromJson.map(Object.keys), 'the keys in the same order');
    assert.equal(yaml.stdout.match(/^---$/gm)?.length, every.length - 1, '--- between documents, not before the first');
    assert.equal(yaml.stderr, ndjson.stderr, 'stderr as with the JSON stream');
  });

  it('yaml mode is only -o yaml, and prints the stream under -q and beside a command', () => {
    const yaml = { format: 'yaml', outputGiven: true, hasCommand: false, stderrIsTTY: true, term: 'xterm' } as const;
    assert.equal(watchOutputMode({ ...yaml, quiet: false }), 'yaml');
    assert.equal(watchOutputMode({ ...yaml, quiet: true, hasCommand: true }), 'yaml');
    assert.ok(printsEvents('yaml') && printsEvents('events'), "a command's stdout goes to stderr");
    assert.ok(!printsEvents('log') && !printsEvents('spinner') && !printsEvents('quiet'));
  });

  it('log: one line per event on stderr, nothing on stdout', async () => {
    const { stdout, stderr } = await render('log');
    assert.equal(stdout, '');
    const lines = stderr.split('\n').filter((line) => line.startsWith('queenctl: 10:00:01.250'));
    assert.equal(lines.length, events.length);
    assert.match(
      lines[0] ?? '',
      /lease L1 renewed \(2 partitions\) until 2026-12-02T10:01:01.000000Z: 59s left, next renewal in 20s/,
    );
    assert.match(
      lines[1] ?? '',
      /lease L1: cannot reach the broker: connection refused; retry 1 in 250ms \(40s left on the lease\)/,
    );
    assert.match(lines[3] ?? '', /lease L2: --for has elapsed/);
    assert.match(stderr, /queenctl: started \.\/job\.sh/);
  });

  it('quiet: the loss and nothing else', async () => {
    const { stdout, stderr } = await render('quiet', true);
    assert.equal(stdout, '');
    assert.match(stderr, /^queenctl: lease L1 is LOST/);
    assert.doesNotMatch(stderr, /warning|retry|renewed \(|started|--for/);
  });

  it('spinner: falls back to lines on a stream that only claims to be a terminal', async () => {
    const stderr = new Collector(true);
    const renderer = await watchRenderer({
      mode: 'spinner',
      stdout: new Collector(),
      stderr,
      clock: new FakeClock(),
      color: false,
      quiet: false,
      leaseCount: 1,
      firstLeaseId: 'L1',
      status: () => status,
    });
    renderer.event(events[1] as WatchEvent);
    renderer.close();
    assert.match(stderr.text, /^queenctl: 10:00:01.250 lease L1: cannot reach the broker/);
  });

  it('spinner text: the lease, renewals so far, time to expiry, to the next renewal, and the last error', () => {
    const now = Date.parse('2026-12-02T10:00:00Z');
    const text = spinnerText(
      {
        ...status,
        earliestDeadline: now + 38_000,
        nextRenewalAt: now + 12_000,
        lastError: 'HTTP 503',
        lastErrorAt: now - 3_000,
      },
      now,
      1,
      'L1',
    );
    assert.equal(text, 'lease L1: 4 renewals, expires in 38s, next renewal in 12s, last error 3s ago: HTTP 503');
    const many = spinnerText(
      { ...status, watching: 3, held: 2, lost: 1, earliestDeadline: now + 5_000, nextRenewalAt: now },
      now,
      3,
      'L1',
    );
    assert.equal(many, '3 leases: 2 held, 1 lost, 4 renewals, earliest expiry in 5s, next renewal in 0ms');
    assert.equal(
      spinnerText({ ...status, renewals: 0, earliestDeadline: null, nextRenewalAt: null }, now, 1, 'L1'),
      'lease L1: 0 renewals, not renewed yet',
    );
  });
});

describe('what a loss means', () => {
  it('an expiry passed behind broker errors is said as such, never "another tenant"', () => {
    const at = '2026-12-04T00:00:00.000Z';
    const behind = lostMeaning({
      event: 'lost',
      leaseId: 'l',
      at,
      reason: 'expired',
      detail: 'HTTP 503 (13s of them)',
    });
    assert.match(behind, /expired while the broker did not renew it \(HTTP 503 \(13s of them\)\)/);
    assert.doesNotMatch(behind, /tenant/);
    const refused = lostMeaning({ event: 'lost', leaseId: 'l', at, reason: 'not-renewed', detail: null });
    assert.match(refused, /another tenant/);
  });
});
