/**
 * The package as users get it: packed as `npm pack` packs it and installed with `npm install -g`
 * into a scratch prefix, and the installed `queenctl` on PATH renewing a lease; then the V8 code
 * cache it starts from, on the Node that built the package and on any other (CI runs this file
 * on Node 20, 22 and 24 against one build: .ci/run).
 *
 * Each run of node costs a start-up and CI runs this file three times: a run here proves
 * something no other run does (a kind of run, a report of the cache, a way the cache directory
 * is found), and the runs of the install itself are those the shipped caches are checked on.
 */
import assert from 'node:assert/strict';
import {
  type ExecFileOptions,
  execFile as execFileCallback,
  type PromiseWithChild,
  spawnSync,
} from 'node:child_process';
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { VERSION } from '../../src/version.js';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { cleanEnv, needsNode } from '../support/cli.js';
import { checkSbom } from '../support/sbom.js';

/** The npm package is node's bin: a standalone executable (QUEENCTL_EXE) is not in it. */
const npmPackage = needsNode('the npm package, its bin and its code cache');
// Asynchronous on purpose: the simulator runs in this process and must keep answering. It
// rejects on an exit other than 0; each run has a time limit well under the test's own.
const execFileAsync = promisify(execFileCallback);
const execFile = (file: string, args: string[], options: ExecFileOptions): PromiseWithChild<ExecResult> =>
  execFileAsync(file, args, { timeout: 60_000, killSignal: 'SIGKILL', ...options, encoding: 'utf8' });
type ExecResult = { stdout: string; stderr: string };
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
let sim: Simulator;
let scratch: string;
let env: NodeJS.ProcessEnv;
let installed: string;

before(async () => {
  sim = await startSimulator();
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-pack-'));
  // HOME is an empty directory (cleanEnv), so npm is given the user's own settings and cache
  // (as `npm test` exports them, else npm's defaults under the real home): the registry's CA and
  // the packages `npm ci` cached, for an install that works offline.
  env = cleanEnv({
    npm_config_prefix: join(scratch, 'prefix'),
    npm_config_userconfig: process.env.npm_config_userconfig ?? join(homedir(), '.npmrc'),
    npm_config_cache: process.env.npm_config_cache ?? join(homedir(), '.npm'),
  });
});
after(async () => {
  await sim.close();
  rmSync(scratch, { recursive: true, force: true });
});

it('src/version.ts matches package.json', () => {
  assert.equal(VERSION, JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
});

it('the bundle requires at run time only its package.json dependencies; the licences and SBOM of the rest', (t) => {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
  };
  const dist = join(ROOT, 'dist');
  const files = readdirSync(dist).filter((name) => /^queenctl.*\.cjs$/.test(name));
  if (files.length === 0) return t.skip('no bundle: npm run build makes it');
  const required = new Set<string>();
  for (const name of files) {
    for (const [, specifier] of readFileSync(join(dist, name), 'utf8').matchAll(/\brequire\("([^"./][^"]*)"\)/g)) {
      const pkg = /^(@[^/]+\/[^/]+|[^/]+)/.exec(specifier as string)?.[1] as string;
      // node:sqlite (undici's cache store) is built into Node 22+, not Node 20: node: is never a package.
      if (!pkg.startsWith('node:') && !isBuiltin(pkg)) required.add(pkg);
    }
  }
  // undici's index (behind a proxy) is the one package required from node_modules.
  assert.deepEqual([...required].sort(), Object.keys(manifest.dependencies).sort());
  // What is bundled is not installed with the package: its licence is in the package's files.
  const licences = readFileSync(join(dist, 'THIRD-PARTY-LICENSES'), 'utf8');
  for (const pkg of ['chalk', 'commander', 'json-p3', 'ora', 'prom-client', 'yaml']) {
    assert.ok(manifest.devDependencies[pkg], `${pkg} is bundled: a devDependency, not installed by users`);
    assert.match(licences, new RegExp(`^${pkg} \\d+\\.\\d+\\.\\d+\\n\\n\\s*\\S`, 'm'), `${pkg}'s licence`);
  }
  // And declared (docs/security.md): the SBOM names each package whose licence the build carries,
  // at the version bundled, and no other.
  const components = checkSbom(readFileSync(join(dist, 'sbom.cdx.json'), 'utf8'));
  const licensed = [...licences.matchAll(/^(@?[a-z0-9][\w./-]*) (\d+\.\d+\.\d+\S*)\n\n/gm)].map(
    ([, name, version]) => `${name}@${version}`,
  );
  assert.deepEqual([...components].map(([name, { version }]) => `${name}@${version}`).sort(), licensed.sort());
});

/** What the installed bin on PATH reported for `help` and `lease extend` (QUEENCTL_DEBUG). */
let installRuns: Array<{ kind: string; stderr: string }> = [];
/** Where those runs looked for their own caches. */
let installCacheHome: string;

it('npm install -g of the package as npm packs it gives a working queenctl on PATH', {
  skip: npmPackage,
  timeout: 120_000,
}, async () => {
  // Packed by `npm pack` itself, its prepack and postpack included (scripts/pack-manifest.mjs:
  // the packed package.json has no scripts; the build already ran, npm test builds first), then
  // that tarball installed as a user installs it. Its dependencies from npm's cache when they are
  // there (they are: `npm ci` put them there).
  const packed = await execFile('npm', ['pack', '--silent', '--pack-destination', scratch, ROOT], { env });
  const tarball = join(scratch, packed.stdout.trim().split('\n').at(-1) as string);
  const manifest = spawnSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }).stdout;
  assert.equal(JSON.parse(manifest).scripts, undefined, 'the packed package.json has no scripts');
  const npmArgs = ['install', '-g', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel', 'warn'];
  const install = await execFile('npm', [...npmArgs, tarball], { env });
  // Issue 33: the package carried `prepare`, and npm warned of install scripts not allowed.
  assert.doesNotMatch(install.stderr, /warn/i, `npm install -g warned:\n${install.stderr}`);
  installed = join(scratch, 'prefix', 'lib', 'node_modules', 'queenctl');
  assert.ok(!lstatSync(installed).isSymbolicLink(), 'a copy of the package, not a link to the working tree');
  assert.equal(existsSync(join(installed, 'src')), false, 'only what package.json `files` names');
  assert.ok(existsSync(join(installed, 'dist', 'THIRD-PARTY-LICENSES')), 'the licences of what the bundle carries');
  checkSbom(readFileSync(join(installed, 'dist', 'sbom.cdx.json'), 'utf8'));
  assert.ok(!existsSync(join(installed, 'node_modules', 'yaml')), 'a bundled package is not installed');
  const bin = join(scratch, 'prefix', 'bin', 'queenctl');
  // Run as a user runs it, reporting the cache it starts from (checked below, per Node).
  installCacheHome = join(scratch, 'install-cache');
  const debugEnv = { ...env, QUEENCTL_DEBUG: '1', XDG_CACHE_HOME: installCacheHome };
  // `--version` alone reads the version off the bundle's first line (bin/queenctl.cjs): `help` is
  // the local run that loads the bundle.
  const version = await execFile(bin, ['--version'], { env: debugEnv });
  assert.equal(version.stdout, `${VERSION}\n`);
  assert.equal(version.stderr, '', 'no code cache: the bundle is not loaded');
  const help = await execFile(bin, ['help'], { env: debugEnv });
  assert.match(help.stdout, /^Usage: queenctl /);
  const leaseId = sim.mint({ partitions: 2 });
  const extend = await execFile(bin, ['lease', 'extend', leaseId, '--server', sim.url, '-o', 'json'], {
    env: debugEnv,
  });
  assert.equal(JSON.parse(extend.stdout).renewed, 2);
  installRuns = [
    { kind: 'local', stderr: help.stderr },
    { kind: 'net', stderr: extend.stderr },
  ];
  // package.json's `man`: npm links every page into the prefix's share/man/man1 (issue 26).
  const manPage = join(scratch, 'prefix', 'share', 'man', 'man1', 'queenctl-lease-extend.1');
  assert.ok(existsSync(manPage), `npm install -g linked no ${manPage}`);
  assert.match(readFileSync(manPage, 'utf8'), /^\.TH "QUEENCTL\\-LEASE\\-EXTEND" 1 /m);
});

const man = spawnSync('man', ['-w', 'man'], { timeout: 10_000 });
const noMan = man.error ? `man is not installed (${man.error.message})` : false;

it('man finds the installed pages under the install prefix', {
  skip: npmPackage || noMan,
  timeout: 60_000,
}, async () => {
  assert.ok(installed, 'the package was installed by the test above');
  const manPath = join(scratch, 'prefix', 'share', 'man');
  // A prefix of its own is not on man's default path, as /usr/local is: MANPATH names it.
  const manEnv = { ...env, MANPATH: manPath };
  for (const page of ['queenctl', 'queenctl-lease-extend', 'queenctl-config-set-context']) {
    const { stdout } = await execFile('man', ['-w', page], { env: manEnv, timeout: 20_000 });
    // man names the file the link in man1 points to: the package's own copy, under the prefix.
    assert.equal(realpathSync(stdout.trim()), realpathSync(join(manPath, 'man1', `${page}.1`)), page);
    assert.ok(stdout.startsWith(join(scratch, 'prefix')), stdout);
  }
});

/** The installed copy (or a copy of it) run by the Node running this test, with the cache report. */
async function queenctl(
  packageDir: string,
  args: string[],
  extra: Record<string, string | undefined>,
  input = '',
): Promise<{ stdout: string; stderr: string }> {
  const bin = join(packageDir, 'bin', 'queenctl.cjs');
  const running = execFile(process.execPath, [bin, ...args], { env: { ...env, QUEENCTL_DEBUG: '1', ...extra } });
  running.child.stdin?.end(input);
  return running;
}

/** One id on the command line: node:net, no undici (src/commands/globals.ts). */
const extendArgs = (): string[] => ['lease', 'extend', sim.mint(), '--server', sim.url, '-o', 'json'];
/** Ids from standard input: undici, and its file of the bundle. */
const bulkExtendArgs = (): string[] => ['lease', 'extend', '-', '--server', sim.url, '-o', 'ndjson'];

/** `// queenctl build <id> node <node> version <version>`, the bundle's first line (scripts/bundle.mjs). */
function buildOf(packageDir: string): { id: string; node: string } {
  const line = readFileSync(join(packageDir, 'dist', 'queenctl.cjs'), 'utf8').split('\n', 1)[0] ?? '';
  const match = /^\/\/ queenctl build ([0-9a-f]+) node (v\S+) version (\S+)$/.exec(line);
  assert.ok(match, `the bundle names its build and Node on its first line, got: ${line}`);
  return { id: match[1] as string, node: match[2] as string };
}

const cacheDir = (cacheHome: string): string => join(cacheHome, 'queenctl', 'code');
/**
 * A copy of the installed package without the cache shipped for each file of the bundle
 * (scripts/bundle.mjs): it takes another Node's path. Its dependencies are the installed ones
 * (a link: copying them costs the suite and proves nothing).
 */
function copyWithoutShippedCaches(name: string): string {
  const copy = join(scratch, name);
  mkdirSync(copy);
  for (const entry of readdirSync(installed)) {
    if (entry === 'node_modules') symlinkSync(join(installed, entry), join(copy, entry));
    else cpSync(join(installed, entry), join(copy, entry), { recursive: true });
  }
  for (const file of readdirSync(join(copy, 'dist'))) {
    if (file.endsWith('.cache')) rmSync(join(copy, 'dist', file));
  }
  return copy;
}

/** undici's file is loaded under --liftoff-only on Node 20, and has caches of that kind (bin/queenctl.cjs). */
const UNDICI_KIND = Number.parseInt(process.versions.v8, 10) < 12 ? 'net+liftoff' : 'net';

const escaped = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

it('on the Node that built it, the installed copy starts from the shipped code cache and writes none', {
  skip: npmPackage,
}, async (t) => {
  assert.ok(installed, 'the package was installed by the test above');
  const builder = buildOf(installed).node;
  if (builder !== process.version) return t.skip(`the package was built by node ${builder}`);
  // Each kind of run (bin/queenctl.cjs) from the cache shipped for it: the install's own runs.
  assert.deepEqual(
    installRuns.map((run) => run.kind),
    ['local', 'net'],
  );
  for (const { kind, stderr } of installRuns) {
    assert.match(
      stderr,
      new RegExp(`code cache accepted \\(shipped with the package\\): .*queenctl\\.cjs\\.${kind}\\.cache`),
    );
    assert.doesNotMatch(stderr, /code cache (rejected|absent|written)/);
  }
  assert.equal(existsSync(cacheDir(installCacheHome)), false);
});

it('on another Node, the first run makes a code cache for that Node and the second run uses it', {
  skip: npmPackage,
}, async (t) => {
  assert.ok(installed, 'the package was installed by the test above');
  const build = buildOf(installed);
  if (build.node === process.version) return t.skip('this is the Node that built the package (CI runs 22 and 24)');
  const cacheHome = mkdtempSync(join(scratch, 'cache-'));
  const first = await queenctl(installed, extendArgs(), { XDG_CACHE_HOME: cacheHome });
  assert.match(first.stderr, /code cache rejected \(shipped with the package\)/);
  const made = join(cacheDir(cacheHome), `${process.version}-${process.arch}-${build.id}.net.cache`);
  assert.match(first.stderr, new RegExp(`code cache written for node ${escaped(process.version)}: ${escaped(made)}`));
  const second = await queenctl(installed, extendArgs(), { XDG_CACHE_HOME: cacheHome });
  assert.equal(JSON.parse(second.stdout).renewed, 1);
  assert.match(
    second.stderr,
    new RegExp(`code cache accepted \\(made on this machine for node ${escaped(process.version)}\\): ${escaped(made)}`),
  );
  assert.doesNotMatch(second.stderr, /code cache written/);
});

/**
 * Any Node: a copy of the installed package without its shipped cache takes the path another
 * Node version takes, so the cache directory's rules are checked on every version CI runs.
 */
const EACH_KIND =
  'without a cache that fits, each kind of run makes its own and the next run of that kind uses it; ' +
  'caches of other builds and Node versions go once a week old';
it(EACH_KIND, {
  skip: npmPackage,
}, async () => {
  assert.ok(installed, 'the package was installed by the test above');
  const copy = copyWithoutShippedCaches('no-shipped-cache');
  const prefix = `${process.version}-${process.arch}-${buildOf(copy).id}`;
  const cacheHome = mkdtempSync(join(scratch, 'cache-'));
  const dir = cacheDir(cacheHome);
  const extra = { XDG_CACHE_HOME: cacheHome };
  // Left by other builds and Node versions: one 8 days old, one in use (fresh).
  mkdirSync(dir, { recursive: true });
  const eightDaysAgo = new Date(Date.now() - 8 * 24 * 3600 * 1000);
  const old = 'v0.0.1-x64-0123456789abcdef.net.cache';
  const fresh = 'v0.0.2-x64-0123456789abcdef.net.cache';
  writeFileSync(join(dir, old), 'old');
  utimesSync(join(dir, old), eightDaysAgo, eightDaysAgo);
  writeFileSync(join(dir, fresh), 'in use by another Node');

  // Often the first run after an install: a local run, with a cache of its own. Writing it
  // removes the week-old cache of another build; the fresh one stays.
  const local = await queenctl(copy, ['help'], extra);
  assert.match(local.stderr, /code cache absent/);
  // undici (dist/queenctl-undici.cjs) is loaded only by a run that sends requests.
  assert.doesNotMatch(local.stderr, /queenctl-undici/);
  assert.deepEqual(readdirSync(dir).sort(), [`${prefix}.local.cache`, fresh].sort());
  // A lease run does not use it (on Node 20 it runs under other V8 flags): it makes the net kind's.
  // One id goes over node:net, so undici's file is not loaded.
  const lease = await queenctl(copy, extendArgs(), extra);
  assert.match(lease.stderr, /code cache absent/);
  assert.doesNotMatch(lease.stderr, /queenctl-undici/);
  assert.deepEqual(readdirSync(dir).sort(), [`${prefix}.local.cache`, `${prefix}.net.cache`, fresh].sort());
  // Ids from standard input load undici's file, and leave a cache for it.
  const bulk = await queenctl(copy, bulkExtendArgs(), extra, `${sim.mint()}\n`);
  assert.match(bulk.stderr, /code cache of queenctl-undici\.cjs absent/);
  assert.deepEqual(
    readdirSync(dir).sort(),
    [`${prefix}.local.cache`, `${prefix}.${UNDICI_KIND}-undici.cache`, `${prefix}.net.cache`, fresh].sort(),
  );
  // The next run of each kind uses what the first made: a bulk run both the net kind's and
  // undici's, a local run the local kind's.
  const runs: Array<[string[], string, string]> = [
    [bulkExtendArgs(), `${sim.mint()}\n`, 'net'],
    [['help'], '', 'local'],
  ];
  for (const [args, input, kind] of runs) {
    const again = await queenctl(copy, args, extra, input);
    assert.match(again.stderr, new RegExp(`code cache accepted \\(made on this machine .*\\.${kind}\\.cache`));
    const undici = `${escaped(UNDICI_KIND)}-undici\\.cache`;
    if (input !== '') {
      assert.equal(JSON.parse(again.stdout.trim()).renewed, 1);
      assert.match(
        again.stderr,
        new RegExp(`code cache of queenctl-undici\\.cjs accepted \\(made on this machine .*\\.${undici}`),
      );
    }
    assert.doesNotMatch(again.stderr, /code cache written/);
  }

  // What V8 refuses (another build of the same length, a damaged file) is made again.
  writeFileSync(join(dir, `${prefix}.net.cache`), 'not a code cache');
  const damaged = await queenctl(copy, extendArgs(), extra);
  assert.equal(JSON.parse(damaged.stdout).renewed, 1);
  assert.match(damaged.stderr, /code cache rejected \(made on this machine/);
  assert.match(damaged.stderr, /code cache written/);
  // Written in its place (a written cache is accepted by the next run: the runs above).
  assert.notEqual(readFileSync(join(dir, `${prefix}.net.cache`), 'utf8'), 'not a code cache');
});

it('a cache directory that cannot be written, or no HOME, changes nothing but the report', {
  skip: npmPackage,
}, async () => {
  assert.ok(installed, 'the package was installed by the test above');
  const copy = copyWithoutShippedCaches('unwritable');
  // A file where the directory should be: refused even to root, who may write a read-only one.
  const file = join(scratch, 'a-file');
  writeFileSync(file, '');
  const cases = [
    [
      { XDG_CACHE_HOME: join(file, 'cache') },
      /code cache not written to .* \(ENOTDIR\): every run compiles the bundle/,
    ],
    [{ XDG_CACHE_HOME: undefined, HOME: file }, /code cache not written to .* \(ENOTDIR\)/],
    [{ XDG_CACHE_HOME: undefined, HOME: undefined }, /code cache not written: no HOME/],
    [{ XDG_CACHE_HOME: 'relative/cache', HOME: undefined }, /code cache not written: no HOME/],
  ] as const;
  // Some cases have no HOME, where the default config would be the machine's: an empty one instead
  // (a file named by QUEEN_CONFIG must exist).
  const noConfig = join(scratch, 'no-config.yaml');
  writeFileSync(noConfig, '');
  for (const [extra, report] of cases) {
    const result = await queenctl(copy, extendArgs(), { QUEEN_CONFIG: noConfig, ...extra });
    assert.equal(JSON.parse(result.stdout).renewed, 1);
    assert.match(result.stderr, report);
  }
  // The installed copy, with the cache it ships: the same with no HOME at all, whichever Node
  // this is (on the one that built it, the shipped cache is taken and nothing is written).
  for (const [extra] of [cases[2]]) {
    const result = await queenctl(installed, extendArgs(), { QUEEN_CONFIG: noConfig, ...extra });
    assert.equal(JSON.parse(result.stdout).renewed, 1);
    assert.doesNotMatch(result.stderr, /error/i);
  }
});
