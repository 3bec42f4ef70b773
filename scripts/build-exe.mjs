// `npm run build:exe`: the standalone executable, queenctl compiled with the Bun runtime into one
// file by Bun's compiler (`bun build --compile --bytecode`), and its release archive with
// SHA256SUMS. How and why: docs/standalone.md. Plain JS: it runs before anything is compiled.
//
//   dist/exe/queenctl-<version>-<os>-<arch>/queenctl[.exe]   the executable
//   dist/exe/queenctl-<version>-<os>-<arch>.tar.gz (.zip)    it, LICENSE, README, licences, SBOM, ...
//   dist/exe/SHA256SUMS                                      sha256sum -c checks the archive
//   dist/exe/build.json                                      what was built, for the tests and release
//   dist/exe/queenctl.cjs                                    the bundle compiled in (build.json: its SHA-256)
//
// `--target <os>-<arch>`: linux-x64, linux-arm64, darwin-x64, darwin-arm64, windows-x64, all built
// on this machine (Bun's compiler cross-builds: the target's runtime is only copied, never run).
// The host's target goes to dist/exe/, another to dist/exe-<target>/, unless QUEENCTL_EXE_OUT says
// otherwise. The executable is run here when it can be: natively, or linux-arm64 on linux-x64
// under user-mode emulation (qemu-aarch64 with the arm64 C runtime of libc6-arm64-cross); a
// macOS or Windows one is checked for what it can be (the bundle it carries), not run.
//
// Bun is the release published on the npm registry as @oven/bun-<os>-<cpu>, at the exact version
// pinned in package.json (config.standaloneBun), fetched once per platform into
// node_modules/.cache/queenctl-exe/: the host's to compile with, the target's to embed
// (--compile-executable-path), so that Bun downloads nothing itself.
import { build } from 'esbuild';
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
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { crc32, deflateRawSync } from 'node:zlib';
import { lazyCommanderChildProcess, lazyHttp2 } from './esbuild-plugins.mjs';
import { inspectExecutable, verifyCodeSignature } from './binary-format.mjs';
import { bundledPackages, licensesText, npmPurl, SBOM_FILE, sbomText } from './licenses.mjs';
import { adhocSign } from './macho-sign.mjs';

const root = fileURLToPath(new URL('../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const bunVersion = pkg.config.standaloneBun;
/** Bun's licence (its npm packages carry none): packaging/bun/README.md. */
const BUN_LICENSE = join(root, 'packaging', 'bun', 'LICENSE.md');

/**
 * The platforms built, as Node.js names them (process.platform-process.arch, as `queenctl version`
 * prints them), with Bun's name of each: the npm package of its runtime and the compiler's target.
 * x64 is Bun's default build (CPUs from 2013 on, AVX2: Haswell and later), as the packages are.
 */
const PLATFORMS = {
  'linux-x64': { bun: 'linux-x64', exe: 'queenctl', archive: 'tar.gz' },
  'linux-arm64': { bun: 'linux-aarch64', target: 'linux-arm64', exe: 'queenctl', archive: 'tar.gz' },
  'darwin-x64': { bun: 'darwin-x64', exe: 'queenctl', archive: 'tar.gz' },
  'darwin-arm64': { bun: 'darwin-aarch64', target: 'darwin-arm64', exe: 'queenctl', archive: 'tar.gz' },
  'windows-x64': { bun: 'windows-x64', exe: 'queenctl.exe', archive: 'zip' },
};

function fail(message) {
  process.stderr.write(`build:exe: ${message}\n`);
  process.exit(1);
}
const say = (line) => process.stderr.write(`build:exe: ${line}\n`);

const host = `${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
// QUEENCTL_EXE_PLATFORM: the same as --target (the test of the refusal).
const targetArg = process.argv.indexOf('--target');
const platform = (targetArg > 0 ? process.argv[targetArg + 1] : undefined) || process.env.QUEENCTL_EXE_PLATFORM || host;
const target = PLATFORMS[platform];
if (!target)
  fail(
    `no Bun runtime for ${platform} (@oven/bun-<os>-<cpu> on the npm registry) that queenctl is built for;` +
      ` the platforms: ${Object.keys(PLATFORMS).join(', ')}`,
  );
if (!PLATFORMS[host])
  fail(`Bun's compiler does not run on ${host}: build on one of ${Object.keys(PLATFORMS).join(', ')}`);

/** The targets run here under emulation, and what that needs. */
const EMULATED = {
  'linux-x64>linux-arm64': {
    qemu: 'qemu-aarch64',
    prefix: process.env.QEMU_LD_PREFIX || '/usr/aarch64-linux-gnu',
    libraries: ['lib/ld-linux-aarch64.so.1', 'lib/libc.so.6'],
    packages: ['qemu-user', 'libc6-arm64-cross'],
  },
};
/** null: runs natively; an emulator: runs under it; undefined: not run here at all. */
const emulation = platform === host ? null : EMULATED[`${host}>${platform}`];
const runsHere = emulation !== undefined;
if (emulation) checkEmulator(emulation);

const name = `queenctl-${pkg.version}-${platform}`;
// QUEENCTL_EXE_OUT: another directory (the build's own tests, which must not replace dist/exe; the
// release). Another target's build never replaces the host's.
const exeDir = process.env.QUEENCTL_EXE_OUT || join(root, 'dist', platform === host ? 'exe' : `exe-${platform}`);
const outDir = join(exeDir, name);
const exe = join(outDir, target.exe);
const archive = join(exeDir, `${name}.${target.archive}`);
const work = join(exeDir, '.build');
// An executable from an earlier build must not outlive a failed one.
for (const stale of [
  outDir,
  archive,
  ...['SHA256SUMS', 'build.json', 'queenctl.cjs'].map((f) => join(exeDir, f)),
  work,
])
  rmSync(stale, { recursive: true, force: true });
mkdirSync(work, { recursive: true });

const compiler = bunBinary(host);
// QUEENCTL_EXE_RUNTIME: another Bun binary to embed (the build's test of a compile that fails).
const runtime = process.env.QUEENCTL_EXE_RUNTIME || (platform === host ? compiler : bunBinary(platform));
say(`Bun ${bunVersion}: ${relative(root, runtime) || runtime}`);

// 1. The bundle: the entry (src/standalone.ts) with the whole CLI, every dependency bundled (the
// executable has no node_modules), one CommonJS file (Bun's --bytecode wants CommonJS). import()
// becomes a function that evaluates the module when called: the guardian never evaluates the CLI.
// esbuild, as for the npm package: the same plugins, and its metafile names every package bundled.
const BUNDLE_ID_PLACEHOLDER = '0'.repeat(64);
const builtAt = buildDate();
const made = await build({
  entryPoints: [join(root, 'src', 'standalone.ts')],
  bundle: true,
  platform: 'node',
  target: 'esnext',
  format: 'cjs',
  supported: { 'dynamic-import': false },
  legalComments: 'none',
  charset: 'utf8',
  logLevel: 'warning',
  metafile: true,
  write: false,
  outfile: join(work, 'queenctl.cjs'),
  plugins: [lazyCommanderChildProcess, lazyHttp2],
  define: {
    QUEENCTL_BUILD_INFO: JSON.stringify({ commit: gitCommit(), date: builtAt, standalone: true, platform }),
    QUEENCTL_BUNDLE_SHA256: JSON.stringify(BUNDLE_ID_PLACEHOLDER),
  },
});
const bundled = Object.keys(made.metafile.inputs);
const draft = Buffer.from(made.outputFiles[0].contents);
// The bundle's id: the SHA-256 of the bundle with its own id zeroed, written into it (in the one
// place the placeholder is), so that the executable carries it and build.json records it.
const bundleSha256 = createHash('sha256').update(draft).digest('hex');
const placeholderAt = draft.indexOf(BUNDLE_ID_PLACEHOLDER);
if (placeholderAt === -1 || draft.indexOf(BUNDLE_ID_PLACEHOLDER, placeholderAt + 1) !== -1)
  fail('the bundle does not hold its id placeholder exactly once (src/standalone.ts, QUEENCTL_BUNDLE_SHA256)');
// Kept beside the executable: what it was compiled from, for the tests (and for a comparison of
// compiler flags, docs/standalone.md).
const bundle = join(exeDir, 'queenctl.cjs');
writeFileSync(
  bundle,
  Buffer.concat([
    draft.subarray(0, placeholderAt),
    Buffer.from(bundleSha256),
    draft.subarray(placeholderAt + BUNDLE_ID_PLACEHOLDER.length),
  ]),
);

// 2. The executable, compiled under a temporary name: only one that ran as queenctl (or, where it
// cannot run here, that carries this bundle) gets the final name.
mkdirSync(outDir, { recursive: true });
const partial = join(outDir, `.queenctl.partial-${process.pid}${platform.startsWith('windows') ? '.exe' : ''}`);
try {
  run(
    compiler,
    [
      'build',
      bundle,
      '--compile',
      `--target=bun-${target.target ?? platform}`,
      `--compile-executable-path=${runtime}`,
      // Compiled ahead: JavaScriptCore's bytecode of every function, not parsed at each start
      // (docs/standalone.md, "How it starts").
      '--bytecode',
      '--minify',
      // What the directory a command runs in holds is not the executable's configuration: no .env
      // (QUEEN_TOKEN, HTTPS_PROXY ...), bunfig.toml (preload: code), package.json or tsconfig.json
      // read at start (docs/security.md).
      '--no-compile-autoload-dotenv',
      '--no-compile-autoload-bunfig',
      '--no-compile-autoload-package-json',
      '--no-compile-autoload-tsconfig',
      '--outfile',
      partial,
    ],
    'compiling',
    { cwd: work, env: { PATH: process.env.PATH ?? '', HOME: work, BUN_INSTALL_CACHE_DIR: join(work, 'cache') } },
  );
  chmodSync(partial, 0o755);
  if (platform.startsWith('darwin')) await macSignature(partial);
  // Where it runs here it must run as queenctl; everywhere, it must carry this bundle's id.
  if (!readFileSync(partial).includes(Buffer.from(bundleSha256)))
    throw new Error(`the compiled executable does not carry the bundle's id ${bundleSha256}`);
  if (runsHere) {
    const check = spawnSync(...onTarget(partial, ['--version']), { env: targetEnv({}), encoding: 'utf8' });
    if (check.status !== 0 || check.stdout !== `${pkg.version}\n`)
      throw new Error(
        `the compiled executable does not run as queenctl: \`--version\` exited ${check.status} ` +
          `printing ${JSON.stringify(check.stdout)} ${JSON.stringify((check.stderr ?? '').slice(0, 400))}`,
      );
  }
  renameSync(partial, exe);
} catch (error) {
  rmSync(partial, { force: true });
  rmSync(bundle, { force: true });
  fail(`${error.message}\nno executable was made`);
}
say(`${relative(root, exe)}: ${(statSync(exe).size / 1e6).toFixed(1)} MB`);

// 3. The release archive, as the Go queenctl's: the executable, the licences, the README and the
// SBOM (sbom.cdx.json: what it carries, docs/security.md); for Linux and macOS the bash, zsh and
// fish completion scripts and the man pages. Then SHA256SUMS covering the archive.
copyFileSync(join(root, 'LICENSE'), join(outDir, 'LICENSE'));
copyFileSync(join(root, 'README.md'), join(outDir, 'README.md'));
writeFileSync(join(outDir, 'THIRD-PARTY-LICENSES'), thirdPartyLicenses());
writeFileSync(join(outDir, SBOM_FILE), sbom());
if (!platform.startsWith('windows')) {
  mkdirSync(join(outDir, 'completions'));
  for (const [shell, file] of [
    ['bash', 'queenctl.bash'],
    ['zsh', '_queenctl'],
    ['fish', 'queenctl.fish'],
  ]) {
    try {
      // Printed by the executable itself; where it cannot run here, by the same bundle run by the
      // host's Bun (the scripts depend on the command tree only).
      const [command, args] = runsHere
        ? onTarget(exe, ['completion', shell])
        : [compiler, [bundle, 'completion', shell]];
      writeFileSync(join(outDir, 'completions', file), run(command, args, `the ${shell} completion`));
    } catch (error) {
      fail(error.message);
    }
  }
  // The man pages `npm run build` wrote (dist/man), when there are any: `npm run release` requires them.
  const manPages = existsSync(join(root, 'dist', 'man'))
    ? readdirSync(join(root, 'dist', 'man')).filter((file) => file.endsWith('.1'))
    : [];
  if (manPages.length > 0) {
    mkdirSync(join(outDir, 'man', 'man1'), { recursive: true });
    for (const page of manPages) copyFileSync(join(root, 'dist', 'man', page), join(outDir, 'man', 'man1', page));
  }
}
try {
  if (target.archive === 'zip') writeFileSync(archive, zip(exeDir, name));
  else {
    const gnuTar = /GNU tar/.test(spawnSync('tar', ['--version'], { encoding: 'utf8' }).stdout ?? '');
    run(
      'tar',
      [
        ...(gnuTar ? ['--owner=0', '--group=0', '--numeric-owner', '--sort=name'] : []),
        ...(gnuTar && process.env.SOURCE_DATE_EPOCH ? [`--mtime=@${process.env.SOURCE_DATE_EPOCH}`] : []),
        '-czf',
        archive,
        '-C',
        exeDir,
        name,
      ],
      'packing the archive',
    );
  }
} catch (error) {
  rmSync(archive, { force: true });
  fail(error.message);
}
const sums = join(exeDir, 'SHA256SUMS');
writeFileSync(sums, `${sha256(archive)}  ${basename(archive)}\n`);
say(`${relative(root, archive)}: ${(statSync(archive).size / 1e6).toFixed(1)} MB; ${relative(root, sums)}`);

// What was built, for `npm run test:exe`, `npm run bench` and the release (scripts/test-exe.mjs,
// bench-exe.ts, release.mjs).
writeFileSync(
  join(exeDir, 'build.json'),
  `${JSON.stringify(
    {
      exe,
      archive,
      sums,
      platform,
      runtime: { name: 'bun', version: bunVersion, package: `@oven/bun-${target.bun}`, binary: runtime },
      // The compiler's Bun, which also runs the bundle for the tests (the same program, unpacked).
      bun: compiler,
      // The SHA-256 of the bundle compiled in, with this id zeroed (it carries the id itself).
      bundle,
      bundleSha256,
      exeSha256: sha256(exe),
      runsHere,
      emulator: emulation ? emulatorOf(emulation) : null,
      // For the release's packages (scripts/release.mjs): their copyright file.
      runtimeLicense: BUN_LICENSE,
      packages: bundledPackages(bundled, root),
    },
    null,
    2,
  )}\n`,
);
rmSync(work, { recursive: true, force: true });

/**
 * macOS: the code signature Bun's compiler leaves, checked here page by page as `codesign
 * --verify` would (scripts/binary-format.mjs; no macOS here). For darwin-arm64 Bun 1.4.5 signs the
 * executable ad hoc, as Apple silicon requires, and every page matches: kept as made. For
 * darwin-x64 it leaves Bun's own release signature (Developer ID, hardened runtime), which no
 * longer matches the file once the program is in it, and macOS kills a process whose pages do not
 * match their signature: the executable is signed again ad hoc (scripts/macho-sign.mjs), as
 * `codesign --force --sign -` would, and checked again (docs/install.md, "macOS: the code
 * signature"). Nothing here has run on a Mac.
 */
async function macSignature(file) {
  const made = await verifyCodeSignature(file);
  const info = await inspectExecutable(file);
  if (info.format !== 'macho') throw new Error(`${file} is not a Mach-O executable (${info.format})`);
  if (info.adhocSigned && made.valid) return say(`${platform}: signed ad hoc by Bun, every page matches`);
  const { pages } = await adhocSign(file, { identifier: 'queenctl' });
  const signed = await verifyCodeSignature(file);
  const again = await inspectExecutable(file);
  if (!signed.valid || !again.adhocSigned)
    throw new Error(`${file}: signed again ad hoc, and still not a valid ad hoc signature`);
  const before = 'mismatched' in made ? `${made.mismatched} of ${made.pages} pages no longer matched` : 'invalid';
  say(`${platform}: Bun's own signature (${before}) replaced by an ad hoc one over ${pages} pages`);
}

function sha256(file) {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

/** How `file` of the target runs here: itself, or under the emulator. */
function onTarget(file, args) {
  return emulation ? [emulation.qemu, [file, ...args]] : [file, args];
}

/** `env` with what the emulator needs (where the target's C runtime is). */
function targetEnv(env) {
  return emulation ? { ...env, QEMU_LD_PREFIX: emulation.prefix } : env;
}

/** For whoever runs the executable afterwards (the release's tests): the command and its env. */
function emulatorOf(emulator) {
  return { command: emulator.qemu, env: { QEMU_LD_PREFIX: emulator.prefix } };
}

/** The emulator and the target's runtime are there, or the build says what to install. */
function checkEmulator(emulator) {
  const missing = [];
  const qemu = spawnSync(emulator.qemu, ['--version'], { encoding: 'utf8' });
  if (qemu.status !== 0) missing.push(`${emulator.qemu} (${qemu.error?.code ?? `exit ${qemu.status}`})`);
  for (const library of emulator.libraries)
    if (!existsSync(join(emulator.prefix, library))) missing.push(join(emulator.prefix, library));
  if (missing.length > 0)
    fail(
      `building for ${platform} on ${host} runs the executable under user-mode emulation, and this machine lacks ` +
        `${missing.join(', ')}.\nInstall them (Debian, Ubuntu): sudo apt-get install ${emulator.packages.join(' ')}` +
        `\n(QEMU_LD_PREFIX names another root of the ${platform} runtime.) No executable was made.`,
    );
}

/** The licences of what the executable carries besides queenctl: Bun's, then each npm package's. */
function thirdPartyLicenses() {
  return licensesText([
    { name: 'Bun', version: bunVersion, text: readFileSync(BUN_LICENSE, 'utf8') },
    ...bundledPackages(bundled, root),
  ]);
}

/**
 * What the executable carries, declared (docs/security.md): the Bun release it is made of (the
 * npm package @oven/bun-<os>-<cpu> it was fetched as) and each npm package bundled into it.
 */
function sbom() {
  const release = JSON.parse(readFileSync(join(root, 'packaging', 'release.json'), 'utf8'));
  const runtimePackage = `@oven/bun-${target.bun}`;
  return sbomText({
    subject: pkg,
    packages: bundledPackages(bundled, root),
    platform: {
      name: runtimePackage,
      version: bunVersion,
      // Bun's own, and those of the libraries its binary links in (its LICENSE.md).
      license: release.runtimeLicenses.join(' AND '),
      purl: npmPurl(runtimePackage, bunVersion),
    },
    properties: [
      {
        name: 'queenctl:bytecode',
        value:
          "JavaScriptCore bytecode of the bundled program, made by Bun's compiler at build time and carried in " +
          'the executable with the source (docs/standalone.md)',
      },
      { name: 'queenctl:bundle-sha256', value: bundleSha256 },
    ],
    root,
  });
}

/**
 * The Bun release binary for `forPlatform` (the npm package @oven/bun-<os>-<cpu> at the pinned
 * version), fetched once into node_modules/.cache/queenctl-exe/. `npm pack` fetches it (checked
 * against the registry's integrity) for any platform: `npm install` refuses another OS's or CPU's.
 */
function bunBinary(forPlatform) {
  const pkgName = `@oven/bun-${PLATFORMS[forPlatform].bun}`;
  const cache = join(root, 'node_modules', '.cache', 'queenctl-exe', `bun-${PLATFORMS[forPlatform].bun}-${bunVersion}`);
  const binary = join(cache, 'package', 'bin', forPlatform.startsWith('windows') ? 'bun.exe' : 'bun');
  const stamp = join(cache, 'package', 'package.json');
  const fetched = () =>
    existsSync(binary) && existsSync(stamp) && JSON.parse(readFileSync(stamp, 'utf8')).version === bunVersion;
  if (fetched()) return binary;
  say(`fetching ${pkgName}@${bunVersion} from the npm registry (about 40 MB, once)`);
  rmSync(cache, { recursive: true, force: true });
  mkdirSync(dirname(cache), { recursive: true });
  // Into a fresh directory, renamed when complete: an interrupted fetch is never taken as done.
  const fetching = mkdtempSync(`${cache}.partial-`);
  const spec = `${pkgName}@${bunVersion}`;
  const pack = spawnSync('npm', ['pack', '--json', '--pack-destination', fetching, spec], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const unpacked =
    pack.status === 0
      ? spawnSync('tar', ['-xzf', join(fetching, JSON.parse(pack.stdout)[0].filename), '-C', fetching], {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'pipe'],
        })
      : pack;
  if (unpacked.status !== 0) {
    rmSync(fetching, { recursive: true, force: true });
    fail(
      /E404|ETARGET/.test(unpacked.stderr)
        ? `the npm registry has no ${spec} (the Bun release for ${forPlatform}):\n${unpacked.stderr}`
        : `could not fetch ${spec} from the npm registry:\n${unpacked.stderr || unpacked.error}`,
    );
  }
  renameSync(fetching, cache);
  if (!fetched()) fail(`${spec} gave no ${relative(cache, binary)} of version ${bunVersion}`);
  chmodSync(binary, 0o755);
  return binary;
}

/**
 * A zip of `dir`/`top` (the Windows archive), written here rather than by zip(1), which neither
 * CI nor a developer's machine need then: entries in name order, deflated, with the build's date
 * (SOURCE_DATE_EPOCH when set) and Unix modes, so the same files give the same archive.
 */
function zip(dir, top) {
  const files = [];
  const walk = (relativePath) => {
    for (const entry of readdirSync(join(dir, relativePath), { withFileTypes: true }).sort((a, b) =>
      a.name < b.name ? -1 : 1,
    )) {
      const path = `${relativePath}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else files.push(path);
    }
  };
  walk(top);
  const date = new Date(builtAt);
  const dosTime = (date.getUTCHours() << 11) | (date.getUTCMinutes() << 5) | (date.getUTCSeconds() >> 1);
  const dosDate = ((date.getUTCFullYear() - 1980) << 9) | ((date.getUTCMonth() + 1) << 5) | date.getUTCDate();
  const locals = [];
  const centrals = [];
  let offset = 0;
  for (const path of files) {
    const data = readFileSync(join(dir, path));
    const packed = deflateRawSync(data, { level: 9 });
    const nameBytes = Buffer.from(path, 'utf8');
    const mode = statSync(join(dir, path)).mode & 0o777;
    const fields = (header) => {
      header.writeUInt16LE(20, 0); // version needed: 2.0 (deflate)
      header.writeUInt16LE(0x0800, 2); // names in UTF-8
      header.writeUInt16LE(8, 4); // deflated
      header.writeUInt16LE(dosTime, 6);
      header.writeUInt16LE(dosDate, 8);
      header.writeUInt32LE(crc32(data), 10);
      header.writeUInt32LE(packed.length, 14);
      header.writeUInt32LE(data.length, 18);
      header.writeUInt16LE(nameBytes.length, 22);
      return header;
    };
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    fields(local.subarray(4));
    locals.push(local, nameBytes, packed);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE((3 << 8) | 20, 4); // made by: Unix, 2.0 (its modes in the attributes)
    fields(central.subarray(6));
    central.writeUInt32LE(((0o100000 | mode) << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    centrals.push(central, nameBytes);
    offset += local.length + nameBytes.length + packed.length;
  }
  const centralBytes = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(files.length, 8);
  end.writeUInt16LE(files.length, 10);
  end.writeUInt32LE(centralBytes.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, centralBytes, end]);
}

function run(command, args, what, options = {}) {
  const ran = spawnSync(command, args, {
    encoding: 'utf8',
    env: targetEnv({ PATH: process.env.PATH ?? '' }),
    maxBuffer: 64 * 1024 * 1024,
    ...options,
  });
  if (ran.status !== 0) {
    const output = `${ran.stdout ?? ''}${ran.stderr ?? ''}`.trim() || String(ran.error ?? `signal ${ran.signal}`);
    throw Object.assign(new Error(`${what} failed: ${command} ${args.join(' ')}\n${output}`), { output });
  }
  return ran.stdout;
}

/** As scripts/bundle.mjs: the short commit, only from a git checkout of queenctl itself. */
function gitCommit() {
  try {
    const [top, hash] = execFileSync('git', ['rev-parse', '--show-toplevel', '--short', 'HEAD'], {
      cwd: root,
      stdio: 'pipe',
      encoding: 'utf8',
    })
      .trim()
      .split('\n');
    return top && realpathSync(top) === realpathSync(root) ? hash || null : null;
  } catch {
    return null;
  }
}

/** SOURCE_DATE_EPOCH (reproducible builds) when set, else now. */
function buildDate() {
  const epoch = Number(process.env.SOURCE_DATE_EPOCH);
  const date = new Date(Number.isFinite(epoch) && epoch > 0 ? epoch * 1000 : Date.now());
  return `${date.toISOString().slice(0, 19)}Z`;
}
