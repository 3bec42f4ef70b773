/**
 * The release (`npm run release`, scripts/release.mjs, docs/install.md) as operators get it, from
 * dist/release/: run by `npm run test:release` after it, left out of `npm test`.
 *
 * - SHA256SUMS covers every file, and `sha256sum -c` accepts them;
 * - each archive holds the executable, licences, README, completions, every man page and the SBOM,
 *   which names each bundled package and the Bun release for that platform; the macOS archives
 *   the same, the Windows zip without completions and man pages;
 * - every executable, run here or not, is of its platform's format and CPU (file(1)) and carries
 *   the bundle manifest.json names (its SHA-256, which the build writes into it);
 * - both .debs: lintian finds nothing (what it would say and is meant is overridden with its
 *   reason: packaging/lintian-overrides), the control fields, a DEP-5 copyright;
 * - the amd64 .deb installs with dpkg -i: queenctl runs, man finds its pages, bash loads its
 *   completion, and dpkg -r leaves none of its files (as root, as CI runs);
 * - both .rpms: the same files as the .deb, the right arch, version and licence, `rpm -K` passes.
 *
 * Every process has a time limit and its exit code asserted. lintian reads a 120 MB executable:
 * its limit is generous.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { VERSION } from '../../src/version.js';
import { type CliResult, type ExpectedExit, runProcess } from '../support/cli.js';
import { checkSbom } from '../support/sbom.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const RELEASE = join(ROOT, 'dist', 'release');
const MAN = join(ROOT, 'dist', 'man');
const TARGETS = [
  { platform: 'linux-x64', deb: 'amd64', rpm: 'x86_64', machine: 'x86-64' },
  { platform: 'linux-arm64', deb: 'arm64', rpm: 'aarch64', machine: 'aarch64' },
] as const;
/** The archives of the platforms that have no packages, and what file(1) says of each executable. */
const OTHERS = [
  { platform: 'darwin-arm64', archive: 'tar.gz', exe: 'queenctl', file: /^Mach-O 64-bit arm64 executable/ },
  { platform: 'darwin-x64', archive: 'tar.gz', exe: 'queenctl', file: /^Mach-O 64-bit x86_64 executable/ },
  { platform: 'windows-x64', archive: 'zip', exe: 'queenctl.exe', file: /^PE32\+ executable \(console\) x86-64/ },
] as const;
const archive = (platform: string) =>
  `queenctl-${VERSION}-${platform}.${platform.startsWith('windows') ? 'zip' : 'tar.gz'}`;
const deb = (arch: string) => `queenctl_${VERSION}-1_${arch}.deb`;
const rpm = (arch: string) => `queenctl-${VERSION}-1.${arch}.rpm`;
const skip = existsSync(join(RELEASE, 'SHA256SUMS'))
  ? false
  : 'no dist/release/SHA256SUMS: run `npm run release` first';
const isRoot = process.getuid?.() === 0;

/** A tool run to completion within `timeoutMs`, in the release directory. */
async function tool(command: string, args: string[], timeoutMs = 120_000, exit: ExpectedExit = 0): Promise<CliResult> {
  const result = await runProcess(command, args, { cwd: RELEASE, timeoutMs, exit });
  assert.equal(result.killed, false, `${command} ${args.join(' ')} did not end within ${timeoutMs} ms`);
  return result;
}
async function ok(command: string, args: string[], timeoutMs?: number): Promise<string> {
  const result = await tool(command, args, timeoutMs);
  assert.equal(result.code, 0, `${command} ${args.join(' ')} exited ${result.code}\n${result.stdout}${result.stderr}`);
  return result.stdout;
}

/** The regular files of a .deb, as installed paths, without Debian's lintian overrides. */
async function debFiles(file: string): Promise<string[]> {
  const names = await ok('tar', ['-tvf', await fsysTar(file)]);
  return names
    .split('\n')
    .filter((line) => line.startsWith('-'))
    .map((line) => line.split(/\s+/).slice(5).join(' ').replace(/^\./, ''))
    .filter((path) => path !== '/usr/share/lintian/overrides/queenctl')
    .sort();
}
/** `<path> <sha256>` of each file of a .deb (as RPM's FILEDIGESTS gives them, SHA-256). */
async function debDigests(file: string): Promise<string[]> {
  const out = join(scratch, `${file}.tree`);
  if (!existsSync(out)) await ok('dpkg-deb', ['--extract', file, out], 300_000);
  const files = await debFiles(file);
  return files
    .map(
      (path) =>
        `${path} ${createHash('sha256')
          .update(readFileSync(join(out, path)))
          .digest('hex')}`,
    )
    .sort();
}
let scratch: string;
/** The data tarball of a .deb, extracted to a file (dpkg-deb --fsys-tarfile). */
async function fsysTar(file: string): Promise<string> {
  const out = join(scratch, `${file}.tar`);
  if (!existsSync(out)) {
    const result = await runProcess('sh', ['-c', `dpkg-deb --fsys-tarfile "$1" > "$2"`, 'sh', file, out], {
      cwd: RELEASE,
      timeoutMs: 120_000,
      exit: 0,
    });
    assert.equal(result.code, 0, result.stderr);
  }
  return out;
}

before(() => {
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-release-test-'));
});
after(() => rmSync(scratch, { recursive: true, force: true }));

describe('the release directory', { skip }, () => {
  it('holds the five archives, two .debs, two .rpms, manifest.json and SHA256SUMS over each', async () => {
    const expected = [
      'manifest.json',
      ...TARGETS.flatMap((t) => [archive(t.platform), deb(t.deb), rpm(t.rpm)]),
      ...OTHERS.map((t) => archive(t.platform)),
    ].sort();
    assert.deepEqual(readdirSync(RELEASE).sort(), [...expected, 'SHA256SUMS'].sort());
    const sums = readFileSync(join(RELEASE, 'SHA256SUMS'), 'utf8');
    assert.deepEqual(
      sums
        .trim()
        .split('\n')
        .map((line) => line.split(/\s+/)[1]),
      expected,
    );
    const checked = await ok('sha256sum', ['-c', 'SHA256SUMS']);
    assert.equal(
      checked
        .trim()
        .split('\n')
        .filter((line) => line.endsWith(': OK')).length,
      expected.length,
    );
  });

  it('each archive holds the executable, LICENSE, THIRD-PARTY-LICENSES, README, completions, man, SBOM', async () => {
    const pages = readdirSync(MAN).filter((file) => file.endsWith('.1'));
    assert.ok(pages.length > 0, 'dist/man has the pages the build wrote');
    for (const { platform } of TARGETS) {
      const top = `queenctl-${VERSION}-${platform}`;
      const names = (await ok('tar', ['-tzf', archive(platform)])).trim().split('\n').sort();
      const want = [
        'queenctl',
        'LICENSE',
        'THIRD-PARTY-LICENSES',
        'README.md',
        'completions/queenctl.bash',
        'completions/_queenctl',
        'completions/queenctl.fish',
        'sbom.cdx.json',
        ...pages.map((page) => `man/man1/${page}`),
      ];
      for (const name of want) assert.ok(names.includes(`${top}/${name}`), `${archive(platform)} lacks ${name}`);
      const sbom = await ok('tar', ['-xzOf', archive(platform), `${top}/sbom.cdx.json`]);
      const components = checkSbom(sbom);
      const runtime = manifest().executables[platform]?.runtime.package ?? '';
      assert.match(runtime, /^@oven\/bun-linux-(x64|aarch64)$/);
      assert.equal(components.get(runtime)?.type, 'platform', `${archive(platform)}: its Bun`);
    }
  });

  it('the macOS archives hold what the Linux ones do; the Windows zip, all but completions and man', async () => {
    const pages = readdirSync(MAN).filter((file) => file.endsWith('.1'));
    for (const { platform, exe } of OTHERS) {
      const top = `queenctl-${VERSION}-${platform}`;
      const windows = platform.startsWith('windows');
      const names = windows
        ? (await ok('unzip', ['-Z1', archive(platform)])).trim().split('\n').sort()
        : (await ok('tar', ['-tzf', archive(platform)]))
            .trim()
            .split('\n')
            .filter((name) => !name.endsWith('/'))
            .sort();
      const want = [
        exe,
        'LICENSE',
        'THIRD-PARTY-LICENSES',
        'README.md',
        'sbom.cdx.json',
        ...(windows
          ? []
          : [
              'completions/queenctl.bash',
              'completions/_queenctl',
              'completions/queenctl.fish',
              ...pages.map((page) => `man/man1/${page}`),
            ]),
      ].map((name) => `${top}/${name}`);
      assert.deepEqual(names, want.sort(), archive(platform));
      const read = (name: string) =>
        windows
          ? ok('unzip', ['-p', archive(platform), `${top}/${name}`])
          : ok('tar', ['-xzOf', archive(platform), `${top}/${name}`]);
      assert.match(await read('THIRD-PARTY-LICENSES'), /^Bun \d+\.\d+\.\d+\n\nBun itself is MIT-licensed\./);
      const components = checkSbom(await read('sbom.cdx.json'));
      const runtime = manifest().executables[platform]?.runtime.package;
      assert.equal(runtime, `@oven/bun-${platform.replace('arm64', 'aarch64')}`);
      assert.equal(components.get(runtime)?.type, 'platform');
    }
  });

  it('every executable is of its platform and carries the bundle manifest.json names', async () => {
    const executables = manifest().executables;
    assert.deepEqual(Object.keys(executables).sort(), [...TARGETS, ...OTHERS].map((t) => t.platform).sort());
    for (const [platform, entry] of Object.entries(executables)) {
      const into = mkdtempSync(join(scratch, `${platform}-`));
      if (platform.startsWith('windows')) await ok('unzip', ['-q', join(RELEASE, entry.archive), '-d', into]);
      else await ok('tar', ['-xzf', join(RELEASE, entry.archive), '-C', into]);
      const file = join(into, entry.executable);
      const bytes = readFileSync(file);
      assert.equal(createHash('sha256').update(bytes).digest('hex'), entry.executableSha256, platform);
      assert.match(entry.bundleSha256, /^[0-9a-f]{64}$/);
      assert.ok(
        bytes.includes(Buffer.from(entry.bundleSha256)),
        `${platform}: carries the bundle ${entry.bundleSha256}`,
      );
      // Until scripts/binary-format.mjs: what file(1) says of the format and CPU.
      const described = (await ok('file', ['-b', file])).trim();
      const wanted =
        OTHERS.find((t) => t.platform === platform)?.file ??
        (platform === 'linux-x64' ? /^ELF 64-bit LSB executable, x86-64/ : /^ELF 64-bit LSB executable, ARM aarch64/);
      assert.match(described, wanted, platform);
      rmSync(into, { recursive: true, force: true });
    }
    // One bundle for every platform but the build info each names: all differ, none is empty.
    const bundles = new Set(Object.values(executables).map((entry) => entry.bundleSha256));
    assert.equal(bundles.size, Object.keys(executables).length);
  });
});

/** dist/release/manifest.json (scripts/release.mjs). */
function manifest(): {
  version: string;
  executables: Record<
    string,
    {
      archive: string;
      executable: string;
      executableSha256: string;
      bundleSha256: string;
      runtime: { package: string; version: string };
    }
  >;
} {
  return JSON.parse(readFileSync(join(RELEASE, 'manifest.json'), 'utf8'));
}

describe('the .debs', { skip }, () => {
  for (const target of TARGETS) {
    it(`${deb(target.deb)}: lintian reports nothing that is not overridden with its reason`, async () => {
      const result = await tool(
        'lintian',
        ['--fail-on', 'error,warning', '--no-tag-display-limit', '--display-level', '>=warning', deb(target.deb)],
        600_000,
      );
      assert.equal(result.code, 0, `lintian exited ${result.code}\n${result.stdout}${result.stderr}`);
      assert.doesNotMatch(result.stdout, /^[EW]: /m, result.stdout);
    });

    it(`${deb(target.deb)}: control fields, the files where each shell and man look, a DEP-5 copyright`, async () => {
      const field = async (name: string) => (await ok('dpkg-deb', ['--field', deb(target.deb), name])).trim();
      assert.equal(await field('Package'), 'queenctl');
      assert.equal(await field('Version'), `${VERSION}-1`);
      assert.equal(await field('Architecture'), target.deb);
      assert.match(await field('Maintainer'), /^.+ <[^>]+@[^>]+>$/);
      assert.match(await field('Homepage'), /^https:\/\//);
      assert.match(await field('Description'), /Queen MQ/);
      const depends = await field('Depends');
      // Bun links its C++ runtime in: the C library alone.
      assert.match(depends, /^libc6 \(>= [\d.]+\)$/, depends);
      const files = await debFiles(deb(target.deb));
      const pages = readdirSync(MAN)
        .filter((file) => file.endsWith('.1'))
        .map((page) => `/usr/share/man/man1/${page}.gz`);
      assert.deepEqual(
        files,
        [
          '/usr/bin/queenctl',
          '/usr/share/bash-completion/completions/queenctl',
          '/usr/share/doc/queenctl/changelog.Debian.gz',
          '/usr/share/doc/queenctl/copyright',
          '/usr/share/doc/queenctl/sbom.cdx.json',
          '/usr/share/fish/vendor_completions.d/queenctl.fish',
          ...pages,
          '/usr/share/zsh/vendor-completions/_queenctl',
        ].sort(),
      );
      const tarball = await fsysTar(deb(target.deb));
      // The archive's executable, byte for byte (not stripped: Bun's program is in a section of it).
      const digest = await runProcess('sh', ['-c', 'tar -xOf "$1" ./usr/bin/queenctl | sha256sum', 'sh', tarball], {
        timeoutMs: 120_000,
        exit: 0,
      });
      assert.equal(digest.code, 0, digest.stderr);
      assert.equal(digest.stdout.split(' ')[0], manifest().executables[target.platform]?.executableSha256);
      // The SBOM of the archive's executable, as it is (the .rpm has the same bytes: below).
      const sbom = await ok('tar', ['-xOf', tarball, './usr/share/doc/queenctl/sbom.cdx.json']);
      const archived = await ok('tar', [
        '-xzOf',
        archive(target.platform),
        `queenctl-${VERSION}-${target.platform}/sbom.cdx.json`,
      ]);
      assert.equal(sbom, archived);
      checkSbom(sbom);
      const copyright = await ok('tar', ['-xOf', tarball, './usr/share/doc/queenctl/copyright']);
      assert.match(
        copyright,
        /^Format: https:\/\/www\.debian\.org\/doc\/packaging-manuals\/copyright-format\/1\.0\/$/m,
      );
      assert.match(copyright, /^Files: \*\nCopyright: .+\nLicense: Expat$/m);
      const runtime = manifest().executables[target.platform]?.runtime.package ?? '-';
      assert.match(copyright, new RegExp(`^Files: ${runtime.replace('/', '\\/')}/\\*$`, 'm'));
      for (const bundled of ['commander', 'undici', 'yaml'])
        assert.match(copyright, new RegExp(`^Files: node_modules/${bundled}/\\*$`, 'm'));
      // The executable is an ELF file for its CPU.
      const exe = await runProcess(
        'sh',
        ['-c', `tar -xOf "$1" ./usr/bin/queenctl | head -c 20 | od -An -tx1`, 'sh', tarball],
        {
          timeoutMs: 60_000,
          exit: 0,
        },
      );
      assert.equal(exe.code, 0, exe.stderr);
      const machine = exe.stdout.trim().split(/\s+/).slice(18, 20).join('');
      assert.equal(machine, target.deb === 'amd64' ? '3e00' : 'b700', `e_machine of ${target.deb}`);
    });
  }

  it('the amd64 .deb installs with dpkg -i: queenctl, its man pages and completions work; dpkg -r leaves nothing', {
    skip: isRoot ? false : 'dpkg -i needs root (CI runs as root)',
  }, async () => {
    const installed = await tool('dpkg', ['-i', deb('amd64')], 300_000);
    try {
      assert.equal(installed.code, 0, installed.stdout + installed.stderr);
      const listed = (await ok('dpkg', ['-L', 'queenctl'])).trim().split('\n');
      const version = await runProcess('/usr/bin/queenctl', ['version', '--short'], { timeoutMs: 30_000, exit: 0 });
      assert.equal(version.code, 0, version.stderr);
      assert.match(
        version.stdout,
        new RegExp(`^queenctl ${VERSION.replaceAll('.', '\\.')} .*linux-x64 standalone build`),
      );
      const onPath = await runProcess('sh', ['-c', 'command -v queenctl'], { timeoutMs: 30_000, exit: 0 });
      assert.equal(onPath.code, 0, onPath.stderr);
      assert.equal(onPath.stdout.trim(), '/usr/bin/queenctl');
      const page = await tool('man', ['-w', 'queenctl-lease-extend'], 60_000);
      assert.equal(page.code, 0, page.stderr);
      assert.equal(page.stdout.trim(), '/usr/share/man/man1/queenctl-lease-extend.1.gz');
      const shown = await runProcess('sh', ['-c', 'man -P cat queenctl-lease-extend | head -5'], {
        timeoutMs: 60_000,
        exit: 0,
      });
      assert.equal(shown.code, 0, shown.stderr);
      assert.match(shown.stdout, /queenctl-lease-extend/i);
      // bash-completion loads /usr/share/bash-completion/completions/<command> on demand.
      const bash = await runProcess(
        'bash',
        ['-c', '. /usr/share/bash-completion/completions/queenctl && complete -p queenctl'],
        { timeoutMs: 30_000, exit: 0 },
      );
      assert.equal(bash.code, 0, bash.stderr);
      assert.match(bash.stdout, /^complete .* queenctl$/m);
      assert.match(readFileSync('/usr/share/zsh/vendor-completions/_queenctl', 'utf8'), /^#compdef queenctl/);
      assert.match(readFileSync('/usr/share/fish/vendor_completions.d/queenctl.fish', 'utf8'), /complete -c queenctl/);
      for (const shell of ['zsh', 'fish']) {
        const there = await runProcess('sh', ['-c', `command -v ${shell}`], { timeoutMs: 10_000, exit: [0, 1, 127] });
        if (there.code !== 0) continue;
        const file =
          shell === 'zsh'
            ? '/usr/share/zsh/vendor-completions/_queenctl'
            : '/usr/share/fish/vendor_completions.d/queenctl.fish';
        const syntax = await runProcess(shell, shell === 'zsh' ? ['-n', file] : ['--no-execute', file], {
          timeoutMs: 30_000,
          exit: 0,
        });
        assert.equal(syntax.code, 0, `${shell}: ${syntax.stderr}`);
      }
      const removed = await tool('dpkg', ['-r', 'queenctl'], 300_000);
      assert.equal(removed.code, 0, removed.stdout + removed.stderr);
      const left = listed.filter((path) => path.includes('queenctl') && existsSync(path));
      assert.deepEqual(left, [], 'dpkg -r removed every file and directory of its own');
      const status = await tool(
        'dpkg-query',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own field syntax
        ['--show', '--showformat=${db:Status-Status}', 'queenctl'],
        30_000,
        [0, 1],
      );
      assert.equal(status.code === 0 ? status.stdout : 'not-installed', 'not-installed');
    } finally {
      await tool('dpkg', ['--purge', 'queenctl'], 300_000);
    }
  });
});

describe('the .rpms', { skip }, () => {
  for (const target of TARGETS) {
    it(`${rpm(target.rpm)}: the .deb's files, ${target.rpm}, the version and licence; rpm -K passes`, async () => {
      const listed = (await ok('rpm', ['-qpl', rpm(target.rpm)])).trim().split('\n').sort();
      assert.deepEqual(listed, await debFiles(deb(target.deb)));
      const info = await ok('rpm', ['-qpi', rpm(target.rpm)]);
      assert.match(info, /^Name\s*: queenctl$/m);
      assert.match(info, new RegExp(`^Version\\s*: ${VERSION.replaceAll('.', '\\.')}$`, 'm'));
      assert.match(info, /^Release\s*: 1$/m);
      assert.match(info, new RegExp(`^Architecture: ${target.rpm}$`, 'm'));
      assert.match(info, /^License\s*: MIT AND /m);
      const requires = await ok('rpm', ['-qpR', rpm(target.rpm)]);
      assert.match(requires, /^libc\.so\.6\(GLIBC_2\.\d+\)/m);
      // Bun links its C++ runtime in: the C library alone.
      assert.doesNotMatch(requires, /^libstdc\+\+/m);
      const checked = await ok('rpm', ['-K', rpm(target.rpm)]);
      assert.match(checked, /digests OK/);
      // The same bytes as the .deb's files: nothing stripped (the program Bun's compiler put in a
      // section of the executable) or compressed again.
      const digests = (await ok('rpm', ['-qp', '--queryformat', '[%{FILENAMES} %{FILEDIGESTS}\\n]', rpm(target.rpm)]))
        .trim()
        .split('\n')
        .sort();
      assert.deepEqual(digests, await debDigests(deb(target.deb)));
    });
  }
});
