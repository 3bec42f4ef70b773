/**
 * A signal's exit status, decided in one place (exit.ts) and returned by the verbs themselves:
 * 129 for SIGHUP, 130 for SIGINT, 143 for SIGTERM (docs/cli-contract.md#exit-codes). cli.ts
 * only turns SIGHUP into the abort a verb sees; the end to end tests send the real signals.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Renewal } from '../../src/broker/contract.js';
import { runExtend } from '../../src/commands/lease/extend.js';
import { runList } from '../../src/commands/lease/list.js';
import { ExitCode, runExitCode, signalExitCode } from '../../src/exit.js';
import { bufferIO, instantClock } from '../support/fakes.js';

const SIGNALS = [
  ['SIGHUP', 129],
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const;

/** A request that waits until the signal, then fails with its name, as the real client does. */
const untilAborted = (signal: AbortSignal): Promise<never> =>
  new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));

describe('signal status', () => {
  it('is 128 + the signal number, and outranks every outcome of a run', () => {
    for (const [signal, code] of SIGNALS) {
      assert.equal(signalExitCode(signal), code);
      assert.equal(runExitCode(new Set([ExitCode.Auth, ExitCode.Broker, ExitCode.NotHeld, code])), code);
    }
  });

  for (const [signal, code] of SIGNALS) {
    it(`extend stopped by ${signal} while a renewal waits: exit ${code}, said on stderr, stdout empty`, async () => {
      const controller = new AbortController();
      const io = bufferIO();
      const client = {
        server: 'http://broker.test',
        extend: (_leaseId: string, _seconds: number, options?: { signal?: AbortSignal }): Promise<Renewal> =>
          untilAborted(options?.signal as AbortSignal),
      };
      const run = runExtend(
        {
          leaseIds: ['a'],
          seconds: 60,
          retry: { retries: 2, baseDelayMs: 10, maxDelayMs: 10 },
          // Room for more than one: the run reads to the end of its ids while the request waits.
          concurrency: 4,
          format: 'json',
          noHeaders: false,
        },
        { io, client, clock: instantClock, signal: controller.signal },
      );
      // Once the one id is sent and nothing is left to read: the signal finds only the wait.
      setTimeout(() => controller.abort(signal), 20);
      assert.equal(await run, code);
      assert.equal(io.stdout.text, '');
      assert.match(io.stderr.text, /interrupted before the broker answered; lease a may or may not be held/);
    });

    it(`list stopped by ${signal} while the listing waits: exit ${code}, nothing listed, no crash`, async () => {
      const controller = new AbortController();
      const io = bufferIO();
      const client = {
        consumerGroups: (options: { signal: AbortSignal }) => untilAborted(options.signal),
        consumerGroup: (_group: string, options: { signal: AbortSignal }) => untilAborted(options.signal),
        extend: (_leaseId: string, _seconds: number, options?: { signal?: AbortSignal }): Promise<Renewal> =>
          untilAborted(options?.signal as AbortSignal),
      };
      const run = runList(
        {
          groups: [],
          queues: [],
          partitions: [],
          all: false,
          expiry: false,
          expiringWithinMs: undefined,
          retry: { retries: 2, baseDelayMs: 10, maxDelayMs: 10 },
          concurrency: 4,
          format: 'json',
          noHeaders: false,
        },
        { io, client, clock: instantClock, signal: controller.signal },
      );
      setImmediate(() => controller.abort(signal));
      assert.equal(await run, code);
      assert.equal(io.stdout.text, '');
      assert.equal(io.stderr.text, 'queenctl: interrupted before the listing was complete; nothing was listed\n');
    });
  }
});
