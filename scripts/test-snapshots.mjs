// `npm run test:snapshots [-- --update]` after the build (package.json): the terminal snapshot
// tests alone (test/process/snapshots.test.ts, docs/development.md#terminal-snapshots). With
// --update, every snapshot is written again from what queenctl shows now: the directory is
// emptied first, so a case that is gone leaves no file behind, and `git diff test/snapshots` is
// then exactly what changed on the screens. Plain JS, like the other build scripts.
import { spawnSync } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
// Each test process's temporary files in a directory of its own, removed when it ends (test/support/temp-root.ts).
const TEMP_ROOT = pathToFileURL(join(root, 'dist', 'test', 'support', 'temp-root.js')).href;
const args = process.argv.slice(2);
const unknown = args.filter((arg) => arg !== '--update');
if (unknown.length > 0) {
  process.stderr.write(`test-snapshots: unknown argument ${unknown[0]}; usage: npm run test:snapshots [-- --update]\n`);
  process.exit(1);
}
const update = args.includes('--update');
const snapshots = join(root, 'test', 'snapshots');
if (update) {
  for (const file of readdirSync(snapshots)) if (file.endsWith('.txt')) rmSync(join(snapshots, file));
}
const env = { ...process.env, ...(update && { UPDATE_SNAPSHOTS: '1' }) };
const test = join('dist', 'test', 'process', 'snapshots.test.js');
const { status } = spawnSync(
  process.execPath,
  ['--import', TEMP_ROOT, '--test', '--test-timeout=120000', '--unhandled-rejections=strict', test],
  { cwd: root, env, stdio: 'inherit' },
);
if (update && status === 0) process.stdout.write('test-snapshots: written; see git diff test/snapshots\n');
process.exit(status ?? 1);
