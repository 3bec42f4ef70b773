// The files `npm test` hands to `node --test` (package.json test:built and test:process), most
// of them in groups that share one process: the groups that wait on the wall clock first (they
// take the longest), then the files alone, then the rest. node --test starts a process per file,
// and on Node 20 each costs ~0.3 CPU-s before its first test (node, the runner, the modules
// compiled without a code cache): ~20 of the suite's CPU-s went there (issue 25). A group is a
// file written here, dist/test/.groups/<all|process>/<name>.js, that imports its members; their
// tests run, and are reported, as they would be from their own files. Node 22's
// --test-isolation=none does the same for a whole run; Node 20 has no such flag.
//
// A test that changes what the whole process shares (its user, working directory, umask or
// environment) stays in a process of its own: such a file is never grouped, whatever the rules
// below say. A file that waits on real time (wall time, not CPU) is grouped only with others that
// do: in another group it would hold up the rest. Plain JS, like the other build scripts.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const tests = join(root, 'dist', 'test');
const only = process.argv[2]; // `process`: only test/process (npm run test:process)

/** Suites CI runs apart (test:slow, test:exe, test:fleet, test:release, test:image). */
const APART = /^(slow|exe|fleet|release)\//;
/**
 * Groups by directory (`alone`: files of it that keep a process of their own), or of the files
 * named. A group's files run one after another. `waits`: its files wait on real time (watches on
 * the wall clock, real processes); the process tests make two such groups, so they end with the
 * rest. The completion tests (real bash, zsh on a pseudo terminal and fish, a queenctl run per TAB)
 * are in none: on a loaded machine each file takes a minute, and each keeps its own time limit.
 */
const GROUPS = [
  // Each group is one file to node --test, under its 120 s limit: on Node 22 and the standalone
  // executable the eight files of one group took longer, so they are two.
  {
    name: 'process-1',
    waits: true,
    files: ['package', 'signals', 'list', 'output'].map((name) => `process/${name}.test.js`),
  },
  {
    name: 'process-3',
    waits: true,
    files: ['tty', 'guardian', 'cache-trust', 'run'].map((name) => `process/${name}.test.js`),
  },
  {
    name: 'process-2',
    waits: true,
    files: ['watch', 'loads', 'readers-and-signals', 'exit-codes', 'demo-job'].map((name) => `process/${name}.test.js`),
  },
  // The terminal snapshots: ~40 screens of queenctl in tmux, four at a time (about 10 s).
  { name: 'process-snapshots', waits: true, files: ['process/snapshots.test.js'] },
  {
    name: 'e2e-wall-clock',
    waits: true,
    files: ['watch', 'watch-scale', 'watch-outage', 'metrics'].map((name) => `e2e/${name}.test.js`),
  },
  // Two groups of unit tests, each well under its 120 s limit on a machine running two suites.
  { name: 'unit-a', directory: /^unit\/[a-l]/ },
  { name: 'unit-b', directory: /^unit\/[m-z]/ },
  { name: 'reliability-and-tools', directory: /^(reliability|tools)\// },
  // The live views' tests watch hundreds of leases on a fake clock, and lease run's commands and
  // guardians are real processes on the wall clock: files of their own, so the e2e group does not
  // wait for them.
  {
    name: 'e2e',
    directory: /^e2e\//,
    alone: [
      'e2e/live-views.test.js',
      'e2e/run.test.js',
      'e2e/run-load.test.js',
      'e2e/run-outcomes.test.js',
      'e2e/run-follow.test.js',
    ],
  },
  { name: 'docs', directory: /^docs\//, alone: ['docs/doctest.test.js'] },
];
const member = (group, file) =>
  group.files ? group.files.includes(file) : group.directory.test(file) && !group.alone?.includes(file);
/** What marks a test that changes the process's shared state. */
const SHARED_STATE = new RegExp(
  [
    String.raw`\bprocess\.(seteuid|setuid|setgid|setegid|chdir|umask)\??\.?\(`,
    String.raw`\bprocess\.env(\.\w+|\[[^\]]+\])\s*=[^=]`,
    String.raw`delete process\.env`,
  ].join('|'),
);

function walk(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name.startsWith('.') ? [] : walk(path);
    return entry.name.endsWith('.test.js') ? [relative(tests, path)] : [];
  });
}

const files = walk(tests)
  .filter((file) => !APART.test(file))
  .filter((file) => only !== 'process' || file.startsWith('process/'))
  .sort();
const groupsDir = join(tests, '.groups', only ?? 'all');
rmSync(groupsDir, { recursive: true, force: true });
mkdirSync(groupsDir, { recursive: true });
const listed = [];
const members = new Map(GROUPS.map((group) => [group.name, []]));
for (const file of files) {
  const group = GROUPS.find((rule) => member(rule, file));
  if (group && !SHARED_STATE.test(readFileSync(join(tests, file), 'utf8'))) members.get(group.name).push(file);
  else listed.push(join('dist', 'test', file));
}
// node --test starts the files in this order, four at a time.
const [waiting, rest] = [[], []];
for (const [name, grouped] of members) {
  if (grouped.length === 0) continue;
  const path = join(groupsDir, `${name}.js`);
  const imports = grouped.map((file) => `import ${JSON.stringify(pathToFileURL(join(tests, file)).href)};`);
  writeFileSync(
    path,
    `// ${name}: test files that share one process (scripts/test-files.mjs)\n${imports.join('\n')}\n`,
  );
  (GROUPS.find((group) => group.name === name).waits ? waiting : rest).push(relative(root, path));
}
process.stdout.write(`${[...waiting, ...listed, ...rest].join('\n')}\n`);
