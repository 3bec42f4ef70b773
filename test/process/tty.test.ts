/**
 * `-` when standard input is a terminal: a real pseudo-terminal (script(1)) in front of the
 * process, so isTTY comes from the kernel, not from a test's say-so.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { startSimulator } from '../../tools/simulator/index.js';
import { assertNoStackTrace } from '../reliability/harness.js';
import { cliCommandLine, runProcess, startProcess } from '../support/cli.js';
import { runInProcess } from '../support/in-process.js';

const hasScript = spawnSync('script', ['--version'], { stdio: 'ignore', timeout: 10_000 }).status === 0;

/**
 * The refusal is one rule for both verbs (leaseIdSource, test/unit/args.test.ts): extend runs
 * behind a real pty, where isTTY comes from the kernel; inspect in-process, told its standard
 * input is a terminal, which is all a second process would add.
 */
describe('- when standard input is a terminal', () => {
  const refused = (output: string): void => {
    assert.match(output, /queenctl: - reads lease ids from standard input, but it is a terminal/);
    assertNoStackTrace(output);
  };

  it('lease extend -: exit 1 before reading anything, nothing sent', {
    skip: hasScript ? false : 'needs script(1) for a pty (test/unit/args.test.ts covers leaseIdSource with isTTY)',
  }, async () => {
    const sim = await startSimulator();
    try {
      const command = `${cliCommandLine()} lease extend - --server ${sim.url}`;
      // script(1) runs the command on a new pty: its stdin and stdout are a terminal.
      const { code, stdout, stderr } = await runProcess('script', ['-qec', command, '/dev/null'], { exit: 1 });
      const output = stdout + stderr;
      assert.equal(code, 1, output);
      refused(output);
      assert.equal(sim.log.length, 0);
    } finally {
      await sim.close();
    }
  });

  it('lease inspect -: exit 1 before reading anything, nothing sent (in-process)', async () => {
    const sim = await startSimulator();
    try {
      const result = await runInProcess(['lease', 'inspect', '-', '--server', sim.url], {
        stdinIsTTY: true,
        stdin: `${sim.mint()}\n`,
      });
      assert.equal(result.code, 1, result.stderr);
      assert.equal(result.stdout, '');
      refused(result.stderr);
      assert.equal(sim.log.length, 0);
    } finally {
      await sim.close();
    }
  });
});

describe('lease watch on a terminal', () => {
  it('shows the spinner (ora, from its file of the bundle), then ends at --for with exit 0', {
    skip: hasScript ? false : 'needs script(1) for a pty',
  }, async () => {
    const sim = await startSimulator();
    try {
      const leaseId = sim.mint({ seconds: 60 });
      // A terminal with a width: the spinner, not log lines (src/output/watch.ts). The bundle gave
      // ora's namespace where its function was meant, and every watch on a terminal ended in
      // "internal error: ora is not a function", exit 2; only a process through the bundle shows it.
      const watch = `${cliCommandLine()} lease watch ${leaseId} --for 2s --server ${sim.url}`;
      const command = `stty cols 100 rows 30; exec ${watch}`;
      // TERM=dumb (some CI systems, editors' shells) would choose log lines over the spinner.
      const { code, stdout, stderr } = await runProcess('script', ['-qec', command, '/dev/null'], {
        exit: 0,
        env: { TERM: 'xterm' },
      });
      const output = stdout + stderr;
      assert.equal(code, 0, output);
      assert.match(output, new RegExp(`lease ${leaseId}: \\d+ renewals?, `), 'the spinner’s text');
      assert.match(output, /--for has elapsed; no longer\s+renewed/);
      assert.doesNotMatch(output, /internal error/);
      assertNoStackTrace(output);
    } finally {
      await sim.close();
    }
  });
});

describe('the live views on a terminal, through the bundle (log-update, string-width, cli-truncate)', () => {
  // Their file of the bundle hands over ES modules' namespaces, as ora's does: only a process
  // through the bundle shows that the view draws at all (src/output/live.ts). Ctrl+C is typed on
  // the terminal once the view is up, as an operator would: the kernel makes it SIGINT.
  it('lease list --watch: a frame of the leases, cut to 60 columns; Ctrl+C leaves it, exit 130', {
    skip: hasScript ? false : 'needs script(1) for a pty',
  }, async () => {
    const sim = await startSimulator();
    try {
      const leaseId = sim.mint({ queue: 'orders', partitions: [{ partition: 'p7' }], seconds: 60 });
      const list = `${cliCommandLine()} lease list --watch --interval 200ms --server ${sim.url}`;
      const run = startProcess('script', ['-qec', `stty cols 60 rows 20; exec ${list}`, '/dev/null'], {
        exit: 130,
        env: { TERM: 'xterm' },
        // Open: what is typed on the terminal goes through it.
        stdin: null,
      });
      // At 60 columns the partitions stay and the bar goes (issue 39).
      await run.waitForStdout(new RegExp(`${leaseId} +(\\d+s|1m00s) +p7`));
      run.write('\u0003');
      const { code, stdout, stderr } = await run.exited;
      const output = stdout + stderr;
      assert.equal(code, 130, output);
      assert.match(output, /LEASE ID +LEFT +PARTITIONS/);
      assert.match(output, /\u001b\[\?25h/, 'the cursor shown again');
      assert.doesNotMatch(output, /internal error/);
      assertNoStackTrace(output);
    } finally {
      await sim.close();
    }
  });

  it('lease watch of more leases than rows: the summary; Ctrl+C says the leases stopped in one line', {
    skip: hasScript ? false : 'needs script(1) for a pty',
  }, async () => {
    const sim = await startSimulator();
    try {
      const ids = Array.from({ length: 30 }, () => sim.mint({ seconds: 60 }));
      const watch = `${cliCommandLine()} lease watch ${ids.join(' ')} --server ${sim.url}`;
      const run = startProcess('script', ['-qec', `stty cols 80 rows 20; exec ${watch}`, '/dev/null'], {
        exit: 130,
        env: { TERM: 'xterm' },
        // Open: what is typed on the terminal goes through it.
        stdin: null,
      });
      await run.waitForStdout(/30 leases: 30 held, 0 lost, 0 in outage · least time left/);
      run.write('\u0003');
      const { code, stdout, stderr } = await run.exited;
      const output = stdout + stderr;
      assert.equal(code, 130, output);
      assert.match(output, /queenctl: 30 leases: interrupted; no longer renewed/);
      assert.doesNotMatch(output, / renewed \(1 partition\)/, 'no line per renewal');
      assert.doesNotMatch(output, /internal error/);
      assertNoStackTrace(output);
    } finally {
      await sim.close();
    }
  });
});
