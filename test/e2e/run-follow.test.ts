/**
 * `queenctl lease run` as a worker (docs/cli-contract.md#lease-run): `--follow` waits on an empty
 * queue, `--parallel` runs up to n commands and never more, `--drain` lets a running command end
 * by itself before the signal is forwarded. In-process against the simulator, with real commands;
 * every verdict is read from files the commands write and the simulator's state, never timings.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { events, RunScene, until } from '../support/lease-run.js';

const scene = new RunScene();

const worker = (args: string[], command: string[]) => scene.start(args, command, 90_000);

/** A handler that logs its start and end in `log`, and waits for the file `go` before it ends. */
function gated(name: string, options: { exit?: number } = {}) {
  const log = scene.file(`${name}.log`);
  const go = scene.file(`${name}.go`);
  const term = scene.file(`${name}.term`);
  writeFileSync(log, '');
  // sh, not node (~0.09 CPU-s less a start). SIGTERM reaches the command's whole group, so the
  // sleep it waits in ends at once and the trap runs.
  const path = scene.shell(
    name,
    `trap 'printf x >> ${JSON.stringify(term)}; exit 143' TERM
cat > /dev/null
echo start >> ${JSON.stringify(log)}
while [ ! -e ${JSON.stringify(go)} ]; do sleep 0.02; done
echo end >> ${JSON.stringify(log)}
exit ${options.exit ?? 0}
`,
  );
  const lines = (): string[] => readFileSync(log, 'utf8').split('\n').filter(Boolean);
  return { path, go, term, lines };
}

/** The most commands that ran at once, from their start and end lines in order. */
function mostAtOnce(lines: string[]): number {
  let now = 0;
  let most = 0;
  for (const line of lines) {
    now += line === 'start' ? 1 : -1;
    most = Math.max(most, now);
  }
  return most;
}

describe('lease run as a worker', () => {
  it('--follow waits on an empty queue, takes what is pushed later, and exits 0 on SIGTERM', async () => {
    scene.sim.createQueue({ name: scene.queue, partitions: ['p1'], leaseTime: 60 });
    const seen = scene.file('seen');
    const handler = scene.shell('count', `cat >> ${JSON.stringify(seen)}\n`);
    const running = worker(['--follow', '--wait', '2s', '--batch', '10', '-o', 'ndjson'], ['sh', handler]);
    let ended = false;
    void running.exited.then(() => (ended = true));
    try {
      await until(() => scene.requests('/api/v1/pop/') >= 2, 'two pops of the empty queue');
      assert.equal(ended, false, 'an empty queue does not end a worker');
      scene.sim.push(scene.queue, [{ n: 1 }, { n: 2 }], 'p1');
      await until(() => scene.ackElements().length === 2, 'the batch pushed later, acked');
      scene.sim.push(scene.queue, [{ n: 3 }], 'p1');
      await until(() => scene.ackElements().length === 3, 'the next one');
    } finally {
      running.kill('SIGTERM');
    }
    const result = await running.exited;
    assert.equal(result.code, 0, result.stderr);
    assert.equal(readFileSync(seen, 'utf8').trimEnd().split('\n').length, 3);
    assert.ok(scene.ackElements().every((a) => a.status === 'completed'));
    assert.equal(scene.pending(), 0);
    assert.ok(events(result.stdout).some((e) => e.event === 'empty'));
  });

  it('--parallel 4 runs four commands at once, and never five', async () => {
    const partitions = Array.from({ length: 8 }, (_, i) => `p${i + 1}`);
    scene.sim.createQueue({ name: scene.queue, partitions, leaseTime: 60 });
    for (const partition of partitions) scene.sim.push(scene.queue, [{ partition }], partition);
    const gate = gated('parallel');
    const running = worker(['--parallel', '4', '--batches', '8', '--batch', '5'], ['sh', gate.path]);
    try {
      await until(() => gate.lines().length === 4, 'four commands started');
      // A fifth batch is taken only once a slot is free: a run without the limit would have
      // popped it before the fourth command could start.
      assert.equal(scene.requests('/api/v1/pop/'), 4, 'no fifth pop while four commands run');
    } finally {
      writeFileSync(gate.go, '');
    }
    const result = await running.exited;
    assert.equal(result.code, 0, result.stderr);
    assert.equal(gate.lines().filter((line) => line === 'start').length, 8);
    assert.equal(mostAtOnce(gate.lines()), 4);
    assert.equal(scene.pending(), 0);
  });

  it('--drain lets a running command finish by itself, and acks it completed', async () => {
    scene.queueWith(1);
    const gate = gated('drain');
    const running = worker(['--follow', '--wait', '1s', '--drain', '60s'], ['sh', gate.path]);
    await until(() => gate.lines().length === 1, 'the command to start');
    running.kill('SIGTERM');
    await running.waitForStderr(/SIGTERM: no further batch; 1 command running get --drain 1m00s/);
    writeFileSync(gate.go, '');
    const result = await running.exited;
    assert.equal(result.code, 0, result.stderr);
    assert.ok(!existsSync(gate.term), 'the command never got SIGTERM');
    assert.deepEqual(
      scene.ackElements().map((a) => a.status),
      ['completed'],
    );
    assert.equal(scene.requests('/api/v1/pop/'), 1, 'no batch taken after the signal');
  });

  it('--drain over: the signal goes to the command, and its batch is acked retry; exit 0', async () => {
    scene.queueWith(1);
    const gate = gated('over');
    const running = worker(['--follow', '--wait', '1s', '--drain', '300ms'], ['sh', gate.path]);
    await until(() => gate.lines().length === 1, 'the command to start');
    running.kill('SIGTERM');
    const result = await running.exited;
    assert.equal(result.code, 0, result.stderr);
    assert.ok(existsSync(gate.term), 'SIGTERM reached the command once the drain was over');
    assert.deepEqual(
      scene.ackElements().map((a) => a.status),
      ['retry'],
    );
    assert.equal(scene.pending(), 1);
  });

  it('side by side, lines of the commands are never cut into each other', async () => {
    const partitions = ['p1', 'p2', 'p3'];
    scene.sim.createQueue({ name: scene.queue, partitions, leaseTime: 60 });
    for (const partition of partitions) scene.sim.push(scene.queue, [{ partition }], partition);
    const out = scene.file('lines');
    const ready = scene.file('ready');
    // Each command writes long lines in small pieces: whole lines only if queenctl joins them. It
    // starts writing once all three have started (a file each), so that their pieces are written
    // at the same time. sh, not node (~0.07 CPU-s less a start): one write per printf.
    const handler = scene.shell(
      'chatty',
      `cat > /dev/null
tag=$QUEEN_PARTITIONS ready=${JSON.stringify(ready)}
: > "$ready.$tag"
while [ ! -e "$ready.p1" ] || [ ! -e "$ready.p2" ] || [ ! -e "$ready.p3" ]; do
  sleep 0.01
done
piece=''; i=0; while [ $i -lt 30 ]; do piece=$piece$tag; i=$((i + 1)); done
n=0
while [ $n -lt 20 ]; do
  i=0; while [ $i -lt 10 ]; do printf %s "$piece" >&2; i=$((i + 1)); done
  printf '\\n' >&2
  n=$((n + 1))
done
printf done > ${JSON.stringify(out)}."$tag"
`,
    );
    const captured: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    // The commands' stderr passes through this process's own (the launcher writes it there).
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      captured.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString());
      return write(chunk, ...rest);
    }) as typeof process.stderr.write;
    let result: Awaited<ReturnType<typeof worker>['exited']>;
    try {
      result = await worker(['--parallel', '3', '--batches', '3', '-q'], ['sh', handler]).exited;
    } finally {
      process.stderr.write = write;
    }
    assert.equal(result.code, 0, result.stderr);
    assert.equal(readdirSync(scene.dir).filter((name) => name.startsWith(`lines-${scene.count}.`)).length, 3);
    const lines = captured
      .join('')
      .split('\n')
      .filter((line) => /^(p1|p2|p3)/.test(line));
    assert.equal(lines.length, 60);
    for (const line of lines) assert.match(line, /^(p1){300}$|^(p2){300}$|^(p3){300}$/);
  });

  it('--metrics-address: batches, messages by status, pops and readiness of a worker', async () => {
    scene.queueWith(2);
    const fails = scene.file('metrics.failed');
    // Fails its first batch, then succeeds.
    const handler = scene.shell(
      'metrics',
      `cat > /dev/null
if [ ! -e ${JSON.stringify(fails)} ]; then printf x > ${JSON.stringify(fails)}; exit 1; fi
`,
    );
    const running = worker(
      ['--follow', '--wait', '1s', '--batch', '1', '--retry-delay', '1ms', '--metrics-address', '127.0.0.1:0'],
      ['sh', handler],
    );
    try {
      const [, url] = await running.waitForStderr(/serving metrics on (http:\/\/\S+)\/metrics/);
      await until(() => scene.pending() === 0 && scene.ackElements().length === 3, 'both messages completed');
      const ready = await fetch(`${url}/readyz`);
      assert.equal(ready.status, 200, await ready.text());
      const text = await (await fetch(`${url}/metrics`)).text();
      const value = (series: string): number => Number(new RegExp(`^${series} (\\S+)$`, 'm').exec(text)?.[1]);
      assert.equal(value('queenctl_run_batches_total'), 3);
      assert.equal(value('queenctl_run_messages_total\\{status="completed"\\}'), 2);
      assert.equal(value('queenctl_run_messages_total\\{status="retry"\\}'), 1);
      assert.equal(value('queenctl_run_pops_total\\{result="batch"\\}'), 3);
      assert.equal(value('queenctl_run_in_flight'), 0);
      assert.equal(value('queenctl_run_parallel'), 1);
      assert.ok(value('queenctl_run_command_seconds_count') >= 3);
    } finally {
      running.kill('SIGTERM');
    }
    const result = await running.exited;
    assert.equal(result.code, 0, result.stderr);
  });
});
