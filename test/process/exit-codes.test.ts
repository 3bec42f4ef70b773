/**
 * Each exit status of docs/cli-contract.md through the real binary, as a shell sees it: the
 * status itself, what is on stdout, and one line of reason on stderr (no stack trace). The rules
 * behind each are tested in-process (test/e2e, test/reliability); this is the process around
 * them: the status reaching the shell, and both streams flushed before the end.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { assertNoStackTrace, assertOneLineReason, closedPort, describeResult } from '../reliability/harness.js';
import { BIN, cliCommandLine, needsNode, runCli, runShell } from '../support/cli.js';
import { makeCertificate, type TestCertificate } from '../support/tls.js';

let sim: Simulator;
let refusedUrl: string;

before(async () => {
  sim = await startSimulator({ tokens: { 'read-only': { role: 'read-only' }, 'read-write': { role: 'read-write' } } });
  refusedUrl = `http://127.0.0.1:${await closedPort()}`;
});
after(() => sim.close());

describe('exit statuses through the binary', { concurrency: true }, () => {
  it('0: renewed, the record on stdout, nothing on stderr', async () => {
    const leaseId = sim.mint();
    const result = await runCli(['lease', 'extend', leaseId, '--server', sim.url, '--token', 'read-write'], {
      exit: 0,
    });
    assert.equal(result.code, 0, describeResult(result));
    assert.equal(JSON.parse(result.stdout).leaseId, leaseId);
    assert.equal(result.stderr, '');
  });

  it('1: a usage error, nothing on stdout, nothing sent', async () => {
    const result = await runCli(['lease', 'extend', 'x', '--seconds', 'soon', '--server', sim.url], { exit: 1 });
    assert.equal(result.code, 1, describeResult(result));
    assert.equal(result.stdout, '');
    assertNoStackTrace(result.stderr);
    assert.match(result.stderr, /--seconds/);
  });

  it('2: the broker could not be reached, nothing on stdout', async () => {
    const result = await runCli(['lease', 'inspect', 'x', '--server', refusedUrl, '--retries', '0'], { exit: 2 });
    assert.equal(result.code, 2, describeResult(result));
    assert.equal(result.stdout, '');
    assertOneLineReason(result.stderr, /refused/);
  });

  it('3: a token that may not renew, nothing on stdout', async () => {
    const result = await runCli(['lease', 'extend', sim.mint(), '--server', sim.url, '--token', 'read-only'], {
      exit: 3,
    });
    assert.equal(result.code, 3, describeResult(result));
    assert.equal(result.stdout, '');
    assertNoStackTrace(result.stderr);
  });

  it('4: not renewed, the record says so on stdout and the reason is on stderr', async () => {
    const result = await runCli(['lease', 'extend', 'gone', '--server', sim.url, '--token', 'read-write'], { exit: 4 });
    assert.equal(result.code, 4, describeResult(result));
    assert.equal(JSON.parse(result.stdout).renewed, 0);
    assertNoStackTrace(result.stderr);
    assert.match(result.stderr, /^queenctl: lease gone was not renewed/);
  });

  it('74: stdout cannot be written (a full disk): said once on stderr, every lease renewed all the same', async () => {
    const leaseIds = [sim.mint(), sim.mint()];
    const args = `lease extend ${leaseIds.join(' ')} --server ${sim.url} --token read-write`;
    const result = await runShell(`${cliCommandLine()} ${args} >/dev/full`, { exit: 74 });
    assert.equal(result.code, 74, describeResult(result));
    assert.equal(
      result.stderr,
      'queenctl: could not write to stdout: no space left on device (ENOSPC); ' +
        'what this run did is not all in its output\n',
    );
    for (const leaseId of leaseIds)
      assert.equal(sim.log.filter((entry) => entry.rawPath === `/api/v1/lease/${leaseId}/extend`).length, 1);
  });

  it('stdout cannot be written and a lease was not renewed: 4 stands, and stderr says both', async () => {
    const args = `lease extend ${sim.mint()} gone --server ${sim.url} --token read-write`;
    const result = await runShell(`${cliCommandLine()} ${args} >/dev/full`, { exit: 4 });
    assert.equal(result.code, 4, describeResult(result));
    assert.match(result.stderr, /^queenctl: could not write to stdout: no space left on device \(ENOSPC\);/);
    assert.match(result.stderr, /^queenctl: lease gone was not renewed/m);
  });

  it('lease run with stdout on a full disk keeps its own status: 4, nothing to take', async () => {
    const queue = `empty-${process.pid}`;
    sim.createQueue({ name: queue, partitions: ['p1'] });
    const args = `lease run ${queue} --server ${sim.url} --token read-write --batches 1 -o ndjson -- true`;
    const result = await runShell(`${cliCommandLine()} ${args} >/dev/full`, { exit: 4 });
    assert.equal(result.code, 4, describeResult(result));
    assert.match(result.stderr, /^queenctl: could not write to stdout: no space left on device \(ENOSPC\);/m);
    assert.match(result.stderr, /^queenctl: nothing to take from queue /m);
  });

  it('lease acquire -o json with stdout on a full disk: 74, and the batch is kept, with its ack line', async () => {
    const queue = `full-${process.pid}`;
    sim.createQueue({ name: queue, partitions: ['p1'] });
    sim.push(queue, [{ n: 1 }], 'p1');
    const args = `lease acquire ${queue} --server ${sim.url} --token read-write -o json`;
    const result = await runShell(`${cliCommandLine()} ${args} >/dev/full`, { exit: 74 });
    assert.equal(result.code, 74, describeResult(result));
    const record = /^ {2}queenctl lease ack (\S+)$/m.exec(result.stderr)?.[1];
    assert.ok(record && existsSync(record), `the batch's record is kept and named:\n${result.stderr}`);
    assert.equal(JSON.parse(readFileSync(record, 'utf8')).messages.length, 1);
  });
});

/**
 * NODE_EXTRA_CA_CERTS is read by Node itself as the process starts, so only a process shows that
 * queenctl's https honours it. The suite's processes run without the machine's own
 * (test/support/temp-root.ts): this test names its CA on purpose, and checks it is needed.
 */
describe('https with the CA named by NODE_EXTRA_CA_CERTS', () => {
  let secure: Simulator;
  let certificate: TestCertificate;
  before(async () => {
    certificate = makeCertificate();
    secure = await startSimulator({ tls: { key: certificate.key, cert: certificate.cert } });
  });
  after(() => secure.close());

  it('0 when the environment names the CA; 2, nothing on stdout, when it does not', async () => {
    assert.equal(process.env.NODE_EXTRA_CA_CERTS, undefined, 'the suite runs without the machine CA file');
    const args = ['lease', 'extend', secure.mint(), '--server', secure.url, '--retries', '0'];
    const trusted = await runCli(args, { exit: 0, env: { NODE_EXTRA_CA_CERTS: certificate.certFile } });
    assert.equal(trusted.code, 0, describeResult(trusted));
    assert.equal(JSON.parse(trusted.stdout).renewed, 1);
    const untrusted = await runCli(args, { exit: 2 });
    assert.equal(untrusted.code, 2, describeResult(untrusted));
    assert.equal(untrusted.stdout, '');
    assertOneLineReason(untrusted.stderr, /TLS connection to https:\/\/127\.0\.0\.1:\d+ failed/);
  });
});

/**
 * Bytes that are not UTF-8 on the command line: Node.js hands queenctl U+FFFD in their place, and
 * the real argv is read again from /proc/self/cmdline (src/utf8.ts). What layout the process has
 * (the bin under node, node flags before it, the standalone executable) must not matter.
 */
describe('an argument that is not UTF-8, through the process (issue 31)', { concurrency: true }, () => {
  const q = (text: string): string => `'${text.replaceAll("'", "'\\''")}'`;
  const layouts: Array<[string, string, false | string]> = [
    ['the bin (or QUEENCTL_EXE)', cliCommandLine(), false],
    [
      'node with flags of its own before the bin',
      `${q(process.execPath)} --no-warnings --stack-size=2000 ${q(BIN)}`,
      needsNode('node flags in argv'),
    ],
  ];
  for (const [name, queenctl, skip] of layouts) {
    it(`${name}: exit 1 naming the byte offset, nothing sent`, { skip }, async () => {
      // Sent first if the bad argument were let through: the simulator is shared with other tests.
      const leaseId = sim.mint();
      const result = await runShell(
        `exec ${queenctl} lease extend ${leaseId} "$(printf 'ab\\377cd')" --server ${q(sim.url)} --token read-write`,
        { exit: 1 },
      );
      assert.equal(result.stdout, '');
      assertOneLineReason(result.stderr, /argument 4 "ab\\xffcd" is not valid UTF-8: byte 0xff at offset 2/);
      assert.ok(!sim.log.some((entry) => entry.leaseId === leaseId), 'nothing was sent');
    });

    it(`${name}: a U+FFFD typed as such (EF BF BD) is sent as it is`, { skip }, async () => {
      const leaseId = sim.mint();
      const result = await runShell(
        `exec ${queenctl} lease extend ${leaseId} "$(printf 'ab\\357\\277\\275cd')" --server ${q(sim.url)} ` +
          '--token read-write -o ndjson',
        { exit: 4 },
      );
      assert.deepEqual(
        result.stdout
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line).leaseId),
        [leaseId, 'ab\uFFFDcd'],
      );
    });
  }
});
