/**
 * The OCI image (issue 27, docs/kubernetes.md), dist/release/queenctl-<version>-oci.tar as
 * scripts/build-image.mjs writes it. Run by `npm run test:image`, which builds it from the
 * release archives; left out of `npm test` (it needs the release, podman and qemu-user).
 *
 * - the layout: an index of linux/amd64 and linux/arm64, each FROM scratch with queenctl, the
 *   libraries it links and its loader, nothing else that runs (no shell), user 65532, the
 *   entrypoint and the OCI labels;
 * - podman loads it and runs it: `version --short`, and `lease extend` against the simulator on
 *   the host network, renewed (0) and not renewed (4) through the container's exit code;
 * - the arm64 image, unpacked, runs `--version` under qemu-aarch64 with only its own libraries.
 *
 * Podman runs with storage, state and configuration of the test's own (a temporary directory):
 * containers.conf (CONTAINERS_CONF) with runc, cgroupfs, file events and ulimits this machine
 * allows, storage.conf (CONTAINERS_STORAGE_CONF) with the vfs driver, which needs no overlay
 * mount wherever the temporary directory is; never the system's.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { VERSION } from '../../src/version.js';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { type CliResult, type ExpectedExit, runProcess } from '../support/cli.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const IMAGE = join(ROOT, 'dist', 'release', `queenctl-${VERSION}-oci.tar`);
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
/** Loading the image copies ~135 MB; each run starts a container. Far below the runner's limit. */
const PODMAN_MS = 120_000;
const QEMU_MS = 60_000;

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { architecture: string; os: string; variant?: string };
  annotations?: Record<string, string>;
}
interface ImageConfig {
  architecture: string;
  os: string;
  config: { User: string; Entrypoint: string[]; Cmd?: string[]; Env: string[]; Labels: Record<string, string> };
  rootfs: { diff_ids: string[] };
}

let scratch: string;
let layout: string;
let sim: Simulator;

before(() => {
  assert.ok(existsSync(IMAGE), `${relative(ROOT, IMAGE)} is missing: \`npm run build:image\` makes it`);
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-image-test-'));
  layout = join(scratch, 'layout');
  mkdirSync(layout);
  execFileSync('tar', ['-xf', IMAGE, '-C', layout]);
});
after(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

const blob = (digest: string): Buffer => readFileSync(join(layout, 'blobs', 'sha256', digest.replace(/^sha256:/, '')));
const blobJson = <T>(digest: string): T => JSON.parse(blob(digest).toString('utf8'));

/** The index's manifest for a platform, its config, and its layer unpacked into a directory. */
function image(architecture: string): { manifest: Descriptor; config: ImageConfig; rootfs: string } {
  const top = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as { manifests: Descriptor[] };
  assert.equal(top.manifests.length, 1, 'index.json holds one image index');
  const index = blobJson<{ manifests: Descriptor[] }>(top.manifests[0]?.digest ?? '');
  const manifest = index.manifests.find((entry) => entry.platform?.architecture === architecture);
  assert.ok(manifest, `no ${architecture} manifest in ${JSON.stringify(index.manifests)}`);
  const body = blobJson<{ config: Descriptor; layers: Descriptor[] }>(manifest.digest);
  const config = blobJson<ImageConfig>(body.config.digest);
  const rootfs = join(scratch, `rootfs-${architecture}`);
  if (!existsSync(rootfs)) {
    mkdirSync(rootfs);
    for (const layer of body.layers) {
      const file = join(layout, 'blobs', 'sha256', layer.digest.slice(7));
      execFileSync('tar', ['-xzf', file, '-C', rootfs, '--numeric-owner']);
    }
  }
  return { manifest, config, rootfs };
}

/** Every path in a directory tree, relative to it, with `/` after directories. */
function tree(dir: string, under = ''): string[] {
  return readdirSync(join(dir, under), { withFileTypes: true }).flatMap((entry) => {
    const path = under ? `${under}/${entry.name}` : entry.name;
    return entry.isDirectory() ? [`${path}/`, ...tree(dir, path)] : [path];
  });
}

/** What the executable links (readelf -d), followed through each library: sonames. */
function linked(file: string, libDir: string, seen = new Set<string>()): Set<string> {
  const dynamic = execFileSync('readelf', ['-d', file], { encoding: 'utf8' });
  for (const [, soname] of dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[(.+)]/g)) {
    if (!soname || seen.has(soname)) continue;
    seen.add(soname);
    linked(join(libDir, soname), libDir, seen);
  }
  return seen;
}

describe('the image layout', () => {
  it("is in the release's SHA256SUMS, once, with its digest", () => {
    const sums = readFileSync(join(dirname(IMAGE), 'SHA256SUMS'), 'utf8').split('\n');
    const digest = createHash('sha256').update(readFileSync(IMAGE)).digest('hex');
    const lines = sums.filter((line) => line.endsWith(`  queenctl-${VERSION}-oci.tar`));
    assert.deepEqual(lines, [`${digest}  queenctl-${VERSION}-oci.tar`]);
  });

  it('every blob has the digest and size its descriptor gives', () => {
    for (const name of readdirSync(join(layout, 'blobs', 'sha256'))) {
      const bytes = blob(name);
      assert.equal(createHash('sha256').update(bytes).digest('hex'), name);
    }
    const top = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as { manifests: Descriptor[] };
    const index = top.manifests[0] as Descriptor;
    assert.equal(index.mediaType, 'application/vnd.oci.image.index.v1+json');
    assert.equal(blob(index.digest).length, index.size);
    assert.deepEqual(JSON.parse(readFileSync(join(layout, 'oci-layout'), 'utf8')), { imageLayoutVersion: '1.0.0' });
  });

  for (const [architecture, triplet, loader] of [
    ['amd64', 'x86_64-linux-gnu', '/lib64/ld-linux-x86-64.so.2'],
    ['arm64', 'aarch64-linux-gnu', '/lib/ld-linux-aarch64.so.1'],
  ] as const) {
    it(`linux/${architecture}: queenctl, the libraries it links, its loader, user 65532, no shell`, () => {
      const { manifest, config, rootfs } = image(architecture);
      assert.deepEqual(manifest.platform?.os, 'linux');
      assert.equal(config.architecture, architecture);
      assert.equal(config.config.User, '65532');
      assert.deepEqual(config.config.Entrypoint, ['/usr/bin/queenctl']);
      assert.equal(config.config.Cmd, undefined);
      const labels = config.config.Labels;
      assert.equal(labels['org.opencontainers.image.version'], VERSION);
      assert.match(labels['org.opencontainers.image.revision'] ?? '', /^[0-9a-f]{7,40}$/);
      assert.equal(labels['org.opencontainers.image.licenses'], 'MIT AND LGPL-2.1-or-later');
      const repository = typeof PKG.repository === 'string' ? PKG.repository : PKG.repository?.url;
      if (repository) assert.ok(labels['org.opencontainers.image.source'], 'a source label from package.json');

      const executable = join(rootfs, 'usr', 'bin', 'queenctl');
      const libDir = join(rootfs, 'usr', 'lib', triplet);
      const libraries = linked(executable, libDir);
      // The C library alone: Bun links its C++ runtime in.
      assert.ok(libraries.has('libc.so.6') && !libraries.has('libstdc++.so.6'), [...libraries].join(', '));
      // Exactly those libraries, the loader where the executable asks for it, licences and the
      // user's files: nothing else, and nothing else executable.
      const loaderLink = readlinkSync(join(rootfs, loader));
      assert.equal(join(dirname(loader), loaderLink), `/usr/lib/${triplet}/${loader.split('/').pop()}`);
      const files = tree(rootfs).filter((path) => !path.endsWith('/'));
      const expected = [
        'usr/bin/queenctl',
        loader.slice(1),
        ...[...libraries].map((soname) => `usr/lib/${triplet}/${soname}`),
        'etc/passwd',
        'etc/group',
        'etc/nsswitch.conf',
      ];
      const docs = files.filter((path) => path.startsWith('usr/share/doc/'));
      assert.deepEqual(files.filter((path) => !docs.includes(path)).sort(), expected.sort());
      const libc = architecture === 'amd64' ? 'libc6' : 'libc6-arm64-cross';
      for (const licence of ['queenctl/LICENSE', 'queenctl/THIRD-PARTY-LICENSES', `${libc}/copyright`])
        assert.ok(docs.includes(`usr/share/doc/${licence}`), `no ${licence} in ${docs.join(', ')}`);
      assert.match(readFileSync(join(rootfs, 'etc', 'passwd'), 'utf8'), /^queenctl:x:65532:65532:/m);
      assert.match(readFileSync(join(rootfs, 'etc', 'group'), 'utf8'), /^queenctl:x:65532:$/m);
      assert.equal(lstatSync(join(rootfs, 'home', 'queenctl')).uid, 65532);
      assert.equal(lstatSync(join(rootfs, 'tmp')).mode & 0o7777, 0o1777);
    });
  }
});

describe('podman runs the image', () => {
  let podmanArgs: string[];
  let env: Record<string, string>;
  let name: string;

  const podman = async (args: string[], exit: ExpectedExit = 0, timeoutMs = PODMAN_MS): Promise<CliResult> => {
    const result = await runProcess('podman', [...podmanArgs, ...args], { env, timeoutMs, exit });
    assert.equal(result.killed, false, `podman ${args.join(' ')} outlived ${timeoutMs} ms: ${result.stderr}`);
    return result;
  };
  const run = (args: string[], exit: ExpectedExit = 0): Promise<CliResult> =>
    podman(['run', '--rm', '--pull=never', '--network', 'host', name, ...args], exit);

  before(async () => {
    sim = await startSimulator();
    const home = join(scratch, 'podman');
    mkdirSync(home);
    const conf = join(home, 'containers.conf');
    writeFileSync(
      conf,
      [
        '[engine]',
        'runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        // Where an image being loaded is copied first: /var/tmp unless told.
        `image_copy_tmp_dir = "${join(home, 'copying')}"`,
        '[containers]',
        'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]',
        '',
      ].join('\n'),
    );
    mkdirSync(join(home, 'copying'));
    const storage = join(home, 'storage.conf');
    const [graph, state, tmp] = ['root', 'runroot', 'tmp'].map((dir) => join(home, dir));
    writeFileSync(storage, `[storage]\ndriver = "vfs"\ngraphroot = "${graph}"\nrunroot = "${state}"\n`);
    env = { CONTAINERS_CONF: conf, CONTAINERS_STORAGE_CONF: storage };
    // Not runc's state (--runtime-flag root=): podman 4.3 passes it when it creates the container
    // but not when --rm deletes it, which then looks in /run/runc and leaves the state behind.
    podmanArgs = ['--root', graph as string, '--runroot', state as string, '--tmpdir', tmp as string];
    podmanArgs.push('--storage-driver', 'vfs');
    const load = await podman(['load', '-i', IMAGE]);
    assert.equal(load.code, 0, load.stderr);
    const loaded = /Loaded image(?:\(s\))?: (\S+)/.exec(load.stdout)?.[1];
    assert.ok(loaded, `podman load named no image: ${load.stdout}`);
    name = loaded;
  });
  after(async () => {
    await sim?.close();
  });

  it('loads the image for this machine, with the user, entrypoint and labels', async () => {
    const inspect = await podman(['image', 'inspect', name]);
    assert.equal(inspect.code, 0, inspect.stderr);
    const [found] = JSON.parse(inspect.stdout) as {
      Architecture: string;
      Config: { User: string; Entrypoint: string[]; Labels: Record<string, string> };
    }[];
    assert.equal(found?.Architecture, process.arch === 'arm64' ? 'arm64' : 'amd64');
    assert.equal(found?.Config.User, '65532');
    assert.deepEqual(found?.Config.Entrypoint, ['/usr/bin/queenctl']);
    assert.equal(found?.Config.Labels['org.opencontainers.image.version'], VERSION);
  });

  it('runs `version --short`', async () => {
    const result = await run(['version', '--short']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      // Once version names the platform: "linux-x64 standalone build" (this machine's, which podman ran).
      new RegExp(
        `^queenctl ${VERSION.replaceAll('.', '\\.')} \\(commit [0-9a-f]+, built \\S+, ` +
          `(linux-${process.arch} )?standalone build, bun \\d+`,
      ),
    );
  });

  it('renews a lease of the simulator on the host network (0), and says one was not renewed (4)', async () => {
    const leaseId = sim.mint();
    const renewed = await run(['lease', 'extend', leaseId, '--server', sim.url, '--seconds', '30']);
    assert.equal(renewed.code, 0, renewed.stderr);
    assert.equal(JSON.parse(renewed.stdout).renewed, 1);
    assert.ok(
      sim.log.some((entry) => JSON.stringify(entry).includes(leaseId)),
      'the simulator saw the renewal',
    );

    const lost = await run(['lease', 'extend', 'no-such-lease', '--server', sim.url, '--retries', '0'], 4);
    assert.equal(lost.code, 4, lost.stderr);
    assert.match(lost.stderr, /not renewed/);
  });

  it('runs as uid 65532, not root: it cannot write where root can', async () => {
    // No shell to ask `id`: a config file written into / fails with EACCES for any user but root.
    const result = await run(
      ['config', 'set-context', 'x', '--server', 'http://127.0.0.1:1', '--config', '/x.yaml'],
      1,
    );
    assert.notEqual(result.code, 0, result.stdout);
    assert.match(result.stderr, /EACCES|permission denied/i);
  });

  it('leaves no container behind (--rm)', async () => {
    const left = await podman(['ps', '--all', '--quiet']);
    assert.equal(left.code, 0, left.stderr);
    assert.equal(left.stdout, '');
  });
});

describe('the build refuses what it cannot make an image of', () => {
  /** The build, its scratch in a directory of the test's own, which it must leave empty. */
  const buildImage = async (releaseDir: string): Promise<CliResult> => {
    const temporary = mkdtempSync(join(scratch, 'tmp-'));
    const result = await runProcess(process.execPath, [join(ROOT, 'scripts', 'build-image.mjs')], {
      env: { QUEENCTL_RELEASE_DIR: releaseDir, TMPDIR: temporary },
      timeoutMs: PODMAN_MS,
      exit: 1,
    });
    assert.deepEqual(readdirSync(temporary), [], 'the build left its scratch behind');
    return result;
  };

  it('a missing release archive: exit 1, naming it and the command that makes it, and no image', async () => {
    const releaseDir = mkdtempSync(join(scratch, 'release-'));
    const x64 = `queenctl-${VERSION}-linux-x64.tar.gz`;
    copyFileSync(join(dirname(IMAGE), x64), join(releaseDir, x64));
    const result = await buildImage(releaseDir);
    assert.equal(result.killed, false);
    assert.equal(result.code, 1, result.stderr);
    assert.match(
      result.stderr,
      new RegExp(`queenctl-${VERSION}-linux-arm64\\.tar\\.gz is missing: \`npm run release\``),
    );
    assert.doesNotMatch(result.stderr, /linux-x64\.tar\.gz is missing/);
    assert.match(result.stderr, /no image was made\n$/);
    assert.deepEqual(readdirSync(releaseDir), [x64]);
  });

  it('an archive whose executable is for another CPU: exit 1, saying whose, and no image', async () => {
    const releaseDir = mkdtempSync(join(scratch, 'release-'));
    const x64 = join(dirname(IMAGE), `queenctl-${VERSION}-linux-x64.tar.gz`);
    copyFileSync(x64, join(releaseDir, `queenctl-${VERSION}-linux-x64.tar.gz`));
    copyFileSync(x64, join(releaseDir, `queenctl-${VERSION}-linux-arm64.tar.gz`));
    const result = await buildImage(releaseDir);
    assert.equal(result.killed, false);
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /linux-arm64\.tar\.gz is for Advanced Micro Devices X86-64, not AArch64/);
    assert.equal(readdirSync(releaseDir).filter((file) => file.includes('-oci.tar')).length, 0);
  });
});

describe('the arm64 image under emulation', () => {
  it('runs `--version` with only the libraries and loader of its own root', async () => {
    const { rootfs } = image('arm64');
    // -L: the loader and libraries are looked up in the unpacked image first (qemu's prefix).
    const result = await runProcess(
      'qemu-aarch64',
      ['-L', rootfs, join(rootfs, 'usr', 'bin', 'queenctl'), '--version'],
      {
        env: { QEMU_LD_PREFIX: undefined },
        timeoutMs: QEMU_MS,
        exit: 0,
      },
    );
    assert.equal(result.killed, false, `qemu-aarch64 outlived ${QEMU_MS} ms`);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, `${VERSION}\n`);
  });
});
