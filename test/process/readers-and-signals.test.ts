/**
 * queenctl as a process among others: a reader that goes away (`| head -1`), a stderr nobody
 * reads, and SIGINT/SIGTERM/SIGHUP in the middle of a bulk run or while standard input is still
 * open.
 */
import assert from 'node:assert/strict';
import { setMaxListeners } from 'node:events';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, beforeEach, describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { cliCommandLine, runShell, startCli } from '../support/cli.js';
import { assertNoStackTrace, describeResult, records } from '../reliability/harness.js';

const BULK = 3_000;
/** queenctl's default --concurrency. */
const CONCURRENCY = 16;

let sim: Simulator;
let ids: string[];
let idsFile: string;

// The hooks inside one describe: npm test runs this file in a process shared with others
// (scripts/test-files.mjs), where a hook at the top level would run for their tests too.
describe('readers and signals, through the real binary', () => {
  before(async () => {
    // Each request the simulator delays listens to its closing signal; thousands do, by design.
    setMaxListeners(0);
    sim = await startSimulator({ logLimit: 20_000 });
    ids = Array.from({ length: BULK }, () => sim.mint({ seconds: 600 }));
    idsFile = join(tmpdir(), `queenctl-reliability-ids-${process.pid}.txt`);
    writeFileSync(idsFile, `${ids.join('\n')}\n`);
  });
  after(() => sim.close());
  beforeEach(() => {
    sim.clearFaults();
    sim.resetLog();
  });

  /** Polls what is not a process's output (the simulator's log); generous for a loaded machine. */
  async function until(condition: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await delay(10);
    }
  }

  describe('a reader that goes away', () => {
    // Each verb, each kind of writer (a record per line, one document).
    for (const [verb, format] of [
      ['inspect', 'ndjson'],
      ['extend', 'json'],
    ] as const) {
      it(`lease ${verb} - -o ${format} | head -1: ends quietly and stops sending`, async () => {
        // Slow enough that all 3000 would take seconds: the run must end long before.
        sim.inject({ kind: 'latency', ms: 20 });
        const command =
          `${cliCommandLine()} lease ${verb} - -o ${format} --server ${sim.url} ` + `< ${JSON.stringify(idsFile)}`;
        const result = await runShell(`${command} | head -1; echo "queenctl exit: \${PIPESTATUS[0]}" >&2`, {
          exit: 0,
        });
        assert.equal(result.code, 0, describeResult(result));
        const line = result.stdout.replace(/\n$/, '');
        assert.ok(!line.includes('\n'), `one line:\n${result.stdout}`);
        if (format === 'ndjson') assert.equal(JSON.parse(line).leaseId, ids[0]);
        else assert.equal(line, '[');
        // Nothing but the status line: no EPIPE, no stack, no report of what was not sent.
        assert.match(result.stderr, /^queenctl exit: (0|141)\n$/, result.stderr);
        assert.ok(sim.log.length < BULK, `stopped sending once nobody read (${sim.log.length} of ${BULK} sent)`);
      });
    }
  });

  describe('a stderr nobody reads', () => {
    // One run proves it: an error of stderr is ignored in one place (src/cli.ts), whatever the status.
    it('does not change the exit code: a lost lease still exits 4, not 1', async () => {
      const run = startCli(['lease', 'extend', 'gone-1', 'gone-2', '--server', sim.url, '-o', 'json'], { exit: 4 });
      run.process.stderr.destroy();
      const { code, stdout } = await run.exited;
      assert.equal(code, 4);
      assert.deepEqual(
        records(stdout).map((record) => record.renewed),
        [0, 0],
      );
    });
  });

  interface Interruption {
    verb: 'extend' | 'inspect';
    signal: 'SIGINT' | 'SIGTERM' | 'SIGHUP';
    code: number;
  }

  describe('a signal in the middle of a bulk run', () => {
    // Each verb once; SIGHUP (the terminal went away) is taken as SIGINT, with its own status. SIGINT
    // itself ends the run below, with the same report.
    const cases: Interruption[] = [
      { verb: 'inspect', signal: 'SIGTERM', code: 143 },
      { verb: 'extend', signal: 'SIGHUP', code: 129 },
    ];
    for (const { verb, signal, code } of cases) {
      it(`lease ${verb} over ${BULK} ids, ${signal}: stops issuing, reports what was done, exits ${code}`, async () => {
        sim.inject({ kind: 'latency', ms: 100 });
        const run = startCli(['lease', verb, '-', '-o', 'ndjson', '--server', sim.url], {
          exit: code,
          stdin: `${ids.join('\n')}\n`,
        });
        await until(() => sim.log.length >= 3 * CONCURRENCY, 'requests in flight');
        const sentAtSignal = sim.log.length;
        run.kill(signal);
        const { code: exitCode, stdout, stderr, killed } = await run.exited;
        const sentAtExit = sim.log.length;
        assert.equal(killed, false, 'ended by itself');
        assert.equal(exitCode, code, describeResult({ code: exitCode, stdout, stderr }));
        assertNoStackTrace(stderr);

        await delay(300);
        assert.equal(sim.log.length, sentAtExit, 'no request after it ended');
        // In flight at the signal, plus what the answers of one turn of its loop let it issue.
        assert.ok(
          sentAtExit <= sentAtSignal + 4 * CONCURRENCY,
          `stopped issuing: ${sentAtSignal} sent at the signal, ${sentAtExit} at the end`,
        );
        assert.ok(sentAtExit < BULK);

        // What was done is on stdout: a record per lease id it tried, in input order.
        const printed = records(stdout);
        assert.deepEqual(
          printed.map((record) => record.leaseId),
          ids.slice(0, printed.length),
        );
        const logged = new Set(sim.log.map((entry) => entry.leaseId));
        for (const leaseId of logged)
          assert.ok(
            printed.some((record) => record.leaseId === leaseId),
            `${leaseId} was sent, so it has a record`,
          );
        const done = printed.filter((record) =>
          verb === 'extend' ? record.renewed === 1 : record.live === true,
        ).length;
        const unanswered = printed.filter((record) => record.error === 'interrupted before the broker answered').length;
        assert.equal(done + unanswered, printed.length, 'every record is either done or said to be unanswered');
        assert.ok(done > 0 && unanswered > 0);

        // ... and summed up on stderr.
        const [yes, no] = verb === 'extend' ? ['renewed', 'not renewed'] : ['live', 'not held'];
        assert.match(
          stderr,
          new RegExp(
            `^queenctl: interrupted after ${printed.length} lease ids: ${done} ${yes}, 0 ${no}, ` +
              `${unanswered} unknown; (the remaining lease ids were not sent|no further lease id was read or sent)$`,
            'm',
          ),
        );
      });
    }
  });

  describe('a signal while standard input is still open', () => {
    it('streams each answer as it comes, then SIGINT ends the run without waiting for input: exit 130', async () => {
      const run = startCli(['lease', 'extend', '-', '-o', 'ndjson', '--server', sim.url], { stdin: null, exit: 130 });
      // A producer that wrote three ids and is still working on the rest.
      run.write(`${ids.slice(0, 3).join('\n')}\n`);
      await run.waitForStdout(/^(.*\n){3}/);
      run.kill('SIGINT');
      const { code, stdout, stderr, killed } = await run.exited;
      assert.equal(killed, false, 'ended without its standard input ending');
      assert.equal(code, 130, describeResult({ code, stdout, stderr }));
      assert.deepEqual(
        records(stdout).map((record) => record.renewed),
        [1, 1, 1],
      );
      assert.match(
        stderr,
        new RegExp(
          '^queenctl: interrupted after 3 lease ids: 3 renewed, 0 not renewed, 0 unknown; ' +
            'no further lease id was read or sent$',
          'm',
        ),
      );
      assertNoStackTrace(stderr);
    });
  });
});
