/**
 * Each exit status of docs/cli-contract.md through the real binary, as a shell sees it: the
 * status itself, what is on stdout, and one line of reason on stderr (no stack trace). The rules
 * behind each are tested in-process (test/e2e, test/reliability); this is the process around
 * them: the status reaching the shell, and both streams flushed before the end.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { assertNoStackTrace, assertOneLineReason, closedPort, describeResult } from '../reliability/harness.js';
import { runCli } from '../support/cli.js';

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
});
