/**
 * What the reliability suite shares: running queenctl's command line in this process, and the
 * checks every failure must pass (its exit code, one line of reason on stderr, no stack trace,
 * nothing on stdout a script could take for success). The same through the real binary, as a
 * shell sees it: test/process/exit-codes.test.ts.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { StdinLike } from '../../src/args.js';
import { BrokerClient } from '../../src/broker/client.js';
import { DEFAULT_RETRY } from '../../src/broker/retry.js';
import { systemClock, type Clock } from '../../src/clock.js';
import { runExtend } from '../../src/commands/lease/extend.js';
import { runInspect } from '../../src/commands/lease/inspect.js';
import type { OutputFormat } from '../../src/output/format.js';
import { bufferIO } from '../support/fakes.js';
import { makeTransport, type TransportName } from '../support/transports.js';
import { type InProcessOptions, type InProcessResult, runInProcess } from '../support/in-process.js';

/** queenctl's whole command line (arguments, environment, exit code), run in this process. */
export function runQueenctl(args: string[], options: InProcessOptions = {}): Promise<InProcessResult> {
  return runInProcess(args, options);
}

/** A loopback port nothing listens on: bound, then released. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Neither a JavaScript stack nor Node's own crash report. */
export function assertNoStackTrace(stderr: string): void {
  assert.doesNotMatch(stderr, /^\s+at \S.*(:\d+:\d+\)?|<anonymous>\)?)$/m, `a stack trace on stderr:\n${stderr}`);
  assert.doesNotMatch(
    stderr,
    /node:internal|Node\.js v\d|Uncaught|internal error|Error \[ERR_|\w+Error: /,
    `a crash report on stderr:\n${stderr}`,
  );
}

/**
 * One line that says what happened, `queenctl: ...`, and at most one indented hint under it.
 * (Runs with --retries 0, so no retry notices come before it.)
 */
export function assertOneLineReason(stderr: string, reason: RegExp): void {
  assertNoStackTrace(stderr);
  const lines = stderr.replace(/\n$/, '').split('\n');
  assert.ok(lines.length >= 1 && lines.length <= 2, `one reason and at most one hint, got:\n${stderr}`);
  assert.match(lines[0] ?? '', /^queenctl: \S/, `the reason starts with "queenctl: ":\n${stderr}`);
  assert.match(lines[0] ?? '', reason);
  if (lines[1] !== undefined) assert.match(lines[1], /^ {2}\S/, `the hint is indented under the reason:\n${stderr}`);
}

/** Records of a json/ndjson stdout, whichever it is. */
export function records(stdout: string): Array<Record<string, unknown>> {
  const text = stdout.trim();
  if (text === '') return [];
  if (text.startsWith('[')) return JSON.parse(text) as Array<Record<string, unknown>>;
  return text.split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
}

export function describeResult(result: Pick<InProcessResult, 'stdout' | 'stderr'> & { code: number | null }): string {
  const { code, stdout, stderr } = result;
  return `exit ${code}\n--- stdout\n${stdout.slice(0, 2000)}\n--- stderr\n${stderr.slice(0, 2000)}`;
}

/** What a verb run in this process leaves: its exit code and its two streams. */
export interface VerbResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface VerbRunOptions {
  retries?: number;
  timeoutMs?: number;
  format?: OutputFormat;
  stdin?: string | null | StdinLike;
  /** Retry backoff waits on this clock (default: real time). */
  clock?: Clock;
  /**
   * The broker client's deadlines run on this clock (default: real time). A FakeClock makes
   * `timeoutMs` a deadline that passes only when the test moves it: no verdict of a row then
   * depends on how fast the machine answers.
   */
  clientClock?: Clock;
  /** Called as each request the transport sent has its answer or its failure. */
  onSettled?: () => void;
  signal?: AbortSignal;
  concurrency?: number;
  /** The transport the requests go over (default undici, as `-` runs use). */
  transport?: TransportName;
  token?: string;
}

/**
 * Runs `extend` or `inspect` in this process, the way globals.ts wires them: the real broker
 * client over loopback (over either transport), buffers for the streams. The fault matrix runs
 * here (a process per row would cost half a second each); a subset also runs as a process
 * (faults.test.ts).
 */
export async function runVerb(
  verb: 'extend' | 'inspect',
  leaseIds: string[],
  server: string,
  options: VerbRunOptions = {},
): Promise<VerbResult> {
  const { stdin = null } = options;
  const io = typeof stdin === 'string' || stdin === null ? bufferIO({ stdin }) : { ...bufferIO(), stdin };
  const transport = makeTransport(options.transport ?? 'undici', { connections: options.concurrency ?? 16 });
  const { onSettled } = options;
  const client = new BrokerClient({
    server,
    timeoutMs: options.timeoutMs ?? 10_000,
    userAgent: 'queenctl/test',
    ...(options.token !== undefined && { token: options.token }),
    ...(options.clientClock && { clock: options.clientClock }),
    transport: onSettled
      ? {
          send: (request) => {
            const answer = transport.send(request);
            answer.then(onSettled, onSettled);
            return answer;
          },
          close: () => transport.close(),
        }
      : transport,
  });
  const runtime = {
    io,
    client,
    clock: options.clock ?? systemClock,
    signal: options.signal ?? new AbortController().signal,
  };
  const common = {
    leaseIds,
    retry: { ...DEFAULT_RETRY, retries: options.retries ?? 0 },
    concurrency: options.concurrency ?? 16,
    format: options.format ?? 'json',
    noHeaders: false,
  };
  try {
    const code =
      verb === 'extend' ? await runExtend({ ...common, seconds: 60 }, runtime) : await runInspect(common, runtime);
    return { code, stdout: io.stdout.text, stderr: io.stderr.text };
  } finally {
    await client.close();
  }
}
