/**
 * `queenctl lease run` under load, end to end: 1,000 messages with failures, a 10 MB message and a
 * command that reads nothing, a broker outage under the command
 * (docs/cli-contract.md#lease-run). A file of its own: a process of its own in `npm test`.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { startTcpFront } from '../../tools/simulator/index.js';
import { startInProcess } from '../support/in-process.js';
import { events, NODE, RunScene, until } from '../support/lease-run.js';

const scene = new RunScene();

describe('lease run under load', () => {
  it('--until-empty over 1,000 messages, one in ten failing once: each acked completed exactly once', async () => {
    scene.queueWith(1000, { retryLimit: 100 });
    const seen = scene.file(`seen`);
    writeFileSync(seen, '');
    // Fails a batch holding a message n % 10 == 0 delivered for the first time (remembered in a
    // file). sh, not node: the run starts it for every batch and every half of a failed one.
    // The lines are queenctl's compact JSON, keys sorted: `"data":{"n":40}` before the id. One sed,
    // not two greps: ~45 runs of the command, a process less each.
    const handler = scene.shell(
      'tenth',
      `tenth=$(sed -nE 's/.*"data":\\{"n":[0-9]*0\\}.*("transactionId":"[^"]*").*/\\1/p')
fresh=$(printf '%s\\n' "$tenth" | grep -vxF -f ${JSON.stringify(seen)})
[ -z "$fresh" ] && exit 0
printf '%s\\n' "$fresh" >> ${JSON.stringify(seen)}
exit 1
`,
    );
    const result = await scene.run(
      ['--batch', '200', '--until-empty', '--retry-delay', '1ms', '-o', 'ndjson'],
      ['sh', handler],
      { timeoutMs: 120_000 },
    );
    // Each failed batch was halved under its lease and every half succeeded: every message taken
    // was acked completed (0), whatever the command's own first status (1).
    assert.equal(result.code, 0, result.stderr);
    const acks = scene.ackElements();
    const completed = acks.filter((a) => a.status === 'completed').map((a) => a.transactionId);
    assert.equal(completed.length, 1000, 'every message acked completed');
    assert.equal(new Set(completed).size, 1000, 'each exactly once');
    const retried = acks.filter((a) => a.status === 'retry');
    const failedBatches = events(result.stdout).filter((e) => e.event === 'acked' && e.exitStatus === 1);
    assert.ok(failedBatches.length > 0);
    // Nothing was given back: the messages of a failed batch were completed by the halves.
    assert.equal(retried.length, 0);
    assert.ok(
      acks.every((a) => a.leaseId !== '' && a.leaseId !== undefined),
      'never an ack without the lease id',
    );
    assert.equal(scene.pending(), 0, 'none lost, none left');
    assert.equal(events(result.stdout).at(-1)?.event, 'empty');
  });

  it('a broker outage under the command is ridden out; the ack waits for the broker and lands once', async () => {
    scene.queueWith(2);
    const front = await startTcpFront({ host: '127.0.0.1', port: scene.sim.port });
    const handler = scene.waiter('outage', 0);
    try {
      const running = startInProcess(
        [
          'lease',
          'run',
          scene.queue,
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
          'sh',
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
      const acks = scene.ackElements();
      assert.equal(scene.requests('/api/v1/ack/batch'), 1, 'the ack reached the broker once');
      assert.ok(acks.length === 2 && acks.every((a) => a.status === 'completed'));
      assert.equal(scene.pending(), 0);
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
    scene.sim.createQueue({ name: scene.queue, partitions: ['p1'], leaseTime: 60 });
    const big = 'x'.repeat(10 * 1024 * 1024);
    scene.sim.push(scene.queue, [{ big }, { n: 2 }], 'p1');
    const ignores = scene.shell('ignores', 'exit 0\n');
    // It exits 0 before 10 MB could be written to it: it cannot have read the message, which comes back.
    const unread = await scene.run(['--batch', '1', '--retry-delay', '1ms'], ['sh', ignores], { timeoutMs: 60_000 });
    assert.equal(unread.code, 5, unread.stderr);
    assert.deepEqual(
      scene.ackElements().map((a) => a.status),
      ['retry'],
    );
    assert.match(unread.stderr, /before its line on standard input was written|1 acked retry/);
    // --input none: the batch is in the file only, and a command that exits 0 completed it.
    const first = await scene.run(['--batch', '1', '--input', 'none'], ['sh', ignores], { timeoutMs: 60_000 });
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(
      scene.ackElements().map((a) => a.status),
      ['retry', 'completed'],
    );
    scene.sim.push(scene.queue, [{ big }], 'p1');
    const size = scene.file(`size`);
    const reads = scene.script(
      'reads',
      `const fs = require('node:fs');
const lines = fs.readFileSync(0, 'utf8').trimEnd().split('\\n').map((l) => JSON.parse(l));
fs.writeFileSync(${JSON.stringify(size)}, lines.map((m) => String(m.data.big ? m.data.big.length : 0)).join(','));`,
    );
    const second = await scene.run(['--batch', '10'], [NODE, reads], { timeoutMs: 60_000 });
    assert.equal(second.code, 0, second.stderr);
    assert.equal(readFileSync(size, 'utf8'), `0,${big.length}`, 'every byte of every message, in order');
    assert.equal(scene.ackElements().length, 4);
    assert.equal(scene.pending(), 0);
  });
});
