/**
 * Output that no terminal shows is written to its descriptor directly, without process.stdout or
 * process.stderr (src/cli.ts, processOutput): making either stream for a pipe or a socket loads
 * node:net, which costs every start a few ms. A socket is what a Node.js parent's
 * `stdio: 'pipe'` gives (and `npm run bench`'s runs), journald and container runtimes too.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, needsNode } from '../support/cli.js';

const BIN = fileURLToPath(new URL('../../../bin/queenctl.cjs', import.meta.url));
/** Node's own module list is what this looks at: the npm package, run by node with a --require. */
const skip = needsNode('a --require that reports the Node modules loaded');

let scratch: string;
let hook: string;
before(() => {
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-output-'));
  hook = join(scratch, 'report-net.cjs');
  // At exit, on descriptor 3 (a pipe of the test's own), whether node:net was loaded.
  writeFileSync(
    hook,
    "process.on('exit', () => require('node:fs').writeSync(3, " +
      "String(process.moduleLoadList.includes('NativeModule net'))));\n",
  );
});
after(() => rmSync(scratch, { recursive: true, force: true }));

/** queenctl with stdout and stderr each a socket (spawn's 'pipe'), and whether it loaded node:net. */
function run(args: string[]): { status: number | null; stdout: string; stderr: string; net: string } {
  const result = spawnSync(process.execPath, ['--require', hook, BIN, ...args], {
    env: cleanEnv({ XDG_CACHE_HOME: join(scratch, 'cache') }),
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    encoding: 'utf8',
    timeout: 15_000,
    killSignal: 'SIGKILL',
  });
  const output = result.output as (string | null)[];
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, net: output[3] ?? '' };
}

describe('output to a socket', { skip }, () => {
  it('--version: printed, and node:net never loaded', () => {
    const result = run(['--version']);
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /^\d+\.\d+\.\d+\n$/);
    assert.equal(result.net, 'false');
  });

  it('a usage error: its message on stderr, exit 1, and node:net never loaded', () => {
    const result = run(['lease', 'extend', '--bogus']);
    assert.equal(result.status, 1);
    assert.match(result.stderr, /unknown option '--bogus'/);
    assert.equal(result.stdout, '');
    assert.equal(result.net, 'false');
  });
});
