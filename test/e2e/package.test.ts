/**
 * The package as users get it: `npm pack`, `npm install -g` into a scratch prefix, and the
 * installed `queenctl` on PATH renewing a lease.
 */
import assert from 'node:assert/strict';
import { execFile as execFileCallback } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { VERSION } from '../../src/version.js';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { cleanEnv } from '../support/cli.js';

// Asynchronous on purpose: the simulator runs in this process and must keep answering.
const execFile = promisify(execFileCallback);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
let sim: Simulator;
let scratch: string;

before(async () => {
  sim = await startSimulator();
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-pack-'));
});
after(async () => {
  await sim.close();
  rmSync(scratch, { recursive: true, force: true });
});

it('src/version.ts matches package.json', () => {
  assert.equal(VERSION, JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
});

it('npm pack + npm install -g gives a working queenctl on PATH', { timeout: 120_000 }, async () => {
  const env = cleanEnv({ npm_config_prefix: join(scratch, 'prefix') });
  // The build already ran (npm test builds first); --ignore-scripts packs what it made.
  const packed = await execFile('npm', ['pack', '--pack-destination', scratch, '--silent', '--ignore-scripts'], {
    cwd: ROOT,
    env,
  });
  const tarball = join(scratch, packed.stdout.trim().split('\n').pop() ?? '');
  await execFile('npm', ['install', '-g', '--no-audit', '--no-fund', '--silent', tarball], { env });
  const bin = join(scratch, 'prefix', 'bin', 'queenctl');
  assert.match((await execFile(bin, ['--version'], { env })).stdout, new RegExp(VERSION));
  // The start-up lever of issue 6: the installed copy runs from its build-time V8 code cache.
  const debug = await execFile(bin, ['version'], { env: { ...env, QUEENCTL_DEBUG: '1' } });
  assert.match(debug.stderr, /code cache accepted/);
  const leaseId = sim.mint({ partitions: 2 });
  const { stdout } = await execFile(bin, ['lease', 'extend', leaseId, '--server', sim.url, '-o', 'json'], { env });
  assert.equal(JSON.parse(stdout).renewed, 2);
});
