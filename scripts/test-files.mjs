// The files `npm test` hands to `node --test` (package.json test:built and test:process), one
// per process: each is a file written here, dist/test/.groups/<all|process>/<NN>-<name>.js, that
// imports its members, whose tests run, and are reported, as they would be from their own files.
// Most hold several test files, so that they share one process: node --test starts a process per
// file, and on Node 20 each costs ~0.3 CPU-s before its first test (node, the runner, the modules
// compiled without a code cache): ~20 of the suite's CPU-s went there (issue 25). Node 22's
// --test-isolation=none does the same for a whole run; Node 20 has no such flag.
//
// Order: node --test starts its files in the order of their paths (it sorts them), six at a
// time, so the NN of each name is the order of ORDER below: the longest first (the ones that wait
// on real processes and the wall clock beside the ones that keep a CPU busy), the short ones
// last, so that the run does not end on one long file started late. On this 2-CPU machine the
// suite's CPU time (~85 CPU-s) keeps both CPUs busy for most of its wall time: what is left to
// order is the end.
//
// A test that changes what the whole process shares (its user, working directory, umask or
// environment) stays in a process of its own: such a file is never grouped, whatever the rules
// below say. A file that waits on real time (wall time, not CPU) is grouped only with others that
// do: in another group it would hold up the rest. Plain JS, like the other build scripts.
//
// A new test file, by default: under unit/, e2e/, reliability/, tools/ or docs/ it joins its
// directory's group (unit/watch-* the watch group, e2e/ by its first letter); anywhere else (a
// new test/process file, a new directory) it runs in a process of its own, started where ORDER
// says `others`, after the long groups. Move it to a group of its own here when it is long.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const tests = join(root, 'dist', 'test');
const only = process.argv[2]; // `process`: only test/process (npm run test:process)

/** Suites CI runs apart (test:slow, test:exe, test:fleet, test:release, test:image). */
const APART = /^(slow|exe|fleet|release)\//;
const processTests = (...names) => names.map((name) => `process/${name}.test.js`);
const e2eTests = (...names) => names.map((name) => `e2e/${name}.test.js`);
/**
 * What runs in one process, in the order started. A group is `files` (named) or `directory` (a
 * pattern; `except`: files of it that run elsewhere); a file alone is a group of one. `others`
 * stands for every file no group takes, each in a process of its own. A group's files run one
 * after another, so none is allowed much over ~30 s on this machine when it is quiet (the
 * runner's limit is per test, 120 s, but a long group is the end of the run). The completion
 * tests (real bash, zsh on a pseudo terminal and fish, a queenctl run per TAB) are alone: on a
 * loaded machine each takes a minute, and each keeps its own time limit.
 */
const ORDER = [
  // Real processes and the wall clock, beside the CPU-bound groups that follow: `npm pack` and a
  // global install (the longest single test), then watches and signals.
  { name: 'process-package', files: processTests('package') },
  // The fault matrix (every fault on both transports, all at once) and the simulator.
  { name: 'reliability-and-tools', directory: /^(reliability|tools)\// },
  { name: 'e2e-wall-clock', files: e2eTests('watch', 'watch-scale', 'watch-outage', 'metrics') },
  { name: 'process-watch', files: processTests('watch', 'loads', 'readers-and-signals', 'exit-codes', 'demo-job') },
  // The watch's scheduler on fake time at scale: thousands of leases over minutes and an hour.
  { name: 'unit-watch', directory: /^unit\/watch-/ },
  { name: 'process-guardian', files: processTests('tty', 'guardian', 'cache-trust', 'run') },
  // The command tests, in-process against the simulator; the live views and lease run below.
  { name: 'e2e-a-h', directory: /^e2e\/[a-h]/ },
  {
    name: 'e2e-i-z',
    directory: /^e2e\/[i-z]/,
    except: e2eTests('live-views', 'run', 'run-load', 'run-outcomes', 'run-follow'),
  },
  { name: 'unit', directory: /^unit\// },
  { name: 'others' },
  // The doc tests, and the checks of docs/ (links, manifests) that take a second or two: one
  // process (each more costs ~0.25 CPU-s before its first test).
  { name: 'docs', directory: /^docs\// },
  // 400 idle connections and 20 trickling ones against a watch's metrics, under ulimit -n 256.
  { name: 'process-metrics-flood', files: processTests('metrics-flood') },
  // The live views watch hundreds of leases on a fake clock: a file of its own. lease run's
  // commands are real processes on the wall clock, and its files mostly wait: two to a process,
  // each pair under ~20 s on this machine when it is quiet, so that no group waits long for them.
  { name: 'e2e-live-views', files: e2eTests('live-views') },
  { name: 'process-demo', files: processTests('demo') },
  { name: 'process-lease-completion', files: processTests('lease-completion') },
  { name: 'e2e-run-load-and-outcomes', files: e2eTests('run-load', 'run-outcomes') },
  { name: 'process-signals', files: processTests('signals', 'list', 'output') },
  // The terminal snapshots: ~40 screens of queenctl in tmux, four at a time (about 10 s).
  { name: 'process-snapshots', files: processTests('snapshots') },
  { name: 'e2e-run-and-follow', files: e2eTests('run', 'run-follow') },
  { name: 'process-completion', files: processTests('completion') },
];
const takes = (group, file) =>
  group.files ? group.files.includes(file) : group.directory?.test(file) && !group.except?.includes(file);
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
/** Each process to start, in order: its name and its files. */
const processes = ORDER.map((group) => ({ group, name: group.name, files: [] }));
const others = processes.find((entry) => entry.name === 'others');
for (const file of files) {
  const at = processes.findIndex((entry) => takes(entry.group, file));
  const alone = { group: { files: [] }, name: file.replace(/\.test\.js$/, '').replaceAll('/', '-'), files: [file] };
  if (at === -1) processes.splice(processes.indexOf(others), 0, alone);
  else if (SHARED_STATE.test(readFileSync(join(tests, file), 'utf8'))) processes.splice(at + 1, 0, alone);
  else processes[at].files.push(file);
}
const groupsDir = join(tests, '.groups', only ?? 'all');
rmSync(groupsDir, { recursive: true, force: true });
mkdirSync(groupsDir, { recursive: true });
const paths = processes
  .filter((entry) => entry.files.length > 0)
  .map((entry, index) => {
    const path = join(groupsDir, `${String(index + 1).padStart(2, '0')}-${entry.name}.js`);
    const imports = entry.files.map((file) => `import ${JSON.stringify(pathToFileURL(join(tests, file)).href)};`);
    writeFileSync(
      path,
      `// ${entry.name}: test files that share one process (scripts/test-files.mjs)\n${imports.join('\n')}\n`,
    );
    return relative(root, path);
  });
process.stdout.write(`${paths.join('\n')}\n`);
