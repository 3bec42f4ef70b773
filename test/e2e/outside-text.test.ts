/**
 * Outside text is data (docs/security.md#outside-text-is-data), end to end against the simulator,
 * in-process: a lease id with a line break in it never becomes two ids in a pipe, completion offers
 * no id `-o name` would not print, and the broker's words reach the terminal escaped, through the
 * real client and the one place cli.ts prints an error. (Every renderer, for any text:
 * test/reliability/outside-text.test.ts.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runInProcess } from '../support/in-process.js';
import { withSimulator } from '../support/shared.js';

const VICTIM = 'VICTIM-ID';

describe('outside text is data', { concurrency: true }, () => {
  it('`lease list -o name | lease extend -` never extends an id hidden after a line break', () =>
    withSimulator(async (sim) => {
      const held = sim.mint({ queue: 'orders', seconds: 300 });
      sim.mint({ leaseId: `evil\n${VICTIM}`, queue: 'orders', seconds: 300 });
      // The victim's own lease, on another queue: only a forged line could name it here.
      sim.mint({ leaseId: VICTIM, queue: 'payroll', seconds: 300 });
      const listed = await runInProcess(['lease', 'list', '--queue', 'orders', '-o', 'name', '--server', sim.url]);
      assert.equal(listed.code, 2, listed.stderr);
      assert.equal(listed.stdout, `${held}\n`);
      assert.equal(
        listed.stderr,
        'queenctl: skipped a lease id from the broker that is no lease id (an answer outside the contract): ' +
          `"evil\\n${VICTIM}"\n`,
      );
      sim.resetLog();
      const extended = await runInProcess(['lease', 'extend', '-', '-o', 'name', '--server', sim.url], {
        stdin: listed.stdout,
      });
      assert.equal(extended.code, 0, extended.stderr);
      assert.deepEqual(
        sim.log.filter((entry) => entry.method === 'POST').map((entry) => decodeURIComponent(entry.rawPath)),
        [`/api/v1/lease/${held}/extend`],
      );
    }));

  it('`__complete leases` offers only ids `-o name` prints, and exits 2 when it left one out', () =>
    withSimulator(async (sim) => {
      const held = sim.mint();
      sim.mint({ leaseId: `evil\n${VICTIM}` });
      sim.mint({ leaseId: 'spoof\u202eDI-EKAF' });
      // A budget no busy machine spends: the default (a shell waits on it) is what a slow broker gets.
      const result = await runInProcess(['__complete', 'leases', '--server', sim.url], {
        env: { QUEENCTL_COMPLETION_TIMEOUT: '60s' },
      });
      assert.equal(result.stdout, `${held}\n`);
      assert.equal(result.code, 2);
      assert.match(result.stderr, /"evil\\nVICTIM-ID"/);
      assert.match(result.stderr, /"spoof\\u202eDI-EKAF"/);
    }));

  it("a table on a terminal shows a producer's queue and partition names as text", () =>
    withSimulator(async (sim) => {
      const queue = 'orders\u001b]0;pwned\u0007';
      sim.mint({ queue, partitions: [{ partition: 'p1\u001b[2J\u202e' }] });
      // Wide enough that no name is cut to fit (output/fit.ts): the escapes are shown whole.
      const result = await runInProcess(['lease', 'list', '--server', sim.url], { stdoutIsTTY: true, columns: 200 });
      assert.equal(result.code, 0, result.stderr);
      // The only escape sequences left are queenctl's own colour of LIVE.
      const shown = result.stdout.replaceAll('\u001b[32myes\u001b[39m', 'yes');
      assert.doesNotMatch(shown, /[\u001b\u0007\u202e]/);
      assert.match(shown, /orders\\x1b\]0;pwned\\x07 +p1\\x1b\[2J\\u202e/);
    }));

  it("the broker's error words on stderr cannot erase or forge the queenctl: line", () =>
    withSimulator(async (sim) => {
      const leaseId = sim.mint();
      const words = '\r\u001b[2Kqueenctl: lease renewed\nall fine';
      sim.inject({ kind: 'status', status: 400, body: JSON.stringify({ error: words }) });
      const result = await runInProcess(['lease', 'extend', leaseId, '--server', sim.url], { stderrIsTTY: true });
      assert.equal(result.code, 2, result.stderr);
      assert.doesNotMatch(result.stderr, /[\r\u001b]/);
      const lines = result.stderr.split('\n').filter(Boolean);
      // On a terminal of 80 columns the line is wrapped, its next lines two spaces in: read whole.
      const first = result.stderr.split(/\n(?! )/)[0]?.replace(/\n {2}/g, ' ');
      assert.match(first ?? '', /^queenctl: .*\\r\\x1b\[2Kqueenctl: lease renewed\\nall fine/);
      for (const line of lines) assert.match(line, /^(queenctl: | {2})/);
    }));
});
