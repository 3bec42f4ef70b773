import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PartitionHolder } from '../../src/broker/consumer-groups.js';
import {
  type ListEvent,
  listChanges,
  runListWatch,
  type ListWatchOptions,
} from '../../src/commands/lease/list-watch.js';
import type { ListClient, ListRecord } from '../../src/commands/lease/list.js';
import { AuthError, BrokerError } from '../../src/exit.js';
import { resolveFormat } from '../../src/output/format.js';
import { bufferIO, FakeClock } from '../support/fakes.js';

const holder = (leaseId: string | null, partition: string, group = 'billing', leaseActive = true): PartitionHolder => ({
  group,
  queue: 'orders',
  partition,
  leaseId,
  leaseActive,
});

const record = (leaseId: string, partitions: string[], live = true): ListRecord => ({
  leaseId,
  consumerGroup: 'billing',
  queue: 'orders',
  partitions,
  live,
});

describe('lease list --watch: what changed', () => {
  it('names new holders added, holders whose partitions or liveness differ changed, gone ones removed', () => {
    const before = new Map(
      [record('A', ['p1']), record('B', ['p2']), record('C', ['p3'])].map((r) => [
        JSON.stringify([r.leaseId, r.consumerGroup, r.queue]),
        r,
      ]),
    );
    const now = [record('A', ['p1']), record('B', ['p2', 'p4']), record('D', ['p5'])];
    assert.deepEqual(
      listChanges(before, now).map((event) => [event.event, event.leaseId]),
      [
        ['changed', 'B'],
        ['added', 'D'],
        ['removed', 'C'],
      ],
    );
    assert.deepEqual(listChanges(before, [record('A', ['p1'], false), record('B', ['p2']), record('C', ['p3'])]), [
      { event: 'changed', ...record('A', ['p1'], false) },
    ]);
    assert.deepEqual(listChanges(new Map(), []), []);
  });
});

/**
 * A broker whose group `billing` holds what `polls` says, one entry per listing (the last one
 * repeats); an Error entry is how that listing fails.
 */
function changingBroker(polls: Array<PartitionHolder[] | Error>) {
  let listed = 0;
  const client: ListClient = {
    extend: async () => {
      throw new Error('list --watch never renews');
    },
    consumerGroups: async () => {
      const now = polls[Math.min(listed, polls.length - 1)] as PartitionHolder[] | Error;
      listed++;
      if (now instanceof Error) throw now;
      return [{ group: 'billing', queue: 'orders' }];
    },
    consumerGroup: async () => {
      const now = polls[Math.min(listed - 1, polls.length - 1)] as PartitionHolder[];
      return now;
    },
  };
  return { client, listed: () => listed };
}

async function watchList(
  polls: Array<PartitionHolder[] | Error>,
  options: { output?: string; stopAfterPolls: number; signal?: 'SIGINT' | 'SIGTERM'; quiet?: boolean },
) {
  const clock = new FakeClock();
  const io = bufferIO({ quiet: options.quiet ?? false });
  const controller = new AbortController();
  const { client, listed } = changingBroker(polls);
  const watchOptions: ListWatchOptions = {
    groups: [],
    queues: [],
    partitions: [],
    all: false,
    expiry: false,
    expiringWithinMs: undefined,
    retry: { retries: 2, baseDelayMs: 10, maxDelayMs: 10 },
    concurrency: 4,
    format: await resolveFormat(options.output ?? 'ndjson', false),
    noHeaders: false,
    intervalMs: 2000,
  };
  // Settled at once: a run that fails on its first poll must not be an unhandled rejection.
  const run = runListWatch(watchOptions, { io, client, clock, signal: controller.signal }).then(
    (code) => ({ code, error: null }),
    (error: unknown) => ({ code: null, error }),
  );
  // Let each poll finish, then move the clock to the next one.
  for (let poll = 1; poll < options.stopAfterPolls; poll++) {
    await new Promise((resolve) => setImmediate(resolve));
    clock.advance(2000);
  }
  await new Promise((resolve) => setImmediate(resolve));
  controller.abort(options.signal ?? 'SIGINT');
  const { code, error } = await run;
  if (error) throw error;
  return { code, io, polls: listed() };
}

const events = (text: string): Array<[string, string]> =>
  text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const event = JSON.parse(line) as ListEvent;
      return [event.event, event.leaseId];
    });

describe('lease list --watch', () => {
  it('prints the current holders as added, then only changes, one record plus "event" a line', async () => {
    const { code, io, polls } = await watchList(
      [
        [holder('A', 'p1'), holder('B', 'p2')],
        [holder('A', 'p1'), holder('B', 'p2')],
        [holder('A', 'p1'), holder('B', 'p2'), holder('B', 'p3'), holder('C', 'p4')],
        [holder('B', 'p2'), holder('B', 'p3'), holder('C', 'p4'), holder(null, 'p1')],
      ],
      { stopAfterPolls: 4 },
    );
    assert.equal(code, 130, 'SIGINT stops it as it stops watch');
    assert.equal(polls, 4);
    assert.deepEqual(events(io.stdout.text), [
      ['added', 'A'],
      ['added', 'B'],
      ['changed', 'B'],
      ['added', 'C'],
      ['removed', 'A'],
    ]);
    const first = JSON.parse(io.stdout.text.split('\n')[0] as string);
    assert.deepEqual(first, { event: 'added', ...record('A', ['p1']) }, 'the record as lease list -o json prints it');
  });

  it('goes on through broker faults: one line when it cannot list, one when it can again', async () => {
    const down = new BrokerError('cannot reach the broker at http://broker:6632: connection refused', true);
    const { io } = await watchList([[holder('A', 'p1')], down, down, down, [holder('B', 'p2')]], {
      stopAfterPolls: 6,
    });
    const lines = io.stderr.text.trim().split('\n');
    assert.equal(lines.length, 2, io.stderr.text);
    assert.match(lines[0] as string, /cannot be listed: cannot reach the broker.*trying again every 2s/);
    assert.match(lines[1] as string, /answers again after 6s/);
    assert.deepEqual(events(io.stdout.text), [
      ['added', 'A'],
      ['added', 'B'],
      ['removed', 'A'],
    ]);
  });

  it('stops on SIGTERM with 143, and a refused token with exit 3', async () => {
    assert.equal((await watchList([[holder('A', 'p1')]], { stopAfterPolls: 2, signal: 'SIGTERM' })).code, 143);
    const refused = new AuthError('the broker refused the credentials (HTTP 401)', 401);
    await assert.rejects(watchList([refused], { stopAfterPolls: 1 }), (error: unknown) => {
      return error instanceof AuthError && error.exitCode === 3;
    });
  });

  it('applies -o jsonpath= to each event, one line an event', async () => {
    const { io } = await watchList([[holder('A', 'p1')], [holder('A', 'p1'), holder('A', 'p2')]], {
      output: 'jsonpath={.event} {.leaseId} {.partitions}',
      stopAfterPolls: 2,
    });
    assert.equal(io.stdout.text, 'added A ["p1"]\nchanged A ["p1","p2"]\n');
  });

  it('-o name prints the ids of leases as they are added', async () => {
    const { io } = await watchList([[holder('A', 'p1')], [holder('B', 'p2')]], { output: 'name', stopAfterPolls: 2 });
    assert.equal(io.stdout.text, 'A\nB\n');
  });

  it('on a terminal, the table grows: a header once, then one row per change', async () => {
    const { io } = await watchList([[holder('A', 'p1')], [holder('A', 'p1'), holder('B', 'p2')], []], {
      output: 'table',
      stopAfterPolls: 3,
    });
    const lines = io.stdout.text.trimEnd().split('\n');
    assert.match(lines[0] as string, /^EVENT +LEASE ID +GROUP +QUEUE +PARTITIONS +LIVE$/);
    assert.deepEqual(
      lines.slice(1).map((line) => line.split(/ +/).slice(0, 2)),
      [
        ['added', 'A'],
        ['added', 'B'],
        ['removed', 'A'],
        ['removed', 'B'],
      ],
    );
    for (const removed of lines.slice(3)) assert.match(removed, /NO$/, 'a removed row is not live');
  });

  it('a removed record is live: false in JSON too', async () => {
    const { io } = await watchList([[holder('A', 'p1')], []], { stopAfterPolls: 2 });
    const removed = JSON.parse(io.stdout.text.trim().split('\n')[1] as string);
    assert.deepEqual(removed, { event: 'removed', ...record('A', ['p1'], false) });
  });
});
