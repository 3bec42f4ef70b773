// `npm run release` (after `npm run build`, which writes the man pages to dist/man): everything a
// release publishes, built on one linux-x64 machine, into dist/release/ (docs/install.md):
//
//   queenctl-<v>-linux-x64.tar.gz, queenctl-<v>-linux-arm64.tar.gz   the standalone executables
//   queenctl-<v>-darwin-arm64.tar.gz, queenctl-<v>-darwin-x64.tar.gz  macOS
//   queenctl-<v>-windows-x64.zip                                        Windows
//   queenctl_<v>-1_amd64.deb, queenctl_<v>-1_arm64.deb                 Debian, Ubuntu
//   queenctl-<v>-1.x86_64.rpm, queenctl-<v>-1.aarch64.rpm              Fedora, RHEL, SUSE
//   manifest.json                                                       what each executable carries
//   queenctl.rb, queenctl.json        the Homebrew formula, the Scoop manifest (when a download base is set)
//   SHA256SUMS                                                          over every file above
//
// Every executable is compiled here by scripts/build-exe.mjs from this commit's bundle, with the
// pinned Bun runtime of its platform (docs/standalone.md); the linux-arm64 one is run under
// user-mode emulation to check it, and without the emulator that build says what to install and
// the release stops. The macOS and Windows ones cannot run here: the build checks each carries
// this bundle, and manifest.json records the bundle's checksum for the tests (scripts/test-release.mjs).
// Packages are made with dpkg-deb and rpmbuild (Debian's dpkg and rpm packages)
// from one staged tree per architecture (the files of both formats are the same). Everything is
// made in dist/release.partial-<pid>/ and renamed to dist/release/ only when complete: a failed
// step leaves no release, partial or old. Plain JS, like the other build scripts.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { embeds, inspectExecutable, verifyCodeSignature } from './binary-format.mjs';
import { packageManagerFiles } from './package-managers.mjs';

const root = fileURLToPath(new URL('../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const meta = JSON.parse(readFileSync(join(root, 'packaging', 'release.json'), 'utf8'));
const version = pkg.version;
const revision = String(meta.revision);
/** Each target: Node.js's name for it, its archive, and Debian's and RPM's (Linux only: packages). */
const TARGETS = [
  { platform: 'linux-x64', archive: 'tar.gz', deb: 'amd64', rpm: 'x86_64' },
  { platform: 'linux-arm64', archive: 'tar.gz', deb: 'arm64', rpm: 'aarch64' },
  { platform: 'darwin-arm64', archive: 'tar.gz' },
  { platform: 'darwin-x64', archive: 'tar.gz' },
  { platform: 'windows-x64', archive: 'zip' },
];
/** What each platform's executable must be (scripts/binary-format.mjs's names). */
const EXECUTABLE_FORMATS = {
  'linux-x64': { format: 'elf', arch: 'x64' },
  'linux-arm64': { format: 'elf', arch: 'arm64' },
  'darwin-arm64': { format: 'macho', arch: 'arm64' },
  'darwin-x64': { format: 'macho', arch: 'x64' },
  'windows-x64': { format: 'pe', arch: 'x64' },
};
/** Where each file goes in the packages (the same in both formats). */
const PATHS = {
  exe: 'usr/bin/queenctl',
  bash: 'usr/share/bash-completion/completions/queenctl',
  zsh: 'usr/share/zsh/vendor-completions/_queenctl',
  fish: 'usr/share/fish/vendor_completions.d/queenctl.fish',
  man: 'usr/share/man/man1',
  doc: 'usr/share/doc/queenctl',
  lintian: 'usr/share/lintian/overrides/queenctl',
};

const started = Date.now();
const say = (line) => process.stderr.write(`release: ${line}\n`);
function fail(message) {
  process.stderr.write(`release: ${message}\nrelease: no release was made (dist/release/ removed)\n`);
  rmSync(partial, { recursive: true, force: true });
  process.exit(1);
}

const release = join(root, 'dist', 'release');
const partial = join(root, 'dist', `release.partial-${process.pid}`);
// A release from an earlier run must not pass for this one's if this one fails; nor stay what an
// interrupted run left.
rmSync(release, { recursive: true, force: true });
if (existsSync(join(root, 'dist')))
  for (const left of readdirSync(join(root, 'dist')).filter((name) => name.startsWith('release.partial-')))
    rmSync(join(root, 'dist', left), { recursive: true, force: true });

const host = `${process.platform}-${process.arch}`;
if (host !== 'linux-x64')
  fail(`a release is built on linux-x64 (this is ${host}): it builds linux-arm64 under emulation`);
const manDir = join(root, 'dist', 'man');
const manPages = existsSync(manDir)
  ? readdirSync(manDir)
      .filter((file) => file.endsWith('.1'))
      .sort()
  : [];
if (manPages.length === 0)
  fail(`no man pages in ${relative(root, manDir)}/ (*.1): \`npm run build\` writes them; run it before the release`);
const tools = [
  ['dpkg-deb', '--version', 'dpkg'],
  ['rpmbuild', '--version', 'rpm'],
  ['tar', '--version', 'tar'],
  ['readelf', '--version', 'binutils'],
];
const missing = tools.filter(([command, flag]) => spawnSync(command, [flag], { stdio: 'ignore' }).status !== 0);
if (missing.length > 0)
  fail(
    `${missing.map(([command]) => command).join(', ')} not found: install them (Debian, Ubuntu): ` +
      `sudo apt-get install ${missing.map(([, , debian]) => debian).join(' ')}`,
  );

mkdirSync(partial, { recursive: true });
const work = join(partial, '.work');
const epoch = sourceDateEpoch();
const changelogDate = new Date(epoch * 1000).toUTCString().replace('GMT', '+0000');
/** `Thu Dec 03 2026`, as an RPM %changelog dates its entries. */
const rpmDate = (([day, date, month, year]) => `${day.slice(0, 3)} ${month} ${date} ${year}`)(
  new Date(epoch * 1000).toUTCString().split(' '),
);

/** What each executable carries, by platform (manifest.json). */
const manifest = {};
for (const target of TARGETS) {
  // 1. The standalone executable and its archive (scripts/build-exe.mjs), its man pages included.
  const out = join(work, `exe-${target.platform}`);
  say(`building the ${target.platform} executable`);
  const built = spawnSync(process.execPath, [join(root, 'scripts', 'build-exe.mjs'), '--target', target.platform], {
    cwd: root,
    env: { ...process.env, QUEENCTL_EXE_OUT: out, SOURCE_DATE_EPOCH: String(epoch) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (built.status !== 0) fail(`the ${target.platform} executable could not be built (above)`);
  const build = JSON.parse(readFileSync(join(out, 'build.json'), 'utf8'));
  copyFileSync(build.archive, join(partial, basename(build.archive)));
  manifest[target.platform] = {
    archive: basename(build.archive),
    executable: relative(dirname(dirname(build.exe)), build.exe).replaceAll('\\', '/'),
    executableSha256: build.exeSha256,
    bundleSha256: build.bundleSha256,
    runtime: { package: build.runtime.package, version: build.runtime.version },
  };
  if (!target.deb) continue;

  // 2. One staged tree, which both packages take.
  try {
    const stage = join(work, `stage-${target.deb}`);
    stageTree(stage, build);
    const depends = runtimeDependencies(join(stage, PATHS.exe));
    makeDeb(stage, target, depends);
    makeRpm(stage, target);
  } catch (error) {
    fail(error.message);
  }
}

// 3. What each executable carries (manifest.json, written below with what step 4 found): its file
// in its archive, its checksum, and the checksum of the bundle it was compiled from (which the
// executable carries too: src/standalone.ts), so that the tests can check each one, run here or
// not, is this release's.
//
// 4. What can be checked here of executables that cannot all run here (scripts/binary-format.mjs):
// each is the file format and CPU of its platform, carries this release's bundle (its checksum,
// written into the bundle by scripts/build-exe.mjs), and, for macOS, an ad hoc signature whose
// every page matches the file, as the kernel checks it at launch. Then the Homebrew formula and
// the Scoop manifest (scripts/package-managers.mjs), from the archives' checksums, for a tap and a
// bucket: only when the release knows where its files will be published (QUEENCTL_DOWNLOAD_BASE,
// or packaging/release.json `downloadBase`), since each names its archive's address. Before the
// checksums below, which cover what they write.
for (const target of TARGETS) {
  const entry = manifest[target.platform];
  const file = join(work, `exe-${target.platform}`, entry.executable);
  const expected = EXECUTABLE_FORMATS[target.platform];
  try {
    const info = await inspectExecutable(file);
    if (info.format !== expected.format || info.arch !== expected.arch)
      fail(
        `${entry.executable}: a ${info.format} ${info.arch} file, ` +
          `not the ${expected.format} ${expected.arch} of ${target.platform}`,
      );
    if (!(await embeds(file, entry.bundleSha256)))
      fail(`${entry.executable} (${target.platform}) does not carry this release's bundle ${entry.bundleSha256}`);
    if (info.format === 'pe' && !info.console)
      fail(`${entry.executable} (${target.platform}) is not a console program`);
    let signature = 'none';
    if (info.format === 'macho') {
      const pages = await verifyCodeSignature(file);
      if (!info.adhocSigned || !pages.valid)
        fail(`${entry.executable} (${target.platform}): no valid ad hoc signature (${JSON.stringify(pages)})`);
      signature = `ad hoc, ${pages.pages} pages checked`;
    }
    entry.checked = { format: info.format, arch: info.arch, bundle: true, signature };
    say(`${target.platform}: ${info.format} ${info.arch}, this release's bundle, signature: ${signature}`);
  } catch (error) {
    fail(`${target.platform}: ${error.message}`);
  }
}
writeFileSync(join(partial, 'manifest.json'), `${JSON.stringify({ version, executables: manifest }, null, 2)}\n`);

const archiveSums = readdirSync(partial)
  .filter((file) => /\.(tar\.gz|zip)$/.test(file))
  .sort()
  .map((file) => `${sha256(join(partial, file))}  ${file}\n`)
  .join('');
const downloadSetting = process.env.QUEENCTL_DOWNLOAD_BASE || meta.downloadBase || undefined;
const managerFiles = downloadSetting
  ? packageManagerFiles({ version, sha256sums: archiveSums, pkg, meta, downloadBase: downloadSetting })
  : {};
for (const [name, text] of Object.entries(managerFiles)) writeFileSync(join(partial, name), text);
if (!downloadSetting)
  say(
    'no Homebrew formula or Scoop manifest: where the files will be published is not set ' +
      '(QUEENCTL_DOWNLOAD_BASE, or downloadBase in packaging/release.json; docs/install.md)',
  );

// 5. SHA256SUMS over every file, in `sha256sum -c` format, sorted by name.
const files = readdirSync(partial)
  .filter((file) => file !== '.work')
  .sort();
const expected = [
  'manifest.json',
  ...Object.keys(managerFiles),
  ...TARGETS.flatMap(({ platform, archive, deb, rpm }) => [
    `queenctl-${version}-${platform}.${archive}`,
    ...(deb ? [`queenctl_${version}-${revision}_${deb}.deb`, `queenctl-${version}-${revision}.${rpm}.rpm`] : []),
  ]),
].sort();
if (JSON.stringify(files) !== JSON.stringify(expected))
  fail(`the release holds ${files.join(', ')}, not ${expected.join(', ')}`);
const sums = files.map((file) => `${sha256(join(partial, file))}  ${file}\n`).join('');
rmSync(work, { recursive: true, force: true });
writeFileSync(join(partial, 'SHA256SUMS'), sums);
renameSync(partial, release);
for (const file of [...files, 'SHA256SUMS'])
  say(`${relative(root, join(release, file))}: ${(statSync(join(release, file)).size / 1e6).toFixed(1)} MB`);
say(`done in ${Math.round((Date.now() - started) / 1000)} s`);

/** The package's files, as installed, under `stage`. */
function stageTree(stage, build) {
  rmSync(stage, { recursive: true, force: true });
  const put = (path, data, mode = 0o644) => {
    const file = join(stage, path);
    mkdirSync(dirname(file), { recursive: true });
    if (typeof data === 'string' || Buffer.isBuffer(data)) writeFileSync(file, data);
    else copyFileSync(data.from, file);
    chmodSync(file, mode);
  };
  const unpacked = dirname(build.exe);
  put(PATHS.exe, { from: build.exe }, 0o755);
  put(PATHS.bash, { from: join(unpacked, 'completions', 'queenctl.bash') });
  put(PATHS.zsh, { from: join(unpacked, 'completions', '_queenctl') });
  put(PATHS.fish, { from: join(unpacked, 'completions', 'queenctl.fish') });
  for (const page of manPages) put(join(PATHS.man, `${page}.gz`), gzip(readFileSync(join(manDir, page))));
  put(join(PATHS.doc, 'copyright'), copyright(build));
  // What the package carries, declared (docs/security.md): the SBOM of the archive's executable.
  put(join(PATHS.doc, 'sbom.cdx.json'), { from: join(unpacked, 'sbom.cdx.json') });
  put(join(PATHS.doc, 'changelog.Debian.gz'), gzip(debianChangelog()));
  put(PATHS.lintian, lintianOverrides());
}

/** Every file under `dir`, relative to it, sorted. */
function filesUnder(dir, prefix = '') {
  return readdirSync(join(dir, prefix), { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? filesUnder(dir, join(prefix, entry.name)) : [join(prefix, entry.name)]))
    .sort();
}

function makeDeb(stage, target, depends) {
  const tree = join(work, `deb-${target.deb}`);
  rmSync(tree, { recursive: true, force: true });
  run('cp', ['-a', stage, tree], 'staging the .deb');
  const files = filesUnder(tree);
  const installedKb = Math.ceil(files.reduce((sum, file) => sum + statSync(join(tree, file)).size, 0) / 1024);
  mkdirSync(join(tree, 'DEBIAN'));
  const control = [
    'Package: queenctl',
    `Version: ${version}-${revision}`,
    `Architecture: ${target.deb}`,
    `Maintainer: ${meta.maintainer}`,
    `Installed-Size: ${installedKb}`,
    `Depends: ${depends.map(({ pkg: name, min }) => `${name} (>= ${min})`).join(', ')}`,
    `Section: ${meta.section}`,
    `Priority: ${meta.priority}`,
    `Homepage: ${meta.homepage}`,
    `Description: ${meta.summary}`,
    ...meta.description.map((line) => ` ${line}`),
    '',
  ].join('\n');
  writeFileSync(join(tree, 'DEBIAN', 'control'), control);
  writeFileSync(
    join(tree, 'DEBIAN', 'md5sums'),
    files
      .map(
        (file) =>
          `${createHash('md5')
            .update(readFileSync(join(tree, file)))
            .digest('hex')}  ${file}\n`,
      )
      .join(''),
  );
  const deb = join(partial, `queenctl_${version}-${revision}_${target.deb}.deb`);
  // gzip, not xz: xz spent over 70 s of CPU on half of one package's 130 MB executable here (four
  // packages to make, on 2 shared cores); gzip takes seconds, for 44 MB a package instead of
  // about 30, and every dpkg and rpm reads it.
  run('dpkg-deb', ['--root-owner-group', '-Zgzip', '-z9', '--build', tree, deb], `dpkg-deb (${target.deb})`, {
    env: { PATH: process.env.PATH, SOURCE_DATE_EPOCH: String(epoch) },
  });
  say(`${relative(root, deb)}: Depends: ${depends.map(({ pkg: name, min }) => `${name} (>= ${min})`).join(', ')}`);
}

function makeRpm(stage, target) {
  const top = join(work, `rpm-${target.rpm}`);
  rmSync(top, { recursive: true, force: true });
  for (const dir of ['BUILD', 'RPMS', 'SOURCES', 'SPECS', 'SRPMS', 'BUILDROOT'])
    mkdirSync(join(top, dir), { recursive: true });
  // Debian's own overrides have no place in an RPM.
  const files = filesUnder(stage).filter((file) => file !== PATHS.lintian);
  const spec = readFileSync(join(root, 'packaging', 'queenctl.spec'), 'utf8')
    .replaceAll('@VERSION@', version)
    .replaceAll('@REVISION@', revision)
    .replaceAll('@SUMMARY@', meta.summary)
    .replaceAll('@LICENSE@', licenceExpression())
    .replaceAll('@HOMEPAGE@', meta.homepage)
    .replaceAll('@PACKAGER@', meta.maintainer)
    .replaceAll('@DESCRIPTION@', meta.description.join('\n'))
    .replaceAll('@STAGE@', stage)
    .replaceAll(
      '@FILES@',
      files.map((file) => (file === PATHS.exe ? `%attr(0755,root,root) /${file}` : `/${file}`)).join('\n'),
    )
    .replaceAll('@CHANGELOG_DATE@', rpmDate)
    .replaceAll('@CHANGELOG@', changelogText());
  const specFile = join(top, 'SPECS', 'queenctl.spec');
  writeFileSync(specFile, spec);
  run(
    'rpmbuild',
    [
      '-bb',
      '--target',
      `${target.rpm}-linux`,
      '--define',
      `_topdir ${top}`,
      '--define',
      `_buildhost reproducible`,
      specFile,
    ],
    `rpmbuild (${target.rpm})`,
    { env: { PATH: process.env.PATH, HOME: top, SOURCE_DATE_EPOCH: String(epoch) } },
  );
  const rpm = join(top, 'RPMS', target.rpm, `queenctl-${version}-${revision}.${target.rpm}.rpm`);
  if (!existsSync(rpm)) throw new Error(`rpmbuild made no ${relative(root, rpm)}`);
  renameSync(rpm, join(partial, basename(rpm)));
}

/**
 * The C and C++ runtime packages the executable needs, at the least version: for each symbol set
 * it needs of each library (readelf's version needs, which the loader checks: GLIBC_2.28 of
 * libc.so.6), the version that Debian's symbols file of that library gives the set, else the
 * set's own number. By set, not by symbol as dpkg-shlibdeps goes: Debian dates a few old symbols
 * by later changes (sysconf@GLIBC_2.2.5 at libc6 2.34), which would refuse Debian 11 and Ubuntu
 * 20.04, where Node.js's official binary, built against glibc 2.28, runs.
 */
function runtimeDependencies(exe) {
  const packages = [
    { pkg: 'libc6', sonames: /^(libc|libm|libdl|libpthread|librt)\.so\.\d+$|^ld-linux[-\w]*\.so\.\d+$/ },
    { pkg: 'libgcc-s1', sonames: /^libgcc_s\.so\.1$/ },
    { pkg: 'libstdc++6', sonames: /^libstdc\+\+\.so\.6$/ },
  ];
  // The file each version index of the executable's version needs comes from.
  const fileOf = new Map();
  let file = null;
  for (const line of run('readelf', ['--version-info', '--wide', exe], 'reading the executable').split('\n')) {
    const from = /File: (\S+)/.exec(line);
    if (from) file = from[1];
    const need = /Name: (\S+)\s+Flags: \S+\s+Version: (\d+)/.exec(line);
    if (need && file) fileOf.set(need[2], file);
  }
  const imported = run('readelf', ['--dyn-syms', '--wide', exe], 'reading the symbols of the executable')
    .split('\n')
    .map((line) => /\sUND (\S+@\S+) \((\d+)\)$/.exec(line.trimEnd()))
    .filter(Boolean)
    .map(([, symbol, index]) => ({ symbol, soname: fileOf.get(index) }));
  const needed = run('readelf', ['--dynamic', '--wide', exe], 'reading the libraries the executable needs');
  for (const [, soname] of needed.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g))
    if (!packages.some(({ sonames }) => sonames.test(soname)))
      throw new Error(`the executable needs ${soname}, which no dependency of the packages provides`);
  const neededSonames = [...needed.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map(([, soname]) => soname);
  // Only the packages of the libraries it needs (Bun links its C++ runtime in: no libstdc++6).
  const used = packages.filter(({ sonames }) => neededSonames.some((soname) => sonames.test(soname)));
  return used.map(({ pkg: name, sonames }) => {
    const table = debianSymbols(name);
    let min = null;
    for (const { symbol, soname } of imported) {
      if (!soname || !sonames.test(soname)) continue;
      const set = symbol.split('@').pop();
      const at = table.get(`${soname} ${set}@${set}`) ?? /_(\d+(?:\.\d+)*)$/.exec(set)?.[1];
      if (!at) throw new Error(`no version of ${name} is known for ${symbol} of ${soname}`);
      if (min === null || compareVersions(at, min) > 0) min = at;
    }
    if (min === null)
      throw new Error(`the executable imports nothing of ${name}: its dependencies are not as expected`);
    return { pkg: name, min };
  });
}

/** `<soname> <symbol@SET>` -> the least version of the package, from dpkg's symbols file here. */
function debianSymbols(name) {
  const table = new Map();
  const file = `/var/lib/dpkg/info/${name}:amd64.symbols`;
  if (!existsSync(file)) throw new Error(`${file} is missing: the release needs Debian's ${name} installed`);
  let soname = null;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const library = /^(\S+\.so[.\d]*) /.exec(line);
    if (library) soname = library[1];
    const match = /^ (\S+@\S+) (\S+)/.exec(line);
    if (match && soname) table.set(`${soname} ${match[1]}`, match[2].replace(/~$/, ''));
  }
  return table;
}

function compareVersions(a, b) {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++)
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
  return 0;
}

/**
 * The RPM's License: queenctl's, those of the npm packages bundled (package.json), and Bun's with
 * the libraries it links in (packaging/release.json, from Bun's LICENSE.md). The texts are
 * in /usr/share/doc/queenctl/copyright.
 */
function licenceExpression() {
  const spdx = new Set([pkg.license]);
  const built = JSON.parse(readFileSync(join(work, 'exe-linux-x64', 'build.json'), 'utf8'));
  for (const { license } of built.packages) spdx.add(license);
  for (const license of meta.runtimeLicenses) spdx.add(license);
  return [...spdx].join(' AND ');
}

/** DEP-5 (machine-readable) copyright: queenctl, each npm package bundled, Bun. */
function copyright(build) {
  const text = (body) =>
    body
      .replace(/\s+$/, '')
      .split('\n')
      .map((line) => (line.trim() === '' ? ' .' : ` ${line.replace(/\t/g, '    ').trimEnd()}`))
      .join('\n');
  const notices = (body, fallback) => {
    const lines = body.split('\n').filter((line) => /^\s*(\(c\)|copyright\b)/i.test(line) && /\d{4}|\(c\)/i.test(line));
    return lines.length > 0
      ? lines.map((line) => line.trim().replace(/^copyright\s*(\(c\))?\s*/i, '')).join('\n ')
      : fallback;
  };
  const debianName = (spdx) => ({ MIT: 'Expat' })[spdx] ?? spdx;
  const queenctlLicense = readFileSync(join(root, 'LICENSE'), 'utf8');
  const paragraphs = [
    [
      'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/',
      'Upstream-Name: queenctl',
      `Upstream-Contact: ${meta.maintainer}`,
      `Source: ${meta.homepage}`,
      "Comment: /usr/bin/queenctl is compiled by Bun's compiler: one file holding queenctl,",
      ' the npm packages listed below (bundled into its program), and the official release',
      ` binary of Bun ${build.runtime.version} (the npm package ${build.runtime.package}), with the`,
      " libraries Bun links in, whose licences Bun's own LICENSE.md names in its paragraph below.",
    ].join('\n'),
    [
      'Files: *',
      `Copyright: ${notices(queenctlLicense, 'the queenctl authors')}`,
      `License: ${debianName(pkg.license)}`,
      text(queenctlLicense.replace(/^MIT License\s*\n/, '').replace(/^Copyright.*\n/m, '')),
    ].join('\n'),
  ];
  for (const { name, version: at, license, dir, licenseFile } of build.packages) {
    const body = withCommonLicences(licenseFile ? readFileSync(licenseFile, 'utf8') : `${license}`);
    paragraphs.push(
      [
        `Files: ${dir.replaceAll('\\', '/')}/*`,
        `Copyright: ${notices(body, `the ${name} authors`)}`,
        `License: ${debianName(license)}`,
        text(body),
        `Comment: ${name} ${at}, from the npm registry, bundled into /usr/bin/queenctl.`,
      ].join('\n'),
    );
  }
  const runtimeLicense = withCommonLicences(readFileSync(build.runtimeLicense, 'utf8'));
  paragraphs.push(
    [
      `Files: ${build.runtime.package}/*`,
      'Copyright: Oven (the Bun authors)',
      ' the authors of each library named in the licence below',
      `License: ${meta.runtimeLicenses.join(' and ')}`,
      text(runtimeLicense),
      `Comment: Bun ${build.runtime.version}, the official release binary of the npm package`,
      ` ${build.runtime.package}, embedded in /usr/bin/queenctl. Its LICENSE.md, in full above,`,
      ' gives the licence of Bun and of every library it links in; on Debian systems the LGPL',
      ' (JavaScriptCore, WebKit, tinycc) is in /usr/share/common-licenses/LGPL-2 and LGPL-2.1.',
    ].join('\n'),
  );
  const written = `${paragraphs.join('\n\n')}\n`;
  if (/TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION/.test(written))
    throw new Error('a full Apache License 2.0 text was not recognised: the copyright file would carry it');
  return written;
}

/**
 * A licence text with each full text of the Apache License 2.0 in it (in Node.js's LICENSE:
 * LIEF's, OpenSSL's, simdjson's ...) replaced by where Debian keeps it, as
 * Debian policy asks of a copyright file (12.5).
 */
function withCommonLicences(text) {
  const apache =
    /^[ \t]*Apache License\s*\n\s*Version 2\.0, January 2004\s*\n[\s\S]*?END OF TERMS AND CONDITIONS[ \t]*$/gm;
  return text.replace(
    apache,
    () =>
      `    Apache License, Version 2.0 (the full text, on Debian systems:\n` +
      `    /usr/share/common-licenses/Apache-2.0; elsewhere: https://www.apache.org/licenses/LICENSE-2.0)`,
  );
}

/** The release's entry: the version, its commit and the Bun it carries. */
function changelogText() {
  const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout?.trim();
  // Lines of at most 80 characters in the Debian changelog, with its indent.
  return [
    `- queenctl ${version}${commit ? ` (commit ${commit})` : ''}: the standalone executable,`,
    `  carrying Bun ${pkg.config.standaloneBun}. Changes: the release notes of this version.`,
  ].join('\n');
}

function debianChangelog() {
  const entry = changelogText()
    .split('\n')
    .map((line) => `  ${line.startsWith('- ') ? '*' : ' '} ${line.slice(2)}`)
    .join('\n');
  const trailer = ` -- ${meta.maintainer}  ${changelogDate}`;
  return `queenctl (${version}-${revision}) unstable; urgency=medium\n\n${entry}\n\n${trailer}\n`;
}

/** Each tag lintian reports on the .deb that is meant, and why (packaging/lintian-overrides). */
function lintianOverrides() {
  return readFileSync(join(root, 'packaging', 'lintian-overrides'), 'utf8');
}

/** SOURCE_DATE_EPOCH when set, else the commit's time: the same commit packs the same dates. */
function sourceDateEpoch() {
  const given = Number(process.env.SOURCE_DATE_EPOCH);
  if (Number.isFinite(given) && given > 0) return Math.floor(given);
  const committed = Number(spawnSync('git', ['log', '-1', '--format=%ct'], { cwd: root, encoding: 'utf8' }).stdout);
  return Number.isFinite(committed) && committed > 0 ? committed : Math.floor(Date.now() / 1000);
}

function gzip(data) {
  // No name or time in the header (gzip -n): the same page packs the same bytes.
  return gzipSync(data, { level: 9 });
}

function sha256(file) {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

function run(command, args, what, options = {}) {
  const ran = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options });
  if (ran.status !== 0) {
    const output = `${ran.stdout ?? ''}${ran.stderr ?? ''}`.trim() || String(ran.error ?? `signal ${ran.signal}`);
    throw new Error(`${what} failed: ${command} ${args.join(' ')}\n${output}`);
  }
  return ran.stdout;
}
