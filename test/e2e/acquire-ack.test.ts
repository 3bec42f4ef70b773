/**
 * `queenctl lease acquire` and `lease ack` end to end: run in-process against the simulator's pop
 * and ack routes (docs/cli-contract.md#lease-acquire, #lease-ack), one test per rule.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, mkdirSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { beforeEach, describe, it } from 'node:test';
import type { Simulator } from '../../tools/simulator/index.js';
import { runInProcess, type InProcessOptions } from '../support/in-process.js';
import { sharedSimulator } from '../support/shared.js';

const simulator = sharedSimulator();
let sim: Simulator;
let queue = '';
let count = 0;
const dir = mkdtempSync(join(tmpdir(), 'queenctl-ack-'));
beforeEach(() => {
  sim = simulator();
  queue = `orders-${++count}`;
});

const lease = (args: string[], options: InProcessOptions = {}) =>
  runInProcess(['lease', ...args, '--server', sim.url], options);

/** A queue with messages 1..n in partition p1 (and p2 if asked), lease time 60 s. */
function queueWith(n: number, options: { leaseTime?: number; retryLimit?: number } = {}): void {
  sim.createQueue({ name: queue, partitions: ['p1', 'p2'], leaseTime: 60, ...options });
  sim.push(
    queue,
    Array.from({ length: n }, (_, i) => ({ n: i + 1 })),
    'p1',
  );
}

/** `acquire -o json` into a file; its path and record. */
async function acquireToFile(args: string[] = []): Promise<{ path: string; record: BatchJson }> {
  const result = await lease(['acquire', queue, '--batch', '10', '-o', 'json', ...args]);
  assert.equal(result.code, 0, result.stderr);
  const path = join(dir, `batch-${count}-${Math.random().toString(16).slice(2)}.json`);
  writeFileSync(path, result.stdout);
  return { path, record: JSON.parse(result.stdout) as BatchJson };
}

interface BatchJson {
  leaseId: string;
  queue: string;
  consumerGroup: string;
  partitions: string[];
  expiresAt: string | null;
  messages: Array<{ transactionId: string; partitionId: string; partition: string; data: { n: number } }>;
}

const acks = (): number => sim.log.filter((entry) => entry.rawPath === '/api/v1/ack/batch').length;
const pops = (): number => sim.log.filter((entry) => entry.rawPath.startsWith('/api/v1/pop/')).length;

describe('lease acquire', () => {
  it('prints the batch record in a pipe: the contract keys in order, every message key kept, exit 0', async () => {
    queueWith(2);
    const result = await lease(['acquire', queue, '--batch', '10']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, '');
    const record = JSON.parse(result.stdout) as BatchJson;
    assert.deepEqual(Object.keys(record), ['leaseId', 'queue', 'consumerGroup', 'partitions', 'expiresAt', 'messages']);
    assert.equal(record.queue, queue);
    assert.equal(record.consumerGroup, '__QUEUE_MODE__');
    assert.deepEqual(record.partitions, ['p1']);
    assert.ok(record.expiresAt !== null && Date.parse(record.expiresAt) > sim.brokerNow());
    assert.deepEqual(
      record.messages.map((m) => m.data.n),
      [1, 2],
    );
    assert.ok('createdAt' in (record.messages[0] ?? {}) && 'id' in (record.messages[0] ?? {}));
    assert.ok(sim.lease(record.leaseId), 'the lease is the simulator store lease that extend and list see');
  });

  it('shows a table on a terminal: the lease and its messages', async () => {
    queueWith(1);
    sim.push(queue, [{ text: 'evil\u001b[2Jline' }], 'p2');
    // Wide enough for every column (a narrower terminal is fitted: test/e2e/terminal-width.test.ts).
    const result = await lease(['acquire', queue, '--batch', '5', '--partitions', '2'], {
      stdoutIsTTY: true,
      columns: 200,
    });
    assert.equal(result.code, 0, result.stderr);
    const [summary = '', , , head = ''] = result.stdout.split('\n\n');
    const header = /^LEASE ID\s+GROUP\s+QUEUE\s+PARTITIONS\s+MESSAGES\s+LEFT\n/.source;
    const row = new RegExp(`${header}\\S+\\s+\\(queue mode\\)\\s+\\S+\\s+p1, p2\\s+2\\s+(?:(\\d+)m)?(\\d+)s$`, 'm');
    const [, minutes = '0', seconds = 'NaN'] = row.exec(summary) ?? [];
    const left = Number(minutes) * 60 + Number(seconds);
    // LEFT is measured on the broker's whole-second Date header, on however busy a machine: the
    // queue's lease time (60 s) at most, and well above nothing.
    assert.ok(left > 30 && left <= 60, summary);
    assert.match(result.stdout, /TRANSACTION ID\s+PARTITION\s+CREATED\s+DATA/);
    assert.doesNotMatch(result.stdout, /\u001b/, 'a control character from a message never reaches the terminal');
    assert.match(result.stdout, /evil\\u001b\[2Jline/);
    assert.equal(head, '');
  });

  it('a batch shown as tables says how to ack it: its record kept privately, removed once acked', async () => {
    queueWith(2);
    const taken = await lease(['acquire', queue, '--batch', '5'], { stdoutIsTTY: true, columns: 200 });
    assert.equal(taken.code, 0, taken.stderr);
    const [, kept = ''] = /^queenctl: to ack this batch .*:\n {2}queenctl lease ack (\S+)\n/m.exec(taken.stderr) ?? [];
    assert.match(kept, /queenctl-batch-\w{6}\/batch\.json$/, taken.stderr);
    assert.equal(statSync(kept).mode & 0o777, 0o600);
    assert.equal(statSync(dirname(kept)).mode & 0o777, 0o700);
    const acked = await lease(['ack', kept]);
    assert.equal(acked.code, 0, acked.stderr);
    assert.equal(sim.queue(queue)?.groups.__QUEUE_MODE__?.p1?.pending, 0, 'acked from what the screen said');
    assert.equal(existsSync(dirname(kept)), false, 'the kept record is removed once every message is acked');
  });

  it('-o name prints the lease id alone, and keeps the record as a table does: the batch can be acked', async () => {
    queueWith(1);
    const result = await lease(['acquire', queue, '-o', 'name']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^[0-9a-f-]{36}\n$/);
    assert.ok(sim.lease(result.stdout.trim()));
    // The id alone is no record lease ack can read: without the kept one, the batch could not be
    // acked, and its messages would come back only once the lease ran out.
    const [, kept = ''] = /^queenctl: to ack this batch .*:\n {2}queenctl lease ack (\S+)\n/m.exec(result.stderr) ?? [];
    assert.match(kept, /queenctl-batch-\w{6}\/batch\.json$/, result.stderr);
    assert.equal(statSync(kept).mode & 0o777, 0o600);
    const acked = await lease(['ack', kept]);
    assert.equal(acked.code, 0, acked.stderr);
    assert.equal(sim.queue(queue)?.groups.__QUEUE_MODE__?.p1?.pending, 0, 'acked from the kept record');
    assert.equal(existsSync(dirname(kept)), false, 'the kept record is removed once every message is acked');
  });

  it('without --seconds it probes for one second and leaves the lease time; with it, renews at once', async () => {
    queueWith(2);
    sim.push(queue, [{ n: 3 }], 'p2');
    const probed = await lease(['acquire', queue, '-o', 'name']);
    const first = sim.lease(probed.stdout.trim())?.rows[0]?.expiresAt ?? 0;
    assert.ok(first - sim.brokerNow() <= 60_000 && first - sim.brokerNow() > 50_000, 'the queue lease time, 60 s');
    const renewed = await lease(['acquire', queue, '-o', 'name', '--seconds', '600']);
    const second = sim.lease(renewed.stdout.trim())?.rows[0]?.expiresAt ?? 0;
    assert.ok(second - sim.brokerNow() > 590_000, 'renewed to 600 s');
    const bodies = sim.log.filter((e) => e.rawPath.endsWith('/extend')).map((e) => JSON.parse(e.body));
    assert.deepEqual(bodies, [{ seconds: 1 }, { seconds: 600 }]);
  });

  it('sends the group, partition, batch, partitions and wait it was given, never autoAck', async () => {
    sim.createQueue({ name: queue, partitions: ['p7'] });
    sim.push(queue, [{ n: 1 }], 'p7');
    const result = await lease([
      'acquire',
      queue,
      '--group',
      'billing',
      '--partition',
      'p7',
      '--batch',
      '3',
      '--partitions',
      '2',
      '--wait',
      '2s',
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(JSON.parse(result.stdout).consumerGroup, 'billing');
    const path = sim.log.find((entry) => entry.rawPath.startsWith('/api/v1/pop/'))?.rawPath;
    assert.equal(
      path,
      `/api/v1/pop/queue/${queue}/partition/p7?batch=3&partitions=2&consumerGroup=billing&wait=true&timeout=2000`,
    );
    assert.doesNotMatch(path ?? '', /autoAck/);
  });

  it('exits 4 with one line when there is nothing to take, also for a queue the broker does not know', async () => {
    sim.createQueue({ name: queue });
    for (const name of [queue, `unknown-${queue}`]) {
      const result = await lease(['acquire', name]);
      assert.equal(result.code, 4);
      assert.equal(result.stdout, '');
      assert.match(result.stderr, /^queenctl: nothing to take from queue \S+: .*does not know the queue.*\n$/);
    }
  });

  it('exits 4 when --wait ends with nothing', async () => {
    sim.createQueue({ name: queue });
    const result = await lease(['acquire', queue, '--wait', '150ms']);
    assert.equal(result.code, 4);
    assert.match(result.stderr, /by the end of --wait 150ms/);
  });

  it('exits 4 for lease_held on --partition, naming how to find the holder', async () => {
    queueWith(2);
    await acquireToFile();
    const result = await lease(['acquire', queue, '--partition', 'p1']);
    assert.equal(result.code, 4);
    assert.equal(result.stdout, '');
    assert.match(
      result.stderr,
      /partition p1 of queue \S+ is held by another lease \(lease_held\): queenctl lease list/,
    );
  });

  it('exits 4 for a lease on no messages, stdout empty, the lease id on stderr', async () => {
    queueWith(1, { retryLimit: 0 });
    const { path, record } = await acquireToFile();
    assert.equal((await lease(['ack', path, '--status', 'failed'])).code, 0);
    // Dead-lettered at once (retry limit 0), the ack did not release the lease: it runs out.
    sim.expire(record.leaseId);
    const result = await lease(['acquire', queue, '--partition', 'p1']);
    assert.equal(result.code, 4, result.stderr);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /handed out lease [0-9a-f-]{36} on no messages/);
  });

  const refused: Array<[string, string[]]> = [
    ['a queue name with a slash', ['a/b']],
    ['a queue name of ..', ['..']],
    ['a queue name with a control character', ['x\u001b[2J']],
    ['--batch 0', ['q', '--batch', '0']],
    ['--partitions 0', ['q', '--partitions', '0']],
    ['--group with a slash', ['q', '--group', '../x']],
    ['--seconds 0', ['q', '--seconds', '0']],
  ];
  for (const [name, args] of refused) {
    it(`refuses ${name}: exit 1, one line, nothing sent`, async () => {
      const result = await lease(['acquire', ...args]);
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /^(queenctl: |error: ).+/);
      assert.equal(pops(), 0);
    });
  }

  it('exits 3 when the broker refuses the token', async () => {
    sim.setTokens({ good: { role: 'read-write' } });
    queueWith(1);
    const result = await lease(['acquire', queue, '--token', 'bad-token']);
    assert.equal(result.code, 3);
    assert.equal(result.stdout, '');
  });
});

describe('lease ack', () => {
  it('acks every message with the lease id and the group at the top level, exit 0', async () => {
    queueWith(2);
    const { path, record } = await acquireToFile();
    const result = await lease(['ack', path]);
    assert.equal(result.code, 0, result.stderr);
    const printed = JSON.parse(result.stdout);
    assert.deepEqual(Object.keys(printed), ['leaseId', 'status', 'acked', 'refused', 'results']);
    assert.deepEqual(
      [printed.leaseId, printed.status, printed.acked, printed.refused],
      [record.leaseId, 'completed', 2, 0],
    );
    assert.deepEqual(Object.keys(printed.results[0]), [
      'transactionId',
      'partitionId',
      'success',
      'error',
      'dlq',
      'leaseReleased',
    ]);
    const sent = JSON.parse(sim.log.find((e) => e.rawPath === '/api/v1/ack/batch')?.body ?? '{}');
    assert.equal(sent.consumerGroup, '__QUEUE_MODE__');
    assert.ok(sent.acknowledgments.every((a: { leaseId: string }) => a.leaseId === record.leaseId));
    assert.equal(sim.queue(queue)?.groups.__QUEUE_MODE__?.p1?.pending, 0);
    assert.equal(sim.lease(record.leaseId), undefined, 'the whole batch acked released the lease');
  });

  it('shows per message what the broker said on a terminal; -o name lists the acked ids', async () => {
    queueWith(2);
    const { path, record } = await acquireToFile();
    const table = await lease(['ack', path, '--status', 'retry', '--no-color'], { stdoutIsTTY: true });
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /^TRANSACTION ID\s+RESULT\s+REASON\s+LEASE\n/);
    assert.match(table.stdout, /acked \(redelivered\)\s+-\s+released/);
    const again = await acquireToFile();
    assert.deepEqual(
      again.record.messages.map((m) => m.transactionId),
      record.messages.map((m) => m.transactionId),
      'retry redelivers at once',
    );
    const names = await lease(['ack', again.path, '-o', 'name']);
    assert.equal(names.stdout, `${record.messages.map((m) => m.transactionId).join('\n')}\n`);
  });

  it('reads the record from standard input with -', async () => {
    queueWith(1);
    const { record } = await acquireToFile();
    const result = await lease(['ack', '-', '-o', 'json'], { stdin: JSON.stringify(record) });
    assert.equal(result.code, 0, result.stderr);
  });

  it('an ack after expiry exits 4 and a second acquire receives the same messages', async () => {
    queueWith(2);
    const { path, record } = await acquireToFile();
    sim.expire(record.leaseId);
    const result = await lease(['ack', path]);
    assert.equal(result.code, 4);
    assert.match(
      result.stderr,
      /^queenctl: 2 of 2 messages of lease \S+ were not acked: Invalid or expired lease.*\n$/,
    );
    assert.equal(JSON.parse(result.stdout).refused, 2, 'the record still says what the broker said');
    const again = await acquireToFile();
    assert.deepEqual(
      again.record.messages.map((m) => m.transactionId),
      record.messages.map((m) => m.transactionId),
    );
  });

  it('a batch acked twice: the second ack is refused by the broker, exit 4', async () => {
    queueWith(2);
    const { path } = await acquireToFile();
    assert.equal((await lease(['ack', path])).code, 0);
    const second = await lease(['ack', path]);
    assert.equal(second.code, 4);
    assert.match(second.stderr, /Invalid or expired lease/);
  });

  it('a record with its lease id edited is refused by the broker: exit 4', async () => {
    queueWith(1);
    const { path, record } = await acquireToFile();
    writeFileSync(path, JSON.stringify({ ...record, leaseId: '01a23f03-0000-7000-8000-000000000000' }));
    const result = await lease(['ack', path]);
    assert.equal(result.code, 4);
    assert.ok(sim.lease(record.leaseId), 'the real lease is untouched');
  });

  it('a record from another consumer group is refused by the broker: exit 4', async () => {
    queueWith(1);
    const { path, record } = await acquireToFile(['--group', 'billing']);
    writeFileSync(path, JSON.stringify({ ...record, consumerGroup: '__QUEUE_MODE__' }));
    assert.equal((await lease(['ack', path])).code, 4);
  });

  const notBatches: Array<[string, (path: string) => void]> = [
    ['invalid JSON', (path) => writeFileSync(path, '{"leaseId": ')],
    ['an object that is not a batch', (path) => writeFileSync(path, '{}')],
    [
      'a batch with no messages',
      (path) =>
        writeFileSync(
          path,
          JSON.stringify({
            leaseId: 'x',
            queue: 'q',
            consumerGroup: 'g',
            partitions: [],
            expiresAt: null,
            messages: [],
          }),
        ),
    ],
    [
      'a file larger than the cap',
      (path) => {
        writeFileSync(path, '');
        truncateSync(path, 129 * 1024 * 1024);
      },
    ],
    ['a directory', (path) => mkdirSync(path)],
    ['a file that does not exist', () => {}],
  ];
  for (const [name, make] of notBatches) {
    it(`refuses ${name}: exit 1, one line, nothing sent`, async () => {
      const path = join(dir, `not-a-batch-${count}`);
      make(path);
      const result = await lease(['ack', path]);
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /^queenctl: .*nothing was sent\n/);
      assert.equal(result.stdout, '');
      assert.equal(acks(), 0);
    });
  }

  it('an ack whose request times out after it was written exits 2, says so, and is never resent', async () => {
    queueWith(2);
    const { path, record } = await acquireToFile();
    sim.inject({ kind: 'until-abandoned', route: 'ack' });
    const result = await lease(['ack', path, '--timeout', '300ms', '--retries', '5']);
    assert.equal(result.code, 2);
    assert.equal(result.stdout, '');
    assert.match(
      result.stderr,
      new RegExp(`the ack of lease ${record.leaseId} may or may not have landed: .*not sent again`),
    );
    assert.match(result.stderr, /queenctl lease inspect/);
    assert.equal(acks(), 1, 'the simulator saw exactly one ack request');
  });

  it('an ack whose answer is cut off landed, exits 2 and is not resent', async () => {
    queueWith(2);
    const { path } = await acquireToFile();
    sim.inject({ kind: 'reset-mid-body', route: 'ack' });
    const result = await lease(['ack', path, '--retries', '5']);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /may or may not have landed/);
    assert.equal(acks(), 1);
    assert.equal(sim.queue(queue)?.groups.__QUEUE_MODE__?.p1?.pending, 0, 'it did land');
  });

  it('an ack answered 503 is of unknown outcome: exit 2, one request', async () => {
    queueWith(1);
    const { path } = await acquireToFile();
    sim.inject({ kind: 'status', status: 503, route: 'ack' });
    const result = await lease(['ack', path, '--retries', '5']);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /may or may not have landed/);
    assert.equal(acks(), 1);
  });

  it('an ack answered 204 (no broker answers so) may have landed: exit 2, never "nothing was acked"', async () => {
    queueWith(1);
    const { path } = await acquireToFile();
    sim.inject({ kind: 'status', status: 204, route: 'ack' });
    const result = await lease(['ack', path]);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /may or may not have landed/);
    assert.doesNotMatch(result.stderr, /nothing was acked/);
    assert.equal(acks(), 1);
  });

  it("the ack table in colour colours queenctl's words, never shows their escape codes as text", async () => {
    queueWith(1);
    const { path } = await acquireToFile();
    const table = await lease(['ack', path], { stdoutIsTTY: true, env: { FORCE_COLOR: '1' } });
    assert.equal(table.code, 0, table.stderr);
    assert.doesNotMatch(table.stdout, /\\x1b/, table.stdout);
    assert.match(table.stdout, /\u001b\[32macked/);
  });

  it('an ack refused a connection goes on to the next replica, and lands once', async () => {
    queueWith(1);
    const { path } = await acquireToFile();
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as { port: number };
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const result = await runInProcess(['lease', 'ack', path, '--server', `http://127.0.0.1:${port},${sim.url}`]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(acks(), 1);
  });

  it('--status failed with --error sends them, and counts against the retry limit', async () => {
    queueWith(1, { retryLimit: 0 });
    const { path } = await acquireToFile();
    const result = await lease(['ack', path, '--status', 'failed', '--error', 'bad payload', '-o', 'json']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(JSON.parse(result.stdout).results[0].dlq, true);
    assert.equal(sim.queue(queue)?.deadLetters[0]?.errorMessage, 'bad payload');
  });

  it('refuses a --status it does not know before sending', async () => {
    const result = await lease(['ack', 'x.json', '--status', 'maybe']);
    assert.equal(result.code, 1);
    assert.equal(acks(), 0);
  });
});
