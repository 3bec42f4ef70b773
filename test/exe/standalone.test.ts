/**
 * The standalone executable (issue 18, docs/standalone.md): what only it can get wrong. Run by
 * `npm run test:exe`, which builds it and sets QUEENCTL_EXE; left out of `npm test`.
 *
 * - the release archive: SHA256SUMS checks it, and the executable unpacked from it runs with an
 *   empty environment, and in a chroot holding nothing but the libraries `ldd` lists;
 * - the same outcome as the npm package on this Node.js (stdout, stderr, exit code): help, usage
 *   errors, a missing or read-only HOME, a closed stdout; renewals, https with --cacert and
 *   NODE_EXTRA_CA_CERTS, a signal;
 * - what is its own: NODE_OPTIONS ignored and BUN_OPTIONS named, with a message; nothing of the
 *   directory it runs in read as its configuration (.env, bunfig.toml); no file written; the
 *   bundle it was compiled from, by its checksum;
 * - the build: a platform with no Bun runtime, and a compile that fails, leave nothing.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { VERSION } from '../../src/version.js';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { BIN, type CliResult, describeRun, runProcess, runShell, startProcess } from '../support/cli.js';
import { checkSbom } from '../support/sbom.js';
import { makeCertificate, type TestCertificate } from '../support/tls.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const EXE = process.env.QUEENCTL_EXE;
const skip = EXE ? false : 'QUEENCTL_EXE is not set: `npm run test:exe` builds the executable and runs this file';
const manifest = (): {
  exe: string;
  archive: string;
  sums: string;
  platform: string;
  runtime: { name: string; version: string; package: string; binary: string };
  bundle: string;
  bundleSha256: string;
} => JSON.parse(readFileSync(join(dirname(dirname(EXE as string)), 'build.json'), 'utf8'));

let scratch: string;
let sim: Simulator;
let secure: Simulator;
let certificate: TestCertificate;

before(async () => {
  if (!EXE) return;
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-exe-'));
  certificate = makeCertificate();
  sim = await startSimulator();
  secure = await startSimulator({ tls: { key: certificate.key, cert: certificate.cert } });
});
after(async () => {
  if (!EXE) return;
  await sim.close();
  await secure.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** Each run's time limit: well under the runner's, and far above what any of these takes. */
const LIMIT_MS = 15_000;
const exe = (args: string[], exit: number, env: Record<string, string | undefined> = {}): Promise<CliResult> =>
  runProcess(EXE as string, args, { env, exit, timeoutMs: LIMIT_MS });
/** The npm package on this Node.js, for outcomes to compare. */
const npm = (args: string[], exit: number, env: Record<string, string | undefined> = {}): Promise<CliResult> =>
  runProcess(process.execPath, [BIN, ...args], { env, exit, timeoutMs: LIMIT_MS });
const outcome = ({ code, stdout, stderr }: CliResult) => ({ code, stdout, stderr });

describe('the release archive', { skip }, () => {
  it('SHA256SUMS covers the archive, and `sha256sum -c` accepts it', () => {
    const { archive, sums } = manifest();
    const digest = createHash('sha256').update(readFileSync(archive)).digest('hex');
    assert.equal(readFileSync(sums, 'utf8'), `${digest}  ${basename(archive)}\n`);
    const checked = spawnSync('sha256sum', ['-c', 'SHA256SUMS'], {
      cwd: dirname(sums),
      encoding: 'utf8',
      timeout: LIMIT_MS,
    });
    assert.equal(checked.status, 0, checked.stderr);
    assert.match(checked.stdout, /: OK$/m);
  });

  it('unpacks to the executable, LICENSE, README, completions, SBOM; runs with an empty environment', async () => {
    const { archive } = manifest();
    const into = mkdtempSync(join(scratch, 'unpacked-'));
    execFileSync('tar', ['-xzf', archive, '-C', into], { timeout: LIMIT_MS });
    const [top, ...others] = readdirSync(into);
    assert.deepEqual(others, []);
    assert.equal(top, basename(archive, '.tar.gz'));
    const dir = join(into, top as string);
    assert.deepEqual(readdirSync(dir).sort(), [
      'LICENSE',
      'README.md',
      'THIRD-PARTY-LICENSES',
      'completions',
      'man',
      'queenctl',
      'sbom.cdx.json',
    ]);
    assert.deepEqual(readdirSync(join(dir, 'completions')).sort(), ['_queenctl', 'queenctl.bash', 'queenctl.fish']);
    // The man pages of the build (issue 26): one for queenctl, and one per command, in man1/ so
    // that MANPATH can name the directory.
    assert.deepEqual(readdirSync(join(dir, 'man')), ['man1']);
    const pages = readdirSync(join(dir, 'man', 'man1'));
    assert.ok(pages.includes('queenctl.1') && pages.includes('queenctl-lease-extend.1'), pages.join(' '));
    assert.deepEqual(pages.sort(), readdirSync(join(ROOT, 'dist', 'man')).sort());
    assert.match(readFileSync(join(dir, 'LICENSE'), 'utf8'), /^MIT License/);
    // Bun's licence first (packaging/bun), then every bundled package's.
    const licences = readFileSync(join(dir, 'THIRD-PARTY-LICENSES'), 'utf8');
    assert.ok(
      licences.startsWith(`Bun ${manifest().runtime.version}\n\nBun itself is MIT-licensed.`),
      licences.slice(0, 80),
    );
    assert.match(licences, /^commander \d+\.\d+\.\d+$/m);
    // What it carries, declared (docs/security.md): every bundled package, and the Bun release it
    // is made of.
    const components = checkSbom(readFileSync(join(dir, 'sbom.cdx.json'), 'utf8'));
    const runtime = components.get(manifest().runtime.package);
    assert.equal(runtime?.type, 'platform');
    assert.equal(runtime?.version, manifest().runtime.version);
    // The completion scripts are what the executable prints for them.
    const bash = spawnSync(join(dir, 'queenctl'), ['completion', 'bash'], {
      env: {},
      encoding: 'utf8',
      timeout: LIMIT_MS,
    });
    assert.equal(bash.status, 0, bash.stderr);
    assert.match(bash.stdout, /complete /);
    assert.equal(readFileSync(join(dir, 'completions', 'queenctl.bash'), 'utf8'), bash.stdout);

    const version = spawnSync('env', ['-i', join(dir, 'queenctl'), '--version'], {
      encoding: 'utf8',
      timeout: LIMIT_MS,
    });
    assert.deepEqual([version.status, version.stdout, version.stderr], [0, `${VERSION}\n`, '']);
    const leaseId = sim.mint();
    // Asynchronous: the simulator answers from this process.
    const extend = await runProcess(
      'env',
      ['-i', join(dir, 'queenctl'), 'lease', 'extend', leaseId, '--server', sim.url],
      {
        exit: 0,
        timeoutMs: LIMIT_MS,
      },
    );
    assert.equal(extend.code, 0, extend.stderr);
    assert.equal(JSON.parse(extend.stdout).renewed, 1);
  });

  it('runs in a chroot that holds only the libraries ldd lists, and /proc', async (t) => {
    if (process.getuid?.() !== 0) return t.skip('chroot needs root');
    const root = mkdtempSync(join(scratch, 'chroot-'));
    const libs = execFileSync('ldd', [EXE as string], { encoding: 'utf8', timeout: LIMIT_MS })
      .split('\n')
      .map((line) => /(\/\S+) \(0x/.exec(line)?.[1])
      .filter((path): path is string => path !== undefined);
    assert.ok(
      libs.some((lib) => /libc\.so/.test(lib)),
      `ldd listed no C library: ${libs.join(', ')}`,
    );
    for (const lib of libs) {
      mkdirSync(join(root, dirname(lib)), { recursive: true });
      copyFileSync(lib, join(root, lib));
    }
    copyFileSync(EXE as string, join(root, 'queenctl'));
    chmodSync(join(root, 'queenctl'), 0o755);
    const chroot = spawnSync('sh', ['-c', 'command -v chroot'], { encoding: 'utf8', timeout: LIMIT_MS }).stdout.trim();
    if (!chroot) return t.skip('no chroot command on this machine');
    // Bun finds the program it runs in its own file through /proc/self/exe: /proc is the one thing
    // besides the libraries it needs (docs/standalone.md), as every container runtime mounts it.
    mkdirSync(join(root, 'proc'));
    const mount = spawnSync('mount', ['-t', 'proc', 'proc', join(root, 'proc')], {
      encoding: 'utf8',
      timeout: LIMIT_MS,
    });
    if (mount.status !== 0) return t.skip(`cannot mount /proc in the chroot here: ${mount.stderr.trim()}`);
    t.after(() => spawnSync('umount', [join(root, 'proc')], { timeout: LIMIT_MS }));
    const probe = spawnSync(chroot, [root, '/queenctl', '--version'], { env: {}, encoding: 'utf8', timeout: LIMIT_MS });
    if (probe.error || /Operation not permitted|cannot change root/.test(probe.stderr))
      return t.skip(`chroot is not possible here: ${probe.error?.message ?? probe.stderr.trim()}`);
    assert.deepEqual([probe.status, probe.stdout, probe.stderr], [0, `${VERSION}\n`, '']);
    // Nothing else in it: no /etc, /dev, /tmp, HOME; the renewal still goes through.
    assert.deepEqual(
      readdirSync(root).sort(),
      [...new Set(libs.map((lib) => lib.split('/')[1]))].concat('queenctl', 'proc').sort(),
    );
    const leaseId = sim.mint();
    const extend = await runProcess(
      'env',
      ['-i', chroot, root, '/queenctl', 'lease', 'extend', leaseId, '--server', sim.url],
      {
        exit: 0,
        timeoutMs: LIMIT_MS,
      },
    );
    assert.equal(extend.code, 0, extend.stderr);
    assert.equal(JSON.parse(extend.stdout).renewed, 1);
  });
});

describe('the same outcome as the npm package', { skip }, () => {
  /**
   * Each case: the outcome expected of both (the exit code, and what stdout and stderr must
   * hold), then the two compared. Both hanging, crashing or printing nothing never passes.
   */
  interface Case {
    what: string;
    args: string[];
    env: () => Record<string, string | undefined>;
    exit: number;
    stdout: RegExp;
    stderr: RegExp;
  }
  const usage = (reason: RegExp): Pick<Case, 'exit' | 'stdout' | 'stderr'> => ({
    exit: 1,
    stdout: /^$/,
    stderr: reason,
  });
  const cases: Case[] = [
    { what: '--version', args: ['--version'], env: () => ({}), exit: 0, stdout: /^\d+\.\d+\.\d+\S*\n$/, stderr: /^$/ },
    { what: '--help', args: ['--help'], env: () => ({}), exit: 0, stdout: /^Usage: queenctl /m, stderr: /^$/ },
    {
      what: 'a verb help',
      args: ['lease', 'extend', '--help'],
      env: () => ({}),
      exit: 0,
      stdout: /^Usage: queenctl lease extend /m,
      stderr: /^$/,
    },
    {
      what: 'an unknown flag',
      args: ['lease', 'extend', 'x', '--bogus'],
      env: () => ({}),
      ...usage(/unknown option '--bogus'/),
    },
    {
      what: 'an unknown command',
      args: ['help', 'nope'],
      env: () => ({}),
      ...usage(/^queenctl: unknown command "nope"/),
    },
    {
      what: 'a bad lease id',
      args: ['lease', 'extend', 'bad\u0001id', '--server', 'http://127.0.0.1:9'],
      env: () => ({}),
      ...usage(/^queenctl: lease id #1 .* holds control characters\n$/),
    },
    {
      what: 'a missing HOME',
      args: ['config', 'view'],
      env: () => ({ HOME: '/nonexistent/home' }),
      exit: 0,
      stdout: /"contexts": \[\]/,
      stderr: /^queenctl: no config file at \/nonexistent\/home\/\.queen\/config\.yaml/,
    },
    {
      what: 'no HOME at all',
      args: ['config', 'get-contexts', '-o', 'json'],
      env: () => ({ HOME: undefined }),
      exit: 0,
      stdout: /^\[\]\n$/,
      stderr: /^queenctl: no config file at /,
    },
    {
      // Not writable even by root, as the tests run here: the config directory cannot be made.
      // One line naming the path, exit 1, at once (it used to hang until the kill timer).
      what: 'a read-only HOME',
      args: ['config', 'set-context', 'a', '--server', 'http://127.0.0.1:1'],
      env: () => ({ HOME: '/proc' }),
      ...usage(/^queenctl: [^\n]*\/proc\/\.queen[^\n]*\n$/),
    },
    {
      what: 'completion',
      args: ['completion', 'fish'],
      env: () => ({}),
      exit: 0,
      stdout: /complete -c queenctl/,
      stderr: /^$/,
    },
  ];
  for (const { what, args, env, exit, stdout, stderr } of cases) {
    it(`${what}: ${args.join(' ')}: exit ${exit}, as the npm package`, async () => {
      const [fromExe, fromNpm] = await Promise.all([exe(args, exit, env()), npm(args, exit, env())]);
      assert.match(fromExe.stdout, stdout, describeRun(fromExe));
      assert.match(fromExe.stderr, stderr, describeRun(fromExe));
      assert.deepEqual(outcome(fromExe), outcome(fromNpm));
    });
  }

  it('a closed stdout: exit 141 and nothing on stderr, as the npm package', async () => {
    const pipe = (command: string) =>
      runShell(`${command} completion zsh | head -c 10 > /dev/null; echo "status \${PIPESTATUS[0]}" >&2`, {
        exit: 0,
        timeoutMs: LIMIT_MS,
      });
    const [fromExe, fromNpm] = await Promise.all([
      pipe(JSON.stringify(EXE)),
      pipe(`${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)}`),
    ]);
    assert.equal(fromExe.stderr, 'status 141\n');
    assert.equal(fromExe.stderr, fromNpm.stderr);
  });

  it('a renewal: the same record and exit code', async () => {
    const [one, two] = [sim.mint(), sim.mint()];
    const fromExe = await exe(['lease', 'extend', one, '--server', sim.url, '-o', 'yaml'], 0);
    const fromNpm = await npm(['lease', 'extend', two, '--server', sim.url, '-o', 'yaml'], 0);
    assert.match(fromExe.stdout, /renewed: 1/);
    const shape = (text: string) =>
      text.replaceAll(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, 'T').replaceAll(/[0-9a-f-]{36}/g, 'ID');
    assert.equal(shape(fromExe.stdout), shape(fromNpm.stdout));
    assert.equal(fromExe.stderr, fromNpm.stderr);
  });

  it('https: --cacert and NODE_EXTRA_CA_CERTS are trusted, and without them the broker is refused', async () => {
    const leaseId = secure.mint();
    const withFlag = await exe(
      ['lease', 'extend', leaseId, '--server', secure.url, '--cacert', certificate.certFile],
      0,
    );
    assert.equal(JSON.parse(withFlag.stdout).renewed, 1);
    const withEnv = await exe(['lease', 'extend', leaseId, '--server', secure.url], 0, {
      NODE_EXTRA_CA_CERTS: certificate.certFile,
    });
    assert.equal(JSON.parse(withEnv.stdout).renewed, 1);
    const untrusted = await exe(['lease', 'extend', leaseId, '--server', secure.url], 2, {
      NODE_EXTRA_CA_CERTS: undefined,
    });
    assert.match(untrusted.stderr, /TLS connection to https:\/\/127\.0\.0\.1:\d+ failed/);
    assert.equal(untrusted.stdout, '');
  });

  it('SIGTERM while a request hangs: exit 143 and what was not renewed, as the npm package', async () => {
    const hung: net.Socket[] = [];
    const server = net.createServer((socket) => hung.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    try {
      const results: CliResult[] = [];
      for (const argv of [[EXE as string], [process.execPath, BIN]]) {
        const before = hung.length;
        const running = startProcess(
          argv[0] as string,
          [...argv.slice(1), 'lease', 'extend', 'hung-1', '--server', url],
          {
            exit: 143,
            timeoutMs: LIMIT_MS,
          },
        );
        await running.until(() => (hung.length > before ? true : undefined), 'the request to arrive');
        running.kill('SIGTERM');
        results.push(await running.exited);
      }
      // The retry delays are jittered.
      const [fromExe, fromNpm] = (results as [CliResult, CliResult]).map((result) => ({
        ...outcome(result),
        stderr: result.stderr.replaceAll(/ in \d+ms/g, ' in (jitter)'),
      }));
      assert.equal(fromExe?.code, 143, fromExe?.stderr);
      assert.match(
        fromExe?.stderr ?? '',
        /interrupted before the broker answered; lease hung-1 may or may not be held/,
      );
      assert.deepEqual(fromExe, fromNpm);
    } finally {
      for (const socket of hung) socket.destroy();
      server.close();
    }
  });
});

describe('its own', { skip }, () => {
  it('NODE_OPTIONS is ignored, and it says so on stderr; the outcome is unchanged', async () => {
    for (const options of ['--bogus-option', '--require /nonexistent.js', '--max-old-space-size=4']) {
      const result = await exe(['--version'], 0, { NODE_OPTIONS: options });
      assert.equal(result.stdout, `${VERSION}\n`);
      assert.equal(
        result.stderr,
        'queenctl: NODE_OPTIONS is ignored: this queenctl carries its own runtime (Bun) and takes no Node.js options\n',
      );
    }
    const leaseId = sim.mint();
    const extend = await exe(['lease', 'extend', leaseId, '--server', sim.url], 0, { NODE_OPTIONS: '--bogus-option' });
    assert.equal(JSON.parse(extend.stdout).renewed, 1);
  });

  it('BUN_OPTIONS, which Bun applies before queenctl runs, is named on stderr', async () => {
    const result = await exe(['--version'], 0, { BUN_OPTIONS: '--smol' });
    assert.equal(result.stdout, `${VERSION}\n`);
    assert.equal(
      result.stderr,
      'queenctl: BUN_OPTIONS is set, and the Bun runtime this queenctl carries applied it before queenctl started\n',
    );
  });

  it('reads nothing of the directory it runs in as configuration: no .env, bunfig.toml, package.json', async () => {
    // Each would change the run if read: a dead server, and code preloaded that prints a line.
    const dir = mkdtempSync(join(scratch, 'cwd-'));
    const preload = join(dir, 'preload.js');
    writeFileSync(preload, 'process.stderr.write("PRELOADED\\n");\n');
    writeFileSync(join(dir, '.env'), 'QUEEN_SERVER=http://127.0.0.1:9\nQUEENCTL_DEBUG=1\n');
    writeFileSync(
      join(dir, 'bunfig.toml'),
      `preload = [${JSON.stringify(preload)}]\n[run]\npreload = [${JSON.stringify(preload)}]\n`,
    );
    writeFileSync(join(dir, 'package.json'), '{"type": "module", "name": "not-queenctl"}\n');
    const leaseId = sim.mint();
    const result = await runProcess(EXE as string, ['lease', 'extend', leaseId], {
      cwd: dir,
      env: { QUEEN_SERVER: sim.url },
      exit: 0,
      timeoutMs: LIMIT_MS,
    });
    assert.equal(JSON.parse(result.stdout).renewed, 1);
    assert.equal(result.stderr, '');
  });

  it('writes no file, wherever HOME and XDG_CACHE_HOME point', async () => {
    const home = mkdtempSync(join(scratch, 'home-'));
    const env = { HOME: home, XDG_CACHE_HOME: join(home, 'cache'), QUEENCTL_DEBUG: '1' };
    const leaseId = sim.mint();
    for (const args of [['--version'], ['lease', 'extend', leaseId, '--server', sim.url, '-o', 'yaml']]) {
      const result = await exe(args, 0, env);
      assert.notEqual(result.stdout, '');
    }
    assert.deepEqual(readdirSync(home), []);
  });

  it('carries the bundle build.json names: its checksum in the file, and said with QUEENCTL_DEBUG', async () => {
    const { bundle, bundleSha256 } = manifest();
    // The checksum is of the bundle with the checksum itself zeroed, as the build wrote it in.
    const zeroed = readFileSync(bundle, 'latin1').replace(bundleSha256, '0'.repeat(64));
    assert.equal(createHash('sha256').update(zeroed, 'latin1').digest('hex'), bundleSha256);
    assert.ok(readFileSync(EXE as string).includes(Buffer.from(bundleSha256)), 'the bundle id is in the executable');
    const result = await exe(['--version'], 0, { QUEENCTL_DEBUG: '1' });
    assert.equal(result.stdout, `${VERSION}\n`);
    assert.match(result.stderr, new RegExp(`^queenctl: bundle sha256:${bundleSha256}$`, 'm'));
  });

  it('`version --short` says it is the standalone build and names the Bun it carries', async () => {
    const result = await exe(['version', '--short'], 0);
    const bun = manifest().runtime.version.replaceAll('.', '\\.');
    assert.match(
      result.stdout,
      new RegExp(
        `^queenctl ${VERSION.replaceAll('.', '\\.')} \\(.*, linux-x64 standalone build, bun ${bun} built in\\)\\n$`,
      ),
    );
  });
});

describe('the bench', { skip }, () => {
  it('npm run bench -- --quick --only exe prints its rows beside node -e 0', { timeout: 120_000 }, async () => {
    const bench = join(ROOT, 'dist', 'scripts', 'bench.js');
    const result = await runProcess(process.execPath, [bench, '--quick', '--only', 'exe'], {
      exit: 0,
      timeoutMs: 110_000,
    });
    for (const row of [
      /\| exe --version, median of 3, side by side \| [\d.]+ ms \| node -e 0: [\d.]+ ms \| [\d.]+x \| <= 1\.15x \|/,
      /\| exe lease extend \| [\d.]+ ms \| node -e 0: [\d.]+ ms \| [\d.]+x \| <= 1\.35x \|/,
      /\| exe lease extend vs the npm package \| [\d.]+ ms \| npm package: [\d.]+ ms \| [\d.]+x \| <= 1\.0x \|/,
    ])
      assert.match(result.stdout, row);
  });
});

describe('the build', { skip }, () => {
  const build = (env: Record<string, string>) =>
    runProcess(process.execPath, [join(ROOT, 'scripts', 'build-exe.mjs')], { env, exit: 1, timeoutMs: 280_000 });

  it('for a platform with no Bun runtime: says so, exits 1, builds nothing', async () => {
    const out = mkdtempSync(join(scratch, 'out-'));
    const result = await build({ QUEENCTL_EXE_PLATFORM: 'plan9-mips', QUEENCTL_EXE_OUT: out });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /^build:exe: no Bun runtime for plan9-mips \(@oven\/bun-<os>-<cpu>/);
    assert.deepEqual(readdirSync(out), []);
  });

  it('a compile that fails: exits 1, and leaves no executable', { timeout: 300_000 }, async () => {
    // A runtime to embed that is no Bun at all: the compiler refuses it.
    const broken = join(scratch, 'not-bun');
    writeFileSync(broken, '#!/bin/sh\nexit 0\n');
    chmodSync(broken, 0o755);
    const out = mkdtempSync(join(scratch, 'out-'));
    const result = await build({ QUEENCTL_EXE_RUNTIME: broken, QUEENCTL_EXE_OUT: out });
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /compiling failed/);
    assert.match(result.stderr, /no executable was made/);
    const left = existsSync(out) ? readdirSync(out, { recursive: true }).map(String) : [];
    assert.deepEqual(
      left.filter((file) => !file.startsWith('.build')),
      [basename(dirname(EXE as string))],
      'only the empty output directory',
    );
    assert.deepEqual(readdirSync(join(out, basename(dirname(EXE as string)))), []);
  });
});
