/**
 * `queenctl lease run` end to end: in-process against the simulator's pop, extend and ack routes,
 * with real commands (small Node.js scripts) under the real supervisor
 * (docs/cli-contract.md#lease-run). One test per rule; counts of acks are read from the
 * simulator's request log and queue state, never inferred from timings.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { startTcpFront } from '../../tools/simulator/index.js';
import type { Simulator } from '../../tools/simulator/index.js';
import { runInProcess, startInProcess, type InProcessOptions } from '../support/in-process.js';
import { sharedSimulator } from '../support/shared.js';

const simulator = sharedSimulator();
let sim: Simulator;
let queue = '';
let count = 0;
const dir = mkdtempSync(join(tmpdir(), 'queenctl-run-test-'));
beforeEach(() => {
  sim = simulator();
  queue = `jobs-${++count}`;
});

const NODE = process.execPath;

/** A handler script in the test's directory; its path. */
function script(name: string, source: string): string {
  const path = join(dir, `${name}-${count}.cjs`);
  writeFileSync(path, source);
  return path;
}

const run = (args: string[], command: string[], options: InProcessOptions = {}) =>
  runInProcess(['lease', 'run', queue, '--server', sim.url, ...args, '--', ...command], options);

function queueWith(n: number, options: { leaseTime?: number; retryLimit?: number } = {}): void {
  sim.createQueue({ name: queue, partitions: ['p1'], leaseTime: 60, ...options });
  sim.push(
    queue,
    Array.from({ length: n }, (_, i) => ({ n: i + 1 })),
    'p1',
  );
}

interface AckElement {
  transactionId: string;
  partitionId: string;
  leaseId: string;
  status: string;
  error: string | null;
}

/** Every ack element the simulator received, in order. */
function ackElements(): AckElement[] {
  return sim.log
    .filter((entry) => entry.rawPath === '/api/v1/ack/batch')
    .flatMap((entry) => (JSON.parse(entry.body) as { acknowledgments: AckElement[] }).acknowledgments);
}

/** Requests of a route the simulator received. */
const requests = (fragment: string): number => sim.log.filter((entry) => entry.rawPath.includes(fragment)).length;

/** Turns a hang into a failure; never reached by a slow machine. */
const PATIENCE_MS = 30_000;
async function until<T>(check: () => T | undefined | false, what: string): Promise<T> {
  const deadline = Date.now() + PATIENCE_MS;
  for (;;) {
    const found = check();
    if (found !== undefined && found !== false) return found;
    if (Date.now() > deadline) throw new Error(`timed out after ${PATIENCE_MS} ms waiting for ${what}`);
    await delay(20);
  }
}

/** A handler that says it started (a file), then waits for a `go` file and exits with `code`. */
function waiter(name: string, code: number): { path: string; started: string; go: string; term: string } {
  const started = join(dir, `${name}-${count}.started`);
  const go = join(dir, `${name}-${count}.go`);
  const term = join(dir, `${name}-${count}.term`);
  const path = script(
    name,
    `const fs = require('node:fs');
process.on('SIGTERM', () => { fs.writeFileSync(${JSON.stringify(term)}, 'x'); process.exit(143); });
fs.writeFileSync(${JSON.stringify(started)}, process.env.QUEEN_LEASE_ID);
const timer = setInterval(() => {
  if (fs.existsSync(${JSON.stringify(go)})) { clearInterval(timer); process.exit(${code}); }
}, 20);`,
  );
  return { path, started, go, term };
}

/** The JSON lines of a run's stdout (-o ndjson). */
const events = (stdout: string): Array<Record<string, unknown> & { event: string }> =>
  stdout
    .trimEnd()
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown> & { event: string });

const pending = (): number =>
  Object.values(sim.queue(queue)?.groups.__QUEUE_MODE__ ?? {}).reduce((sum, p) => sum + p.pending, 0);

describe('lease run', () => {
  it('runs the command on the messages and acks them completed with the lease id: exit 0', async () => {
    queueWith(3);
    const out = join(dir, `seen-${count}.json`);
    const handler = script(
      'record',
      `const fs = require('node:fs');
const input = fs.readFileSync(0, 'utf8');
const file = fs.readFileSync(process.env.QUEEN_BATCH_FILE, 'utf8');
const mode = fs.statSync(process.env.QUEEN_BATCH_FILE).mode & 0o777;
fs.writeFileSync(${JSON.stringify(out)}, JSON.stringify({ input, file, mode, env: {
  id: process.env.QUEEN_LEASE_ID, queue: process.env.QUEEN_QUEUE, group: process.env.QUEEN_CONSUMER_GROUP,
  partitions: process.env.QUEEN_PARTITIONS, token: process.env.QUEEN_TOKEN ?? null,
  path: process.env.QUEEN_BATCH_FILE } }));`,
    );
    const result = await run(['--batch', '10', '--token', 'secret-token-123'], [NODE, handler], {
      env: { QUEEN_TOKEN: undefined },
    });
    assert.equal(result.code, 0, result.stderr);
    const seen = JSON.parse(readFileSync(out, 'utf8')) as {
      input: string;
      file: string;
      mode: number;
      env: Record<string, string | null>;
    };
    const lines = seen.input
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { data: { n: number } });
    assert.deepEqual(
      lines.map((m) => m.data.n),
      [1, 2, 3],
    );
    const record = JSON.parse(seen.file) as { leaseId: string; messages: unknown[] };
    assert.equal(record.messages.length, 3);
    assert.equal(seen.mode, 0o600);
    assert.equal(seen.env.id, record.leaseId);
    assert.equal(seen.env.queue, queue);
    assert.equal(seen.env.group, '__QUEUE_MODE__');
    assert.equal(seen.env.partitions, 'p1');
    assert.equal(seen.env.token, null, 'never the token');
    assert.ok(!existsSync(seen.env.path as string), 'the batch file is removed afterwards');
    const acks = ackElements();
    assert.equal(acks.length, 3);
    assert.ok(acks.every((a) => a.status === 'completed' && a.leaseId === record.leaseId));
    assert.equal(pending(), 0);
  });

  it("-o ndjson streams acquired, the watch events and acked; the command's stdout goes to stderr", async () => {
    queueWith(2);
    const handler = script('echo', `process.stdin.resume(); process.stdin.on('end', () => console.log('handled'));`);
    const result = await run(['--batch', '10', '-o', 'ndjson'], [NODE, handler]);
    assert.equal(result.code, 0, result.stderr);
    const events = result.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const names = events.map((e) => e.event);
    assert.equal(names[0], 'acquired');
    assert.ok(names.includes('renewed'));
    assert.equal(names.at(-1), 'acked');
    const acquired = events[0] as Record<string, unknown>;
    assert.equal(acquired.queue, queue);
    assert.equal(acquired.messages, 2);
    assert.deepEqual(acquired.partitions, ['p1']);
    assert.deepEqual(Object.keys(events.at(-1) ?? {}), ['event', 'at', 'leaseId', 'status', 'acked', 'refused']);
    assert.equal((events.at(-1) as Record<string, unknown>).status, 'completed');
    assert.doesNotMatch(result.stdout, /handled/);
  });

  it('a failed command: acked --on-failure (default retry) with its status, which is the exit status', async () => {
    queueWith(2);
    const fails = script('fails', `process.stdin.resume(); process.stdin.on('end', () => process.exit(3));`);
    const retried = await run(['--batch', '10'], [NODE, fails]);
    assert.equal(retried.code, 3, retried.stderr);
    let acks = ackElements();
    assert.equal(acks.length, 2);
    assert.ok(
      acks.every((a) => a.status === 'retry' && a.leaseId !== '' && /exited with status 3/.test(a.error ?? '')),
    );
    assert.equal(pending(), 2, 'redelivered: still pending');
    sim.resetLog();
    const failed = await run(['--batch', '10', '--on-failure', 'failed'], [NODE, fails]);
    assert.equal(failed.code, 3, failed.stderr);
    acks = ackElements();
    assert.ok(acks.length === 2 && acks.every((a) => a.status === 'failed'));
  });

  it('a lease lost under the command: SIGTERM at the first renewal after the loss, nothing acked, exit 4', async () => {
    queueWith(2);
    const handler = waiter('lost', 0);
    const running = startInProcess(
      ['lease', 'run', queue, '--server', sim.url, '--batch', '10', '--every', '500ms', '--', NODE, handler.path],
      { timeoutMs: 60_000 },
    );
    try {
      const leaseId = await until(
        () => existsSync(handler.started) && readFileSync(handler.started, 'utf8'),
        'the command to start',
      );
      const extendsBefore = requests('/extend');
      assert.ok(sim.release(leaseId), 'the lease is released under the command (as another ack would)');
      const result = await running.exited;
      assert.equal(result.code, 4, result.stderr);
      // Stopped by the first renewal after the loss (--every 500ms): within a second, by mechanism.
      assert.equal(requests('/extend') - extendsBefore, 1, 'one renewal found the lease gone');
      assert.ok(existsSync(handler.term), 'the command got SIGTERM');
      assert.equal(ackElements().length, 0, 'nothing is acked: the redelivery owns the batch');
      assert.match(result.stderr, /nothing was acked/);
    } finally {
      writeFileSync(handler.go, '');
    }
  });

  it('--until-empty over 1,000 messages, one in ten failing once: each acked completed exactly once', async () => {
    queueWith(1000, { retryLimit: 100 });
    const seen = join(dir, `seen-${count}`);
    writeFileSync(seen, '');
    // Fails a batch holding a message n % 10 == 0 delivered for the first time (remembered in a file).
    const handler = script(
      'tenth',
      `const fs = require('node:fs');
const lines = fs.readFileSync(0, 'utf8').trimEnd().split('\\n').map((l) => JSON.parse(l));
const known = new Set(fs.readFileSync(${JSON.stringify(seen)}, 'utf8').split('\\n'));
const fresh = lines.filter((m) => m.data.n % 10 === 0 && !known.has(m.transactionId));
if (fresh.length > 0) {
  fs.appendFileSync(${JSON.stringify(seen)}, fresh.map((m) => m.transactionId + '\\n').join(''));
  process.exit(1);
}`,
    );
    const result = await run(['--batch', '200', '--until-empty', '-o', 'ndjson'], [NODE, handler], {
      timeoutMs: 120_000,
    });
    // Several batches: the status of the first that was not acked completed.
    assert.equal(result.code, 1, result.stderr);
    const acks = ackElements();
    const completed = acks.filter((a) => a.status === 'completed').map((a) => a.transactionId);
    assert.equal(completed.length, 1000, 'every message acked completed');
    assert.equal(new Set(completed).size, 1000, 'each exactly once');
    const retried = acks.filter((a) => a.status === 'retry');
    assert.ok(retried.length >= 100, `${retried.length} retry acks: every failure was redelivered`);
    assert.ok(
      acks.every((a) => a.leaseId !== '' && a.leaseId !== undefined),
      'never an ack without the lease id',
    );
    assert.equal(pending(), 0, 'none lost, none left');
    const events = result.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { event: string });
    assert.equal(events.at(-1)?.event, 'empty');
  });

  it('a broker outage under the command is ridden out; the ack waits for the broker and lands once', async () => {
    queueWith(2);
    const front = await startTcpFront({ host: '127.0.0.1', port: sim.port });
    const handler = waiter('outage', 0);
    try {
      const running = startInProcess(
        [
          'lease',
          'run',
          queue,
          '--server',
          front.url,
          '--batch',
          '10',
          '--seconds',
          '30',
          '--every',
          '1s',
          '-o',
          'ndjson',
          '--',
          NODE,
          handler.path,
        ],
        { timeoutMs: 60_000 },
      );
      await until(() => existsSync(handler.started), 'the command to start');
      // Down from now until the ack has been refused a connection at least once: the command
      // runs through the outage, ends in it, and its ack cannot reach the broker meanwhile.
      const refused = running.waitForStderr(/the ack never reached the broker/);
      const refusing = front.refuse(refused);
      // The command rides out a renewal the broker did not answer, as lease watch would.
      await running.waitForStdout(/"event":"(retry|outage)"/);
      writeFileSync(handler.go, '');
      await refusing;
      const result = await running.exited;
      assert.equal(result.code, 0, result.stderr);
      const acks = ackElements();
      assert.equal(requests('/api/v1/ack/batch'), 1, 'the ack reached the broker once');
      assert.ok(acks.length === 2 && acks.every((a) => a.status === 'completed'));
      assert.equal(pending(), 0);
      assert.match(result.stderr, /never reached the broker/);
      const stream = events(result.stdout);
      assert.ok(!stream.some((e) => e.event === 'lost'));
      assert.equal(stream.at(-1)?.event, 'acked');
    } finally {
      writeFileSync(handler.go, '');
      await front.close();
    }
  });

  it('a command that reads no input, and a 10 MB message: neither hangs nor loses the ack', async () => {
    sim.createQueue({ name: queue, partitions: ['p1'], leaseTime: 60 });
    const big = 'x'.repeat(10 * 1024 * 1024);
    sim.push(queue, [{ big }, { n: 2 }], 'p1');
    const ignores = script('ignores', 'process.exit(0);');
    const first = await run(['--batch', '1'], [NODE, ignores], { timeoutMs: 60_000 });
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(
      ackElements().map((a) => a.status),
      ['completed'],
    );
    sim.push(queue, [{ big }], 'p1');
    const size = join(dir, `size-${count}`);
    const reads = script(
      'reads',
      `const fs = require('node:fs');
const lines = fs.readFileSync(0, 'utf8').trimEnd().split('\\n').map((l) => JSON.parse(l));
fs.writeFileSync(${JSON.stringify(size)}, lines.map((m) => String(m.data.big ? m.data.big.length : 0)).join(','));`,
    );
    const second = await run(['--batch', '10'], [NODE, reads], { timeoutMs: 60_000 });
    assert.equal(second.code, 0, second.stderr);
    assert.equal(readFileSync(size, 'utf8'), `0,${big.length}`, 'every byte of every message, in order');
    assert.equal(ackElements().length, 3);
    assert.equal(pending(), 0);
  });

  it('refuses bad input before anything is sent: one line, exit 1', async () => {
    queueWith(1);
    const cases: Array<[string[], string[], RegExp]> = [
      [['--batch', '0'], [NODE, '-e', '0'], /--batch takes a whole number from 1/],
      [['--batches', '2', '--until-empty'], [NODE, '-e', '0'], /cannot be used with/],
      [['--on-failure', 'completed'], [NODE, '-e', '0'], /--on-failure/],
      [['-o', 'name'], [NODE, '-e', '0'], /-o name is not an output of lease run/],
      [['--give-up-after', '0'], [NODE, '-e', '0'], /--give-up-after/],
    ];
    for (const [args, command, message] of cases) {
      const result = await run(args, command);
      assert.equal(result.code, 1, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message);
      assert.equal(result.stderr.trimEnd().split('\n')[0]?.startsWith('queenctl: '), true, result.stderr);
      assert.equal(result.stdout, '');
    }
    const noCommand = await runInProcess(['lease', 'run', queue, '--server', sim.url]);
    assert.equal(noCommand.code, 1);
    assert.match(noCommand.stderr, /^queenctl: lease run needs the command to run for each batch after --/);
    const badName = await runInProcess(['lease', 'run', 'bad\u0007queue', '--server', sim.url, '--', NODE]);
    assert.equal(badName.code, 1, badName.stderr);
    assert.equal(requests('/api/v1/'), 0, 'nothing was sent');
  });

  it('nothing to take, or an unknown queue: exit 4, one line; --until-empty: exit 0, an empty event', async () => {
    const unknown = await run([], [NODE, '-e', '0']);
    assert.equal(unknown.code, 4, unknown.stderr);
    assert.match(unknown.stderr, /^queenctl: nothing to take from queue jobs-\d+/);
    assert.equal(unknown.stderr.trimEnd().split('\n').length, 1);
    const empty = await run(['--until-empty', '-o', 'ndjson'], [NODE, '-e', '0']);
    assert.equal(empty.code, 0, empty.stderr);
    assert.deepEqual(
      events(empty.stdout).map((e) => e.event),
      ['empty'],
    );
    assert.equal(ackElements().length, 0);
  });

  it('a command that cannot start (127, 126) is acked retry, never completed; no further batch', async () => {
    queueWith(3);
    const missing = await run(['--batch', '1', '--batches', '3'], [join(dir, 'no-such-command')]);
    assert.equal(missing.code, 127, missing.stderr);
    let acks = ackElements();
    assert.equal(acks.length, 1, 'one batch only');
    assert.equal(acks[0]?.status, 'retry');
    assert.match(acks[0]?.error ?? '', /could not be started \(ENOENT, status 127\)/);
    sim.resetLog();
    const notExecutable = join(dir, `plain-${count}.txt`);
    writeFileSync(notExecutable, 'not a program', { mode: 0o644 });
    const denied = await run(['--batch', '1'], [notExecutable]);
    assert.equal(denied.code, 126, denied.stderr);
    acks = ackElements();
    assert.ok(acks.length === 1 && acks[0]?.status === 'retry');
    assert.equal(pending(), 3, 'nothing was lost');
  });

  it('an ack refused for the lease exits 4 with one line', async () => {
    queueWith(2);
    // The command releases its own lease, as a second ack of the batch would, then succeeds.
    const handler = script(
      'releases',
      `fetch(${JSON.stringify(sim.url)} + '/_sim/leases/' + encodeURIComponent(process.env.QUEEN_LEASE_ID),
  { method: 'DELETE' }).then((r) => process.exit(r.ok ? 0 : 9));`,
    );
    const result = await run(['--batch', '10'], [NODE, handler]);
    assert.equal(result.code, 4, result.stderr);
    assert.match(result.stderr, /queenctl: 2 of 2 messages of lease \S+ were not acked: Invalid or expired lease/);
    assert.equal(requests('/api/v1/ack/batch'), 1);
  });

  it('a broker that answers the pop but never the ack: exit 2, the ack sent once and never again', async () => {
    queueWith(2);
    sim.inject({ kind: 'until-abandoned', route: 'ack' });
    const result = await run(['--batch', '10', '--timeout', '2s'], [NODE, '-e', '0']);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /^queenctl: the ack of lease \S+ may or may not have landed: .*it was not sent again/m);
    assert.equal(requests('/api/v1/ack/batch'), 1);
    assert.ok(ackElements().every((a) => a.leaseId !== ''));
  });

  it('the first SIGTERM goes to the command, no further batch is taken; ended by it: acked retry', async () => {
    queueWith(3);
    const handler = waiter('signal', 0);
    const running = startInProcess(
      ['lease', 'run', queue, '--server', sim.url, '--batch', '1', '--batches', '3', '--', NODE, handler.path],
      { timeoutMs: 60_000 },
    );
    try {
      await until(() => existsSync(handler.started), 'the command to start');
      running.kill('SIGTERM');
      const result = await running.exited;
      assert.equal(result.code, 143, result.stderr);
      assert.ok(existsSync(handler.term), 'the command got SIGTERM');
      const acks = ackElements();
      assert.equal(acks.length, 1, 'one batch, no further one');
      assert.equal(acks[0]?.status, 'retry');
      assert.equal(requests('/api/v1/pop/'), 1);
      assert.equal(pending(), 3);
    } finally {
      writeFileSync(handler.go, '');
    }
  });

  it('a message that fails every time ends --until-empty after --give-up-after failures', async () => {
    queueWith(1);
    const fails = script('always', 'process.exit(5);');
    const result = await run(['--until-empty', '--give-up-after', '3'], [NODE, fails]);
    assert.equal(result.code, 5, result.stderr);
    const acks = ackElements();
    assert.deepEqual(
      acks.map((a) => a.status),
      ['retry', 'retry', 'retry'],
    );
    assert.match(result.stderr, /queenctl: no further batch: a message of lease \S+ has failed 3 times in this run/);
    assert.equal(pending(), 1, 'it stays pending for the next consumer');
  });

  it('--batches n takes n batches one after another, and stops early when the queue is empty', async () => {
    queueWith(5);
    // Each command removes its batch file itself: no error, the next batch goes on.
    const ok = script('ok', "process.stdin.resume(); require('node:fs').rmSync(process.env.QUEEN_BATCH_FILE);");
    const two = await run(['--batch', '2', '--batches', '2', '-o', 'ndjson'], [NODE, ok]);
    assert.equal(two.code, 0, two.stderr);
    const taken = events(two.stdout).filter((e) => e.event === 'acquired');
    assert.equal(taken.length, 2);
    assert.notEqual(taken[0]?.leaseId, taken[1]?.leaseId);
    assert.equal(pending(), 1);
    const more = await run(['--batch', '2', '--batches', '5', '-o', 'ndjson'], [NODE, ok]);
    assert.equal(more.code, 0, more.stderr);
    assert.deepEqual(
      events(more.stdout)
        .map((e) => e.event)
        .filter((name) => name === 'acquired' || name === 'acked' || name === 'empty'),
      ['acquired', 'acked', 'empty'],
    );
    assert.equal(pending(), 0);
  });

  it('a signal while the ack cannot reach the broker: it is not tried again, exit 2, one line', async () => {
    queueWith(2);
    const front = await startTcpFront({ host: '127.0.0.1', port: sim.port });
    const handler = waiter('unsent', 0);
    const running = startInProcess(
      ['lease', 'run', queue, '--server', front.url, '--batch', '10', '--', NODE, handler.path],
      { timeoutMs: 60_000 },
    );
    const stop = new AbortController();
    try {
      await until(() => existsSync(handler.started), 'the command to start');
      const refusing = front.refuse(new Promise((resolve) => stop.signal.addEventListener('abort', resolve)));
      writeFileSync(handler.go, '');
      await running.waitForStderr(/the ack never reached the broker/);
      const retries = (text: string): number => text.match(/the ack never reached the broker: retry/g)?.length ?? 0;
      const before = retries(running.stderr());
      running.kill('SIGTERM');
      const result = await running.exited;
      assert.equal(retries(result.stderr), before, 'no try after the signal');
      stop.abort();
      await refusing;
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, /queenctl: the ack of lease \S+ never reached the broker .* not tried again/);
      assert.equal(requests('/api/v1/ack/batch'), 0);
    } finally {
      stop.abort();
      writeFileSync(handler.go, '');
      await front.close();
    }
  });

  it('a signal before the command started: it never starts, the batch is acked retry, exit 143', async () => {
    queueWith(2);
    const started = join(dir, `never-${count}.started`);
    const handler = script('never', `require('node:fs').writeFileSync(${JSON.stringify(started)}, 'x');`);
    // The renewal right after the pop is held, then answered; the watch's first renewal is held
    // in its turn: the run is between taking the batch and starting the command.
    sim.inject({ kind: 'hang', route: 'extend' });
    const running = startInProcess(
      ['lease', 'run', queue, '--server', sim.url, '--batch', '10', '-o', 'ndjson', '--', NODE, handler],
      { timeoutMs: 60_000 },
    );
    await until(() => sim.heldCount().holding === 1, 'the renewal after the pop');
    sim.clearFaults();
    sim.inject({ kind: 'hang', route: 'extend' });
    await running.waitForStdout(/"event":"acquired"/);
    await until(() => sim.heldCount().holding === 1, "the watch's first renewal");
    running.kill('SIGTERM');
    const result = await running.exited;
    sim.clearFaults();
    assert.equal(result.code, 143, result.stderr);
    assert.ok(!existsSync(started), 'the command never started');
    const acks = ackElements();
    assert.ok(acks.length === 2 && acks.every((a) => a.status === 'retry'), JSON.stringify(acks));
    assert.match(acks[0]?.error ?? '', /before the command started/);
    assert.equal(pending(), 2);
  });
});
