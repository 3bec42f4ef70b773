// `npm run test:exe` after the builds (package.json): the tests of the standalone executable
// (test/exe), then every test that runs queenctl as a process (`npm run test:process`), with
// QUEENCTL_EXE naming the executable so that they run it instead of the npm package. Plain JS.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const { exe } = JSON.parse(readFileSync(join(root, 'dist', 'exe', 'build.json'), 'utf8'));
const env = { ...process.env, QUEENCTL_EXE: exe };
const run = (command, args) => spawnSync(command, args, { cwd: root, env, stdio: 'inherit' }).status ?? 1;

const own = readdirSync(join(root, 'dist', 'test', 'exe'))
  .filter((file) => file.endsWith('.test.js'))
  .map((file) => join('dist', 'test', 'exe', file));
let status = run(process.execPath, ['--test', '--test-concurrency=1', '--unhandled-rejections=strict', ...own]);
const scripts = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts;
if (scripts['test:process']) status ||= run('npm', ['run', '--silent', 'test:process']);
else
  process.stderr.write('test:exe: no test:process script yet: only the tests of test/exe ran against the executable\n');
process.exit(status);
