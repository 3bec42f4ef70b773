/**
 * scripts/binary-format.mjs against the executables Bun's compiler really makes, for every target
 * the release builds, from one tiny script carrying a build id: Bun 1.4.5's packages installed
 * from the npm registry into a temporary prefix (`npm install --prefix --ignore-scripts --force`:
 * the other platforms' packages are refused without --force, EBADPLATFORM), then `bun build
 * --compile --target=bun-<target> --compile-executable-path=<that target's bun>`.
 *
 * For each: the format and CPU, the build id found in the file; for macOS an ad-hoc code
 * signature whose page hashes match the file (Apple silicon kills a process whose signature does
 * not hold, and macOS 27 does the same on Intel); for Windows a console program. The linux-x64
 * one is run (it prints the build id); linux-arm64 too under qemu-aarch64 when Debian's qemu-user
 * and the arm64 C runtime are there. Downloads ~130 MB: a release test (test/release/), not in
 * `npm test`. Every process has a time limit and an expected exit code.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type * as BinaryFormat from '../../scripts/binary-format.mjs';
import { describeRun, runProcess } from '../support/cli.js';

const { findBytes, inspectExecutable, verifyCodeSignature }: typeof BinaryFormat = await import(
  new URL('../../../scripts/binary-format.mjs', import.meta.url).href
);

/** The Bun the release compiles with (issue 40): kept in step with the build's pin. */
const BUN_VERSION = process.env.QUEENCTL_BUN_VERSION || '1.4.5';
/** Each target: Bun's name for it, its npm package, and what the executable must be. */
const TARGETS = [
  { target: 'linux-x64', pkg: 'bun-linux-x64', format: 'elf', arch: 'x64' },
  { target: 'linux-arm64', pkg: 'bun-linux-aarch64', format: 'elf', arch: 'arm64' },
  { target: 'darwin-arm64', pkg: 'bun-darwin-aarch64', format: 'macho', arch: 'arm64' },
  { target: 'darwin-x64', pkg: 'bun-darwin-x64', format: 'macho', arch: 'x64' },
  { target: 'windows-x64', pkg: 'bun-windows-x64', format: 'pe', arch: 'x64' },
] as const;
const NAMES = { elf: 'an ELF', macho: 'a Mach-O', pe: 'a PE' } as const;
const QEMU_LD_PREFIX = process.env.QEMU_LD_PREFIX || '/usr/aarch64-linux-gnu';
const canEmulate =
  existsSync(join(QEMU_LD_PREFIX, 'lib', 'ld-linux-aarch64.so.1')) &&
  ['/usr/bin/qemu-aarch64', '/usr/local/bin/qemu-aarch64'].some((path) => existsSync(path));
const hostIsLinuxX64 = process.platform === 'linux' && process.arch === 'x64';

let scratch: string;
/** What the build writes into the bundle: found in every executable, printed by the Linux ones. */
const BUILD_ID = `queenctl-build-id:${randomBytes(16).toString('hex')}`;
const outputs = new Map<string, string>();

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-bun-'));
  if (!hostIsLinuxX64) return;
  const prefix = join(scratch, 'bun');
  const installed = await runProcess(
    'npm',
    [
      'install',
      '--prefix',
      prefix,
      '--no-save',
      '--no-package-lock',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      '--force',
      ...TARGETS.map(({ pkg }) => `@oven/${pkg}@${BUN_VERSION}`),
    ],
    // npm's own settings and cache are the user's (the test environment's HOME is empty).
    { exit: 0, timeoutMs: 600_000, env: { HOME: process.env.HOME } },
  );
  assert.equal(installed.killed, false, describeRun(installed));
  const bun = join(prefix, 'node_modules', '@oven', 'bun-linux-x64', 'bin', 'bun');
  const version = await runProcess(bun, ['--version'], { exit: 0, timeoutMs: 30_000 });
  assert.equal(version.stdout.trim(), BUN_VERSION);
  writeFileSync(join(scratch, 'hello.js'), `console.log(${JSON.stringify(BUILD_ID)});\n`);
  for (const { target, pkg } of TARGETS) {
    const runtime = join(prefix, 'node_modules', '@oven', pkg, 'bin', target.startsWith('windows') ? 'bun.exe' : 'bun');
    // Bun adds .exe to a Windows executable's name.
    const out = join(scratch, `hello-${target}`);
    const built = await runProcess(
      bun,
      [
        'build',
        '--compile',
        `--target=bun-${target}`,
        `--compile-executable-path=${runtime}`,
        join(scratch, 'hello.js'),
        '--outfile',
        out,
      ],
      { exit: 0, timeoutMs: 300_000, env: { HOME: process.env.HOME } },
    );
    assert.equal(built.code, 0, describeRun(built));
    outputs.set(target, target.startsWith('windows') ? `${out}.exe` : out);
  }
});
after(() => rmSync(scratch, { recursive: true, force: true }));

const skip = hostIsLinuxX64 ? false : 'Bun cross-builds are made on linux-x64, as the release';

describe(`Bun ${BUN_VERSION}'s executables, as binary-format reads them`, { skip }, () => {
  for (const { target, format, arch } of TARGETS) {
    it(`${target}: ${NAMES[format]} executable for ${arch}, carrying the build id`, async () => {
      const path = outputs.get(target) ?? assert.fail(`no ${target} executable was built`);
      const found = await inspectExecutable(path);
      assert.deepEqual([found.format, found.arch, found.bits, found.type], [format, arch, 64, 'executable']);
      if (found.format === 'pe') assert.deepEqual([found.subsystem, found.console], ['console', true]);
      if (found.format === 'elf')
        assert.equal(
          found.interpreter,
          arch === 'x64' ? '/lib64/ld-linux-x86-64.so.2' : '/lib/ld-linux-aarch64.so.1',
          'a glibc executable (musl would name /lib/ld-musl-*)',
        );
      assert.notEqual(await findBytes(path, BUILD_ID), -1, `${target}: the build id is not in the executable`);
    });
  }

  it('darwin-arm64: signed ad hoc, and the signature holds over every page', async () => {
    const path = outputs.get('darwin-arm64') ?? assert.fail('no darwin-arm64 executable');
    const found = await inspectExecutable(path);
    assert.ok(found.format === 'macho' && 'signed' in found);
    assert.deepEqual([found.signed, found.adhocSigned, found.codeSignature?.cms], [true, true, false]);
    const check = await verifyCodeSignature(path);
    assert.ok('pages' in check);
    assert.deepEqual([check.valid, check.mismatched], [true, 0], JSON.stringify(check));
    // The bundle lies in the signed range: a bundle changed after signing breaks the signature.
    const at = await findBytes(path, BUILD_ID);
    assert.ok(at >= 0 && at < (found.codeSignature?.codeDirectory.codeLimit ?? 0), `build id at ${at}, not signed`);
  });

  // What Bun 1.4.5 makes for darwin-x64 (measured: docs/install.md): the bundle is written into
  // a copy of Bun's own executable and Oven's signature (hardened runtime, a certificate, CMS) is
  // left as it was, so two of its pages (the first among them) no longer match their hashes:
  // codesign --verify says "invalid signature". The executable must be signed again, ad hoc,
  // before it ships; until the release does that, this is a to-do, reported, not a pass.
  it('darwin-x64: signed ad hoc, and the signature holds over every page', {
    todo: `Bun ${BUN_VERSION} keeps the runtime's own signature on darwin-x64 output; the release must sign again`,
  }, async () => {
    const path = outputs.get('darwin-x64') ?? assert.fail('no darwin-x64 executable');
    const found = await inspectExecutable(path);
    assert.ok(found.format === 'macho' && 'signed' in found);
    const check = await verifyCodeSignature(path);
    assert.ok('pages' in check);
    assert.deepEqual(
      [found.signed, found.adhocSigned, check.valid],
      [true, true, true],
      `${JSON.stringify(found.codeSignature)} ${JSON.stringify(check)}`,
    );
  });

  it('linux-x64: it runs, and prints the build id', async () => {
    const path = outputs.get('linux-x64') ?? assert.fail('no linux-x64 executable');
    const ran = await runProcess(path, [], { exit: 0, timeoutMs: 30_000 });
    assert.equal(ran.stdout, `${BUILD_ID}\n`);
  });

  it('linux-arm64: it runs under qemu-aarch64, and prints the build id', {
    skip: canEmulate ? false : `no qemu-aarch64 or no arm64 C runtime in ${QEMU_LD_PREFIX}`,
  }, async () => {
    const path = outputs.get('linux-arm64') ?? assert.fail('no linux-arm64 executable');
    const ran = await runProcess('qemu-aarch64', [path], {
      exit: 0,
      timeoutMs: 120_000,
      env: { QEMU_LD_PREFIX },
    });
    assert.equal(ran.stdout, `${BUILD_ID}\n`);
  });
});
