// `npm run test:release`, after `npm run release` (package.json, .ci/release): the tests of the
// release in dist/release/ (test/release: the archives, SHA256SUMS, both .debs through lintian and
// the amd64 one installed and removed, both .rpms, the Homebrew formula and Scoop manifest against
// the archives, the arm64 executable under emulation, the formats and signatures Bun's compiler
// makes), then a
// subset of the process tests against the arm64 executable, run under qemu-aarch64 through
// QUEENCTL_EXE (test/support/cli.ts). Plain JS.
//
// The subset (each process under emulation starts ~7x slower than natively, so the whole of
// test/process would take most of CI's time): what proves the arm64 build beyond its start-up,
// i.e. the paths that differ by CPU: undici's WebAssembly parser and node:http (extend, inspect,
// the exit codes 0 to 4 through the real binary), a pipeline of two queenctl (list | extend -),
// signals delivered to a process waiting on the broker (list), and `lease watch -- command`
// supervising a real process group (the environment it gives the command, SIGTERM then SIGKILL to
// a lost lease's group with a grandchild, and a signal to queenctl passed on to its command).
// Every process keeps the limits of test/support/cli.ts (killed after 60 s, waits of 30 s), and
// each file the runner's own --test-timeout.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
// Each test process's temporary files in a directory of its own, removed when it ends (test/support/temp-root.ts).
const TEMP_ROOT = pathToFileURL(join(root, 'dist', 'test', 'support', 'temp-root.js')).href;
const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
const release = join(root, 'dist', 'release');

const run = (args, env = process.env) =>
  spawnSync(process.execPath, args, { cwd: root, env, stdio: 'inherit' }).status ?? 1;
const test = [
  '--import',
  TEMP_ROOT,
  '--test',
  '--test-concurrency=1',
  '--unhandled-rejections=strict',
  '--test-timeout=900000',
];

let status = run([
  ...test,
  join('dist', 'test', 'release', 'packages.test.js'),
  join('dist', 'test', 'release', 'package-managers.test.js'),
  join('dist', 'test', 'release', 'arm64.test.js'),
  // What Bun's compiler makes for each platform, and the macOS signature made again ad hoc: a
  // small program compiled with the pinned Bun packages (from the npm registry), not the release.
  join('dist', 'test', 'release', 'binary-format.test.js'),
]);

// The arm64 executable, unpacked from its archive, run by a wrapper that starts it under the
// emulator: the process tests spawn it (and pass it to sh) as they would any queenctl.
const scratch = mkdtempSync(join(tmpdir(), 'queenctl-release-'));
try {
  const name = `queenctl-${version}-linux-arm64`;
  const unpacked = spawnSync('tar', ['-xzf', join(release, `${name}.tar.gz`), '-C', scratch], { stdio: 'inherit' });
  if (unpacked.status !== 0) {
    process.stderr.write(`test:release: cannot unpack ${name}.tar.gz from dist/release: run npm run release first\n`);
    process.exit(1);
  }
  const wrapper = join(scratch, 'queenctl-arm64');
  const prefix = process.env.QEMU_LD_PREFIX || '/usr/aarch64-linux-gnu';
  writeFileSync(
    wrapper,
    `#!/bin/sh\nQEMU_LD_PREFIX='${prefix}' exec qemu-aarch64 '${join(scratch, name, 'queenctl')}' "$@"\n`,
  );
  chmodSync(wrapper, 0o755);
  const subset = [
    '--test-name-pattern=^exit statuses through the binary',
    '--test-name-pattern=^lease list',
    '--test-name-pattern=^runs the command with QUEEN_LEASE_ID',
    '--test-name-pattern=^a lost lease: SIGTERM to the group',
    '--test-name-pattern=^SIGTERM to queenctl goes to the command',
  ];
  const files = ['exit-codes', 'list', 'watch'].map((file) => join('dist', 'test', 'process', `${file}.test.js`));
  process.stderr.write('test:release: process tests against the arm64 executable, under qemu-aarch64\n');
  status = run([...test, ...subset, ...files], { ...process.env, QUEENCTL_EXE: wrapper }) || status;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
process.exit(status);
