/**
 * `queenctl lease run` end to end: in-process against the simulator's pop, extend and ack routes,
 * with real commands (small Node.js scripts) under the real supervisor
 * (docs/cli-contract.md#lease-run). One test per rule; counts of acks are read from the
 * simulator's request log and queue state, never inferred from timings.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, it } from 'node:test';
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
});
