/**
 * `queenctl lease run` end to end: in-process against the simulator's pop, extend and ack routes,
 * with real commands (small Node.js scripts) under the real supervisor
 * (docs/cli-contract.md#lease-run). One test per rule. The tests that move the most (1,000
 * messages, 10 MB, an outage) are in run-load.test.ts, a process of their own.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startTcpFront } from '../../tools/simulator/index.js';
import { runInProcess, startInProcess } from '../support/in-process.js';
import { events, NODE, RunScene, until } from '../support/lease-run.js';

const scene = new RunScene();

describe('lease run', () => {
  it('runs the command on the messages and acks them completed with the lease id: exit 0', async () => {
    scene.queueWith(3);
    const out = scene.file(`seen.json`);
    const handler = scene.script(
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
    // The token comes from the environment, as a worker's would: the command must not inherit it.
    const result = await scene.run(['--batch', '10'], [NODE, handler], {
      env: { QUEEN_TOKEN: 'secret-token-123' },
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
    assert.equal(seen.env.queue, scene.queue);
    assert.equal(seen.env.group, '__QUEUE_MODE__');
    assert.equal(seen.env.partitions, 'p1');
    assert.equal(seen.env.token, null, 'never the token');
    assert.ok(!existsSync(seen.env.path as string), 'the batch file is removed afterwards');
    const acks = scene.ackElements();
    assert.equal(acks.length, 3);
    assert.ok(acks.every((a) => a.status === 'completed' && a.leaseId === record.leaseId));
    assert.equal(scene.pending(), 0);
  });

  it("-o ndjson streams acquired, the watch events and acked; the command's stdout goes to stderr", async () => {
    scene.queueWith(2);
    const handler = scene.shell('echo', 'cat > /dev/null; echo handled\n');
    const result = await scene.run(['--batch', '10', '-o', 'ndjson'], ['sh', handler]);
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
    assert.equal(acquired.queue, scene.queue);
    assert.equal(acquired.messages, 2);
    assert.deepEqual(acquired.partitions, ['p1']);
    assert.deepEqual(Object.keys(events.at(-1) ?? {}), [
      'event',
      'at',
      'leaseId',
      'exitStatus',
      'completed',
      'retry',
      'failed',
      'dlq',
      'refused',
      'pending',
    ]);
    assert.deepEqual(
      { ...events.at(-1), at: undefined, leaseId: undefined },
      {
        event: 'acked',
        at: undefined,
        leaseId: undefined,
        exitStatus: 0,
        completed: 2,
        retry: 0,
        failed: 0,
        dlq: 0,
        refused: 0,
        pending: 0,
      },
    );
    assert.doesNotMatch(result.stdout, /handled/);
  });

  it('a failed command: its first message acked retry, the rest come back with it; exit 5', async () => {
    scene.queueWith(3);
    const fails = scene.shell('fails', 'cat > /dev/null; exit 4\n');
    const result = await scene.run(['--batch', '10', '--retry-delay', '1ms', '-o', 'ndjson'], ['sh', fails]);
    assert.equal(result.code, 5, result.stderr);
    const acks = scene.ackElements();
    // Never a retry followed by anything: the broker's cursor would skip the retried message.
    assert.equal(acks.length, 1);
    assert.equal(acks[0]?.status, 'retry');
    assert.match(acks[0]?.error ?? '', /exited with status 4/);
    const acked = events(result.stdout).find((e) => e.event === 'acked');
    assert.equal(acked?.exitStatus, 4, "the command's own status is in the event, never queenctl's");
    assert.deepEqual(
      [acked?.completed, acked?.retry, acked?.failed, acked?.dlq, acked?.refused, acked?.pending],
      [0, 1, 0, 0, 0, 2],
    );
    assert.equal(scene.pending(), 3, 'all three come back');
  });

  it('a lease lost under the command: SIGTERM at the first renewal after the loss, nothing acked, exit 4', async () => {
    scene.queueWith(2);
    const handler = scene.waiter('lost', 0);
    const running = startInProcess(
      [
        'lease',
        'run',
        scene.queue,
        '--server',
        scene.sim.url,
        '--batch',
        '10',
        '--every',
        '500ms',
        '--',
        'sh',
        handler.path,
      ],
      { timeoutMs: 60_000 },
    );
    try {
      const leaseId = await until(
        () => existsSync(handler.started) && readFileSync(handler.started, 'utf8'),
        'the command to start',
      );
      const extendsBefore = scene.requests('/extend');
      if (!scene.sim.release(leaseId)) {
        // Not expected: say what the run did, so that a failure here can be traced.
        writeFileSync(handler.go, '');
        const early = await running.exited;
        assert.fail(`the lease ${leaseId} was not held when released: exit ${early.code}, ${early.stderr}`);
      }
      const result = await running.exited;
      assert.equal(result.code, 4, result.stderr);
      // Stopped by the first renewal after the loss (--every 500ms): within a second, by mechanism.
      assert.equal(scene.requests('/extend') - extendsBefore, 1, 'one renewal found the lease gone');
      assert.ok(existsSync(handler.term), 'the command got SIGTERM');
      assert.equal(scene.ackElements().length, 0, 'nothing is acked: the redelivery owns the batch');
      assert.match(result.stderr, /nothing was acked/);
    } finally {
      writeFileSync(handler.go, '');
    }
  });

  it('refuses bad input before anything is sent: one line, exit 1', async () => {
    scene.queueWith(1);
    const cases: Array<[string[], string[], RegExp]> = [
      [['--batch', '0'], [NODE, '-e', '0'], /--batch takes a whole number from 1/],
      [['--batches', '2', '--until-empty'], [NODE, '-e', '0'], /cannot be used with/],
      [['--on-failure', 'completed'], [NODE, '-e', '0'], /--on-failure/],
      [['-o', 'name'], [NODE, '-e', '0'], /-o name is not an output of lease run/],
      [['--give-up-after', '0'], [NODE, '-e', '0'], /--give-up-after/],
    ];
    for (const [args, command, message] of cases) {
      const result = await scene.run(args, command);
      assert.equal(result.code, 1, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message);
      assert.equal(result.stderr.trimEnd().split('\n')[0]?.startsWith('queenctl: '), true, result.stderr);
      assert.equal(result.stdout, '');
    }
    const noCommand = await runInProcess(['lease', 'run', scene.queue, '--server', scene.sim.url]);
    assert.equal(noCommand.code, 1);
    assert.match(noCommand.stderr, /^queenctl: lease run needs the command to run for each batch after --/);
    const badName = await runInProcess(['lease', 'run', 'bad\u0007queue', '--server', scene.sim.url, '--', NODE]);
    assert.equal(badName.code, 1, badName.stderr);
    assert.equal(scene.requests('/api/v1/'), 0, 'nothing was sent');
  });

  it('nothing to take, or an unknown queue: exit 4, one line; --until-empty: exit 0, an empty event', async () => {
    const unknown = await scene.run([], [NODE, '-e', '0']);
    assert.equal(unknown.code, 4, unknown.stderr);
    assert.match(unknown.stderr, /^queenctl: nothing to take from queue jobs-\d+/);
    assert.equal(unknown.stderr.trimEnd().split('\n').length, 1);
    const empty = await scene.run(['--until-empty', '-o', 'ndjson'], [NODE, '-e', '0']);
    assert.equal(empty.code, 0, empty.stderr);
    assert.deepEqual(
      events(empty.stdout).map((e) => e.event),
      ['empty'],
    );
    assert.equal(scene.ackElements().length, 0);
  });

  it('a command that cannot start (127, 126) is acked retry, never completed; no further batch', async () => {
    scene.queueWith(3);
    const missing = await scene.run(['--batch', '1', '--batches', '3'], [join(scene.dir, 'no-such-command')]);
    assert.equal(missing.code, 127, missing.stderr);
    let acks = scene.ackElements();
    assert.equal(acks.length, 1, 'one batch only');
    assert.equal(acks[0]?.status, 'retry');
    assert.match(acks[0]?.error ?? '', /could not be started \(ENOENT, status 127\)/);
    scene.sim.resetLog();
    const notExecutable = scene.file(`plain.txt`);
    writeFileSync(notExecutable, 'not a program', { mode: 0o644 });
    const denied = await scene.run(['--batch', '1'], [notExecutable]);
    assert.equal(denied.code, 126, denied.stderr);
    acks = scene.ackElements();
    assert.ok(acks.length === 1 && acks[0]?.status === 'retry');
    assert.equal(scene.pending(), 3, 'nothing was lost');
  });

  it('an ack refused for the lease exits 4 with one line', async () => {
    scene.queueWith(2);
    // The command releases its own lease, as a second ack of the batch would, then succeeds.
    const handler = scene.script(
      'releases',
      `fetch(${JSON.stringify(scene.sim.url)} + '/_sim/leases/' + encodeURIComponent(process.env.QUEEN_LEASE_ID),
  { method: 'DELETE' }).then((r) => process.exit(r.ok ? 0 : 9));`,
    );
    const result = await scene.run(['--batch', '10'], [NODE, handler]);
    assert.equal(result.code, 4, result.stderr);
    assert.match(result.stderr, /queenctl: 2 of 2 messages of lease \S+ were not acked: Invalid or expired lease/);
    assert.equal(scene.requests('/api/v1/ack/batch'), 1);
  });

  it('a broker that answers the pop but never the ack: exit 2, the ack sent once and never again', async () => {
    scene.queueWith(2);
    scene.sim.inject({ kind: 'until-abandoned', route: 'ack' });
    const result = await scene.run(['--batch', '10', '--timeout', '2s'], ['sh', '-c', 'cat > /dev/null']);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /^queenctl: the ack of lease \S+ may or may not have landed: .*it was not sent again/m);
    assert.equal(scene.requests('/api/v1/ack/batch'), 1);
    assert.ok(scene.ackElements().every((a) => a.leaseId !== ''));
  });

  it('the first SIGTERM goes to the command, no further batch is taken; ended by it: acked retry', async () => {
    scene.queueWith(3);
    // One message a batch: the retried one is the batch's first, and nothing comes after it.
    const handler = scene.waiter('signal', 0);
    const running = startInProcess(
      [
        'lease',
        'run',
        scene.queue,
        '--server',
        scene.sim.url,
        '--batch',
        '1',
        '--batches',
        '3',
        '--',
        'sh',
        handler.path,
      ],
      { timeoutMs: 60_000 },
    );
    try {
      await until(() => existsSync(handler.started), 'the command to start');
      running.kill('SIGTERM');
      const result = await running.exited;
      assert.equal(result.code, 143, result.stderr);
      assert.ok(existsSync(handler.term), 'the command got SIGTERM');
      const acks = scene.ackElements();
      assert.equal(acks.length, 1, 'one batch, no further one');
      assert.equal(acks[0]?.status, 'retry');
      assert.equal(scene.requests('/api/v1/pop/'), 1);
      assert.equal(scene.pending(), 3);
    } finally {
      writeFileSync(handler.go, '');
    }
  });

  it('a message that fails every time ends --until-empty after --give-up-after failures', async () => {
    scene.queueWith(1);
    const fails = scene.shell('always', 'exit 5\n');
    const result = await scene.run(['--until-empty', '--give-up-after', '3', '--retry-delay', '1ms'], ['sh', fails]);
    assert.equal(result.code, 5, result.stderr);
    const acks = scene.ackElements();
    assert.deepEqual(
      acks.map((a) => a.status),
      ['retry', 'retry', 'retry'],
    );
    assert.match(result.stderr, /queenctl: no further batch: a message of lease \S+ has failed 3 times in this run/);
    assert.equal(scene.pending(), 1, 'it stays pending for the next consumer');
  });

  it('--batches n takes n batches one after another, and stops early when the queue is empty', async () => {
    scene.queueWith(5);
    // Each command removes its batch file itself: no error, the next batch goes on.
    const ok = scene.shell('ok', 'cat > /dev/null; rm "$QUEEN_BATCH_FILE"\n');
    const two = await scene.run(['--batch', '2', '--batches', '2', '-o', 'ndjson'], ['sh', ok]);
    assert.equal(two.code, 0, two.stderr);
    const taken = events(two.stdout).filter((e) => e.event === 'acquired');
    assert.equal(taken.length, 2);
    assert.notEqual(taken[0]?.leaseId, taken[1]?.leaseId);
    assert.equal(scene.pending(), 1);
    const more = await scene.run(['--batch', '2', '--batches', '5', '-o', 'ndjson'], ['sh', ok]);
    assert.equal(more.code, 0, more.stderr);
    assert.deepEqual(
      events(more.stdout)
        .map((e) => e.event)
        .filter((name) => name === 'acquired' || name === 'acked' || name === 'empty'),
      ['acquired', 'acked', 'empty'],
    );
    assert.equal(scene.pending(), 0);
  });

  it('a signal while the ack cannot reach the broker: it is not tried again, exit 2, one line', async () => {
    scene.queueWith(2);
    const front = await startTcpFront({ host: '127.0.0.1', port: scene.sim.port });
    const handler = scene.waiter('unsent', 0);
    const running = startInProcess(
      ['lease', 'run', scene.queue, '--server', front.url, '--batch', '10', '--', 'sh', handler.path],
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
      assert.equal(scene.requests('/api/v1/ack/batch'), 0);
    } finally {
      stop.abort();
      writeFileSync(handler.go, '');
      await front.close();
    }
  });

  it('a signal before the command started: it never starts, the batch is acked retry, exit 143', async () => {
    scene.queueWith(2);
    const started = scene.file(`never.started`);
    const handler = scene.script('never', `require('node:fs').writeFileSync(${JSON.stringify(started)}, 'x');`);
    // The renewal right after the pop is held, then answered; the watch's first renewal is held
    // in its turn: the run is between taking the batch and starting the command.
    scene.sim.inject({ kind: 'hang', route: 'extend' });
    const running = startInProcess(
      ['lease', 'run', scene.queue, '--server', scene.sim.url, '--batch', '10', '-o', 'ndjson', '--', NODE, handler],
      { timeoutMs: 60_000 },
    );
    await until(() => scene.sim.heldCount().holding === 1, 'the renewal after the pop');
    scene.sim.clearFaults();
    scene.sim.inject({ kind: 'hang', route: 'extend' });
    await running.waitForStdout(/"event":"acquired"/);
    await until(() => scene.sim.heldCount().holding === 1, "the watch's first renewal");
    running.kill('SIGTERM');
    const result = await running.exited;
    scene.sim.clearFaults();
    assert.equal(result.code, 143, result.stderr);
    assert.ok(!existsSync(started), 'the command never started');
    const acks = scene.ackElements();
    // The first message acked retry: the second comes back with it.
    assert.ok(acks.length === 1 && acks[0]?.status === 'retry', JSON.stringify(acks));
    assert.match(acks[0]?.error ?? '', /stopped by SIGTERM before .* started/);
    assert.equal(scene.pending(), 2);
  });
});
