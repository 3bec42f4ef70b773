// `npm run build:exe`: the standalone executable for the platform this runs on (or, with
// `--target linux-arm64` on linux-x64, for arm64 under user-mode emulation), a Node.js single
// executable application (node:sea) carrying the bundled CLI with the code caches it made of
// itself, and its release archive with SHA256SUMS. How and why: docs/standalone.md. Plain JS: it runs before
// anything is compiled.
//
//   dist/exe/queenctl-<version>-<os>-<arch>/queenctl        the executable
//   dist/exe/queenctl-<version>-<os>-<arch>.tar.gz          it, LICENSE, README, completions, the SBOM
//   dist/exe/SHA256SUMS                                      sha256sum -c checks the archive
//
// The Node.js it carries is the official release published on the npm registry as the package
// node-<os>-<arch>, at the exact version pinned in package.json (config.standaloneNode), fetched
// once into node_modules/.cache/queenctl-exe/. QUEENCTL_EXE_NODE=<path> uses a binary already
// there instead (CI's Node 24), only when it is that exact version.
//
// Another target (only linux-arm64, built on linux-x64) goes to dist/exe-<target>/ unless
// QUEENCTL_EXE_OUT says otherwise. Its code caches must be recorded by the arm64 executable itself
// (V8 rejects a cache made on x64: "read-only snapshot checksum mismatch"), so every run of the
// target's Node.js or of the executable goes through qemu-aarch64 (Debian's qemu-user) with the
// arm64 C and C++ runtimes of libc6-arm64-cross, libstdc++6-arm64-cross and libgcc-s1-arm64-cross
// (QEMU_LD_PREFIX, /usr/aarch64-linux-gnu by default). Without them the build says what to
// install and exits 1: never an executable without its caches.
import { build } from 'esbuild';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  appendFileSync,
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
import { createServer } from 'node:http';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lazyCommanderChildProcess, undiciWithoutNodeHttp } from './esbuild-plugins.mjs';
import { bundledPackages, licensesText, npmPurl, SBOM_FILE, sbomText } from './licenses.mjs';

const root = fileURLToPath(new URL('../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const nodeVersion = pkg.config.standaloneNode;
/** Kept in step with src/standalone-chunks.ts. */
const CODE_CACHE_MARK = 'QCTLCC01';
const CHUNKS_MODULE_ID = 'queenctl:chunks';
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
/** Where node:sea works and the npm registry has a release package (node-<os>-<arch>). */
const PLATFORMS = ['linux-x64', 'linux-arm64', 'darwin-x64', 'darwin-arm64'];

/**
 * The chunks (src/standalone-chunks.ts) besides the CLI's own: each dependency that only some
 * paths use, and the module specifiers src/ imports it by. A new import of one of them must be
 * listed here.
 */
const CHUNKS = {
  // What every request uses, apart from undici's whole index, which only a proxy needs (as in
  // the npm package, where that index is loaded from node_modules).
  undici: [{ id: 'undici/lib/dispatcher/agent.js' }, { id: 'undici/lib/api/api-request.js' }],
  'undici-proxy': [{ id: 'undici' }],
  yaml: [{ id: 'yaml' }],
  chalk: [{ id: 'chalk' }],
  ora: [{ id: 'ora' }],
  // Measuring and wrapping text for a terminal (src/output/width.ts).
  'terminal-text': [{ id: 'string-width' }, { id: 'wrap-ansi' }],
  'cli-table3': [{ id: 'cli-table3' }],
  'json-p3': [{ id: 'json-p3' }],
  // --metrics-address only (src/metrics/registry.ts).
  'prom-client': [{ id: 'prom-client' }],
  // The live views on a terminal only (src/output/live.ts).
  // (string-width comes from terminal-text, as for every terminal run.)
  live: [{ id: 'log-update' }, { id: 'cli-truncate' }],
};
/** An import of any of these packages, or of a file of one: each must be listed in CHUNKS. */
const CHUNKED_NAMES =
  'undici|yaml|chalk|ora|cli-table3|json-p3|prom-client|log-update|string-width|wrap-ansi|cli-truncate';
const CHUNKED_PACKAGES = new RegExp(`^(${CHUNKED_NAMES})([\\\\/].*)?$`);
const chunkOf = new Map(Object.entries(CHUNKS).flatMap(([chunk, ids]) => ids.map(({ id }) => [id, chunk])));
/**
 * In the CLI's chunk, an import of a chunked dependency is a call that loads its chunk, through
 * the one instance of src/standalone-chunks.ts that the entry holds.
 */
const chunked = {
  name: 'standalone-chunks',
  setup(builder) {
    builder.onResolve({ filter: new RegExp(`^${CHUNKS_MODULE_ID}$`) }, (args) => ({ path: args.path, external: true }));
    builder.onResolve({ filter: CHUNKED_PACKAGES }, (args) => {
      if (!chunkOf.has(args.path))
        throw new Error(`${args.importer} imports ${args.path}: list it in CHUNKS in scripts/build-exe.mjs`);
      return { path: args.path, namespace: 'standalone-chunk' };
    });
    builder.onLoad({ filter: /.*/, namespace: 'standalone-chunk' }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(CHUNKS_MODULE_ID)}).loadChunk(${JSON.stringify(
        chunkOf.get(args.path),
      )})[${JSON.stringify(args.path)}];`,
      resolveDir: root,
      loader: 'js',
    }));
  },
};

const host = `${process.platform}-${process.arch}`;
// The code caches are made by running the executable, which has to run here: natively, or for
// linux-arm64 on linux-x64 under user-mode emulation (EMULATED). QUEENCTL_EXE_PLATFORM: the same,
// for the test of the refusal.
const targetArg = process.argv.indexOf('--target');
const platform = (targetArg > 0 ? process.argv[targetArg + 1] : undefined) || process.env.QUEENCTL_EXE_PLATFORM || host;
/** The targets built here under emulation: how to run their binaries, and what that needs. */
const EMULATED = {
  'linux-x64>linux-arm64': {
    qemu: 'qemu-aarch64',
    prefix: process.env.QEMU_LD_PREFIX || '/usr/aarch64-linux-gnu',
    libraries: ['lib/ld-linux-aarch64.so.1', 'lib/libc.so.6', 'lib/libstdc++.so.6', 'lib/libgcc_s.so.1'],
    packages: ['qemu-user', 'libc6-arm64-cross', 'libstdc++6-arm64-cross', 'libgcc-s1-arm64-cross'],
  },
};

function fail(message) {
  process.stderr.write(`build:exe: ${message}\n`);
  process.exit(1);
}
const say = (line) => process.stderr.write(`build:exe: ${line}\n`);

if (!PLATFORMS.includes(platform))
  fail(
    `no Node.js release package for ${platform} (node-${platform} on the npm registry) that can carry queenctl;` +
      ` executables are built on ${PLATFORMS.join(', ')}`,
  );
const emulation = platform === host ? null : EMULATED[`${host}>${platform}`];
if (emulation === undefined)
  fail(
    `cannot build for ${platform} on ${host}: build on a ${platform} machine` +
      ` (only linux-arm64 is built elsewhere: on linux-x64, under emulation)`,
  );
if (emulation) checkEmulator(emulation);

const name = `queenctl-${pkg.version}-${platform}`;
// QUEENCTL_EXE_OUT: another directory (the build's own tests, which must not replace dist/exe; the
// release). Another target's build never replaces the host's.
const exeDir = process.env.QUEENCTL_EXE_OUT || join(root, 'dist', emulation ? `exe-${platform}` : 'exe');
const outDir = join(exeDir, name);
const exe = join(outDir, 'queenctl');
const archive = join(exeDir, `${name}.tar.gz`);
const work = join(exeDir, '.build');
// An executable from an earlier build must not outlive a failed one.
for (const stale of [outDir, archive, join(exeDir, 'SHA256SUMS'), join(exeDir, 'build.json'), work])
  rmSync(stale, { recursive: true, force: true });
mkdirSync(work, { recursive: true });

const node = embeddedNode();
say(`Node.js ${nodeVersion}: ${relative(root, node) || node}`);

// 1. The entry (src/standalone.ts), which loads the CLI, a chunk of its own with everything it
// always uses bundled: the executable has no node_modules to load from. The dependencies that
// only some paths use are chunks of their own too (src/standalone-chunks.ts): a path that needs
// one loads it.
const bundle = join(work, 'queenctl-sea.cjs');
const codeCacheToken = randomBytes(16).toString('hex');
// What node:http says of the embedded Node.js with no options, as the executable runs it.
const maxHeaderSize = execFileSync(...onTarget(node, ['-p', "require('node:http').maxHeaderSize"]), {
  encoding: 'utf8',
  env: targetEnv({}),
});
const common = {
  bundle: true,
  platform: 'node',
  target: `node${nodeVersion.split('.')[0]}`,
  format: 'cjs',
  // import() becomes a require() inside a promise: the modules behind it stay unevaluated until
  // used, and only builtin modules can be required in a single executable application.
  supported: { 'dynamic-import': false },
  legalComments: 'none',
  // Non-ASCII characters of strings and names escaped: src/standalone-chunks.ts reads a chunk as
  // Latin-1, the fastest decoding, which only comments can then differ by.
  charset: 'ascii',
  // Without comments or needless whitespace (names kept, for stack traces): measured 1 to 3 ms
  // faster per start (docs/standalone.md), as V8 reads and hashes less source.
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: 'warning',
  metafile: true,
};
/**
 * How src/standalone-chunks.ts runs a chunk: a function of the module, its exports and a require,
 * written into the file so that the source it compiles is the asset as it is.
 */
const chunkWrapper = { banner: { js: '(function (module, exports, require) {' }, footer: { js: '\n})' } };
/** Every file bundled into the executable, for the licences the archive carries. */
const bundled = new Set();
const collect = (result) => {
  for (const input of Object.keys(result.metafile.inputs)) bundled.add(input);
};
collect(
  await build({
    ...common,
    entryPoints: [join(root, 'src', 'standalone.ts')],
    outfile: bundle,
    define: { QUEENCTL_CODE_CACHE_TOKEN: JSON.stringify(codeCacheToken) },
  }),
);
collect(
  await build({
    ...common,
    entryPoints: [join(root, 'src', 'standalone-cli.ts')],
    outfile: join(work, 'cli.js'),
    ...chunkWrapper,
    plugins: [chunked, lazyCommanderChildProcess],
    define: {
      QUEENCTL_BUILD_INFO: JSON.stringify({ commit: gitCommit(), date: buildDate(), standalone: true, platform }),
    },
  }),
);
for (const [chunk, specifiers] of Object.entries(CHUNKS)) {
  // Each specifier served as it is imported; the lazy ones (undici's index: only behind a
  // proxy) evaluated when first used.
  const entries = specifiers.map(({ id, lazy }) =>
    lazy
      ? `get ${JSON.stringify(id)}() { return require(${JSON.stringify(id)}); }`
      : `${JSON.stringify(id)}: require(${JSON.stringify(id)})`,
  );
  const made = await build({
    ...common,
    stdin: { contents: `module.exports = { ${entries.join(', ')} };`, resolveDir: root, loader: 'js' },
    outfile: join(work, `${chunk}.js`),
    ...chunkWrapper,
    plugins: [undiciWithoutNodeHttp(maxHeaderSize)],
  });
  collect(made);
}

// 2. The blob: the entry with its code cache, the CLI and the other chunks as assets. No start-up
// snapshot (useSnapshot): measured slower than code caches at every start (docs/standalone.md).
const blob = join(work, 'queenctl.blob');
const seaConfig = join(work, 'sea-config.json');
writeFileSync(
  seaConfig,
  JSON.stringify({
    main: bundle,
    output: blob,
    disableExperimentalSEAWarning: true,
    useSnapshot: false,
    useCodeCache: true,
    // NODE_OPTIONS is for the Node.js installed on the host: docs/standalone.md, "NODE_OPTIONS".
    execArgvExtension: 'none',
    assets: Object.fromEntries(
      ['cli', ...Object.keys(CHUNKS)].map((chunk) => [`${chunk}.js`, join(work, `${chunk}.js`)]),
    ),
  }),
);
try {
  // By the target's Node.js: the blob holds the entry's code cache.
  run(...onTarget(node, ['--experimental-sea-config', seaConfig]), 'making the blob', { cwd: work });
} catch (error) {
  fail(`${error.message}\nno executable was made`);
}

// 3. A copy of that Node with the blob injected, under a temporary name: only an executable that
// ran as queenctl gets the final name, so no failure leaves a file that would run plain Node.
mkdirSync(outDir, { recursive: true });
const partial = join(outDir, `.queenctl.partial-${process.pid}`);
try {
  copyFileSync(node, partial);
  chmodSync(partial, 0o755);
  if (process.platform === 'darwin') run('codesign', ['--remove-signature', partial], 'removing the signature');
  const postject = join(root, 'node_modules', 'postject', 'dist', 'cli.js');
  const macho = process.platform === 'darwin' ? ['--macho-segment-name', 'NODE_SEA'] : [];
  run(process.execPath, [postject, partial, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE, ...macho], 'injecting');
  // Signed again after the code caches are appended. Untested here (no macOS machine):
  // docs/standalone.md, "Platforms".
  if (process.platform === 'darwin') run('codesign', ['--sign', '-', partial], 'signing');
  const check = spawnSync(...onTarget(partial, ['--version']), { env: targetEnv({}), encoding: 'utf8' });
  if (check.status !== 0 || check.stdout !== `${pkg.version}\n`)
    throw new Error(
      `the injected executable does not run as queenctl: \`--version\` exited ${check.status} ` +
        `printing ${JSON.stringify(check.stdout)} ${JSON.stringify(check.stderr.slice(0, 400))}`,
    );
  await appendCodeCaches(partial);
  if (process.platform === 'darwin') run('codesign', ['--sign', '-', partial], 'signing');
  renameSync(partial, exe);
} catch (error) {
  rmSync(partial, { force: true });
  fail(`${error.message}\nno executable was made`);
}

say(`${relative(root, exe)}: ${(statSync(exe).size / 1e6).toFixed(1)} MB`);

// 4. The release archive, as the Go queenctl's: the executable, the licences, the README and
// completion scripts made by the executable itself, with the SBOM (sbom.cdx.json: what it
// carries, docs/security.md), then SHA256SUMS covering the archive.
copyFileSync(join(root, 'LICENSE'), join(outDir, 'LICENSE'));
copyFileSync(join(root, 'README.md'), join(outDir, 'README.md'));
writeFileSync(join(outDir, 'THIRD-PARTY-LICENSES'), thirdPartyLicenses());
writeFileSync(join(outDir, SBOM_FILE), sbom());
mkdirSync(join(outDir, 'completions'));
for (const [shell, file] of [
  ['bash', 'queenctl.bash'],
  ['zsh', '_queenctl'],
  ['fish', 'queenctl.fish'],
]) {
  try {
    writeFileSync(
      join(outDir, 'completions', file),
      run(...onTarget(exe, ['completion', shell]), `the ${shell} completion`),
    );
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
const gnuTar = /GNU tar/.test(spawnSync('tar', ['--version'], { encoding: 'utf8' }).stdout ?? '');
try {
  run(
    'tar',
    [
      ...(gnuTar ? ['--owner=0', '--group=0', '--numeric-owner', '--sort=name'] : []),
      '-czf',
      archive,
      '-C',
      exeDir,
      name,
    ],
    'packing the archive',
  );
} catch (error) {
  rmSync(archive, { force: true });
  fail(error.message);
}
const sums = join(exeDir, 'SHA256SUMS');
writeFileSync(sums, `${createHash('sha256').update(readFileSync(archive)).digest('hex')}  ${basename(archive)}\n`);
say(`${relative(root, archive)}: ${(statSync(archive).size / 1e6).toFixed(1)} MB; ${relative(root, sums)}`);

// What was built, for `npm run test:exe` and `npm run bench` (scripts/test-exe.mjs, bench-exe.ts).
writeFileSync(
  join(exeDir, 'build.json'),
  `${JSON.stringify(
    {
      exe,
      archive,
      sums,
      node,
      nodeVersion,
      platform,
      emulator: emulation ? emulatorOf(emulation) : null,
      // For the release's packages (scripts/release.mjs): their copyright file.
      nodeLicense: join(dirname(dirname(node)), 'LICENSE'),
      packages: bundledPackages(bundled, root),
    },
    null,
    2,
  )}\n`,
);

/** How `file` of the target runs here: itself, or under the emulator. */
function onTarget(file, args) {
  return emulation ? [emulation.qemu, [file, ...args]] : [file, args];
}

/** `env` with what the emulator needs (where the target's C and C++ runtimes are). */
function targetEnv(env) {
  return emulation ? { ...env, QEMU_LD_PREFIX: emulation.prefix } : env;
}

/** For whoever runs the executable afterwards (the release's tests): the command and its env. */
function emulatorOf(target) {
  return { command: target.qemu, env: { QEMU_LD_PREFIX: target.prefix } };
}

/** The emulator and the target's runtimes are there, or the build says what to install. */
function checkEmulator(target) {
  const missing = [];
  const qemu = spawnSync(target.qemu, ['--version'], { encoding: 'utf8' });
  if (qemu.status !== 0) missing.push(`${target.qemu} (${qemu.error?.code ?? `exit ${qemu.status}`})`);
  for (const library of target.libraries)
    if (!existsSync(join(target.prefix, library))) missing.push(join(target.prefix, library));
  if (missing.length > 0)
    fail(
      `building for ${platform} on ${host} runs its Node.js under user-mode emulation, and this machine lacks ` +
        `${missing.join(', ')}.\nInstall them (Debian, Ubuntu): sudo apt-get install ${target.packages.join(' ')}` +
        `\n(QEMU_LD_PREFIX names another root of the ${platform} runtimes.) No executable was made.`,
    );
}

/**
 * The licences of what the executable carries besides queenctl: Node.js (whose LICENSE lists
 * its own dependencies') and each npm package bundled into it.
 */
function thirdPartyLicenses() {
  const parts = [];
  const nodeLicense = join(dirname(dirname(node)), 'LICENSE');
  if (existsSync(nodeLicense))
    parts.push({ name: 'Node.js', version: nodeVersion, text: readFileSync(nodeLicense, 'utf8') });
  return licensesText([...parts, ...bundledPackages(bundled, root)]);
}

/**
 * What the executable carries, declared (docs/security.md): the Node.js release it is made of (the
 * npm package node-<platform> it was fetched as) and each npm package bundled into it, from
 * esbuild's metafiles, and its code caches.
 */
function sbom() {
  const release = JSON.parse(readFileSync(join(root, 'packaging', 'release.json'), 'utf8'));
  const nodePackage = `node-${platform}`;
  return sbomText({
    subject: pkg,
    packages: bundledPackages(bundled, root),
    platform: {
      name: nodePackage,
      version: nodeVersion,
      // Node.js's own, and those of the libraries its release binary builds in (its LICENSE).
      license: release.nodeLicenses.join(' AND '),
      purl: npmPurl(nodePackage, nodeVersion),
    },
    properties: [
      {
        name: 'queenctl:code-caches',
        value:
          'V8 code caches (compiled code, run as it is) of the bundled scripts, made by this executable at build ' +
          'time and appended to it; run only from a file trusted as a program (docs/security.md)',
      },
    ],
    root,
  });
}

/**
 * The code caches of the chunks (src/standalone-chunks.ts), made by the executable itself, each
 * with everything a run compiled of it, not only what loading it compiles. V8 takes a cache only
 * under the flags it was made with, and loading undici sets one (--liftoff-only), so a chunk
 * loaded before and one loaded after it have caches of their own (the run records only those
 * made under the flags they were loaded with). Two runs: `config get-contexts` reading a config
 * file (the CLI and yaml, before the flag: every start compiles the command tree and parses its
 * argv as that run does), and `lease extend - -o yaml`, the id on standard input, with no config
 * file against a broker here (undici, then yaml printing the answer, after it: one id as an
 * argument goes over node:http, a built-in module, and loads no chunk of undici). The caches, an
 * index, its length and a mark go at the end of the file.
 */
async function appendCodeCaches(file) {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      const at = new Date(Date.now() + 60_000).toISOString();
      response.setHeader('content-type', 'application/json');
      const leaseId = decodeURIComponent(/\/lease\/([^/]+)\/extend/.exec(request.url)?.[1] ?? '');
      const answer = { leaseId, success: true, renewed: 1, newExpiresAt: at, expiresAt: at, lease_expires_at: at };
      response.end(JSON.stringify(answer));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const config = join(work, 'warm-up.yaml');
  const url = `http://127.0.0.1:${server.address().port}`;
  writeFileSync(config, `current-context: warm-up\ncontexts:\n  - name: warm-up\n    server: ${url}\n`);
  const recorded = join(work, 'code-caches.json');
  const emptyHome = join(work, 'home');
  mkdirSync(emptyHome, { recursive: true });
  const caches = new Map();
  try {
    for (const [argv, configFile, input] of [
      [['config', 'get-contexts'], config, ''],
      // No config file: the default one, in a HOME without it (a QUEEN_CONFIG that does not exist
      // is an error, docs/config.md), so the yaml chunk loads for the output alone.
      [['lease', 'extend', '-', '--server', url, '-o', 'yaml', '--retries', '0'], null, 'warm-up\n'],
    ]) {
      await new Promise((resolve, reject) => {
        const run = execFile(
          ...onTarget(file, argv),
          {
            env: targetEnv({
              ...(configFile === null ? { HOME: emptyHome } : { QUEEN_CONFIG: configFile }),
              QUEENCTL_EXE_RECORD_CODE_CACHE: `${codeCacheToken}:${recorded}`,
            }),
          },
          (error, stdout, stderr) =>
            error
              ? reject(new Error(`the code cache run \`${argv.join(' ')}\` failed: ${error.message}\n${stderr}`))
              : resolve(stdout),
        );
        run.stdin.end(input);
      });
      for (const [chunk, base64] of Object.entries(JSON.parse(readFileSync(recorded, 'utf8'))))
        if (!caches.has(chunk)) caches.set(chunk, base64);
    }
  } finally {
    server.close();
  }
  for (const chunk of ['cli', 'yaml', 'undici+liftoff-only', 'yaml+liftoff-only'])
    if (!caches.has(chunk)) throw new Error(`the code cache runs made no cache of ${chunk}`);
  let offset = statSync(file).size;
  const index = {};
  const parts = [];
  for (const [chunk, base64] of caches) {
    const data = Buffer.from(base64, 'base64');
    index[chunk] = [offset, data.length];
    offset += data.length;
    parts.push(data);
  }
  const indexBytes = Buffer.from(JSON.stringify(index));
  const tail = Buffer.alloc(12);
  tail.writeUInt32LE(indexBytes.length, 0);
  tail.write(CODE_CACHE_MARK, 4, 'latin1');
  appendFileSync(file, Buffer.concat([...parts, indexBytes, tail]));
  say(`code caches of ${[...caches.keys()].join(', ')} appended`);
}

/** The pinned Node.js release binary: QUEENCTL_EXE_NODE when it is that version, else the cache. */
function embeddedNode() {
  const given = process.env.QUEENCTL_EXE_NODE;
  if (given) {
    if (versionOf(given) === `v${nodeVersion}`) return given;
    say(`QUEENCTL_EXE_NODE=${given} is not Node.js ${nodeVersion} (package.json config.standaloneNode): not used`);
  }
  const pkgName = `node-${platform}`;
  const cache = join(root, 'node_modules', '.cache', 'queenctl-exe', `${pkgName}-${nodeVersion}`);
  const binary = join(cache, 'node_modules', pkgName, 'bin', 'node');
  if (existsSync(binary) && versionOf(binary) === `v${nodeVersion}`) return binary;
  say(`fetching ${pkgName}@${nodeVersion} from the npm registry (about 30 MB, once)`);
  rmSync(cache, { recursive: true, force: true });
  mkdirSync(dirname(cache), { recursive: true });
  // Into a fresh directory, renamed when complete: an interrupted fetch is never taken as done.
  const fetching = mkdtempSync(`${cache}.partial-`);
  // Another CPU's package is refused by `npm install` (EBADPLATFORM): its tarball is fetched
  // with `npm pack` and unpacked where `npm install` would have put it.
  const npm = emulation
    ? packed(pkgName, fetching)
    : spawnSync(
        'npm',
        [
          'install',
          '--prefix',
          fetching,
          '--no-save',
          '--no-package-lock',
          '--ignore-scripts',
          '--no-audit',
          '--no-fund',
        ].concat(`${pkgName}@${nodeVersion}`),
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
      );
  if (npm.status !== 0) {
    rmSync(fetching, { recursive: true, force: true });
    const missing = /E404|ETARGET|EBADPLATFORM/.test(npm.stderr);
    fail(
      missing
        ? `the npm registry has no ${pkgName}@${nodeVersion} (the Node.js release for ${platform}):\n${npm.stderr}`
        : `could not fetch ${pkgName}@${nodeVersion} from the npm registry:\n${npm.stderr || npm.error}`,
    );
  }
  renameSync(fetching, cache);
  const fetched = versionOf(binary);
  if (fetched !== `v${nodeVersion}`) fail(`${pkgName}@${nodeVersion} gave ${binary} that says ${fetched}`);
  return binary;
}

/** `npm pack` of the package, unpacked into `dir`/node_modules/`pkgName`: spawnSync's result. */
function packed(pkgName, dir) {
  const spec = `${pkgName}@${nodeVersion}`;
  const pack = spawnSync('npm', ['pack', '--json', '--pack-destination', dir, spec], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (pack.status !== 0) return pack;
  const into = join(dir, 'node_modules', pkgName);
  mkdirSync(into, { recursive: true });
  const [{ filename }] = JSON.parse(pack.stdout);
  return spawnSync('tar', ['-xzf', join(dir, filename), '-C', into, '--strip-components=1'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

function versionOf(binary) {
  try {
    return execFileSync(...onTarget(binary, ['--version']), { encoding: 'utf8', env: targetEnv({}) }).trim();
  } catch (error) {
    return `no version (${error.message.split('\n')[0]})`;
  }
}

function run(command, args, what, options = {}) {
  const ran = spawnSync(command, args, {
    encoding: 'utf8',
    env: targetEnv({ PATH: process.env.PATH ?? '' }),
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
