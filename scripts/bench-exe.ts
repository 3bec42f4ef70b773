/**
 * The standalone executable's rows of `npm run bench` (issues 18 and 40, docs/standalone.md): its
 * start-up against `node -e 0` and against the npm package run by that same Node, all measured
 * side by side in one run: each round runs every command once, in turn, on the same CPU, so a
 * busy moment of the shared machine falls on all. Then the long runs, by CPU time: a bulk extend
 * of many ids and a watch of many leases.
 *
 * Targets (issue 40): `queenctl --version` <= 1.15x `node -e 0`; `queenctl lease extend <id>`
 * against the simulator <= 1.35x `node -e 0` and never slower than the npm package.
 *
 * QUEENCTL_BENCH_EXE_COMPARE=<build.json of another executable>[,<another> ...] (an earlier build,
 * say the Node.js one, or Bun's without --bytecode, kept elsewhere) adds their rows to the same
 * rounds, and the first one's CPU beside this one's on the long runs: the comparison that chose
 * Bun (docs/standalone.md).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'queenctl.cjs');
/** Written by scripts/build-exe.mjs: what it built. */
const MANIFEST = join(ROOT, 'dist', 'exe', 'build.json');

export interface ExeBuild {
  exe: string;
  archive: string;
  /** The runtime it carries (Bun builds); a Node.js build named its Node.js instead. */
  runtime?: { name: string; version: string };
  node?: string;
  nodeVersion?: string;
}

/** A row of the bench's one table (scripts/bench.ts prints them all). */
export interface BenchRow {
  measure: string;
  queenctl: string;
  reference: string;
  ratio: string;
  target: string;
  met: string;
  /** The Node the row measured: the bench's own unless given. */
  node?: string;
}

/** The executable's rows always name the runtime they measured. */
export type ExeRow = BenchRow & { node: string };

export interface ExeBenchOptions {
  /** The simulator's URL, and a lease on it that outlives the runs. */
  url: string;
  leaseId: string;
  runs: number;
  /** Prefixes an argv so that it runs on one CPU (taskset), or leaves it as it is. */
  pinned: (cpu: number, argv: string[]) => string[];
  /** Builds the executable first (npm run build:exe); otherwise the one in dist/exe is used. */
  build: boolean;
  /** Leases minted on the simulator, for the long runs; without it they are left out. */
  mint?: (count: number, seconds: number) => Promise<string[]>;
  /** The long runs' sizes: ids extended in bulk, leases watched, for how long. */
  bulkIds: number;
  watchLeases: number;
  watchSeconds: number;
}

/** The last build's manifest, building first when asked or when there is none. */
export function exeBuild(build: boolean): ExeBuild {
  if (build || !existsSync(MANIFEST)) {
    const made = spawnSync(process.execPath, [join(ROOT, 'scripts', 'build-exe.mjs')], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    if (made.status !== 0) throw new Error(`npm run build:exe failed (exit ${made.status}): see above`);
  }
  return JSON.parse(readFileSync(MANIFEST, 'utf8')) as ExeBuild;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

function timeOnce(argv: string[], env: NodeJS.ProcessEnv): number {
  const started = process.hrtime.bigint();
  const result = spawnSync(argv[0] as string, argv.slice(1), { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const elapsed = Number(process.hrtime.bigint() - started) / 1e6;
  if (result.status !== 0)
    throw new Error(`${argv.join(' ')} exited ${result.status}: ${result.stderr?.toString().slice(0, 300)}`);
  return elapsed;
}

/**
 * The CPU time (user and system, children included) and wall time of `argv` reading `input`, by
 * bash's `times` after it: the kernel's own accounting of the process and everything it started.
 */
function cpuOf(argv: string[], input: string, env: NodeJS.ProcessEnv): { cpuMs: number; wallMs: number } {
  const started = process.hrtime.bigint();
  const result = spawnSync('bash', ['-c', '"$@" >/dev/null; status=$?; times; exit $status', 'bash', ...argv], {
    env,
    input,
    stdio: ['pipe', 'pipe', 'pipe'],
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
  if (result.status !== 0) throw new Error(`${argv.join(' ')} exited ${result.status}: ${result.stderr.slice(0, 300)}`);
  // `times`: the shell's own user and system time, then its children's: "0m1.234s 0m0.567s".
  const children = result.stdout.trim().split('\n').at(-1) ?? '';
  const seconds = [...children.matchAll(/(\d+)m([\d.]+)s/g)].map(([, m, s]) => Number(m) * 60 + Number(s));
  if (seconds.length !== 2) throw new Error(`no times from bash for ${argv.join(' ')}: ${result.stdout.slice(-200)}`);
  return { cpuMs: ((seconds[0] as number) + (seconds[1] as number)) * 1000, wallMs };
}

const fmtMs = (ms: number): string => `${ms.toFixed(2)} ms`;

export async function benchExe(options: ExeBenchOptions): Promise<ExeRow[]> {
  const built = exeBuild(options.build);
  const compareFiles = (process.env.QUEENCTL_BENCH_EXE_COMPARE ?? '').split(',').filter(Boolean);
  const compared = compareFiles.map((file) => JSON.parse(readFileSync(file, 'utf8')) as ExeBuild);
  const compare = compared[0] ?? null;
  const { url, leaseId, pinned } = options;
  const runtimeOf = (b: ExeBuild): string =>
    b.runtime ? `${b.runtime.name} ${b.runtime.version}, embedded` : `node v${b.nodeVersion}, embedded`;
  const runtime = runtimeOf(built);
  const extend = ['lease', 'extend', leaseId, '-o', 'json', '--server', url];
  // The npm package's own code cache for this Node is made by the warm-up run, in a directory
  // of this run's own (bin/queenctl.cjs); the executable writes none.
  const cacheHome = mkdtempSync(join(tmpdir(), 'queenctl-bench-exe-'));
  const env = { ...process.env, XDG_CACHE_HOME: cacheHome, NODE_EXTRA_CA_CERTS: undefined, NODE_OPTIONS: undefined };
  const commands: Record<string, string[]> = {
    bare: pinned(0, [process.execPath, '-e', '0']),
    exeVersion: pinned(0, [built.exe, '--version']),
    exeExtend: pinned(0, [built.exe, ...extend]),
    npmVersion: pinned(0, [process.execPath, BIN, '--version']),
    npmExtend: pinned(0, [process.execPath, BIN, ...extend]),
  };
  for (const [i, other] of compared.entries()) {
    commands[`other${i}Version`] = pinned(0, [other.exe, '--version']);
    commands[`other${i}Extend`] = pinned(0, [other.exe, ...extend]);
    // The Node.js that build carried, bare: its own reference.
    if (other.node) commands[`other${i}Bare`] = pinned(0, [other.node, '-e', '0']);
  }
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(commands).map((name) => [name, []]));
  try {
    // Warm-up: the file cache, and the npm package's code cache for this Node.
    for (const argv of Object.values(commands)) timeOnce(argv, env);
    for (let round = 0; round < options.runs; round++) {
      for (const [name, argv] of Object.entries(commands)) times[name]?.push(timeOnce(argv, env));
    }
  } finally {
    rmSync(cacheHome, { recursive: true, force: true });
  }
  const m = Object.fromEntries(Object.entries(times).map(([name, list]) => [name, median(list)])) as Record<
    string,
    number
  >;
  const bareMs = m.bare as number;
  const vsBare = (ms: number, target: number): Pick<ExeRow, 'ratio' | 'target' | 'met'> => ({
    ratio: `${(ms / bareMs).toFixed(2)}x`,
    target: `<= ${target}x`,
    met: ms / bareMs <= target ? 'yes' : 'no',
  });
  const bare = `node -e 0: ${fmtMs(bareMs)}`;
  const how = `median of ${options.runs}, side by side`;
  const exeVersion = m.exeVersion as number;
  const exeExtend = m.exeExtend as number;
  const npmExtend = m.npmExtend as number;
  const rows: ExeRow[] = [
    {
      measure: `exe --version, ${how}`,
      queenctl: fmtMs(exeVersion),
      reference: bare,
      ...vsBare(exeVersion, 1.15),
      node: runtime,
    },
    {
      measure: 'exe lease extend',
      queenctl: fmtMs(exeExtend),
      reference: bare,
      ...vsBare(exeExtend, 1.35),
      node: runtime,
    },
    {
      measure: 'exe lease extend vs the npm package',
      queenctl: fmtMs(exeExtend),
      reference: `npm package: ${fmtMs(npmExtend)}`,
      ratio: `${(exeExtend / npmExtend).toFixed(2)}x`,
      target: '<= 1.0x',
      met: exeExtend <= npmExtend ? 'yes' : 'no',
      node: runtime,
    },
    // For comparison: the npm package's own targets are issue 19's rows (bench.ts), not these.
    ...(['npmVersion', 'npmExtend'] as const).map((name) => ({
      measure: `npm package ${name === 'npmVersion' ? '--version' : 'lease extend'}, for comparison`,
      queenctl: fmtMs(m[name] as number),
      reference: bare,
      ratio: `${((m[name] as number) / bareMs).toFixed(2)}x`,
      target: '-',
      met: '-',
      node: process.version,
    })),
  ];
  for (const [i, other] of compared.entries()) {
    for (const [name, what] of [
      [`other${i}Bare`, 'its node -e 0'],
      [`other${i}Version`, '--version'],
      [`other${i}Extend`, 'lease extend'],
    ] as const) {
      if (m[name] === undefined) continue;
      rows.push({
        measure: `compared exe ${compareFiles[i]}: ${what}`,
        queenctl: fmtMs(m[name] as number),
        reference: bare,
        ratio: `${((m[name] as number) / bareMs).toFixed(2)}x`,
        target: '-',
        met: '-',
        node: runtimeOf(other),
      });
    }
  }
  if (options.mint) rows.push(...(await longRuns(options, built, compare, env)));
  return rows;
}

/**
 * The long runs, by CPU time (user and system): `lease extend -` of `bulkIds` ids on standard
 * input, and `lease watch -` of `watchLeases` leases for `watchSeconds`, each by this executable
 * and, beside it, the compared one (else the npm package); the target: no more CPU than it.
 */
async function longRuns(
  options: ExeBenchOptions,
  built: ExeBuild,
  compare: ExeBuild | null,
  env: NodeJS.ProcessEnv,
): Promise<ExeRow[]> {
  const { url, pinned } = options;
  const mint = options.mint as NonNullable<ExeBenchOptions['mint']>;
  const runtime = built.runtime ? `${built.runtime.name} ${built.runtime.version}, embedded` : '-';
  const reference = compare
    ? { argv: [compare.exe], name: 'compared exe' }
    : { argv: [process.execPath, BIN], name: 'npm package' };
  const rows: ExeRow[] = [];
  const leaseSeconds = Math.max(3, Math.ceil(options.watchSeconds / 2));
  const bulk = ['lease', 'extend', '-', '-o', 'ndjson', '--server', url];
  const watch = [
    'lease',
    'watch',
    '-',
    '--seconds',
    String(leaseSeconds),
    '--for',
    `${options.watchSeconds}s`,
    '-q',
    '--server',
    url,
  ];
  for (const [what, args, count] of [
    [`bulk extend of ${options.bulkIds} ids`, bulk, options.bulkIds],
    [`watch of ${options.watchLeases} leases for ${options.watchSeconds} s`, watch, options.watchLeases],
  ] as const) {
    // Leases of their own for each run, so neither renews what the other did.
    const input = async () => `${(await mint(count, what.startsWith('bulk') ? 600 : leaseSeconds)).join('\n')}\n`;
    const mine = cpuOf(pinned(0, [built.exe, ...args]), await input(), env);
    const theirs = cpuOf(pinned(0, [...reference.argv, ...args]), await input(), env);
    rows.push({
      measure: `exe ${what}, CPU`,
      queenctl: `${mine.cpuMs.toFixed(0)} ms (wall ${mine.wallMs.toFixed(0)} ms)`,
      reference: `${reference.name}: ${theirs.cpuMs.toFixed(0)} ms (wall ${theirs.wallMs.toFixed(0)} ms)`,
      ratio: `${(mine.cpuMs / theirs.cpuMs).toFixed(2)}x`,
      target: '<= 1.0x',
      met: mine.cpuMs <= theirs.cpuMs ? 'yes' : 'no',
      node: runtime,
    });
  }
  return rows;
}
