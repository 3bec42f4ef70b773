/**
 * `npm run bench`: queenctl measured against references taken in the same run, so a shared and
 * noisy machine cancels out (issue 6). The simulator runs in its own process, on the other CPU
 * where there is one, so it is not what is measured.
 *
 *   1. start-up: `queenctl lease extend <id> -o json` against bare `node -e ""` and a script making
 *      the same request with node:http (the floor of any Node CLI that makes one), on each Node
 *      of QUEENCTL_BENCH_NODES (paths to node binaries, separated as in PATH; default: this one),
 *      and against one `curl`; all without NODE_EXTRA_CA_CERTS (benchStartup says why)
 *   2. bulk extend: 10,000 ids through `lease extend - -o ndjson` against a shell loop of curl
 *   3. watch at scale: 10,000 leases, --seconds 30, for 60 s: lapses, CPU, RSS, margins
 *   4. watch on a slow broker: 10,000 leases, --seconds 30, answers in 100 ms: lapses, renewals/s,
 *      CPU, RSS and the concurrency reached (issue 12)
 *   5. watch through an outage: the broker refusing connections for 10 s under 10,000 leases:
 *      connection attempts during it, time to renew the waiting leases after it, lapses (issue 12)
 *
 * `--quick` runs a small version of each (CI keeps the script working with it; it judges no time).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';
import { SimulatorControl, startTcpFront } from '../tools/simulator/index.js';
import { benchExe } from './bench-exe.js';

const BIN = fileURLToPath(new URL('../../bin/queenctl.cjs', import.meta.url));
const SIMULATOR = fileURLToPath(new URL('../tools/simulator/main.js', import.meta.url));

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    out: { type: 'string' },
    only: { type: 'string' },
  },
});
const quick = flags.quick ?? false;
const SIZES = quick
  ? { startupRuns: 3, bulkIds: 500, curlSample: 20, watchLeases: 200, watchSeconds: 6, leaseSeconds: 3 }
  : { startupRuns: 21, bulkIds: 10_000, curlSample: 200, watchLeases: 10_000, watchSeconds: 60, leaseSeconds: 30 };

// Two CPUs: queenctl and its references on one, the simulator on the other (issue 6: the two
// cores of these machines differ by tens of milliseconds, so every reference shares queenctl's).
const canPin = availableParallelism() > 1 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;
const pinned = (cpu: number, argv: string[]): string[] => (canPin ? ['taskset', '-c', String(cpu), ...argv] : argv);
const hasCurl = spawnSync('curl', ['--version']).status === 0;

interface Row {
  measure: string;
  queenctl: string;
  reference: string;
  ratio: string;
  target: string;
  met: string;
  /** The Node the row measured: this one unless given. */
  node?: string;
}
const rows: Row[] = [];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

function timeOnce(argv: string[], input?: string, env?: NodeJS.ProcessEnv): number {
  const started = process.hrtime.bigint();
  const result = spawnSync(argv[0] as string, argv.slice(1), {
    input,
    env,
    stdio: [input === undefined ? 'ignore' : 'pipe', 'ignore', 'pipe'],
  });
  const elapsed = Number(process.hrtime.bigint() - started) / 1e6;
  if (result.status !== 0)
    throw new Error(`${argv.join(' ')} exited ${result.status}: ${result.stderr?.toString().slice(0, 300)}`);
  return elapsed;
}

/** Samples a running process's CPU ticks and peak RSS from /proc until it exits. */
function watchResources(child: ChildProcess): {
  done: Promise<{ cpuMs: number; peakRssMb: number; wallMs: number; code: number | null }>;
} {
  const ticksPerMs = 100 / 1000; // USER_HZ is 100 on Linux
  const started = performance.now();
  let cpuTicks = 0;
  let peakKb = 0;
  const sample = (): void => {
    try {
      const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      cpuTicks = Number(fields[11]) + Number(fields[12]);
      const hwm = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      if (hwm) peakKb = Math.max(peakKb, Number(hwm[1]));
    } catch {
      // The process has just exited: the last sample stands.
    }
  };
  const timer = setInterval(sample, 100);
  return {
    done: new Promise((resolve) => {
      child.on('exit', (code) => {
        clearInterval(timer);
        resolve({ cpuMs: cpuTicks / ticksPerMs, peakRssMb: peakKb / 1024, wallMs: performance.now() - started, code });
      });
    }),
  };
}

async function startSimulator(): Promise<{ url: string; control: SimulatorControl; stop: () => void }> {
  const argv = pinned(1, [process.execPath, SIMULATOR, '--no-log']);
  const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.once('data', (chunk: Buffer) => resolve((JSON.parse(chunk.toString()) as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`the simulator exited ${code}`)));
  });
  return { url, control: new SimulatorControl(url), stop: () => child.kill('SIGTERM') };
}

async function mintMany(control: SimulatorControl, count: number, seconds: number): Promise<string[]> {
  const ids: string[] = [];
  for (let start = 0; start < count; start += 200) {
    const batch = Array.from({ length: Math.min(200, count - start) }, () => control.mint({ seconds }));
    ids.push(...(await Promise.all(batch)));
  }
  return ids;
}

const fmtMs = (ms: number): string => (ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(2)} ms`);

/** QUEENCTL_BENCH_NODES: node binaries to measure start-up on, separated as in PATH. */
function benchNodes(): Array<{ path: string; version: string }> {
  const given = (process.env.QUEENCTL_BENCH_NODES ?? '').split(delimiter).filter((path) => path !== '');
  return (given.length > 0 ? given : [process.execPath]).map((path) => {
    const result = spawnSync(path, ['--version'], { encoding: 'utf8' });
    if (result.status !== 0)
      throw new Error(
        `QUEENCTL_BENCH_NODES: ${path} does not run (${result.error?.message ?? `exit ${result.status}`}); ` +
          `give paths to node binaries, separated by '${delimiter}'`,
      );
    return { path, version: result.stdout.trim() };
  });
}

/** One request as queenctl makes it, with nothing but node:http: the argument is the URL. */
const ONE_REQUEST = `require('node:http')
  .request(process.argv[1], { method: 'POST', headers: { 'content-type': 'application/json' } }, (response) => {
    if (response.statusCode !== 200) process.exitCode = 1;
    response.resume();
  })
  .end('{"seconds":60}');`;

async function benchStartup(url: string, control: SimulatorControl): Promise<void> {
  const leaseId = await control.mint({ seconds: 86_400 });
  const extendUrl = `${url}/api/v1/lease/${leaseId}/extend`;
  const curl = pinned(0, [
    'curl',
    '-sS',
    '-o',
    '/dev/null',
    '-X',
    'POST',
    '-H',
    'content-type: application/json',
    '-d',
    '{"seconds":60}',
    extendUrl,
  ]);
  // A cache directory of its own: on a Node other than the one that built the package, the
  // warm-up run makes the code cache that the measured runs use (bin/queenctl.cjs). Without
  // NODE_EXTRA_CA_CERTS, which Node 20 reads at every start (+40 ms on a system bundle) and
  // 22 and 24 only when TLS is used: a fixed cost in queenctl and its references alike would
  // hide what differs, and by Node version.
  const cacheHome = mkdtempSync(join(tmpdir(), 'queenctl-bench-cache-'));
  const env = { ...process.env, XDG_CACHE_HOME: cacheHome, NODE_EXTRA_CA_CERTS: undefined };
  try {
    for (const [index, node] of benchNodes().entries()) {
      const withCurl = hasCurl && index === 0;
      const queenctl = pinned(0, [node.path, BIN, 'lease', 'extend', leaseId, '-o', 'json', '--server', url]);
      const bare = pinned(0, [node.path, '-e', '']);
      const http = pinned(0, [node.path, '-e', ONE_REQUEST, extendUrl]);
      const times = { queenctl: [] as number[], bare: [] as number[], http: [] as number[], curl: [] as number[] };
      timeOnce(queenctl, undefined, env); // warm the file cache once; interleaving does the rest
      const cache = spawnSync(queenctl[0] as string, queenctl.slice(1), {
        env: { ...env, QUEENCTL_DEBUG: '1' },
        encoding: 'utf8',
      }).stderr;
      const cacheUsed = /code cache accepted \(shipped/.test(cache)
        ? 'the shipped code cache'
        : /code cache accepted/.test(cache)
          ? 'a code cache made for it'
          : 'no code cache';
      for (let run = 0; run < SIZES.startupRuns; run++) {
        times.bare.push(timeOnce(bare, undefined, env));
        times.queenctl.push(timeOnce(queenctl, undefined, env));
        times.http.push(timeOnce(http, undefined, env));
        if (withCurl) times.curl.push(timeOnce(curl));
      }
      const [q, n, h] = [median(times.queenctl), median(times.bare), median(times.http)];
      rows.push({
        measure: `start-up, median of ${SIZES.startupRuns}`,
        queenctl: fmtMs(q),
        reference: `node -e "": ${fmtMs(n)}`,
        ratio: `${(q / n).toFixed(2)}x`,
        target: '<= 1.3x',
        met: q / n <= 1.3 ? 'yes' : 'no',
        node: `${node.version}, ${cacheUsed}`,
      });
      rows.push({
        measure: 'start-up vs one node:http request',
        queenctl: fmtMs(q),
        reference: `node:http POST: ${fmtMs(h)}`,
        ratio: `${(q / h).toFixed(2)}x`,
        target: '-',
        met: '-',
        node: node.version,
      });
      if (withCurl) {
        const c = median(times.curl);
        rows.push({
          measure: 'start-up vs one curl',
          queenctl: fmtMs(q),
          reference: `curl -X POST: ${fmtMs(c)}`,
          ratio: `${(q / c).toFixed(2)}x`,
          target: '-',
          met: '-',
          node: node.version,
        });
      }
    }
  } finally {
    rmSync(cacheHome, { recursive: true, force: true });
  }
}

async function bulkRun(url: string, ids: string[]): Promise<{ wallMs: number; peakRssMb: number }> {
  const argv = pinned(0, [process.execPath, BIN, 'lease', 'extend', '-', '-o', 'ndjson', '--server', url]);
  const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['pipe', 'ignore', 'inherit'] });
  const resources = watchResources(child);
  child.stdin?.end(`${ids.join('\n')}\n`);
  const result = await resources.done;
  if (result.code !== 0) throw new Error(`bulk extend exited ${result.code}`);
  return result;
}

async function benchBulk(url: string, control: SimulatorControl): Promise<void> {
  const ids = await mintMany(control, SIZES.bulkIds, 86_400);
  const small = await bulkRun(url, ids.slice(0, Math.ceil(ids.length / 10)));
  const full = await bulkRun(url, ids);
  const perLease = full.wallMs / ids.length;
  if (hasCurl) {
    const sample = ids.slice(0, SIZES.curlSample);
    const curl = `curl -sS -o /dev/null -X POST -H 'content-type: application/json' -d '{"seconds":60}'`;
    const script = `for id in ${sample.join(' ')}; do ${curl} "${url}/api/v1/lease/$id/extend"; done`;
    const curlMs = timeOnce(pinned(0, ['bash', '-c', script])) / sample.length;
    const ratio = perLease / curlMs;
    rows.push({
      measure: `bulk extend, ${ids.length} ids`,
      queenctl: `${fmtMs(perLease)} per lease (${(full.wallMs / 1000).toFixed(2)} s)`,
      reference: `curl loop: ${fmtMs(curlMs)} per call`,
      ratio: `1/${(1 / ratio).toFixed(0)}`,
      target: '<= 1/30',
      met: ratio <= 1 / 30 ? 'yes' : 'no',
    });
  }
  const growth = full.peakRssMb / small.peakRssMb;
  rows.push({
    measure: 'bulk extend, peak RSS',
    queenctl: `${full.peakRssMb.toFixed(0)} MB at ${ids.length} ids`,
    reference: `${small.peakRssMb.toFixed(0)} MB at ${Math.ceil(ids.length / 10)} ids`,
    ratio: `${growth.toFixed(2)}x for 10x ids`,
    target: 'flat',
    met: growth < 1.5 ? 'yes' : 'no',
  });
}

async function benchWatch(url: string, control: SimulatorControl): Promise<void> {
  const ids = await mintMany(control, SIZES.watchLeases, SIZES.leaseSeconds);
  const before = await control.stats();
  const argv = pinned(0, [
    process.execPath,
    BIN,
    'lease',
    'watch',
    '-',
    '--seconds',
    String(SIZES.leaseSeconds),
    '--for',
    `${SIZES.watchSeconds}s`,
    '-q',
    '--server',
    url,
  ]);
  const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['pipe', 'ignore', 'inherit'] });
  const resources = watchResources(child);
  child.stdin?.end(`${ids.join('\n')}\n`);
  const result = await resources.done;
  const after = await control.stats();
  const renewals = after.extendRequests - before.extendRequests;
  const cpuShare = result.cpuMs / result.wallMs;
  const lapses = after.lapses - before.lapses;
  rows.push({
    measure: `watch, ${ids.length} leases, --seconds ${SIZES.leaseSeconds}, ${SIZES.watchSeconds} s`,
    queenctl: `exit ${result.code}, ${lapses} lapses, ${(renewals / (result.wallMs / 1000)).toFixed(0)} renewals/s`,
    reference: 'zero lapses',
    ratio: '-',
    target: 'exit 0, 0 lapses',
    met: result.code === 0 && lapses === 0 ? 'yes' : 'no',
  });
  rows.push({
    measure: 'watch, CPU',
    queenctl: `${(cpuShare * 100).toFixed(1)}% of one core`,
    reference: '-',
    ratio: '-',
    target: '< 20%',
    met: cpuShare < 0.2 ? 'yes' : 'no',
  });
  rows.push({
    measure: 'watch, peak RSS',
    queenctl: `${result.peakRssMb.toFixed(0)} MB`,
    reference: '-',
    ratio: '-',
    target: '< 150 MB',
    met: result.peakRssMb < 150 ? 'yes' : 'no',
  });
  rows.push({
    measure: 'watch, least margin at renewal',
    queenctl:
      after.minMarginMs === null
        ? 'no renewal'
        : `${(after.minMarginMs / 1000).toFixed(1)} s of ${SIZES.leaseSeconds} s`,
    reference: '-',
    ratio: '-',
    target: '> 0',
    met: (after.minMarginMs ?? 0) > 0 ? 'yes' : 'no',
  });
}

// --- issue 12: watch on a slow broker, and through an outage ---------------------------------

const SCALE = quick
  ? { slowLeases: 300, slowSeconds: 6, slowForS: 6, outageLeases: 300, outageSeconds: 6, outageMs: 2_000 }
  : { slowLeases: 10_000, slowSeconds: 30, slowForS: 45, outageLeases: 10_000, outageSeconds: 30, outageMs: 10_000 };

/**
 * The most TCP connections a process held open at once, sampled: for a watch, what its pool
 * opened, which is the most requests it had in flight (a connection carries one at a time).
 */
function peakConnections(pid: number): { stop: () => number } {
  let peak = 0;
  const sample = (): void => {
    try {
      const established = new Set<string>();
      for (const table of ['tcp', 'tcp6']) {
        for (const row of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
          const fields = row.trim().split(/\s+/);
          if (fields[3] === '01') established.add(fields[9] as string);
        }
      }
      let open = 0;
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
        if (inode && established.has(inode)) open++;
      }
      peak = Math.max(peak, open);
    } catch {
      // The process has just exited: the last sample stands.
    }
  };
  const timer = setInterval(sample, 200);
  return {
    stop: () => {
      clearInterval(timer);
      return peak;
    },
  };
}

async function benchWatchSlowBroker(url: string, control: SimulatorControl): Promise<void> {
  const { slowLeases, slowSeconds, slowForS } = SCALE;
  await control.inject({ kind: 'latency', ms: 100 });
  try {
    const ids = await mintMany(control, slowLeases, slowSeconds);
    const before = await control.stats();
    const argv = pinned(0, [
      process.execPath,
      BIN,
      'lease',
      'watch',
      '-',
      '--seconds',
      String(slowSeconds),
      '--for',
      `${slowForS}s`,
      '-q',
      '--server',
      url,
    ]);
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['pipe', 'ignore', 'inherit'] });
    const resources = watchResources(child);
    const connections = peakConnections(child.pid as number);
    child.stdin?.end(`${ids.join('\n')}\n`);
    const result = await resources.done;
    const reached = connections.stop();
    const after = await control.stats();
    const lapses = after.lapses - before.lapses;
    const perSecond = (after.extendRequests - before.extendRequests) / (result.wallMs / 1000);
    rows.push({
      measure: `watch, ${slowLeases} leases, --seconds ${slowSeconds}, 100 ms broker, ${slowForS} s`,
      queenctl: `exit ${result.code}, ${lapses} lapses, ${perSecond.toFixed(0)} renewals/s, up to ${reached} in flight`,
      reference: '16 in flight: 160 renewals/s',
      ratio: `${(perSecond / 160).toFixed(1)}x`,
      target: 'exit 0, 0 lapses',
      met: result.code === 0 && lapses === 0 ? 'yes' : 'no',
    });
    rows.push({
      measure: 'watch, 100 ms broker, CPU and peak RSS',
      queenctl: `${((result.cpuMs / result.wallMs) * 100).toFixed(1)}% of one core, ${result.peakRssMb.toFixed(0)} MB`,
      reference: '-',
      ratio: '-',
      target: '-',
      met: '-',
    });
  } finally {
    await control.clearFaults();
  }
}

async function benchWatchOutage(url: string, control: SimulatorControl): Promise<void> {
  const { outageLeases, outageSeconds, outageMs } = SCALE;
  const front = await startTcpFront({ host: '127.0.0.1', port: Number(new URL(url).port) });
  try {
    const ids = await mintMany(control, outageLeases, outageSeconds);
    const before = await control.stats();
    const argv = pinned(0, [
      process.execPath,
      BIN,
      'lease',
      'watch',
      '-',
      '--seconds',
      String(outageSeconds),
      '-o',
      'ndjson',
      '-v',
      '--server',
      front.url,
    ]);
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
    child.stdin?.end(`${ids.join('\n')}\n`);
    // Read as they come: the trace of thousands of renewals is not kept.
    let refused = 0;
    let errTail = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      const text = errTail + chunk;
      const end = text.lastIndexOf('\n') + 1;
      refused += text.slice(0, end).match(/ECONNREFUSED/g)?.length ?? 0;
      errTail = text.slice(end);
    });
    let recovered: { at: number; leases: number } | null = null;
    const renewedAfter = new Set<string>();
    let allRenewedAt: number | null = null;
    let outTail = '';
    let firstRenewed: () => void = () => {};
    const started = new Promise<void>((resolve) => (firstRenewed = resolve));
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      const text = outTail + chunk;
      const end = text.lastIndexOf('\n') + 1;
      for (const line of text.slice(0, end).split('\n')) {
        if (!line) continue;
        const event = JSON.parse(line) as { event: string; leaseId?: string; at: string; leases?: number };
        if (event.event === 'recovered') recovered = { at: Date.parse(event.at), leases: event.leases ?? 0 };
        if (event.event !== 'renewed' || event.leaseId === undefined) continue;
        firstRenewed();
        if (recovered === null || allRenewedAt !== null) continue;
        renewedAfter.add(event.leaseId);
        if (renewedAfter.size >= (recovered as { leases: number }).leases) allRenewedAt = Date.parse(event.at);
      }
      outTail = text.slice(end);
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    await started;
    // The next renewals fall due a third of the lease after the first ones: be down when they do.
    await delay((outageSeconds * 1000) / 3 - 1_000);
    const refusedBefore = refused;
    await front.refuse(outageMs);
    const attempts = refused - refusedBefore;
    for (let waited = 0; allRenewedAt === null && waited < 20_000; waited += 100) await delay(100);
    child.kill('SIGINT');
    const code = await exited;
    const lapses = (await control.stats()).lapses - before.lapses;
    const waiting = (recovered as { leases: number } | null)?.leases ?? 0;
    const recoveredAt = (recovered as { at: number } | null)?.at ?? null;
    const renewAllS =
      recoveredAt === null || allRenewedAt === null
        ? 'not all'
        : `${((allRenewedAt - recoveredAt) / 1000).toFixed(1)} s`;
    rows.push({
      measure: `watch, outage of ${outageMs / 1000} s under ${outageLeases} leases`,
      queenctl:
        `${attempts} connection attempts during it, ` +
        `${waiting} waiting renewed in ${renewAllS} after it, ${lapses} lapses`,
      reference: 'before: ~1,300 attempts/s for 2,000 leases',
      ratio: '-',
      target: 'a few dozen attempts, 0 lapses',
      met: code === 130 && attempts <= 50 && lapses === 0 && allRenewedAt !== null ? 'yes' : 'no',
    });
  } finally {
    await front.close();
  }
}

function table(): string {
  const head: Row = {
    measure: 'measure',
    queenctl: 'queenctl',
    reference: 'reference (same run)',
    ratio: 'ratio',
    target: 'target',
    met: 'met',
    node: 'node',
  };
  const keys = Object.keys(head) as Array<keyof Row>;
  const line = (row: Row): string => `| ${keys.map((key) => row[key] ?? process.version).join(' | ')} |`;
  return [line(head), `| ${keys.map(() => '---').join(' | ')} |`, ...rows.map(line)].join('\n');
}

const sim = await startSimulator();
try {
  const only = flags.only?.split(',');
  if (!only || only.includes('startup')) await benchStartup(sim.url, sim.control);
  // The standalone executable (scripts/bench-exe.ts): built first, except by a quick run that
  // finds one already built (npm run test:exe's smoke run). Left out of a quick run unless named.
  if (only ? only.includes('exe') : !quick) {
    const leaseId = await sim.control.mint({ seconds: 86_400 });
    rows.push(...benchExe({ url: sim.url, leaseId, runs: quick ? 3 : 15, pinned, build: !quick }));
  }
  if (!only || only.includes('bulk')) await benchBulk(sim.url, sim.control);
  if (!only || only.includes('watch')) await benchWatch(sim.url, sim.control);
  if (!only || only.includes('scale')) {
    // Each on a simulator of its own: leases of the other rows expiring meanwhile are not its lapses.
    for (const bench of [benchWatchSlowBroker, benchWatchOutage]) {
      const own = await startSimulator();
      try {
        await bench(own.url, own.control);
      } finally {
        own.stop();
      }
    }
  }
} finally {
  sim.stop();
}

const machine = [
  `${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} CPUs, Node ${process.version}`,
  canPin ? ', pinned with taskset' : ', not pinned (no taskset)',
  hasCurl ? '' : ', no curl: curl rows skipped',
].join('');
const quickNote = quick ? "Quick run (smoke test sizes; the figures are not the targets' measurements). " : '';
const report = `${table()}\n\n${quickNote}Machine: ${machine}. ${new Date().toISOString().slice(0, 10)}.\n`;
process.stdout.write(report);
if (flags.out) writeFileSync(flags.out, report);
