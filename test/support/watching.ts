/**
 * What the end-to-end tests of a large watch share: a watch of many leases read from standard
 * input, in-process (test/e2e) or through the one process runner (test/slow, at full size, where
 * the broker and queenctl must not share one thread), its ndjson events parsed as they come,
 * and counts.
 */
import type { Simulator } from '../../tools/simulator/index.js';
import { describeRun, type ExpectedExit, startCli } from './cli.js';
import { startInProcess } from './in-process.js';
import { withSimulator as withOwnSimulator } from './shared.js';
import type { WatchEventLine } from './watch-scenario.js';

export interface Watching {
  events(): WatchEventLine[];
  /**
   * The leases renewed so far: renewedIds(events()), kept as the events come, for a wait that
   * asks after every line of thousands (a new set of all the events each time cost more than the
   * watch's own renewals).
   */
  renewed(): ReadonlySet<string>;
  stderr(): string;
  /** Resolves once `check` holds for the output so far. */
  until(check: () => boolean, what: string, timeoutMs?: number): Promise<void>;
  kill(signal: NodeJS.Signals): void;
  exited: Promise<number | null>;
}

/**
 * `exit`: how the watch must end; `exited` rejects, with both streams, on any other end or when
 * `guardMs` runs out first.
 */
export function watch(
  server: string,
  leaseIds: string[],
  args: string[],
  exit: ExpectedExit,
  guardMs = 40_000,
  runner: 'in-process' | 'process' = 'process',
): Watching {
  const argv = ['lease', 'watch', '-', '--server', server, ...args];
  const options = { stdin: `${leaseIds.join('\n')}\n`, timeoutMs: guardMs };
  const run = runner === 'in-process' ? startInProcess(argv, options) : startCli(argv, { ...options, exit });
  const exited = run.exited.then((result) => {
    const as = typeof exit === 'number' ? result.signal === null && result.code === exit : result.signal === exit;
    if (result.killed || !as) throw new Error(`lease watch: expected to end with ${exit}, got ${describeRun(result)}`);
    return result.code;
  });
  exited.catch(() => {
    // Awaiting it still rejects; an unawaited one must not crash the run.
  });
  let parsed = 0;
  const seen: WatchEventLine[] = [];
  const renewed = new Set<string>();
  const events = (): WatchEventLine[] => {
    // Parsed as it comes: the output of thousands of leases is re-read many times.
    const stdout = run.stdout();
    const end = stdout.lastIndexOf('\n') + 1;
    for (const line of stdout.slice(parsed, end).split('\n')) {
      if (!line) continue;
      const event = JSON.parse(line) as WatchEventLine;
      seen.push(event);
      if (event.event === 'renewed') renewed.add(event.leaseId as string);
    }
    parsed = end;
    return seen;
  };
  return {
    events,
    renewed() {
      events();
      return renewed;
    },
    stderr: () => run.stderr(),
    async until(check, what, timeoutMs = 20_000) {
      await run.until(() => (check() ? true : undefined), what, timeoutMs);
    },
    kill: (signal) => run.kill(signal),
    exited,
  };
}

export function mintMany(sim: Simulator, count: number, seconds: number): string[] {
  return Array.from({ length: count }, () => sim.mint({ seconds }));
}

export const count = (events: WatchEventLine[], kind: string): number => events.filter((e) => e.event === kind).length;
export const renewedIds = (events: WatchEventLine[]): Set<string> =>
  new Set(events.filter((e) => e.event === 'renewed').map((e) => e.leaseId as string));
/** Connection attempts the broker refused, as the client's -v trace tells them. */
export const refusedAttempts = (stderr: string): number => stderr.match(/ECONNREFUSED/g)?.length ?? 0;

/** Runs a scenario against a simulator of its own, with no tokens, keeping its last 100 requests. */
export const withSimulator = (scenario: (sim: Simulator) => Promise<void>): Promise<void> =>
  withOwnSimulator(scenario, { tokens: null, logLimit: 100 });
