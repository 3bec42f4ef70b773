// `npm run build:image`: the OCI image of a release, written as an OCI image layout in one tar,
// dist/release/queenctl-<version>-oci.tar: an image index for linux/amd64 and linux/arm64, each
// image FROM scratch with the release's standalone executable and nothing else it does not need.
// How it is used: docs/kubernetes.md. Plain JS: it runs before anything is compiled.
//
// Each image holds one layer:
//   /usr/bin/queenctl                    the executable of the release archive for that platform
//   /usr/lib/<triplet>/<soname>          the C runtime libraries it links, and the dynamic
//   /lib64 or /lib/<loader>              loader at the path the executable names (a symlink)
//   /usr/share/doc/...                   queenctl's licences and those of the Debian packages copied
//   /etc/passwd, /etc/group              root and queenctl (uid and gid 65532), /home/queenctl
//   /etc/nsswitch.conf, /tmp             name lookups through files then DNS; a writable /tmp
// No shell, no package manager. The libraries come from this machine's Debian packages: the
// native one (libc6) for amd64, the cross package (libc6-arm64-cross, under
// /usr/aarch64-linux-gnu) for arm64 (Bun links its C++ runtime in); only
// the ones the executable names (readelf -d), and theirs in turn.
//
// Written here byte by byte (tar headers, gzip, the JSON of the OCI image spec): no daemon, no
// storage, no root, nothing pulled, and the same release always gives the same digests (every
// time in it is the executable's build date).
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
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
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const root = fileURLToPath(new URL('../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
// QUEENCTL_RELEASE_DIR: another directory of release archives, the image written there (tests).
const releaseDir = process.env.QUEENCTL_RELEASE_DIR
  ? resolve(process.env.QUEENCTL_RELEASE_DIR)
  : join(root, 'dist', 'release');
const output = join(releaseDir, `queenctl-${pkg.version}-oci.tar`);
const UID = 65532;
/** glibc (SPDX): the only library the executable links (Bun links its C++ runtime in). */
const RUNTIME_LICENCES = 'LGPL-2.1-or-later';

/** Each platform of the index: its release archive, ELF machine and where Debian keeps its libraries. */
const PLATFORMS = [
  {
    release: 'linux-x64',
    platform: { architecture: 'amd64', os: 'linux' },
    machine: 'Advanced Micro Devices X86-64',
    triplet: 'x86_64-linux-gnu',
    libraryDirs: ['/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu'],
  },
  {
    release: 'linux-arm64',
    platform: { architecture: 'arm64', os: 'linux', variant: 'v8' },
    machine: 'AArch64',
    triplet: 'aarch64-linux-gnu',
    libraryDirs: ['/usr/aarch64-linux-gnu/lib'],
  },
];

const MEDIA = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
};

const say = (line) => process.stderr.write(`build:image: ${line}\n`);
function fail(message) {
  process.stderr.write(`build:image: ${message}\nno image was made\n`);
  process.exit(1);
}

const missing = PLATFORMS.map(archiveOf).filter((archive) => !existsSync(archive));
if (missing.length > 0)
  fail(
    `${missing.map((archive) => relative(root, archive)).join(' and ')} ` +
      `${missing.length > 1 ? 'are' : 'is'} missing: \`npm run release\` makes the release archives ` +
      'the image is built from',
  );

rmSync(output, { force: true });
const work = mkdtempSync(join(tmpdir(), 'queenctl-image-'));
const partial = `${output}.partial-${process.pid}`;
try {
  const executables = PLATFORMS.map((target) => extractExecutable(target, join(work, target.release)));
  const info = buildInfo(executables);
  const created = info.buildDate;
  const mtime = Math.floor(Date.parse(created) / 1000);
  const labels = {
    'org.opencontainers.image.title': 'queenctl',
    'org.opencontainers.image.description': pkg.description,
    'org.opencontainers.image.version': info.version,
    'org.opencontainers.image.revision': info.revision,
    'org.opencontainers.image.created': created,
    ...(sourceUrl() ? { 'org.opencontainers.image.source': sourceUrl() } : {}),
    // queenctl and Bun (MIT; the licences of what Bun links in, and of every npm package bundled,
    // are in THIRD-PARTY-LICENSES), glibc (LGPL).
    'org.opencontainers.image.licenses': `${pkg.license} AND ${RUNTIME_LICENCES}`,
  };
  if (!labels['org.opencontainers.image.source'])
    say('package.json has no "repository": the image has no org.opencontainers.image.source label');

  const blobs = new Map();
  const addBlob = (bytes, mediaType, extra = {}) => {
    const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    blobs.set(digest, bytes);
    return { mediaType, digest, size: bytes.length, ...extra };
  };
  const manifests = [];
  for (const [i, target] of PLATFORMS.entries()) {
    const entries = imageFiles(target, executables[i], mtime);
    const layerTar = tar(entries);
    const layer = gzipSync(layerTar, { level: 9 });
    const config = {
      created,
      architecture: target.platform.architecture,
      ...(target.platform.variant ? { variant: target.platform.variant } : {}),
      os: 'linux',
      config: {
        User: String(UID),
        Env: ['PATH=/usr/bin', `HOME=/home/queenctl`],
        Entrypoint: ['/usr/bin/queenctl'],
        WorkingDir: '/home/queenctl',
        Labels: labels,
      },
      rootfs: { type: 'layers', diff_ids: [`sha256:${createHash('sha256').update(layerTar).digest('hex')}`] },
      history: [{ created, created_by: 'scripts/build-image.mjs: the release executable and its runtime libraries' }],
    };
    const manifest = {
      schemaVersion: 2,
      mediaType: MEDIA.manifest,
      config: addBlob(json(config), MEDIA.config),
      layers: [addBlob(layer, MEDIA.layer)],
      annotations: labels,
    };
    manifests.push(addBlob(json(manifest), MEDIA.manifest, { platform: target.platform }));
    say(
      `linux/${target.platform.architecture}: ${(layer.length / 1e6).toFixed(1)} MB compressed, ` +
        `${(layerTar.length / 1e6).toFixed(1)} MB unpacked`,
    );
  }
  const index = addBlob(
    json({ schemaVersion: 2, mediaType: MEDIA.index, manifests, annotations: labels }),
    MEDIA.index,
    {
      annotations: { 'org.opencontainers.image.ref.name': info.version },
    },
  );
  const layout = [
    file('oci-layout', json({ imageLayoutVersion: '1.0.0' }), mtime),
    file('index.json', json({ schemaVersion: 2, mediaType: MEDIA.index, manifests: [index] }), mtime),
    dir('blobs', mtime),
    dir('blobs/sha256', mtime),
    ...[...blobs.keys()].sort().map((digest) => file(`blobs/sha256/${digest.slice(7)}`, blobs.get(digest), mtime)),
  ];
  mkdirSync(releaseDir, { recursive: true });
  // Under a temporary name until complete: a failure leaves no file that looks like an image.
  const image = tar(layout);
  writeFileSync(partial, image);
  renameSync(partial, output);
  // The release's SHA256SUMS covers every file of dist/release/ (docs/install.md): the image's
  // line replaces the one an earlier build of it wrote.
  const sums = join(releaseDir, 'SHA256SUMS');
  const others = existsSync(sums)
    ? readFileSync(sums, 'utf8')
        .split('\n')
        .filter((line) => line && !line.endsWith(`  ${basename(output)}`))
    : [];
  const line = `${createHash('sha256').update(image).digest('hex')}  ${basename(output)}`;
  writeFileSync(sums, `${[...others, line].join('\n')}\n`);
  say(`${relative(root, output)}: ${(statSync(output).size / 1e6).toFixed(1)} MB, index ${index.digest}`);
} catch (error) {
  // fail() exits at once: what was made so far goes first.
  rmSync(partial, { force: true });
  rmSync(work, { recursive: true, force: true });
  fail(error.message);
}
rmSync(work, { recursive: true, force: true });

function archiveOf(target) {
  return join(releaseDir, `queenctl-${pkg.version}-${target.release}.tar.gz`);
}

/** The release archive's `queenctl` (at its top or one directory down), checked to be for that CPU. */
function extractExecutable(target, into) {
  mkdirSync(into, { recursive: true });
  run('tar', ['-xzf', archiveOf(target), '-C', into], `unpacking ${relative(root, archiveOf(target))}`);
  const found = [join(into, 'queenctl'), ...readdirSync(into).map((entry) => join(into, entry, 'queenctl'))].find(
    (path) => existsSync(path) && statSync(path).isFile(),
  );
  if (!found) throw new Error(`${relative(root, archiveOf(target))} holds no executable named queenctl`);
  const machine = /Machine:\s+(.*)/.exec(run('readelf', ['-h', found], 'reading its ELF header'))?.[1].trim();
  if (machine !== target.machine)
    throw new Error(`the queenctl of ${relative(root, archiveOf(target))} is for ${machine}, not ${target.machine}`);
  return found;
}

/**
 * Version, commit and build date, from the executable this machine runs: what the executables
 * say of themselves, not the checkout this script runs in. The commit is made whole when this
 * checkout knows it.
 */
function buildInfo(executables) {
  const native = PLATFORMS.findIndex((target) => target.release === `${process.platform}-${process.arch}`);
  if (native < 0)
    throw new Error(`cannot run either executable on ${process.platform}-${process.arch} to read its version`);
  const printed = run(executables[native], ['version', '--short', '-o', 'json'], 'queenctl version --short');
  const { queenctl } = JSON.parse(printed);
  if (queenctl.version !== pkg.version || !queenctl.standalone)
    throw new Error(`the release executable says ${printed.trim()}: not the standalone build of ${pkg.version}`);
  if (!queenctl.buildDate || !queenctl.commit)
    throw new Error(`the release executable knows no ${queenctl.commit ? 'build date' : 'commit'}: ${printed.trim()}`);
  let revision = queenctl.commit;
  try {
    revision = execFileSync('git', ['rev-parse', '--verify', '--quiet', `${queenctl.commit}^{commit}`], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    // not in this checkout: the short commit the executable carries
  }
  return { version: queenctl.version, revision, buildDate: queenctl.buildDate };
}

function sourceUrl() {
  const repository = typeof pkg.repository === 'string' ? pkg.repository : pkg.repository?.url;
  return repository?.replace(/^git\+/, '').replace(/\.git$/, '');
}

/** Everything in one platform's image, as tar entries, sorted. */
function imageFiles(target, executable, mtime) {
  const libDir = `usr/lib/${target.triplet}`;
  const { interpreter, libraries } = runtimeLibraries(executable, target);
  const entries = new Map();
  const add = (entry) => {
    for (let parent = dirname(entry.name); parent !== '.'; parent = dirname(parent))
      if (!entries.has(parent)) entries.set(parent, dir(parent, mtime));
    entries.set(entry.name, entry);
  };
  add(file('usr/bin/queenctl', readFileSync(executable), mtime, 0o755));
  for (const [soname, path] of libraries) add(file(`${libDir}/${soname}`, readFileSync(path), mtime, 0o755));
  add(symlink(interpreter.slice(1), relative(dirname(interpreter), `/${libDir}/${basename(interpreter)}`), mtime));
  for (const name of ['LICENSE', 'THIRD-PARTY-LICENSES']) {
    const path = join(dirname(executable), name);
    if (!existsSync(path)) throw new Error(`the release archive for ${target.release} has no ${name}`);
    add(file(`usr/share/doc/queenctl/${name}`, readFileSync(path), mtime));
  }
  for (const debianPackage of new Set([...libraries.values()].map(packageOf))) {
    const copyright = `/usr/share/doc/${debianPackage}/copyright`;
    add(file(copyright.slice(1), readFileSync(copyright), mtime));
  }
  add(
    file(
      'etc/passwd',
      `root:x:0:0:root:/root:/sbin/nologin\nqueenctl:x:${UID}:${UID}:queenctl:/home/queenctl:/sbin/nologin\n`,
      mtime,
    ),
  );
  add(file('etc/group', `root:x:0:\nqueenctl:x:${UID}:\n`, mtime));
  add(file('etc/nsswitch.conf', 'passwd: files\ngroup: files\nhosts: files dns\n', mtime));
  add(dir('home/queenctl', mtime, 0o755, UID));
  add(dir('tmp', mtime, 0o1777));
  return [...entries.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * The dynamic loader the executable names, and every library it needs, found as its loader would
 * find them in that platform's Debian directories: soname to the file on this machine.
 */
function runtimeLibraries(executable, target) {
  const interpreter = /Requesting program interpreter: (\S+)]/.exec(
    run('readelf', ['-l', executable], 'readelf -l'),
  )?.[1];
  if (!interpreter) throw new Error(`${executable} names no dynamic loader: not the dynamically linked Bun release`);
  const libraries = new Map();
  const pending = [executable];
  while (pending.length > 0) {
    const object = pending.shift();
    for (const [, soname] of run('readelf', ['-d', object], 'readelf -d').matchAll(
      /\(NEEDED\)\s+Shared library: \[(.+)]/g,
    )) {
      if (libraries.has(soname)) continue;
      const dir = target.libraryDirs.find((candidate) => existsSync(join(candidate, soname)));
      if (!dir)
        throw new Error(
          `${soname}, which ${basename(object)} links, is not in ${target.libraryDirs.join(' or ')}: ` +
            (target.release === 'linux-arm64' ? 'install libc6-arm64-cross' : 'install libc6'),
        );
      libraries.set(soname, join(dir, soname));
      pending.push(join(dir, soname));
    }
  }
  if (![...libraries.keys()].includes(basename(interpreter)))
    throw new Error(`${basename(interpreter)}, the loader queenctl names, is not among the libraries it links`);
  return { interpreter, libraries };
}

/** The Debian package that installed a library (dpkg knows the path it shipped, before any symlink). */
function packageOf(path) {
  for (const candidate of new Set([path, realpathSync(path), join(dirname(path), basename(realpathSync(path)))])) {
    for (const alias of [
      candidate,
      candidate.replace(/^\/usr\/lib\//, '/lib/'),
      candidate.replace(/^\/lib\//, '/usr/lib/'),
    ]) {
      const found = spawnSync('dpkg', ['-S', alias], { encoding: 'utf8' });
      if (found.status === 0) return found.stdout.split(':')[0].split(',')[0].trim();
    }
  }
  throw new Error(`no Debian package owns ${path} (dpkg -S): its licence cannot be shipped`);
}

function json(value) {
  return Buffer.from(JSON.stringify(value));
}

function file(name, content, mtime, mode = 0o644) {
  return { name, type: '0', data: Buffer.from(content), mode, mtime, uid: 0 };
}

function dir(name, mtime, mode = 0o755, uid = 0) {
  return { name, type: '5', data: Buffer.alloc(0), mode, mtime, uid };
}

function symlink(name, target, mtime) {
  return { name, type: '2', data: Buffer.alloc(0), mode: 0o777, mtime, uid: 0, linkname: target };
}

/** A POSIX ustar archive of the entries, in the order given. */
function tar(entries) {
  const parts = [];
  for (const entry of entries) {
    const name = entry.type === '5' ? `${entry.name}/` : entry.name;
    let [prefix, short] = ['', name];
    if (Buffer.byteLength(name) > 100) {
      const cut = name.lastIndexOf('/', name.length - 2);
      [prefix, short] = [name.slice(0, cut), name.slice(cut + 1)];
      if (Buffer.byteLength(prefix) > 155 || Buffer.byteLength(short) > 100)
        throw new Error(`path too long for tar: ${name}`);
    }
    const header = Buffer.alloc(512);
    const put = (text, offset, length) => header.write(text, offset, length, 'utf8');
    const octal = (value, offset, length) => put(`${value.toString(8).padStart(length - 1, '0')}\0`, offset, length);
    put(short, 0, 100);
    octal(entry.mode, 100, 8);
    octal(entry.uid, 108, 8);
    octal(entry.uid, 116, 8);
    octal(entry.data.length, 124, 12);
    octal(entry.mtime, 136, 12);
    put('        ', 148, 8);
    put(entry.type, 156, 1);
    put(entry.linkname ?? '', 157, 100);
    put('ustar\u000000', 257, 8);
    put(prefix, 345, 155);
    let sum = 0;
    for (const byte of header) sum += byte;
    put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
    parts.push(header, entry.data, Buffer.alloc((512 - (entry.data.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

function run(command, args, what) {
  const ran = spawnSync(command, args, { encoding: 'utf8', env: { PATH: process.env.PATH ?? '' }, maxBuffer: 1 << 26 });
  if (ran.status !== 0) {
    const printed = `${ran.stdout ?? ''}${ran.stderr ?? ''}`.trim() || String(ran.error ?? `signal ${ran.signal}`);
    throw new Error(`${what} failed: ${command} ${args.join(' ')}\n${printed}`);
  }
  return ran.stdout;
}
