/**
 * The arm64 executable of the release (dist/release/queenctl-<v>-linux-arm64.tar.gz), run under
 * user-mode emulation (qemu-aarch64 with Debian's arm64 C runtime): it starts, it is the arm64
 * build, it carries the bundle the release's manifest.json names (QUEENCTL_DEBUG says it), and its
 * paths that differ by CPU run: undici's WebAssembly parser (ids on standard input) and yaml.
 * And a build for arm64 without the emulator makes nothing and says what to install.
 *
 * Emulated processes start ~7x slower: each gets 120 s before it is killed, and no verdict here
 * depends on time. The process tests that run against it: scripts/test-release.mjs.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { VERSION } from '../../src/version.js';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { type CliResult, runProcess } from '../support/cli.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const ARCHIVE = join(ROOT, 'dist', 'release', `queenctl-${VERSION}-linux-arm64.tar.gz`);
const QEMU_LD_PREFIX = process.env.QEMU_LD_PREFIX || '/usr/aarch64-linux-gnu';
const skip = existsSync(ARCHIVE) ? false : 'no arm64 archive in dist/release: run `npm run release` first';
const EMULATED_MS = 120_000;

let scratch: string;
let exe: string;
let sim: Simulator;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-arm64-'));
  if (skip) return;
  const unpacked = await runProcess('tar', ['-xzf', ARCHIVE, '-C', scratch], { timeoutMs: 120_000, exit: 0 });
  assert.equal(unpacked.code, 0, unpacked.stderr);
  exe = join(scratch, `queenctl-${VERSION}-linux-arm64`, 'queenctl');
  sim = await startSimulator();
});
after(async () => {
  await sim?.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** The arm64 executable under the emulator, with `env` on top of the clean one, and `stdin`. */
async function arm64(args: string[], env: Record<string, string> = {}, stdin = ''): Promise<CliResult> {
  const result = await runProcess('qemu-aarch64', [exe, ...args], {
    env: { QEMU_LD_PREFIX, ...env },
    stdin,
    timeoutMs: EMULATED_MS,
    exit: 0,
  });
  assert.equal(result.killed, false, `queenctl ${args.join(' ')} under emulation did not end within ${EMULATED_MS} ms`);
  return result;
}

describe('the arm64 executable, under emulation', { skip }, () => {
  it('is an aarch64 ELF file that will not run here natively', () => {
    const header = readFileSync(exe).subarray(0, 20);
    assert.equal(header.toString('latin1', 1, 4), 'ELF');
    assert.equal(header.readUInt16LE(18), 183, 'e_machine EM_AARCH64');
  });

  it('--version prints the version, and `version --short` says it is the linux-arm64 build', async () => {
    const version = await arm64(['--version']);
    assert.equal(version.code, 0, version.stderr);
    assert.equal(version.stdout, `${VERSION}\n`);
    const short = await arm64(['version', '--short']);
    assert.equal(short.code, 0, short.stderr);
    assert.match(short.stdout, / linux-arm64 standalone build, bun \d+\.\d+\.\d+ built in\)\n$/);
    const json = await arm64(['version', '--short', '-o', 'json']);
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual(
      { ...JSON.parse(json.stdout).queenctl, commit: null, buildDate: null, node: null },
      { version: VERSION, commit: null, buildDate: null, node: null, standalone: true, platform: 'linux-arm64' },
    );
  });

  it('carries the bundle manifest.json names, and renews over undici and prints yaml', async () => {
    const { executables } = JSON.parse(readFileSync(join(ROOT, 'dist', 'release', 'manifest.json'), 'utf8'));
    const bundle = executables['linux-arm64'].bundleSha256;
    const version = await arm64(['--version'], { QUEENCTL_DEBUG: '1' });
    assert.equal(version.code, 0, version.stderr);
    assert.match(version.stderr, new RegExp(`^queenctl: bundle sha256:${bundle}$`, 'm'));
    // The ids on standard input: undici and its WebAssembly parser, then yaml printing the answer.
    const [one, two] = [sim.mint(), sim.mint()];
    const result = await arm64(['lease', 'extend', '-', '--server', sim.url, '-o', 'yaml'], {}, `${one}\n${two}\n`);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout.match(/renewed: 1/g)?.length, 2, result.stdout);
  });
});

describe('building for arm64 without the emulator', () => {
  it('makes nothing, says what to install, and exits 1: no qemu-aarch64, or no arm64 runtimes', async () => {
    // A PATH holding node alone: no qemu-aarch64 (the first case). Then the usual PATH, and a
    // QEMU_LD_PREFIX without the arm64 C runtime (the second).
    const bin = mkdtempSync(join(scratch, 'bin-'));
    symlinkSync(process.execPath, join(bin, 'node'));
    const cases = [
      { env: { PATH: bin }, lacks: /lacks qemu-aarch64 \(ENOENT\)/ },
      {
        env: { QEMU_LD_PREFIX: join(scratch, 'no-runtimes') },
        lacks: /lacks \S+\/no-runtimes\/lib\/ld-linux-aarch64\.so\.1/,
      },
    ];
    for (const { env, lacks } of cases) {
      const out = mkdtempSync(join(scratch, 'build-'));
      const result = await runProcess(
        process.execPath,
        [join(ROOT, 'scripts', 'build-exe.mjs'), '--target', 'linux-arm64'],
        { env: { ...env, QUEENCTL_EXE_OUT: out }, timeoutMs: 60_000, exit: 1 },
      );
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, lacks);
      assert.match(result.stderr, /apt-get install qemu-user libc6-arm64-cross\n/);
      assert.match(result.stderr, /No executable was made/);
      assert.equal(result.stdout, '');
      assert.deepEqual(readdirSync(out), []);
    }
  });
});
