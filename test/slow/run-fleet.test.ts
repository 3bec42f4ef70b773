/**
 * A fleet of `lease run --follow` workers, as real queenctl processes, on the simulator: three
 * workers, --parallel 2 each, over 2,000 messages in 12 partitions, with a handler that fails one
 * run in ten and always fails a batch holding the one poison message. Meanwhile one worker is
 * killed by SIGKILL while its commands run (a replacement is started), and the broker goes away
 * and comes back (a TCP front refusing connections, its database kept). At the end every message
 * but the poison is consumed by its own completed ack, the poison alone is dead-lettered, nothing
 * is pending or lost to the cursor, the killed worker's commands are gone (its guardian stopped
 * them), and the workers left exit 0 on SIGTERM. The messages handled more than once are counted
 * by cause, each cause bounded.
 *
 * Verdicts never depend on the machine's speed: every wait polls for a state, with limits that
 * only turn a hang into a failure, and every process has a kill timer and an expected exit.
 * About 30 s of a 2-core machine: `npm run test:slow` runs it, not `npm test`.
 *
 * The handler fails a batch holding the poison without naming it (exit 1): lease run halves the
 * batch under its lease until the poison is alone. Halving used to take the halves again through
 * the partition route after a retry freed the partition, and in a fleet another worker's waiting
 * pop took the whole batch and started over: the poison was never found (this test found it).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { startTcpFront, startSimulator, type MessageState } from '../../tools/simulator/index.js';
import { type ExpectedExit, isRunning, type RunningProcess, startCli } from '../support/cli.js';
import { until as untilWithin } from '../support/lease-run.js';

const QUEUE = 'fleet';
const PARTITIONS = 12;
const MESSAGES = 2_000;
const BATCH = 20;
const PARALLEL = 2;
const POISON = 'poison';
/**
 * How a worker left running ends on SIGTERM: 0, or 2 when the outage cut an ack in flight (its
 * outcome unknown; checked below against what the worker said).
 */
const WORKER_EXIT: ExpectedExit = [0, 2];
/** Turns a hang into a failure; never reached by a slow machine. */
const PATIENCE_MS = 90_000;
/** Each worker's kill timer: far beyond the test's own course, well inside the runner's limit. */
const WORKER_KILL_AFTER_MS = 180_000;

/** The shared poll of the lease run tests, with this test's longer patience. */
const until = <T>(check: () => T | undefined | false, what: string, patienceMs = PATIENCE_MS): Promise<T> =>
  untilWithin(check, what, patienceMs);

/**
 * The handler: `node handler.cjs <dir> <worker>`. It logs its start (worker, pid, lease, the
 * transaction ids it was given) to runs.log and marks itself running (running/<pid>), works
 * 200 ms, then logs its end with an outcome and exits: 1 for a batch holding the poison, 1 for
 * one run in ten (by a hash of its ids; a run holding a message that failed once before never
 * fails this way, so no message but the poison fails twice), else 0. A run stopped by a signal
 * logs no end.
 */
const HANDLER = String.raw`const fs = require('node:fs');
const crypto = require('node:crypto');
const [dir, worker] = process.argv.slice(2);
const ids = fs.readFileSync(0, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line).transactionId);
const run = worker + '-' + process.pid;
const log = (record) => fs.appendFileSync(dir + '/runs.log', JSON.stringify(record) + '\n');
fs.writeFileSync(dir + '/running/' + process.pid, worker);
log({ event: 'start', run, worker, pid: process.pid, lease: process.env.QUEEN_LEASE_ID, ids });
setTimeout(() => {
  let outcome = 'ok';
  const hash = crypto.createHash('sha256').update(ids.join(',')).digest().readUInt32BE(0);
  // A batch holding the poison fails, naming nothing: lease run halves it to find the poison.
  if (ids.includes('${POISON}')) outcome = 'poison';
  else if (hash % 10 === 0 && ids.every((id) => !fs.existsSync(dir + '/failed/' + id))) {
    outcome = 'fail';
    for (const id of ids) fs.writeFileSync(dir + '/failed/' + id, '');
  }
  log({ event: 'end', run, outcome });
  fs.rmSync(dir + '/running/' + process.pid, { force: true });
  process.exit(outcome === 'ok' ? 0 : 1);
}, 200);
`;

interface Run {
  run: string;
  worker: string;
  pid: number;
  lease: string;
  ids: string[];
  outcome?: 'ok' | 'fail' | 'poison';
}

/** The handler's runs, in the order they started. */
function readRuns(dir: string): Run[] {
  const runs = new Map<string, Run>();
  const path = join(dir, 'runs.log');
  if (!existsSync(path)) return [];
  // The last line may be one a handler is writing now: only whole lines are read.
  for (const line of readFileSync(path, 'utf8').split('\n').slice(0, -1)) {
    const record = JSON.parse(line) as Run & { event: 'start' | 'end' };
    if (record.event === 'start') runs.set(record.run, { ...record });
    else {
      const started = runs.get(record.run);
      if (started) started.outcome = record.outcome;
    }
  }
  return [...runs.values()];
}

/** Messages of runs that ended 0: handled to the end. */
const handledOk = (runs: Run[]): number =>
  new Set(runs.filter((run) => run.outcome === 'ok').flatMap((run) => run.ids)).size;

type Cause = 'failures' | 'worker killed' | 'command stopped (lease lost)' | 'handled, came back (ack or lease lost)';

/**
 * Each message's runs after its first, by cause: what became of the run before. A failed run
 * (or one holding the poison) is retried; a run of the killed worker never ended or was never
 * acked; a run of a live worker that never ended was stopped (its lease lost); a run that ended
 * 0 yet came back lost its ack or its lease.
 */
function repeats(runs: Run[], killed: string): { messages: number; byCause: Record<Cause, number>; most: number } {
  const byMessage = new Map<string, Run[]>();
  for (const run of runs) {
    for (const id of run.ids) {
      if (id === POISON) continue;
      const list = byMessage.get(id) ?? [];
      list.push(run);
      byMessage.set(id, list);
    }
  }
  const byCause: Record<Cause, number> = {
    failures: 0,
    'worker killed': 0,
    'command stopped (lease lost)': 0,
    'handled, came back (ack or lease lost)': 0,
  };
  let messages = 0;
  let most = 0;
  for (const list of byMessage.values()) {
    most = Math.max(most, list.length);
    if (list.length < 2) continue;
    messages++;
    for (const previous of list.slice(0, -1)) {
      if (previous.outcome === 'fail' || previous.outcome === 'poison') byCause.failures++;
      else if (previous.worker === killed) byCause['worker killed']++;
      else if (previous.outcome === undefined) byCause['command stopped (lease lost)']++;
      else byCause['handled, came back (ack or lease lost)']++;
    }
  }
  return { messages, byCause, most };
}

it('three lease run --follow workers, one killed and replaced, the broker away and back: none lost', {
  timeout: 200_000,
}, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'queenctl-fleet-'));
  mkdirSync(join(dir, 'running'));
  mkdirSync(join(dir, 'failed'));
  const handler = join(dir, 'handler.cjs');
  writeFileSync(handler, HANDLER);
  const sim = await startSimulator({ logLimit: 0 });
  const front = await startTcpFront({ host: '127.0.0.1', port: sim.port });
  const workers = new Map<string, RunningProcess>();
  try {
    // leaseTime 5 s: a lease taken by a pop whose answer the outage cut comes back within the
    // test; retryLimit 1: the poison's second `failed` ack sends it to the dead-letter queue.
    sim.createQueue({ name: QUEUE, partitions: PARTITIONS, leaseTime: 5, retryLimit: 1 });
    const perPartition = Math.ceil(MESSAGES / PARTITIONS);
    let pushed = 0;
    for (let p = 1; p <= PARTITIONS; p++) {
      const count = Math.min(perPartition, MESSAGES - pushed);
      const items = Array.from({ length: count }, (_, i) => ({
        transactionId: p === 7 && i === 80 ? POISON : `m${p}-${i}`,
        data: { p, i },
      }));
      sim.pushItems(QUEUE, items, `p${p}`);
      pushed += count;
    }
    assert.equal(pushed, MESSAGES);

    const start = (name: string, exit: ExpectedExit): RunningProcess => {
      const worker = startCli(
        [
          'lease',
          'run',
          QUEUE,
          '--server',
          front.url,
          '--follow',
          '--wait',
          '1s',
          '--parallel',
          String(PARALLEL),
          '--batch',
          String(BATCH),
          '--retry-delay',
          '50ms',
          '--give-up-after',
          '2',
          '--on-failure',
          'failed',
          '--seconds',
          '10',
          '--every',
          '1s',
          '--',
          process.execPath,
          handler,
          dir,
          name,
        ],
        { exit, timeoutMs: WORKER_KILL_AFTER_MS, closeGraceMs: 500 },
      );
      workers.set(name, worker);
      return worker;
    };
    const w1 = start('w1', 'SIGKILL');
    start('w2', WORKER_EXIT);
    start('w3', WORKER_EXIT);

    // SIGKILL w1 in the middle, while its commands run; its guardian stops them.
    const runningOf = (worker: string): number[] =>
      readdirSync(join(dir, 'running'))
        .filter((pid) => readFileSync(join(dir, 'running', pid), 'utf8') === worker)
        .map(Number)
        .filter(isRunning);
    const commands = await until(() => {
      if (handledOk(readRuns(dir)) < MESSAGES / 5) return undefined;
      const pids = runningOf('w1');
      return pids.length > 0 ? pids : undefined;
    }, 'a fifth of the messages handled, and a command of w1 running');
    const atKill = handledOk(readRuns(dir));
    w1.kill('SIGKILL');
    await w1.exited;
    start('w4', WORKER_EXIT);
    await until(() => commands.every((pid) => !isRunning(pid)), 'the guardian to stop the commands of w1');

    // The broker away for 3 s (connections refused, the open ones cut), then back.
    await until(() => handledOk(readRuns(dir)) >= MESSAGES / 2, 'half of the messages handled');
    const atOutage = handledOk(readRuns(dir));
    await front.refuse(3_000);

    // The end: nothing pending (the killed worker's leases expire within --seconds).
    const states = await until(
      () => {
        const view = sim.messageStates(QUEUE);
        return view?.messages.every((m) => m.state !== 'pending') ? view.messages : undefined;
      },
      'nothing pending',
      60_000,
    ).catch((error: Error) => {
      // What was left, and what the workers said last.
      const pending = sim.messageStates(QUEUE)?.messages.filter((m) => m.state === 'pending') ?? [];
      const byPartition = new Map<string, number>();
      for (const m of pending) byPartition.set(m.partition, (byPartition.get(m.partition) ?? 0) + 1);
      const said = [...workers].map(([name, w]) => `--- ${name}\n${w.stderr().split('\n').slice(-15).join('\n')}`);
      throw new Error(`${error.message}: pending ${JSON.stringify([...byPartition])}\n${said.join('\n')}`);
    });
    for (const name of ['w2', 'w3', 'w4']) workers.get(name)?.kill('SIGTERM');
    const ackUnknown: string[] = [];
    for (const name of ['w2', 'w3', 'w4']) {
      const worker = workers.get(name) as RunningProcess;
      // The lines that say why, whatever the ending (the error quotes only the start of stderr).
      const why = (): string =>
        worker
          .stderr()
          .split('\n')
          .filter((line) => !/renewed \(|no longer renewed|the lease renewed|took lease|exited with status/.test(line))
          .slice(-20)
          .join('\n');
      const result = await worker.exited.catch((error: Error) => {
        throw new Error(`${name}: ${error.message.split('\n')[0]}\n${why()}`);
      });
      // 2 only for an ack the outage cut in flight: its outcome unknown, it was never resent, and
      // the contract has a worker say so in its status (docs/cli-contract.md, lease run).
      const unknown = result.stderr.match(/may or may not have landed/g)?.length ?? 0;
      if (unknown > 0) ackUnknown.push(`${name}: ${unknown}`);
      assert.equal(result.code, unknown > 0 ? 2 : 0, `${name} on SIGTERM\n${why()}`);
    }

    // Each worker met the outage (a request refused, or a pop cut) and rode it out.
    for (const name of ['w2', 'w3', 'w4']) {
      assert.match(workers.get(name)?.stderr() ?? '', /connection refused|the pop failed/, `${name} met the outage`);
    }

    const byState = (check: (m: MessageState) => boolean): MessageState[] => states.filter(check);
    assert.equal(states.length, MESSAGES);
    const notCompleted = byState((m) => m.transactionId !== POISON && m.settledBy !== 'completed');
    assert.deepEqual(
      notCompleted.map((m) => `${m.transactionId}: ${m.state}, ${m.settledBy}`),
      [],
      'every message but the poison consumed by its own completed ack',
    );
    assert.deepEqual(
      byState((m) => m.state === 'dead-lettered').map((m) => m.transactionId),
      [POISON],
      'the poison alone dead-lettered',
    );
    assert.equal(byState((m) => m.state === 'pending').length, 0, 'nothing pending');
    assert.equal(byState((m) => m.settledBy === 'cursor').length, 0, "nothing settled by 'cursor'");
    assert.deepEqual(
      sim.queue(QUEUE)?.deadLetters.map((d) => d.transactionId),
      [POISON],
    );
    for (const pid of commands) assert.equal(isRunning(pid), false, `command ${pid} of the killed worker is gone`);

    // What was handled more than once, and why.
    const runs = readRuns(dir);
    const again = repeats(runs, 'w1');
    const failedRuns = runs.filter((run) => run.outcome === 'fail' || run.outcome === 'poison').length;
    const redelivered = byState((m) => m.transactionId !== POISON && m.deliveries.length > 1).length;
    const report =
      `${runs.length} runs (${failedRuns} failed); w1 killed at ${atKill} messages handled, with ` +
      `${commands.length} command(s) running; outage at ${atOutage}; ${again.messages} messages handled more ` +
      `than once (at most ${again.most} times), repeats by cause: ${JSON.stringify(again.byCause)}; ` +
      `${redelivered} messages delivered more than once; acks of unknown outcome: ${ackUnknown.join(', ') || 'none'}`;
    t.diagnostic(report);
    console.log(`fleet: ${report}`);
    // Each cause bounded by what it can bring back: a failed run its batch, the killed worker
    // its batches in hand (a command running per slot and one whose ack it had not sent), the
    // outage the batches in hand of the three workers left (two each).
    assert.ok(again.byCause.failures <= failedRuns * BATCH, `repeats after failures: ${again.byCause.failures}`);
    assert.ok(
      again.byCause['worker killed'] <= 2 * PARALLEL * BATCH,
      `repeats of w1: ${again.byCause['worker killed']}`,
    );
    const lost =
      again.byCause['command stopped (lease lost)'] + again.byCause['handled, came back (ack or lease lost)'];
    assert.ok(lost <= 3 * PARALLEL * BATCH, `repeats after a lost lease or ack: ${lost}`);
    assert.ok(again.messages <= MESSAGES / 4, `${again.messages} messages handled more than once`);
  } finally {
    for (const worker of workers.values()) worker.kill('SIGKILL');
    await Promise.allSettled([...workers.values()].map((worker) => worker.exited));
    await front.close();
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
