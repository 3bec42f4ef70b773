/**
 * The standalone executable's rows of `npm run bench` (issue 18, docs/standalone.md): its
 * start-up against `node -e 0` of the very Node.js release it carries, and against the npm
 * package run by that same Node, all measured side by side in one run: each round runs every
 * command once, in turn, on the same CPU, so a busy moment of the shared machine falls on all.
 *
 * Targets: `queenctl --version` <= 1.2x `node -e 0`; `queenctl lease extend <id>` against the
 * simulator <= 2.0x `node -e 0` and never slower than the npm package on that Node.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'queenctl.cjs');
/** Written by scripts/build-exe.mjs: what it built, and with which Node. */
const MANIFEST = join(ROOT, 'dist', 'exe', 'build.json');

export interface ExeBuild {
  exe: string;
  archive: string;
  node: string;
  nodeVersion: string;
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

/** The executable's rows always name the Node it carries. */
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

const fmtMs = (ms: number): string => `${ms.toFixed(2)} ms`;

export function benchExe(options: ExeBenchOptions): ExeRow[] {
  const built = exeBuild(options.build);
  const { url, leaseId, pinned } = options;
  const node = `v${built.nodeVersion}, embedded`;
  const extend = ['lease', 'extend', leaseId, '-o', 'json', '--server', url];
  // The npm package's own code cache for this Node is made by the warm-up run, in a directory
  // of this run's own (bin/queenctl.cjs); the executable writes none.
  const cacheHome = mkdtempSync(join(tmpdir(), 'queenctl-bench-exe-'));
  const env = { ...process.env, XDG_CACHE_HOME: cacheHome, NODE_EXTRA_CA_CERTS: undefined, NODE_OPTIONS: undefined };
  const commands = {
    bare: pinned(0, [built.node, '-e', '0']),
    exeVersion: pinned(0, [built.exe, '--version']),
    exeExtend: pinned(0, [built.exe, ...extend]),
    npmVersion: pinned(0, [built.node, BIN, '--version']),
    npmExtend: pinned(0, [built.node, BIN, ...extend]),
  };
  type Name = keyof typeof commands;
  const times = Object.fromEntries(Object.keys(commands).map((name) => [name, [] as number[]])) as Record<
    Name,
    number[]
  >;
  try {
    // Warm-up: the file cache, and the npm package's code cache for this Node.
    for (const argv of Object.values(commands)) timeOnce(argv, env);
    for (let round = 0; round < options.runs; round++) {
      for (const [name, argv] of Object.entries(commands)) times[name as Name].push(timeOnce(argv, env));
    }
  } finally {
    rmSync(cacheHome, { recursive: true, force: true });
  }
  const m = Object.fromEntries(Object.entries(times).map(([name, list]) => [name, median(list)])) as Record<
    Name,
    number
  >;
  const vsBare = (ms: number, target: number): Pick<ExeRow, 'ratio' | 'target' | 'met'> => ({
    ratio: `${(ms / m.bare).toFixed(2)}x`,
    target: `<= ${target.toFixed(1)}x`,
    met: ms / m.bare <= target ? 'yes' : 'no',
  });
  const bare = `node -e 0: ${fmtMs(m.bare)}`;
  const how = `median of ${options.runs}, side by side`;
  return [
    {
      measure: `exe --version, ${how}`,
      queenctl: fmtMs(m.exeVersion),
      reference: bare,
      ...vsBare(m.exeVersion, 1.2),
      node,
    },
    { measure: 'exe lease extend', queenctl: fmtMs(m.exeExtend), reference: bare, ...vsBare(m.exeExtend, 2), node },
    {
      measure: 'exe lease extend vs the npm package',
      queenctl: fmtMs(m.exeExtend),
      reference: `npm package: ${fmtMs(m.npmExtend)}`,
      ratio: `${(m.exeExtend / m.npmExtend).toFixed(2)}x`,
      target: '<= 1.0x',
      met: m.exeExtend <= m.npmExtend ? 'yes' : 'no',
      node,
    },
    // For comparison: the npm package's own targets are issue 19's rows (bench.ts), not these.
    {
      measure: 'npm package --version, for comparison',
      queenctl: fmtMs(m.npmVersion),
      reference: bare,
      ratio: `${(m.npmVersion / m.bare).toFixed(2)}x`,
      target: '-',
      met: '-',
      node,
    },
    {
      measure: 'npm package lease extend, for comparison',
      queenctl: fmtMs(m.npmExtend),
      reference: bare,
      ratio: `${(m.npmExtend / m.bare).toFixed(2)}x`,
      target: '-',
      met: '-',
      node,
    },
  ];
}
