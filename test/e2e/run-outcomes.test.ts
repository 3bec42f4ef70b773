/**
 * `queenctl lease run` loses no message (docs/cli-contract.md#lease-run): against the simulator,
 * which keeps the real broker's one cursor per partition (test/fixtures/real-broker-mixed-acks.txt)
 * and tells where every message stands: consumed by its own `completed`, dead-lettered, pending,
 * or consumed by the cursor without being completed (`settledBy: 'cursor'`: lost). Each test reads
 * those states, never timings.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { MessageState } from '../../tools/simulator/queues.js';
import { runInProcess } from '../support/in-process.js';
import { events, NODE, RunScene, until } from '../support/lease-run.js';

const scene = new RunScene();

function states(): MessageState[] {
  return scene.sim.messageStates(scene.queue)?.messages ?? [];
}

/** Nothing consumed but by its own completed ack or its own dead-lettering; nothing left pending. */
function assertNothingLost(): void {
  const lost = states().filter((m) => m.settledBy === 'cursor');
  assert.deepEqual(lost, [], 'consumed by the cursor without being completed');
}

/**
 * A handler that fails (exit 1) a batch holding a message whose line matches `pattern` (grep -E,
 * on queenctl's compact JSON), the first `times` times; it reads all of its input first, as a
 * handler that succeeds must. sh, not node: ~0.09 CPU-s less a batch.
 */
function failing(name: string, pattern: string, times = Number.POSITIVE_INFINITY): string {
  const seen = JSON.stringify(scene.file(`${name}.seen`));
  const limit = Number.isFinite(times) ? times : 1_000_000;
  return scene.shell(
    name,
    `matches=$(grep -cE '${pattern}')
count=0; [ -f ${seen} ] && count=$(wc -c < ${seen})
if [ "$count" -lt ${limit} ] && [ "$matches" -gt 0 ]; then printf x >> ${seen}; exit 1; fi
exit 0
`,
  );
}

describe('lease run loses no message', () => {
  it("per-message outcomes in m1's order (2 retry among completed): nothing lost, 2 comes back", async () => {
    scene.sim.createQueue({ name: scene.queue, partitions: ['p1'], leaseTime: 60 });
    scene.sim.push(
      scene.queue,
      [1, 2, 3, 4].map((n) => ({ n })),
      'p1',
    );
    const once = scene.file('once');
    // Reports retry for n=2 the first time, completed for everything else.
    const handler = scene.reporter(
      'report',
      `case $line in *'"data":{"n":2}'*)
    [ -e ${JSON.stringify(once)} ] || { status=retry; : > ${JSON.stringify(once)}; } ;;
  esac`,
    );
    const result = await scene.run(
      ['--batch', '10', '--until-empty', '--retry-delay', '1ms', '-o', 'ndjson'],
      ['sh', handler],
    );
    assert.equal(result.code, 5, result.stderr);
    const first = events(result.stdout).find((e) => e.event === 'acked');
    assert.deepEqual([first?.exitStatus, first?.completed, first?.retry, first?.pending], [0, 1, 1, 2]);
    const acks = scene.ackElements();
    assert.deepEqual(
      acks.slice(0, 2).map((a) => a.status),
      ['completed', 'retry'],
      'nothing after the retry',
    );
    assertNothingLost();
    assert.ok(states().every((m) => m.state === 'consumed' && m.settledBy === 'completed'));
    // n=3 and n=4 were handed out twice: the only repeats.
    assert.deepEqual(
      states().map((m) => m.deliveries.length),
      [1, 2, 2, 2],
    );
  });

  it('a poison among six beside a healthy partition: all else completed, the poison alone dead-lettered', async () => {
    scene.sim.createQueue({ name: scene.queue, partitions: ['p1', 'p2'], leaseTime: 60, retryLimit: 1 });
    scene.sim.push(
      scene.queue,
      [1, 2, 3, 4, 5, 6].map((n) => ({ n, poison: n === 4 })),
      'p1',
    );
    scene.sim.push(
      scene.queue,
      [7, 8, 9, 10, 11, 12].map((n) => ({ n, poison: false })),
      'p2',
    );
    const handler = failing('poison', '"poison":true');
    const result = await scene.run(
      [
        '--batch',
        '10',
        '--until-empty',
        '--retry-delay',
        '1ms',
        '--give-up-after',
        '2',
        '--on-failure',
        'failed',
        '-o',
        'ndjson',
      ],
      ['sh', handler],
      { timeoutMs: 90_000 },
    );
    assert.equal(result.code, 5, result.stderr);
    assertNothingLost();
    const all = states();
    const poison = all.filter((m) => m.state === 'dead-lettered');
    assert.equal(poison.length, 1);
    const [letter] = scene.sim.queue(scene.queue)?.deadLetters ?? [];
    assert.deepEqual(letter?.data, { n: 4, poison: true });
    const rest = all.filter((m) => m.state !== 'dead-lettered');
    assert.equal(rest.length, 11);
    assert.ok(
      rest.every((m) => m.settledBy === 'completed'),
      JSON.stringify(rest),
    );
    // Only the poison was ever acked failed: the broker counts failed per partition.
    assert.ok(all.every((m) => m.acks.failed === 0 || m === poison[0]));
    // Healthy p2 was handed out once; the repeats are p1's, while the poison was sought.
    assert.ok(all.filter((m) => m.partition === 'p2').every((m) => m.deliveries.length === 1));
    const repeats = all.reduce((sum, m) => sum + m.deliveries.length - 1, 0);
    assert.ok(repeats > 0 && repeats < 20, `${repeats} repeated deliveries`);
  });

  it('reads 100 bytes of a 2 MB batch and exits 0: what was never written to the command comes back', async () => {
    scene.sim.createQueue({ name: scene.queue, partitions: ['p1'], leaseTime: 60 });
    const pad = 'y'.repeat(10_000);
    scene.sim.push(
      scene.queue,
      Array.from({ length: 200 }, (_, i) => ({ n: i + 1, pad })),
      'p1',
    );
    // One read of 100 bytes, then exit 0 (sh and dd: ~0.09 CPU-s less than node).
    const handler = scene.shell('head', 'dd bs=100 count=1 of=/dev/null 2>/dev/null\nexit 0\n');
    const result = await scene.run(['--batch', '200', '--retry-delay', '1ms', '-o', 'ndjson'], ['sh', handler]);
    assert.equal(result.code, 5, result.stderr);
    const acked = events(result.stdout).find((e) => e.event === 'acked');
    const completed = acked?.completed as number;
    assert.ok(completed < 200, `${completed} completed`);
    assert.equal(acked?.retry, 1);
    assert.equal(acked?.pending, 200 - completed - 1);
    assertNothingLost();
    const pending = states().filter((m) => m.state === 'pending');
    assert.equal(pending.length, 200 - completed);
  });

  it('a command that cannot be found: its batch acked retry at once, free for the next pop; exit 127', async () => {
    scene.queueWith(3);
    const result = await scene.run(['--batch', '5', '--retry-delay', '1m'], [join(scene.dir, 'no-such-command')], {
      timeoutMs: 30_000,
    });
    assert.equal(result.code, 127, result.stderr);
    assert.deepEqual(
      scene.ackElements().map((a) => a.status),
      ['retry'],
    );
    // The renewal right after the pop and the one the command waits for; none held it for a delay.
    assert.equal(scene.requests('/extend'), 2);
    const next = await runInProcess(['lease', 'acquire', scene.queue, '--server', scene.sim.url, '--batch', '5']);
    assert.equal(next.code, 0, next.stderr);
    assertNothingLost();
  });

  it('a retry waits --retry-delay with the lease held: no consumer is given the message meanwhile', async () => {
    scene.queueWith(1);
    const handler = failing('spaced', '.', 1);
    const running = scene.start(['--until-empty', '--retry-delay', '1500ms', '--seconds', '30'], ['sh', handler]);
    await until(() => existsSync(scene.file('spaced.seen')), 'the first, failing run of the command');
    // The retry cannot be acked before 1.5 s after the command failed, however slow the machine:
    // for the first second of it, another consumer must find nothing to take. It tries every
    // 100 ms, not back to back: a lease given back early stays given back, and is found at the
    // next try as surely as at once (back to back, the tries cost ~1 CPU-s of npm test).
    const failedAt = Date.now();
    let tries = 0;
    while (Date.now() < failedAt + 1000) {
      const other = await runInProcess(['lease', 'acquire', scene.queue, '--server', scene.sim.url]);
      assert.equal(other.code, 4, other.stderr);
      tries++;
      await delay(100);
    }
    assert.ok(tries > 0, 'another consumer tried during the wait');
    assert.ok(!scene.ackElements().some((a) => a.status === 'retry'));
    const result = await running.exited;
    assert.equal(result.code, 5, result.stderr);
    assertNothingLost();
    const [message] = states();
    assert.equal(message?.settledBy, 'completed');
    const [first, second] = message?.deliveries ?? [];
    assert.ok(first && second, 'handed out twice, both times to this run');
    assert.ok(second.at - first.at >= 1500, `${second.at - first.at} ms between the two deliveries`);
  });

  it('a signal cuts a retry wait short: the message is acked retry at once, exit 143', async () => {
    scene.queueWith(1);
    const handler = failing('cut', '.');
    const running = scene.start(['--retry-delay', '1m'], ['sh', handler]);
    await until(() => existsSync(scene.file('cut.seen')), 'the failing command');
    await until(() => scene.requests('/extend') >= 3, 'the lease held for the retry delay');
    running.kill('SIGTERM');
    const result = await running.exited;
    assert.equal(result.code, 143, result.stderr);
    assert.deepEqual(
      scene.ackElements().map((a) => a.status),
      ['retry'],
    );
    assert.equal(states()[0]?.state, 'pending');
  });

  it('failed at the retry limit: what the dead-lettering left under the lease is settled in this run', async () => {
    scene.sim.createQueue({ name: scene.queue, partitions: ['p1'], leaseTime: 60, retryLimit: 1 });
    scene.sim.push(
      scene.queue,
      [1, 2, 3, 4].map((n) => ({ n })),
      'p1',
    );
    // Says failed for n=2, completed for the others, every time.
    const handler = scene.reporter('m6', `case $line in *'"data":{"n":2}'*) status=failed ;; esac; error=bad`);
    const result = await scene.run(
      ['--batch', '10', '--until-empty', '--retry-delay', '1ms', '-o', 'ndjson'],
      ['sh', handler],
    );
    assert.equal(result.code, 5, result.stderr);
    assertNothingLost();
    const all = states();
    assert.deepEqual(
      all.map((m) => m.state),
      ['consumed', 'dead-lettered', 'consumed', 'consumed'],
    );
    assert.ok([all[0], all[2], all[3]].every((m) => m?.settledBy === 'completed'));
    // Twice: with the first failed (below the limit: released), then with the dead-lettering,
    // after which they were acked under the same lease, never left to expire.
    assert.deepEqual(
      all.map((m) => m.deliveries.length),
      [1, 2, 2, 2],
    );
    const acked = events(result.stdout).filter((e) => e.event === 'acked');
    assert.deepEqual(
      acked.map((e) => [e.completed, e.failed, e.dlq, e.pending]),
      [
        [1, 1, 0, 2],
        [2, 0, 1, 0],
      ],
    );
  });

  it('ids, partition names and data depth as a producer chose them: completed, none a variable', async () => {
    const names = ['eu 2 *', "it's $HOME"];
    scene.sim.createQueue({ name: scene.queue, partitions: names, leaseTime: 60 });
    const deep = JSON.parse(`${'['.repeat(4500)}"bottom"${']'.repeat(4500)}`);
    scene.sim.pushItems(scene.queue, [{ transactionId: 'bell\u0007\u001b[31mred', data: { n: 1 } }], names[0]);
    scene.sim.pushItems(scene.queue, [{ transactionId: 'deep', data: deep }], names[1]);
    // What the command read, and QUEEN_PARTITIONS if it was set; sh, not node (~0.09 CPU-s less).
    const input = scene.file('input');
    const partitions = scene.file('partitions');
    const handler = scene.shell(
      'hostile',
      `cat > ${JSON.stringify(input)}
if [ -n "\${QUEEN_PARTITIONS+set}" ]; then printf %s "$QUEEN_PARTITIONS" > ${JSON.stringify(partitions)}; fi
exit 0
`,
    );
    const result = await scene.run(['--batch', '10', '--partitions', '2'], ['sh', handler], {
      env: { QUEEN_PARTITIONS: 'forged' },
    });
    assert.equal(result.code, 0, result.stderr);
    assert.ok(existsSync(input), 'the command ran');
    assert.ok(!existsSync(partitions), 'QUEEN_PARTITIONS never set from such names, never inherited');
    const depth = (text: string): number => {
      let d = 0;
      let max = 0;
      for (const c of text) {
        if (c === '[') max = Math.max(max, ++d);
        else if (c === ']') d--;
      }
      return max;
    };
    const lines = readFileSync(input, 'utf8').trimEnd().split('\n');
    assert.equal(lines.length, 2);
    assert.equal(Math.max(...lines.map(depth)), 4500, 'the data unchanged, one line per message');
    assertNothingLost();
    assert.ok(states().every((m) => m.settledBy === 'completed'));
    assert.ok(
      scene.ackElements().some((a) => a.transactionId === 'bell\u0007\u001b[31mred'),
      'acked as given',
    );
    assert.doesNotMatch(result.stderr, /\u0007|\u001b/, 'shown escaped');
  });

  it('a temporary directory that cannot be written: the batch goes back at once, exit 126', async () => {
    scene.queueWith(2);
    const result = await scene.run(['--batch', '5'], [NODE, '-e', '0'], {
      env: { TMPDIR: join(scene.dir, 'no-such-directory') },
    });
    assert.equal(result.code, 126, result.stderr);
    assert.match(result.stderr, /could not write the batch file in .*no-such-directory \(ENOENT\).*TMPDIR/s);
    assert.deepEqual(
      scene.ackElements().map((a) => a.status),
      ['retry'],
    );
    assert.equal(states().filter((m) => m.state === 'pending').length, 2);
  });

  it('--until-empty says the queue is not drained when other consumers hold partitions', async () => {
    scene.sim.createQueue({ name: scene.queue, partitions: ['p1', 'p2'], leaseTime: 60 });
    scene.sim.push(scene.queue, [{ n: 1 }], 'p1');
    scene.sim.push(scene.queue, [{ n: 2 }], 'p2');
    const other = await runInProcess([
      'lease',
      'acquire',
      scene.queue,
      '--server',
      scene.sim.url,
      '--partition',
      'p2',
      '-o',
      'name',
    ]);
    assert.equal(other.code, 0, other.stderr);
    const result = await scene.run(['--until-empty'], ['sh', '-c', 'cat > /dev/null']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /the queue is not drained: 1 partition \(p2\) is held by other consumers/);
  });

  it('a command a signal killed: the acked event names the signal, not 128 + its number', async () => {
    scene.queueWith(1);
    const result = await scene.run(
      ['--retry-delay', '1ms', '-o', 'ndjson'],
      ['sh', '-c', 'cat > /dev/null; kill -KILL $$'],
    );
    assert.equal(result.code, 5, result.stderr);
    const acked = events(result.stdout).find((e) => e.event === 'acked');
    assert.equal(acked?.signal, 'SIGKILL');
    assert.equal('exitStatus' in (acked ?? {}), false);
  });

  /**
   * Three messages; the command reports retry for the second: the first's completion is acked at
   * once, then the retry waits 30 s with the lease held. Resolves once the run is in that wait.
   */
  async function waitingRetry() {
    scene.queueWith(3);
    const handler = scene.reporter('second', '[ "$i" = 2 ] && status=retry');
    const args = ['--batch', '5', '--retry-delay', '30s', '--every', '200ms', '--seconds', '30', '-o', 'ndjson'];
    const run = scene.start(args, ['sh', handler]);
    await until(() => scene.ackElements().length === 1, 'the completion acked before the wait');
    return run;
  }

  it('a lease lost while a retry waits: what was acked and what comes back are counted; exit 4', async () => {
    const run = await waitingRetry();
    const leaseId = (events(run.stdout()).find((e) => e.event === 'acquired')?.leaseId ?? '') as string;
    scene.sim.expire(leaseId);
    const result = await run.exited;
    assert.equal(result.code, 4, result.stderr);
    assert.match(result.stderr, /was lost while a retry waited its delay: nothing more was acked, and 2 messages/);
    const acked = events(result.stdout).find((e) => e.event === 'acked');
    assert.deepEqual([acked?.completed, acked?.retry, acked?.pending], [1, 0, 2]);
    assertNothingLost();
  });

  it('a token refused while a retry waits: exit 3, the refusal said, the rest counted as coming back', async () => {
    const run = await waitingRetry();
    scene.sim.inject({ kind: 'status', status: 401, route: 'extend' });
    const result = await run.exited;
    scene.sim.clearFaults();
    assert.equal(result.code, 3, result.stderr);
    assert.match(result.stderr, /401/);
    const acked = events(result.stdout).find((e) => e.event === 'acked');
    assert.deepEqual([acked?.completed, acked?.pending], [1, 2]);
  });
});
