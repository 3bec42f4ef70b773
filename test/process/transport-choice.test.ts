/**
 * What a run loads of the HTTP stack, through the published bin (src/commands/globals.ts,
 * docs/architecture.md): a run that sends a few requests loads node:http and never undici's
 * file (dist/queenctl-undici.cjs); a run that sends many loads undici; a run that sends nothing
 * loads neither. Read from the bin's own report (QUEENCTL_DEBUG names each file of the bundle it
 * loads) and from Node's list of the built-in modules it loaded, printed at exit by a preload.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { describeResult } from '../reliability/harness.js';
import { needsNode, runCli } from '../support/cli.js';

let sim: Simulator;
let preload: string;

before(async () => {
  sim = await startSimulator();
  preload = join(mkdtempSync(join(tmpdir(), 'queenctl-loads-')), 'builtins.cjs');
  // process.moduleLoadList names each built-in module Node loaded ("NativeModule http").
  writeFileSync(
    preload,
    "process.on('exit', () => process.stderr.write('builtins: ' + process.moduleLoadList.join(',') + '\\n'));\n",
  );
});
after(() => sim.close());

interface Loads {
  undici: boolean;
  http: boolean;
}

async function loads(args: string[], stdin = ''): Promise<Loads> {
  const result = await runCli(args, { stdin, env: { QUEENCTL_DEBUG: '1' }, nodeArgs: ['--require', preload] });
  assert.equal(result.code, 0, describeResult(result));
  const builtins = /^builtins: (.*)$/m.exec(result.stderr)?.[1]?.split(',');
  assert.ok(builtins, `the preload reported the built-in modules:\n${result.stderr}`);
  return {
    undici: /queenctl-undici\.cjs/.test(result.stderr),
    http: builtins.includes('NativeModule http'),
  };
}

describe('what a run loads of the HTTP stack', { skip: needsNode('a preload and the bin’s own report') }, () => {
  it('lease extend <id>: node:http, never undici', async () => {
    const leaseId = sim.mint();
    assert.deepEqual(await loads(['lease', 'extend', leaseId, '--server', sim.url, '-o', 'json']), {
      undici: false,
      http: true,
    });
  });

  it('lease extend - and lease watch: undici', async () => {
    const leaseId = sim.mint();
    assert.equal(
      (await loads(['lease', 'extend', '-', '--server', sim.url, '-o', 'json'], `${leaseId}\n`)).undici,
      true,
    );
    const watch = ['lease', 'watch', leaseId, '--for', '300ms', '--server', sim.url, '-o', 'ndjson'];
    assert.equal((await loads(watch)).undici, true);
  });

  it('--version sends nothing and loads neither', async () => {
    assert.deepEqual(await loads(['--version']), { undici: false, http: false });
  });
});
