/**
 * scripts/binary-format.mjs against the executables Bun's compiler really makes, for every target
 * the release builds, from one tiny script carrying a build id: Bun 1.4.5's packages installed
 * from the npm registry into a temporary prefix (`npm install --prefix --ignore-scripts --force`:
 * the other platforms' packages are refused without --force, EBADPLATFORM), then `bun build
 * --compile --target=bun-<target> --compile-executable-path=<that target's bun>`.
 *
 * For each: the format and CPU, the build id found in the file; for macOS an ad-hoc code
 * signature whose page hashes match the file (Apple silicon kills a process whose signature does
 * not hold, and macOS 27 does the same on Intel): Bun's own for darwin-arm64, and for darwin-x64
 * the one scripts/macho-sign.mjs writes, as the release does, compared field by field with Bun's
 * arm64 one; and scripts/macho-sign.mjs signing Bun's arm64 output again gives back the very
 * bytes Bun wrote. Nothing here runs on macOS. For Windows a console program. The linux-x64
 * one is run (it prints the build id); linux-arm64 too under qemu-aarch64 when Debian's qemu-user
 * and the arm64 C runtime are there. Downloads ~130 MB: a release test (test/release/), not in
 * `npm test`. Every process has a time limit and an expected exit code.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type * as BinaryFormat from '../../scripts/binary-format.mjs';
import type * as MachOSign from '../../scripts/macho-sign.mjs';
import { describeRun, runProcess } from '../support/cli.js';

const { findBytes, inspectExecutable, verifyCodeSignature }: typeof BinaryFormat = await import(
  new URL('../../../scripts/binary-format.mjs', import.meta.url).href
);
const { adhocSign, readSignature }: typeof MachOSign = await import(
  new URL('../../../scripts/macho-sign.mjs', import.meta.url).href
);

/** The Bun the release compiles with (issue 40): kept in step with the build's pin. */
// The Bun the release pins (package.json config.standaloneBun), unless a test run names another.
const BUN_VERSION =
  process.env.QUEENCTL_BUN_VERSION ||
  (
    JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
      config: { standaloneBun: string };
    }
  ).config.standaloneBun;
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

  // What Bun 1.4.5 makes for darwin-x64 (docs/install.md): the bundle is written into a copy of
  // Bun's own executable and Oven's signature (hardened runtime, a certificate, CMS) is left with
  // two page hashes that no longer match. The release signs it again, ad hoc (scripts/macho-sign.mjs);
  // so does this test, on a copy, and then holds the result against the signature Bun writes itself
  // for darwin-arm64, the one known good (a linker's: adhoc|linker-signed).
  it("darwin-x64: signed again ad hoc, every page matches, fields as in Bun's own arm64 signature", async (t) => {
    const built = outputs.get('darwin-x64') ?? assert.fail('no darwin-x64 executable');
    const asBuilt = await inspectExecutable(built);
    assert.ok(asBuilt.format === 'macho' && 'signed' in asBuilt);
    t.diagnostic(
      `as Bun ${BUN_VERSION} made it: flags 0x${asBuilt.codeSignature?.flags.toString(16)}, cms ` +
        `${asBuilt.codeSignature?.cms}, pages ${JSON.stringify(await verifyCodeSignature(built))}`,
    );
    const path = join(scratch, 'hello-darwin-x64-signed');
    copyFileSync(built, path);
    const result = await adhocSign(path, { identifier: 'queenctl' });
    const found = await inspectExecutable(path);
    assert.ok(found.format === 'macho' && 'signed' in found);
    assert.deepEqual(
      [found.arch, found.signed, found.adhocSigned, found.codeSignature?.cms, found.codeSignature?.identifier],
      ['x64', true, true, false, 'queenctl'],
    );
    const check = await verifyCodeSignature(path);
    assert.deepEqual(check, { valid: true, pages: result.pages, mismatched: 0, firstMismatch: -1 });
    const at = await findBytes(path, BUILD_ID);
    assert.ok(at >= 0 && at < result.codeLimit, `build id at ${at}, not signed`);

    const mine = await readSignature(path);
    const bun = await readSignature(outputs.get('darwin-arm64') ?? assert.fail('no darwin-arm64 executable'));
    t.diagnostic(`Bun's arm64 CodeDirectory: ${JSON.stringify(bun.codeDirectory)}`);
    t.diagnostic(`x64 signed here:           ${JSON.stringify(mine.codeDirectory)}`);
    // The same wherever the code is: the format, and where each part of the blob lies.
    const same = ['version', 'flags', 'hashSize', 'hashType', 'platform', 'pageSize', 'nSpecialSlots'] as const;
    const zero = ['identOffset', 'spare2', 'scatterOffset', 'teamOffset', 'spare3', 'codeLimit64'] as const;
    for (const field of [...same, ...zero, 'execSegBase', 'execSegFlags'] as const)
      assert.equal(mine.codeDirectory[field], bun.codeDirectory[field], field);
    assert.deepEqual(
      [bun.codeDirectory.version, bun.codeDirectory.flags, bun.codeDirectory.pageSize, bun.codeDirectory.hashType],
      [0x20400, 0x20002, 4096, 2],
      "Bun's own arm64 signature is no longer the one this signer copies: compare them again",
    );
    // The same relations to each one's own file.
    for (const signature of [mine, bun]) {
      const cd = signature.codeDirectory;
      assert.equal(cd.codeLimit, signature.offset, 'the signature covers everything before it');
      assert.equal(cd.nCodeSlots, Math.ceil(cd.codeLimit / 4096));
      assert.equal(cd.execSegLimit, signature.text.filesize, 'execSeg is __TEXT');
      assert.equal(cd.hashOffset, cd.identOffset + cd.identifier.length + 1, 'the hashes follow the identifier');
      assert.equal(cd.length, cd.hashOffset + cd.nCodeSlots * 32);
      assert.deepEqual(signature.superBlob, {
        length: signature.size,
        count: 1,
        blobs: [{ type: 0, offset: 20, magic: 0xfade0c02, length: signature.size - 20 }],
      });
      assert.equal(signature.offset + signature.size, signature.fileSize, 'the file ends with its signature');
      assert.equal(signature.linkedit.fileoff + signature.linkedit.filesize, signature.fileSize);
    }
  });

  it('darwin-arm64: signed again here, the signature is the one Bun wrote, byte for byte', async () => {
    const built = outputs.get('darwin-arm64') ?? assert.fail('no darwin-arm64 executable');
    const bun = await readSignature(built);
    const again = join(scratch, 'hello-darwin-arm64-again');
    copyFileSync(built, again);
    await adhocSign(again, { identifier: bun.codeDirectory.identifier });
    assert.ok((await readSignature(again)).bytes.equals(bun.bytes), 'the signature differs from the one Bun wrote');
    assert.ok(readFileSync(again).equals(readFileSync(built)), 'the file differs from the one Bun wrote');

    // With the identifier the release gives: the same but for the identifier and what its length
    // moves (the hashes' offset, the sizes, and so page 0, where the header holds the sizes).
    const renamed = join(scratch, 'hello-darwin-arm64-queenctl');
    copyFileSync(built, renamed);
    await adhocSign(renamed, { identifier: 'queenctl' });
    const mine = await readSignature(renamed);
    const shift = 'queenctl'.length - bun.codeDirectory.identifier.length;
    assert.deepEqual(mine.codeDirectory, {
      ...bun.codeDirectory,
      identifier: 'queenctl',
      hashOffset: bun.codeDirectory.hashOffset + shift,
      length: bun.codeDirectory.length + shift,
    });
    const hashes = (signature: typeof mine) =>
      signature.bytes.subarray(20 + signature.codeDirectory.hashOffset, signature.size);
    assert.ok(hashes(mine).subarray(32).equals(hashes(bun).subarray(32)), 'a page other than the first differs');
    assert.equal(hashes(mine).subarray(0, 32).equals(hashes(bun).subarray(0, 32)), false);
    assert.deepEqual(await verifyCodeSignature(renamed), {
      valid: true,
      pages: bun.codeDirectory.nCodeSlots,
      mismatched: 0,
      firstMismatch: -1,
    });
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
