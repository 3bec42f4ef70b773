/**
 * What bin/queenctl.cjs makes a run load, read from Node's own list of the modules a process
 * loaded (written at exit by a preloaded script): start-up cost is a feature (issue 19), and the
 * loader decides much of it. Runs that send nothing load no HTTP client (undici loads node:http)
 * and not node:v8 (whose flag only a run that may load undici on Node 20 needs); a run whose config
 * file is unchanged does not load the YAML parser.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { BIN, cleanEnv, needsNode, runProcess } from '../support/cli.js';

const skip = needsNode('the npm package loader, preloading a script into it');
let scratch: string;
let sim: Simulator;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-loader-'));
  // Written at exit: the built-in modules loaded, and the bundle's files required through the loader.
  writeFileSync(
    join(scratch, 'report.cjs'),
    `process.on('exit', () => require('node:fs').writeFileSync(process.env.LOADED_REPORT, JSON.stringify({
      builtins: process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13)),
      argv: process.argv,
    })));\n`,
  );
  sim = await startSimulator();
});
after(async () => {
  await sim.close();
  rmSync(scratch, { recursive: true, force: true });
});

let runs = 0;
/** The built-in modules a run of bin/queenctl.cjs loaded, and its exit code. */
async function loadedBy(args: string[]): Promise<{ builtins: Set<string>; code: number | null }> {
  const report = join(scratch, `report-${runs++}.json`);
  const result = await runProcess(process.execPath, ['--require', join(scratch, 'report.cjs'), BIN, ...args], {
    env: cleanEnv({
      LOADED_REPORT: report,
      QUEEN_CONFIG: join(scratch, 'none.yaml'),
      XDG_CACHE_HOME: join(scratch, 'cache'),
    }),
  });
  const { builtins } = JSON.parse(readFileSync(report, 'utf8')) as { builtins: string[] };
  return { builtins: new Set(builtins), code: result.code };
}

const LIFTOFF_NODE = Number.parseInt(process.versions.v8, 10) < 12;

describe('bin/queenctl.cjs: what a run loads', { skip }, () => {
  for (const args of [
    ['--version'],
    ['help'],
    ['config', 'get-contexts'],
    ['completion', 'bash'],
    ['--no-such-flag'],
  ]) {
    it(`\`queenctl ${args.join(' ')}\` loads neither an HTTP client nor node:v8`, async () => {
      const { builtins } = await loadedBy(args);
      // undici requires node:http as it loads: neither is here. (node:net may be: stdio on pipes.)
      for (const module of ['v8', 'http', 'https', 'tls']) assert.ok(!builtins.has(module), `${module} was loaded`);
    });
  }

  it('a config file read before, unchanged, is not parsed again (src/config/memo.ts): no YAML parser', async () => {
    const config = join(scratch, 'config.yaml');
    writeFileSync(config, 'current-context: a\ncontexts:\n  - name: a\n    server: http://127.0.0.1:9\n  - name: b\n');
    const env = cleanEnv({ QUEEN_CONFIG: config, XDG_CACHE_HOME: join(scratch, 'memo-cache'), QUEENCTL_DEBUG: '1' });
    const run = (args: string[]) => runProcess(process.execPath, [BIN, ...args], { env });
    const first = await run(['config', 'get-contexts', '-o', 'name']);
    assert.match(first.stderr, /queenctl-yaml\.cjs/);
    const second = await run(['config', 'current-context']);
    assert.equal(second.stdout, 'a\n');
    assert.doesNotMatch(second.stderr, /queenctl-yaml\.cjs/);
    // An edit is read at once: the memo is for one text of the file.
    assert.equal((await run(['config', 'use-context', 'b'])).code, 0);
    const third = await run(['config', 'current-context']);
    assert.equal(third.stdout, 'b\n');
    assert.match(third.stderr, /queenctl-yaml\.cjs/);
  });

  const flags = LIFTOFF_NODE ? 'sets V8 flags through node:v8 (Node 20)' : 'leaves V8 flags alone (Node 22+)';
  it(`a lease run ${flags}`, async () => {
    const { builtins, code } = await loadedBy(['lease', 'extend', sim.mint(), '--server', sim.url, '-o', 'json']);
    assert.equal(code, 0);
    assert.equal(builtins.has('v8'), LIFTOFF_NODE);
  });
});
