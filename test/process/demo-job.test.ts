/**
 * The demo's step 10 as the shell shows it (issue 33): the job's shell must not report the
 * `sleep` that SIGTERM ended as a bare "Terminated" line, which reads as if queenctl was killed.
 * The job is read from scripts/demo.ts itself, so the demo cannot drift from what is tested here.
 * A process test: the line comes from a real sh in a real process group.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { describeRun, startCli } from '../support/cli.js';
import { ROOT } from '../support/doctest.js';
import { withSimulator } from '../support/shared.js';

/** The `stoppable` job of scripts/demo.ts, unwrapped from its sh -c '…'. */
function demoJob(): string {
  const demo = readFileSync(join(ROOT, 'scripts/demo.ts'), 'utf8');
  const match = /const stoppable = `sh -c '([^`']*)'`;/.exec(demo);
  assert.ok(match, "scripts/demo.ts has its step-10 job as `sh -c '…'`");
  return match[1] as string;
}

it("step 10: the lease lost, the job stops cleanly, and no shell's Terminated line is printed", () =>
  withSimulator(async (sim) => {
    // A long lease, renewed every second: a slow machine loses nothing before the release.
    const leaseId = sim.mint({ seconds: 60 });
    const run = startCli(['lease', 'watch', leaseId, '--seconds', '60', '--every', '1s', '--', 'sh', '-c', demoJob()], {
      env: { QUEEN_SERVER: sim.url },
      exit: 4,
    });
    await run.waitForStderr(/started sh/);
    sim.release(leaseId);
    const result = await run.exited;
    assert.equal(result.code, 4, describeRun(result));
    assert.match(result.stdout + result.stderr, /job: stopping cleanly/);
    assert.doesNotMatch(result.stderr, /^Terminated$/m, describeRun(result));
  }));
