/**
 * What the scenario tests of `lease watch` read of a run, in-process (test/e2e/watch.test.ts) or
 * a process (test/process/watch.test.ts) alike: its ndjson events, parsed as they come, and waits
 * for an event or a line on stderr. (The large watches, read as counts: test/support/watching.ts.)
 */
import type { Simulator } from '../../tools/simulator/index.js';
import { withSimulator as withOwnSimulator } from './shared.js';

export interface WatchEventLine {
  event: string;
  leaseId?: string;
  at: string;
  [key: string]: unknown;
}

/** The events and waits of one run of `lease watch`. */
export interface WatchScenario<Exit> {
  stdout: () => string;
  stderr: () => string;
  /** Parsed ndjson events on stdout so far. */
  events: () => WatchEventLine[];
  /** Resolves once an event matching `match` was printed; fails the test after `timeoutMs`. */
  waitFor(match: (event: WatchEventLine) => boolean, timeoutMs?: number): Promise<WatchEventLine>;
  waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<void>;
  exited: Promise<Exit>;
}

/** The handle either runner returns (test/support/in-process.ts, test/support/cli.ts). */
interface RunHandle<Exit> {
  stdout(): string;
  stderr(): string;
  until<T>(check: () => T | undefined, what: string, timeoutMs?: number): Promise<T>;
  waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exited: Promise<Exit>;
}

export function watchScenario<Exit>(run: RunHandle<Exit>): WatchScenario<Exit> {
  const events = (): WatchEventLine[] =>
    run
      .stdout()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as WatchEventLine);
  return {
    stdout: () => run.stdout(),
    stderr: () => run.stderr(),
    events,
    waitFor: (match, timeoutMs = 30_000) => run.until(() => events().find(match), 'an event', timeoutMs),
    waitForStderr: async (pattern, timeoutMs = 30_000) => {
      await run.waitForStderr(pattern, timeoutMs);
    },
    exited: run.exited,
  };
}

/** Runs a scenario against a simulator of its own, with no tokens, which keeps every request it gets. */
export const withSimulator = (scenario: (sim: Simulator) => Promise<void>): Promise<void> =>
  withOwnSimulator(scenario, { tokens: null });
