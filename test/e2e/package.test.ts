/**
 * The package as users get it: `npm pack`, `npm install -g` into a scratch prefix, and the
 * installed `queenctl` on PATH renewing a lease.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { VERSION } from '../../src/version.js';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { type CliResult, runProcess } from '../support/cli.js';

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
  const env = { npm_config_prefix: join(scratch, 'prefix') };
  // Asynchronous on purpose: the simulator runs in this process and must keep answering.
  const run = async (command: string, args: string[], extra: Record<string, string> = {}): Promise<CliResult> => {
    const result = await runProcess(command, args, { cwd: ROOT, env: { ...env, ...extra }, timeoutMs: 100_000 });
    assert.equal(result.code, 0, `${command} ${args.join(' ')}\n${result.stderr}`);
    return result;
  };
  // The build already ran (npm test builds first); --ignore-scripts packs what it made.
  const packed = await run('npm', ['pack', '--pack-destination', scratch, '--silent', '--ignore-scripts']);
  const tarball = join(scratch, packed.stdout.trim().split('\n').pop() ?? '');
  await run('npm', ['install', '-g', '--no-audit', '--no-fund', '--silent', tarball]);
  const bin = join(scratch, 'prefix', 'bin', 'queenctl');
  assert.match((await run(bin, ['--version'])).stdout, new RegExp(VERSION));
  // The start-up lever of issue 6: the installed copy runs from its build-time V8 code cache.
  const debug = await run(bin, ['version'], { QUEENCTL_DEBUG: '1' });
  assert.match(debug.stderr, /code cache accepted/);
  const leaseId = sim.mint({ partitions: 2 });
  const { stdout } = await run(bin, ['lease', 'extend', leaseId, '--server', sim.url, '-o', 'json']);
  assert.equal(JSON.parse(stdout).renewed, 2);
});
