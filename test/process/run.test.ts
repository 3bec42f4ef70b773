/**
 * `queenctl lease run` as a process, where the process is the point: queenctl killed by SIGKILL
 * while the command runs (as the OOM killer does). The guardian (src/watch/guardian.ts) stops the
 * command's process group all the same, and nothing is acked: the batch comes back to the next
 * pop once its lease has expired (docs/security.md, "A crash of queenctl").
 *
 * Verdicts never depend on the machine's speed: waits poll for what they look for, with limits
 * that only turn a hang into a failure.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isRunning, sleepEnded, sleepStarted, startCli } from '../support/cli.js';
import { withSimulator } from '../support/shared.js';
import { until } from '../support/until.js';

describe('lease run: queenctl killed by SIGKILL', () => {
  it('the guardian stops the command, and nothing is acked', () =>
    withSimulator(async (sim) => {
      const dir = mkdtempSync(join(tmpdir(), 'queenctl-run-kill-'));
      sim.createQueue({ name: 'jobs', partitions: ['p1'], leaseTime: 60 });
      sim.push('jobs', [{ n: 1 }, { n: 2 }], 'p1');
      // Records its pid, then when SIGTERM reached it; --kill-after 120s: an end well before it
      // was SIGTERM's, never the escalation's.
      const trap = `trap 'echo term > ${dir}/term; exit 143' TERM`;
      // The pid is written once the sleep is started: a SIGTERM to the group from then on reaches
      // both. (Written before it, a SIGTERM landing as the shell forked the sleep left the sleep
      // out of it, holding this test's pipe until --kill-after: the file then ran out its time.)
      const script = `${trap}; cat > /dev/null; ${sleepStarted(120, `${dir}/sleep`)}; echo $$ > ${dir}/child; wait`;
      const run = startCli(
        [
          'lease',
          'run',
          'jobs',
          '--server',
          sim.url,
          '--batch',
          '10',
          '--kill-after',
          '120s',
          '--',
          'sh',
          '-c',
          script,
        ],
        { exit: 'SIGKILL', closeGraceMs: 500, timeoutMs: 60_000 },
      );
      // The note comes after the group was named to the guardian (process-group.ts): a SIGKILL
      // before that, in the instant between the command's start and that write, finds no group.
      await run.waitForStderr(/started sh/);
      const child = await until(
        () => existsSync(join(dir, 'child')) && Number(readFileSync(join(dir, 'child'), 'utf8')),
        'the command to start',
      );
      run.kill('SIGKILL');
      await run.exited;
      await until(() => !isRunning(child), 'the command to be stopped by the guardian');
      await sleepEnded(join(dir, 'sleep'));
      await until(() => existsSync(join(dir, 'term')), 'the SIGTERM the command recorded');
      assert.equal(sim.log.filter((entry) => entry.rawPath === '/api/v1/ack/batch').length, 0, 'nothing acked');
    }));

  it("one guardian for every batch: the second batch's command is stopped by the first batch's guardian", () =>
    withSimulator(async (sim) => {
      const dir = mkdtempSync(join(tmpdir(), 'queenctl-run-reuse-'));
      sim.createQueue({ name: 'jobs', partitions: ['p1'], leaseTime: 60 });
      sim.push('jobs', [{ n: 1 }, { n: 2 }], 'p1');
      // The first batch's command ends at once; the second's records its pid and waits.
      const trap = `trap 'echo term > ${dir}/term; exit 143' TERM`;
      const first = `if [ ! -e ${dir}/first ]; then : > ${dir}/first; cat > /dev/null; exit 0; fi`;
      const started = sleepStarted(120, `${dir}/sleep`);
      const script = `${first}; ${trap}; cat > /dev/null; ${started}; echo $$ > ${dir}/child; wait`;
      const run = startCli(
        ['lease', 'run', 'jobs', '--server', sim.url, '--batch', '1', '--batches', '2', '--kill-after', '120s'].concat([
          '--',
          'sh',
          '-c',
          script,
        ]),
        { exit: 'SIGKILL', closeGraceMs: 500, timeoutMs: 60_000 },
      );
      let child: number;
      try {
        child = await until(
          () => existsSync(join(dir, 'child')) && Number(readFileSync(join(dir, 'child'), 'utf8')),
          "the second batch's command to start",
        );
        // Started once the group was named (see above), the second time.
        await run.waitForStderr(/started sh[\s\S]*started sh/);
        const guardians = guardiansUnder(run.process.pid as number);
        assert.equal(guardians.length, 1, `one guardian for both batches: ${guardians.join(', ')}`);
      } finally {
        // Whatever failed above, queenctl goes (its guardian then stops the command): a test left
        // waiting on it would hold its file until the runner's time limit.
        run.kill('SIGKILL');
      }
      await run.exited;
      await until(() => !isRunning(child), 'the command to be stopped by the guardian');
      await sleepEnded(join(dir, 'sleep'));
      await until(() => existsSync(join(dir, 'term')), 'the SIGTERM the command recorded');
      assert.equal(sim.log.filter((entry) => entry.rawPath === '/api/v1/ack/batch').length, 1, 'the first batch only');
    }));
});

/**
 * The guardians running under process `root` (its descendants: `node bin/queenctl.cjs` may run
 * queenctl in a child of its own), told apart by the argument that names them in `ps`.
 */
function guardiansUnder(root: number): number[] {
  const parents = new Map<number, number>();
  const guardians: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.includes('--queenctl-guardian') && isRunning(Number(entry))) guardians.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  const under = (pid: number): boolean => {
    for (let at = parents.get(pid), hops = 0; at !== undefined && at > 1 && hops < 64; at = parents.get(at), hops++) {
      if (at === root) return true;
    }
    return false;
  };
  return guardians.filter(under);
}
