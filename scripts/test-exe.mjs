// `npm run test:exe` after the builds (package.json): the tests of the standalone executable
// (test/exe), then every test that runs queenctl as a process (the e2e files that do, and
// `npm run test:process`), with QUEENCTL_EXE naming the executable so that they run it instead
// of the npm package. Plain JS.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
// Each test process's temporary files in a directory of its own, removed when it ends (test/support/temp-root.ts).
const TEMP_ROOT = pathToFileURL(join(root, 'dist', 'test', 'support', 'temp-root.js')).href;
const { exe } = JSON.parse(readFileSync(join(root, 'dist', 'exe', 'build.json'), 'utf8'));
const env = { ...process.env, QUEENCTL_EXE: exe };
const run = (command, args) => spawnSync(command, args, { cwd: root, env, stdio: 'inherit' }).status ?? 1;

const own = readdirSync(join(root, 'dist', 'test', 'exe'))
  .filter((file) => file.endsWith('.test.js'))
  .map((file) => join('dist', 'test', 'exe', file));
// The e2e tests that still run queenctl as a process (runCli, startCli: the transport's proxies,
// CONNECT tunnels and TLS, config files, failure hints) run it through the executable too, and so
// test the undici it carries, rebuilt without node:http (scripts/esbuild-plugins.mjs). The
// reliability suite runs node with an entry of its own: it has no executable to test.
const e2e = readdirSync(join(root, 'dist', 'test', 'e2e'))
  .filter((file) => file.endsWith('.test.js'))
  .map((file) => join('dist', 'test', 'e2e', file))
  .filter((file) => /\b(runCli|startCli)\(/.test(readFileSync(join(root, file), 'utf8')));
// The runner's limit on a test, well above each process's own kill timer (test/support/cli.ts);
// the build's and the bench's tests set longer ones of their own.
const limit = '--test-timeout=120000';
let status = run(process.execPath, [
  '--import',
  TEMP_ROOT,
  '--test',
  '--test-concurrency=1',
  limit,
  '--unhandled-rejections=strict',
  ...own,
]);
status =
  run(process.execPath, [
    '--import',
    TEMP_ROOT,
    '--test',
    '--test-concurrency=2',
    limit,
    '--unhandled-rejections=strict',
    ...e2e,
  ]) || status;
const scripts = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts;
// Every suite runs, whatever the one before it gave.
if (scripts['test:process']) status = run('npm', ['run', '--silent', 'test:process']) || status;
else
  process.stderr.write('test:exe: no test:process script yet: only the tests of test/exe ran against the executable\n');
process.exit(status);
