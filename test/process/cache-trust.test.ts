/**
 * Caches made on this machine are used only when they are the user's own (docs/security.md,
 * "Code caches and config memos"): what another user planted in a shared XDG_CACHE_HOME must not
 * run as this one (CVE-2019-11244 was kubectl's). Through the published bin and the kernel's own
 * owners and modes: the suite runs as root, and a planted file or directory is given to `nobody`
 * (65534), as one written by another user of a shared cache directory would be.
 *
 * - A V8 code cache runs as it is: one made from another source of the same length runs that
 *   source. Planted here is a cache of a "bundle" that marks a file and exits; trusted, it runs
 *   (the first test shows it does). Not the user's own, it is ignored and the run is as ever.
 * - A config memo decides where the token goes: a memo saying context `prod` is another server,
 *   not the user's own, is ignored, and the token goes only where the config file says.
 *
 * Each way a code cache may not be the user's own is its own case, and -v says why, once; for
 * the memo, one such case (each other is the same check: test/unit/config-memo.test.ts).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { VERSION } from '../../src/version.js';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { describeRun, needsNode, runCli } from '../support/cli.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BUNDLE = join(ROOT, 'dist', 'queenctl.cjs');
const NOBODY = 65534;
const skip =
  needsNode('the npm package’s code caches and config memo') ||
  (process.geteuid?.() === 0 ? false : 'needs root, to give a file to another user (CI runs as root)');

let scratch: string;
let sim: Simulator;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-trust-'));
  sim = await startSimulator();
});
after(async () => {
  await sim.close();
  rmSync(scratch, { recursive: true, force: true });
});

/**
 * How a cache may fail to be the user's own, done to a copy of a cache home holding a cache (or
 * memo) at `file` in the directory `dir` (queenctl/code or queenctl/config). `why` is what -v
 * must say.
 */
interface Planting {
  what: string;
  plant(file: string, dir: string): void;
  why: RegExp;
}
const PLANTINGS: Planting[] = [
  {
    what: 'the file owned by another user',
    plant: (file) => chownSync(file, NOBODY, NOBODY),
    why: /\S+ is owned by uid 65534, not by you \(uid 0\)/,
  },
  {
    what: 'its directory owned by another user',
    plant: (_file, dir) => chownSync(dir, NOBODY, NOBODY),
    why: /\/queenctl\/\w+ is owned by uid 65534, not by you \(uid 0\)/,
  },
  {
    what: 'its directory writable by its group',
    plant: (_file, dir) => chmodSync(dir, 0o770),
    why: /\/queenctl\/\w+ is writable by its group/,
  },
  {
    what: 'queenctl/ above it writable by anyone',
    plant: (_file, dir) => chmodSync(join(dir, '..'), 0o777),
    why: /\/queenctl is writable by others/,
  },
  {
    what: 'a symbolic link instead of the file',
    plant: (file) => {
      renameSync(file, `${file}.real`);
      symlinkSync(`${file}.real`, file);
    },
    why: /\S+ is a symbolic link/,
  },
  {
    what: 'the file of mode 0644',
    plant: (file) => chmodSync(file, 0o644),
    why: /\S+ has mode 0644, not 0600/,
  },
];

/** A copy of `cacheHome` (modes kept), for one case to plant in. */
function copyOf(cacheHome: string, name: string): string {
  const copy = join(scratch, name);
  cpSync(cacheHome, copy, { recursive: true });
  for (const dir of ['', 'queenctl', ...readdirSync(join(cacheHome, 'queenctl')).map((d) => `queenctl/${d}`)])
    chmodSync(join(copy, dir), 0o700);
  return copy;
}

describe('a code cache that is not the user’s own never runs', { skip }, () => {
  let cacheHome: string;
  let mark: string;
  let cacheName: string;

  before(() => {
    // The name bin/queenctl.cjs gives this Node's cache of the bundle for a run that sends nothing.
    const build = /^\/\/ queenctl build ([0-9a-f]+)/.exec(readFileSync(BUNDLE, 'utf8'))?.[1];
    assert.ok(build, 'the bundle names its build on its first line');
    cacheName = `${process.version}-${process.arch}-${build}.local.cache`;
    cacheHome = join(scratch, 'code-cache');
    mkdirSync(join(cacheHome, 'queenctl', 'code'), { recursive: true, mode: 0o700 });
    mark = join(scratch, 'planted-code-ran');
    // A source of the bundle's length, wrapped as the bin wraps it, that marks a file; compiled,
    // run (so its function is in the cache too) and its cache written: by a Node like the one the
    // bin runs on, with the same flags, so V8 takes it for the real bundle.
    const plant = `
      const fs = require('node:fs');
      const { Script } = require('node:vm');
      const [bundle, mark, out] = process.argv.slice(1);
      const wrap = (body) => '(function (exports, require, module, __filename, __dirname) {' + body + '\\n})';
      const length = wrap(fs.readFileSync(bundle, 'utf8')).length;
      const code = 'require("node:fs").writeFileSync(' + JSON.stringify(mark) + ', "ran");' +
        'module.exports.main = async () => {};';
      const source = wrap(code + '/*' + ' '.repeat(length - wrap(code).length - 4) + '*/');
      if (source.length !== length) throw new Error('not the same length');
      const script = new Script(source, { filename: bundle });
      const module = { exports: {} };
      script.runInThisContext()(module.exports, require, module, bundle, '.');
      module.exports.main();
      fs.rmSync(mark);
      fs.writeFileSync(out, script.createCachedData(), { mode: 0o600 });
    `;
    const out = join(cacheHome, 'queenctl', 'code', cacheName);
    const made = spawnSync(process.execPath, ['-e', plant, BUNDLE, mark, out], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(made.status, 0, made.stderr);
  });

  const version = async (home: string): Promise<string> => {
    const result = await runCli(['--version', '-v'], { exit: 0, env: { XDG_CACHE_HOME: home } });
    assert.equal(result.stdout, `${VERSION}\n`, describeRun(result));
    return result.stderr;
  };

  it('the planted cache, were it the user’s own, would run (what the cases below keep from running)', async () => {
    const home = copyOf(cacheHome, 'code-own');
    // `help`: `--version` alone does not load the bundle (bin/queenctl.cjs).
    const result = await runCli(['help'], { exit: 0, env: { XDG_CACHE_HOME: home } });
    assert.equal(result.stdout, '', 'the planted code ran instead of queenctl');
    assert.equal(existsSync(mark), true);
    rmSync(mark);
  });

  for (const [index, { what, plant, why }] of PLANTINGS.entries()) {
    it(what, async () => {
      const home = copyOf(cacheHome, `code-${index}`);
      const dir = join(home, 'queenctl', 'code');
      plant(join(dir, cacheName), dir);
      const stderr = await version(home);
      assert.equal(existsSync(mark), false, 'the planted code ran');
      const lines = stderr.split('\n').filter((line) => line.startsWith('queenctl: code cache ignored: '));
      assert.equal(lines.length, 1, stderr);
      assert.match(lines[0] as string, why);
      assert.match(lines[0] as string, /\(a cache made on this machine runs only if it is your own\)$/);
    });
  }

  it('an untrusted directory is said once for every file of the bundle a run loads', async () => {
    const home = copyOf(cacheHome, 'code-once');
    chmodSync(join(home, 'queenctl', 'code'), 0o777);
    // Ids from standard input: undici's file of the bundle too, each with a cache to look for.
    const result = await runCli(['lease', 'extend', '-', '--server', sim.url, '-o', 'ndjson', '-v'], {
      exit: 0,
      stdin: `${sim.mint()}\n`,
      env: { XDG_CACHE_HOME: home, QUEENCTL_DEBUG: '1' },
    });
    assert.match(result.stderr, /code cache of queenctl-undici\.cjs/, 'undici’s file was loaded');
    assert.equal(result.stderr.match(/code cache ignored: /g)?.length, 1, result.stderr);
    assert.equal(existsSync(mark), false);
  });
});

describe('a config memo that is not the user’s own sends no token anywhere', { skip }, () => {
  const TOKEN = 'the-prod-token-4f1c';
  let elsewhere: Server;
  let elsewhereUrl: string;
  const seen: IncomingHttpHeaders[] = [];
  let config: string;
  let cacheHome: string;
  let memoName: string;

  before(async () => {
    elsewhere = createServer((request, response) => {
      seen.push(request.headers);
      response.writeHead(401).end();
    });
    await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
    elsewhereUrl = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}`;
    config = join(scratch, 'config.yaml');
    writeFileSync(
      config,
      `current-context: prod\ncontexts:\n  - name: prod\n    server: ${sim.url}\n    token-ref: env\n`,
    );
    // The user's own run writes the memo of this config; the planting rewrites it to name another
    // server for prod.
    cacheHome = join(scratch, 'memo-cache');
    const result = await extend(cacheHome, 0);
    assert.equal(JSON.parse(result.stdout).renewed, 1, describeRun(result));
    const dir = join(cacheHome, 'queenctl', 'config');
    [memoName] = readdirSync(dir) as [string];
    const file = join(dir, memoName);
    const memo = readFileSync(file, 'utf8');
    assert.ok(memo.includes(sim.url), memo);
    writeFileSync(file, memo.replaceAll(sim.url, elsewhereUrl));
  });
  after(() => new Promise<void>((resolve) => elsewhere.close(() => resolve())));

  function extend(home: string, exit: number): ReturnType<typeof runCli> {
    return runCli(['lease', 'extend', sim.mint(), '-o', 'json', '-v'], {
      exit,
      env: { QUEEN_CONFIG: config, QUEEN_TOKEN: TOKEN, XDG_CACHE_HOME: home },
    });
  }

  it('the planted memo, were it the user’s own, would send the token elsewhere (prevented below)', async () => {
    const result = await extend(copyOf(cacheHome, 'memo-own'), 3);
    assert.match(result.stderr, new RegExp(`server ${elsewhereUrl}`), describeRun(result));
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.authorization, `Bearer ${TOKEN}`);
    seen.length = 0;
  });

  // One planting through the binary: the memo is kept only by the bundle (an unbundled build keeps
  // none), so this is what shows the run consults it, checks it and sends the token where the
  // file says. Each other way a memo may not be the user's own is the same check, tested on the
  // kernel's owners and modes in-process (test/unit/config-memo.test.ts, every one of these and
  // more): a process each added ~0.12 CPU-s and nothing that test does not show.
  for (const [index, { what, plant, why }] of PLANTINGS.slice(0, 1).entries()) {
    it(what, async () => {
      const home = copyOf(cacheHome, `memo-${index}`);
      const dir = join(home, 'queenctl', 'config');
      plant(join(dir, memoName), dir);
      const result = await extend(home, 0);
      assert.equal(JSON.parse(result.stdout).renewed, 1, describeRun(result));
      assert.equal(seen.length, 0, 'the token went to the server the planted memo named');
      const lines = result.stderr.split('\n').filter((line) => line.startsWith('queenctl: config memo ignored'));
      assert.equal(lines.length, 1, result.stderr);
      assert.match(lines[0] as string, why);
      assert.match(result.stderr, new RegExp(`server ${sim.url}`));
    });
  }
});
