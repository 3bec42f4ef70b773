/**
 * What the lease run tests share (test/e2e/run.test.ts, run-load.test.ts): a simulator per file
 * with a fresh queue per test, handler scripts, and what the simulator saw of the acks. Counts of
 * acks are read from its request log and queue state, never inferred from timings.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach } from 'node:test';
import type { Simulator } from '../../tools/simulator/index.js';
import { runInProcess, startInProcess, type InProcessOptions } from './in-process.js';
import { sharedSimulator } from './shared.js';

export const NODE = process.execPath;

export interface AckElement {
  transactionId: string;
  partitionId: string;
  leaseId: string;
  status: string;
  error: string | null;
}

/** Waiting on real time for what a test cannot be told of (test/support/until.ts). */
export { until } from './until.js';

/** The JSON lines of a run's stdout (-o ndjson). */
export const events = (stdout: string): Array<Record<string, unknown> & { event: string }> =>
  stdout
    .trimEnd()
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown> & { event: string });

/** Call at the top level of a test file: its simulator, and a fresh queue before each test. */
export class RunScene {
  sim!: Simulator;
  queue = '';
  count = 0;
  readonly dir = mkdtempSync(join(tmpdir(), 'queenctl-run-test-'));

  constructor() {
    const simulator = sharedSimulator();
    beforeEach(() => {
      this.sim = simulator();
      this.queue = `jobs-${++this.count}`;
    });
  }

  /** A handler script in the test's directory; its path. */
  script(name: string, source: string): string {
    const path = join(this.dir, `${name}-${this.count}.cjs`);
    writeFileSync(path, source);
    return path;
  }

  /**
   * A handler run by sh, for one that only reads, greps and exits: a node handler costs ~0.09
   * CPU-s a start, and the tests that run hundreds of batches spent seconds of npm test there.
   * Its path; run it as ['sh', path].
   */
  shell(name: string, source: string): string {
    const path = join(this.dir, `${name}-${this.count}.sh`);
    writeFileSync(path, source);
    return path;
  }

  /**
   * A handler run by sh that reads its input to the end and writes one result per message to
   * QUEEN_RESULTS_FILE, in input order: `status` completed unless `decide` (sh, run once per line
   * with the line in $line, its number from 1 in $i) sets `status`, and `error` if it sets one.
   * sh, not node: ~0.09 CPU-s less a batch. The transaction id is cut from queenctl's compact
   * JSON line, as written for the simulator's ids (no quote or backslash in them).
   */
  reporter(name: string, decide: string): string {
    return this.shell(
      name,
      `i=0
while IFS= read -r line || [ -n "$line" ]; do
  i=$((i + 1))
  id=\${line##*'"transactionId":"'}; id=\${id%%'"'*}
  status=completed; error=''
  ${decide}
  extra=''; [ -n "$error" ] && extra=',"error":"'"$error"'"'
  printf '{"transactionId":"%s","status":"%s"%s}\\n' "$id" "$status" "$extra" >> "$QUEEN_RESULTS_FILE"
done
`,
    );
  }

  /** A file name of this test's in the directory. */
  file(name: string): string {
    return join(this.dir, `${name}-${this.count}`);
  }

  run(args: string[], command: string[], options: InProcessOptions = {}) {
    return runInProcess(['lease', 'run', this.queue, '--server', this.sim.url, ...args, '--', ...command], options);
  }

  /** `lease run` of this queue started, for a test that acts while it runs. */
  start(args: string[], command: string[], timeoutMs = 60_000) {
    return startInProcess(['lease', 'run', this.queue, '--server', this.sim.url, ...args, '--', ...command], {
      timeoutMs,
    });
  }

  /** A queue of messages {n: 1..n} in partition p1, lease time 60 s. */
  queueWith(n: number, options: { leaseTime?: number; retryLimit?: number } = {}): void {
    this.sim.createQueue({ name: this.queue, partitions: ['p1'], leaseTime: 60, ...options });
    this.sim.push(
      this.queue,
      Array.from({ length: n }, (_, i) => ({ n: i + 1 })),
      'p1',
    );
  }

  /** Every ack element the simulator received, in order. */
  ackElements(): AckElement[] {
    return this.sim.log
      .filter((entry) => entry.rawPath === '/api/v1/ack/batch')
      .flatMap((entry) => (JSON.parse(entry.body) as { acknowledgments: AckElement[] }).acknowledgments);
  }

  /** Requests whose path holds `fragment` that the simulator received. */
  requests(fragment: string): number {
    return this.sim.log.filter((entry) => entry.rawPath.includes(fragment)).length;
  }

  /** Messages of the queue not acked completed (queue mode). */
  pending(): number {
    const partitions = Object.values(this.sim.queue(this.queue)?.groups.__QUEUE_MODE__ ?? {});
    return partitions.reduce((sum, p) => sum + p.pending, 0);
  }

  /**
   * A handler that says it started (a `started` file holding its QUEEN_LEASE_ID), then waits for a
   * `go` file and exits with `code`; on SIGTERM it leaves a `term` file and exits 143. sh (~0.09
   * CPU-s less a start than node): run it as ['sh', path]. SIGTERM reaches the command's whole
   * group, so the sleep it waits in ends at once and the trap runs.
   *
   * `started` appears whole: written under another name, then renamed. A redirection creates the
   * file empty before printf writes the id, and a test polling for it read '' there now and then
   * on a loaded machine (then released lease '', not the command's).
   */
  waiter(name: string, code: number): { path: string; started: string; go: string; term: string } {
    const started = this.file(`${name}.started`);
    const go = this.file(`${name}.go`);
    const term = this.file(`${name}.term`);
    const path = this.shell(
      name,
      `trap 'printf x > ${JSON.stringify(term)}; exit 143' TERM
printf %s "$QUEEN_LEASE_ID" > ${JSON.stringify(`${started}.part`)}
mv ${JSON.stringify(`${started}.part`)} ${JSON.stringify(started)}
while [ ! -e ${JSON.stringify(go)} ]; do sleep 0.02; done
exit ${code}
`,
    );
    return { path, started, go, term };
  }
}
