/**
 * Outside text is data (docs/security.md#outside-text-is-data), end to end against the simulator,
 * in-process: a lease id with a line break in it never becomes two ids in a pipe, completion offers
 * no id `-o name` would not print, and the broker's words reach the terminal escaped, through the
 * real client and the one place cli.ts prints an error. (Every renderer, for any text:
 * test/reliability/outside-text.test.ts.)
 */
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runInProcess } from '../support/in-process.js';
import { withSimulator } from '../support/shared.js';

const VICTIM = 'VICTIM-ID';

/** Completion's budget (1 s) is for a person at a TAB; on a busy test machine the answer may take longer. */
const SLOW_MACHINE = { env: { QUEENCTL_COMPLETION_TIMEOUT: '60s' } };

/** A config file of the user's own (mode 0600), in a directory of its own. */
async function writeConfig(text: string): Promise<string> {
  const path = join(await mkdtemp(join(tmpdir(), 'queenctl-outside-')), 'config.yaml');
  await writeFile(path, text, { mode: 0o600 });
  return path;
}

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
      const result = await runInProcess(['__complete', 'leases', '--server', sim.url], SLOW_MACHINE);
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

  it('an id that begins with `-` is never printed as a name: `xargs` would make it an option', () =>
    withSimulator(async (sim) => {
      const held = sim.mint({ queue: 'orders', seconds: 300 });
      sim.mint({ leaseId: '--token-file=/etc/shadow', queue: 'orders', seconds: 300 });
      const listed = await runInProcess(['lease', 'list', '--queue', 'orders', '-o', 'name', '--server', sim.url]);
      assert.equal(listed.code, 2, listed.stderr);
      assert.equal(listed.stdout, `${held}\n`);
      assert.match(listed.stderr, /skipped a lease id .*"--token-file=\/etc\/shadow"/);
      const offered = await runInProcess(['__complete', 'leases', '--server', sim.url], SLOW_MACHINE);
      assert.ok(!offered.stdout.includes('--token-file'), offered.stdout);
    }));

  it('`lease list --expiry` never probes the trimmed form of a listed id', () =>
    withSimulator(async (sim) => {
      sim.mint({ leaseId: VICTIM, queue: 'payroll', seconds: 300 });
      sim.mint({ leaseId: ` ${VICTIM}`, queue: 'orders', seconds: 300 });
      sim.resetLog();
      const result = await runInProcess([
        'lease',
        'list',
        '--queue',
        'orders',
        '--expiry',
        '-o',
        'json',
        '--server',
        sim.url,
      ]);
      assert.equal(result.code, 2, result.stderr);
      assert.deepEqual(
        sim.log.filter((entry) => entry.method === 'POST'),
        [],
      );
      const [record] = JSON.parse(result.stdout) as Array<{ error?: string }>;
      assert.match(record?.error ?? '', /not probed/);
    }));

  for (const leaseId of ['..', `MINE ${VICTIM}`, ` ${VICTIM} `, '--server=http://evil.example', 'a\u202eb']) {
    const which = JSON.stringify(leaseId);
    it(`a pop whose lease id is ${which} is an answer outside the contract: exit 2, nothing renewed`, () =>
      withSimulator(async (sim) => {
        const body = JSON.stringify({
          success: true,
          leaseId,
          queue: 'jobs',
          consumerGroup: '__QUEUE_MODE__',
          messages: [{ transactionId: 't1', partitionId: 'pid1', partition: 'p1', data: {}, leaseId }],
        });
        sim.inject({ kind: 'body', body, route: 'pop' });
        const result = await runInProcess(['lease', 'acquire', 'jobs', '-o', 'name', '--server', sim.url]);
        assert.equal(result.code, 2, result.stderr);
        assert.equal(result.stdout, '');
        assert.deepEqual(
          sim.log.filter((entry) => entry.rawPath.includes('/lease/')),
          [],
        );
      }));
  }

  it('a pop answered for another consumer group than the one asked is no batch of this pop: exit 2', () =>
    withSimulator(async (sim) => {
      const body = JSON.stringify({
        success: true,
        leaseId: 'a-lease',
        queue: 'jobs',
        consumerGroup: 'billing',
        messages: [{ transactionId: 't1', partitionId: 'pid1', partition: 'p1', data: {} }],
      });
      sim.inject({ kind: 'body', body, route: 'pop' });
      const result = await runInProcess(['lease', 'acquire', 'jobs', '-o', 'json', '--server', sim.url]);
      assert.equal(result.code, 2, result.stderr);
      assert.equal(result.stdout, '');
      assert.match(result.stderr, /consumer group "billing"/);
    }));

  it("a context name's line break cannot forge a line of the known-contexts hint", async () => {
    const config = await writeConfig(
      'contexts:\n  - name: "x\\e[2J\\nqueenctl: forged"\n    server: http://127.0.0.1:9\ncurrent-context: nope\n',
    );
    const result = await runInProcess(['lease', 'extend', 'abc', '--context', 'missing'], {
      env: { QUEEN_CONFIG: config },
      stderrIsTTY: true,
    });
    assert.equal(result.code, 1, result.stderr);
    assert.doesNotMatch(result.stderr, /\u001b/);
    assert.doesNotMatch(result.stderr, /\n\s*queenctl: forged/);
    assert.match(result.stderr, /\\nqueenctl: forged/);
  });
});
