/**
 * The renewal scheduler of `lease watch` on a fake clock against a fake broker: every rule of
 * its schedule and its fault handling, at full scale in fake time (no real waiting).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RequestOptions } from '../../src/broker/client.js';
import type { Renewal } from '../../src/broker/contract.js';
import { AuthError, BrokerError } from '../../src/exit.js';
import type { WatchEvent } from '../../src/renewal/events.js';
import { localDeadline } from '../../src/broker/broker-clock.js';
import { MinHeap, type HeapItem } from '../../src/renewal/heap.js';
import {
  RenewalScheduler,
  defaultEveryMs,
  nextRenewalAt,
  safetyMarginMs,
  type WatchSummary,
  type WatchTiming,
} from '../../src/renewal/scheduler.js';
import { cannotKeepUpWarning } from '../../src/output/watch.js';
import { FakeClock, fakeRenewal, runFor } from '../support/fakes.js';

const S = 1000;

type OutageKind = 'refused' | 'hang';
type Outage = { from: number; to: number; kind: OutageKind };

interface Call {
  leaseId: string;
  /** Local time the request was sent, ms since the start of the test. */
  at: number;
  timeoutMs: number;
}

/**
 * A broker on the fake clock: renews as docs/broker.md#later-of-rule says (the later of the current
 * expiry and brokerNow + seconds, live leases only), with its own clock offset, a latency,
 * outages that refuse at once or hang until the request's timeout, and a lapse detector.
 */
class FakeBroker {
  readonly calls: Call[] = [];
  readonly expiries = new Map<string, number>();
  readonly start: number;
  offsetMs = 0;
  latencyMs = 0;
  /** Expiry written this far behind the Date header: a database not in UTC. */
  expirySkewMs = 0;
  outages: Outage[] = [];
  refuseAuth = false;
  permanentError: BrokerError | null = null;
  inFlight = 0;
  maxInFlight = 0;
  lapses: string[] = [];

  constructor(readonly clock: FakeClock) {
    this.start = clock.now();
  }

  brokerNow(): number {
    return this.clock.now() + this.offsetMs;
  }

  elapsed(): number {
    return this.clock.now() - this.start;
  }

  mint(leaseId: string, seconds: number): string {
    this.expiries.set(leaseId, this.brokerNow() + seconds * S);
    return leaseId;
  }

  release(leaseId: string): void {
    this.expiries.delete(leaseId);
  }

  /**
   * A lease held by the watch whose expiry is behind the broker's clock lapsed. Once true that
   * stays true while the watch holds the lease (an expiry moves only when a live lease is renewed;
   * a test releases one only between advances), so the harness checks each lease as the watch lets
   * it go (lost, stopped) and every lease still held at the end of each advance: every lapse a
   * check at each wake-up would see.
   */
  checkLapses(held: Iterable<string>): void {
    for (const leaseId of held) {
      const expiresAt = this.expiries.get(leaseId);
      if (expiresAt !== undefined && expiresAt <= this.brokerNow() && !this.lapses.includes(leaseId))
        this.lapses.push(leaseId);
    }
  }

  private outageNow(): Outage | undefined {
    const t = this.elapsed();
    return this.outages.find((o) => t >= o.from && t < o.to);
  }

  readonly client = {
    extend: async (leaseId: string, seconds: number, options: RequestOptions = {}): Promise<Renewal> => {
      const timeoutMs = options.timeoutMs ?? 10_000;
      this.calls.push({ leaseId, at: this.elapsed(), timeoutMs });
      this.inFlight++;
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
      try {
        const outage = this.outageNow();
        if (outage?.kind === 'refused') throw new BrokerError('cannot reach the broker: connection refused', true);
        if (outage?.kind === 'hang') {
          // An older broker with its database down: no answer until the database is back (the
          // outages are fixed before the watch starts) or the request's timeout, whichever is first.
          const sentAt = this.elapsed();
          await this.clock.sleep(Math.min(outage.to - sentAt, timeoutMs), options.signal);
          if (this.elapsed() - sentAt >= timeoutMs) throw new BrokerError(`no answer within ${timeoutMs}ms`, true);
        }
        // The fake clock's sleep takes its listener off the signal itself (what pauseUnless adds for a
        // real clock): a promise fewer per renewal, each one costly under the test runner's hooks.
        if (this.latencyMs > 0) await this.clock.sleep(this.latencyMs, options.signal);
        if (this.refuseAuth)
          throw new AuthError('the broker refused the renewal (HTTP 403: Insufficient permissions)', 403);
        if (this.permanentError) throw this.permanentError;
        return this.renew(leaseId, seconds);
      } finally {
        this.inFlight--;
      }
    },
  };

  private renew(leaseId: string, seconds: number): Renewal {
    const now = this.brokerNow();
    const current = this.expiries.get(leaseId);
    const live = current !== undefined && current > now;
    if (current !== undefined && !live && !this.lapses.includes(leaseId)) this.lapses.push(leaseId);
    const expiresAtMs = live ? Math.max(current, now + seconds * S) : null;
    if (live) this.expiries.set(leaseId, expiresAtMs as number);
    return fakeRenewal(leaseId, expiresAtMs === null ? null : expiresAtMs - this.expirySkewMs, now);
  }
}

interface Harness {
  clock: FakeClock;
  broker: FakeBroker;
  scheduler: RenewalScheduler;
  events: WatchEvent[];
  warnings: string[];
  done: Promise<WatchSummary>;
  summary: () => WatchSummary | null;
  /** Moves fake time on from wake-up to wake-up, letting the scheduler run at each. */
  advance(ms: number): Promise<void>;
  of(kind: WatchEvent['event']): WatchEvent[];
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function harness(
  leases: Array<{ id: string; seconds?: number }>,
  timing: Partial<WatchTiming> & { seconds: number },
  setup: (broker: FakeBroker) => void = () => {},
): Harness {
  const clock = new FakeClock();
  const broker = new FakeBroker(clock);
  setup(broker);
  for (const lease of leases) broker.mint(lease.id, lease.seconds ?? timing.seconds);
  const events: WatchEvent[] = [];
  const warnings: string[] = [];
  const held = new Set(leases.map((lease) => lease.id));
  const scheduler = new RenewalScheduler(
    leases.map((lease) => lease.id),
    { everyMs: defaultEveryMs(timing.seconds), requestTimeoutMs: 10_000, concurrency: 16, ...timing },
    { client: broker.client, clock, random: () => 1 },
    {
      event: (event) => {
        events.push(event);
        if (event.event === 'lost' || event.event === 'stopped') {
          broker.checkLapses([event.leaseId]);
          held.delete(event.leaseId);
        }
      },
      warn: (text) => warnings.push(text),
      cannotKeepUp: (shortfall) => warnings.push(cannotKeepUpWarning(shortfall)),
    },
  );
  let summary: WatchSummary | null = null;
  const done = scheduler.run().then((result) => (summary = result));
  return {
    clock,
    broker,
    scheduler,
    events,
    warnings,
    done,
    summary: () => summary,
    async advance(ms) {
      await runFor(clock, ms);
      broker.checkLapses(held);
    },
    of: (kind) => events.filter((event) => event.event === kind),
  };
}

const renewalTimes = (h: Harness, leaseId = 'a'): number[] =>
  h.broker.calls.filter((call) => call.leaseId === leaseId).map((call) => call.at);

describe('watch scheduler: when it renews', () => {
  it('renews at once, then every --every on a fixed grid', async () => {
    const h = harness([{ id: 'a' }], { seconds: 30, everyMs: 10 * S });
    await h.advance(35 * S);
    assert.deepEqual(renewalTimes(h), [0, 10 * S, 20 * S, 30 * S]);
    assert.equal(h.of('renewed').length, 4);
    h.scheduler.stop('for');
    await h.done;
  });

  it('defaults --every to a third of --seconds', async () => {
    assert.equal(defaultEveryMs(60), 20 * S);
    const h = harness([{ id: 'a' }], { seconds: 3 });
    await h.advance(3.5 * S);
    assert.deepEqual(renewalTimes(h), [0, 1 * S, 2 * S, 3 * S]);
    h.scheduler.stop('for');
    await h.done;
  });

  it('never renews later than the expiry less the safety margin, whatever --every says', async () => {
    const h = harness([{ id: 'a' }], { seconds: 8, everyMs: 60 * S });
    await h.advance(20 * S);
    const margin = safetyMarginMs(8);
    assert.equal(margin, 2 * S);
    assert.deepEqual(renewalTimes(h), [0, 6 * S, 12 * S, 18 * S]);
    assert.deepEqual(h.broker.lapses, []);
    h.scheduler.stop('for');
    await h.done;
  });

  it('takes the reported expiry when later than now + seconds, measured through the Date header', async () => {
    // The lease had 100 s left; renewing for 30 s leaves it there (the later-of rule), so the
    // next renewal may wait the whole --every of 60 s.
    const h = harness([{ id: 'a', seconds: 100 }], { seconds: 30, everyMs: 60 * S });
    await h.advance(61 * S);
    assert.deepEqual(renewalTimes(h), [0, 60 * S]);
    const [first] = h.of('renewed');
    assert.ok(
      first && first.event === 'renewed' && first.remainingMs > 95 * S && first.remainingMs <= 100 * S,
      JSON.stringify(first),
    );
    assert.deepEqual(h.broker.lapses, []);
    h.scheduler.stop('for');
    await h.done;
  });

  it('a late wake-up (a stalled event loop) renews at once, and the grid does not drift', async () => {
    const h = harness([{ id: 'a' }], { seconds: 30, everyMs: 10 * S });
    await h.advance(10 * S);
    // The event loop stalls: the timer due at 20 s fires at 35 s.
    h.clock.advance(25 * S);
    await flush();
    await h.advance(16 * S);
    assert.deepEqual(renewalTimes(h), [0, 10 * S, 35 * S, 40 * S, 50 * S]);
    assert.deepEqual(h.broker.lapses, []);
    h.scheduler.stop('for');
    await h.done;
  });

  it('slow answers do not push the grid later', async () => {
    const h = harness([{ id: 'a' }], { seconds: 30, everyMs: 10 * S }, (broker) => (broker.latencyMs = 700));
    await h.advance(41 * S);
    assert.deepEqual(renewalTimes(h), [0, 10 * S, 20 * S, 30 * S, 40 * S]);
    h.scheduler.stop('for');
    await h.done;
  });

  it('nextRenewalAt: the next slot of the grid after now, capped, never in the past', () => {
    assert.equal(nextRenewalAt(0, 10, 3, 100), 10);
    assert.equal(nextRenewalAt(0, 10, 25, 100), 30, 'missed slots are skipped, not made up in a burst');
    assert.equal(nextRenewalAt(0, 10, 3, 7), 7, 'the deadline less the margin comes first');
    assert.equal(nextRenewalAt(0, 10, 9, 5), 9, 'a cap already passed means at once');
  });
});

describe('watch scheduler: a broker clock far from the local one', () => {
  for (const offsetMs of [3_600_000, -3_600_000]) {
    const which = offsetMs > 0 ? 'an hour ahead' : 'an hour behind';
    it(`broker clock ${which}: renews on schedule, no flood, no false loss`, async () => {
      const h = harness([{ id: 'a' }], { seconds: 30, everyMs: 10 * S }, (broker) => (broker.offsetMs = offsetMs));
      await h.advance(300 * S);
      assert.equal(h.of('lost').length, 0);
      assert.equal(h.broker.calls.length, 31, 'one renewal per 10 s for 300 s');
      for (const event of h.of('renewed')) {
        assert.ok(
          event.event === 'renewed' && event.remainingMs > 25 * S && event.remainingMs <= 30 * S,
          JSON.stringify(event),
        );
      }
      assert.deepEqual(h.broker.lapses, []);
      h.scheduler.stop('for');
      await h.done;
    });
  }

  it('a database writing expiries 5 h behind its Date header: warned once, no false loss', async () => {
    const h = harness(
      [{ id: 'a' }],
      { seconds: 30, everyMs: 10 * S },
      (broker) => (broker.expirySkewMs = 5 * 3_600_000),
    );
    await h.advance(60 * S);
    assert.equal(h.of('lost').length, 0);
    assert.equal(h.broker.calls.length, 7);
    assert.equal(h.warnings.length, 1);
    assert.match(h.warnings[0] ?? '', /time zone/);
    h.scheduler.stop('for');
    await h.done;
  });
});

describe('watch scheduler: a database writing expiries hours ahead of its Date header', () => {
  it('an expiry moved by a renewal counts as now + seconds: an outage ends in a loss at the real one', async () => {
    // A database in UTC+5 writing local time with a Z: every expiry reads 5 h late. The first
    // answer cannot tell that from a lease with 5 h left; the second one moves the expiry, which
    // only a renewal to brokerNow + seconds does.
    const h = harness([{ id: 'a' }], { seconds: 10, everyMs: 3 * S }, (broker) => {
      broker.expirySkewMs = -5 * 3_600_000;
      broker.outages = [{ from: 4 * S, to: 100 * S, kind: 'refused' }];
    });
    await h.advance(20 * S);
    const lost = h.of('lost');
    assert.equal(lost.length, 1, 'the loss is declared, not put off by 5 h');
    assert.equal(Date.parse(lost[0]?.at ?? '') - h.broker.start, 13 * S, 'when the real expiry passed: 3 s + 10 s');
    assert.equal((await h.done).lost, 1);
  });
});

describe('watch scheduler: faults', () => {
  it('retries a transient failure with exponential backoff, each wait at most half the time left', async () => {
    const h = harness([{ id: 'a' }], { seconds: 10, everyMs: 5 * S }, (broker) => {
      broker.outages = [{ from: 5 * S, to: 8 * S, kind: 'refused' }];
    });
    await h.advance(12 * S);
    const retries = h.of('retry').map((event) => (event.event === 'retry' ? event : null));
    // From 5 s, with the lease lasting until 10 s: backoff 250, 500, 1000, 2000 ms (full jitter
    // pinned high), but never more than half of what is left.
    assert.deepEqual(
      retries.map((event) => event?.attempt),
      [1, 2, 3, 4],
    );
    assert.deepEqual(
      retries.map((event) => event?.retryInMs),
      [250, 500, 1000, 1625],
    );
    for (const event of retries)
      assert.ok(event && event.remainingMs !== null && event.retryInMs <= event.remainingMs / 2);
    assert.deepEqual(renewalTimes(h), [0, 5000, 5250, 5750, 6750, 8375, 10000]);
    assert.equal(h.of('lost').length, 0);
    assert.deepEqual(h.broker.lapses, []);
    h.scheduler.stop('for');
    await h.done;
  });

  it("cuts each request's timeout to the time the lease has left, then declares it lost at its expiry", async () => {
    const h = harness([{ id: 'a' }], { seconds: 6, everyMs: 2 * S, requestTimeoutMs: 10 * S }, (broker) => {
      broker.outages = [{ from: 1 * S, to: 60 * S, kind: 'hang' }];
    });
    await h.advance(8 * S);
    const [first, hung] = h.broker.calls;
    assert.equal(first?.timeoutMs, 6 * S, 'before the first renewal: the budget of one lease');
    assert.equal(hung?.at, 2 * S);
    assert.equal(hung?.timeoutMs, 4 * S, 'the lease had 4 s left, not the 10 s of --timeout');
    for (const call of h.broker.calls)
      assert.ok(call.at + call.timeoutMs <= 6 * S, `a request may not outlive the lease: ${JSON.stringify(call)}`);
    const lost = h.of('lost');
    assert.equal(lost.length, 1);
    assert.ok(lost[0]?.event === 'lost' && lost[0].reason === 'expired');
    assert.equal(Date.parse(lost[0].at) - h.broker.start, 6 * S, 'declared when the expiry passed, not later');
    assert.match(lost[0].detail ?? '', /no answer within/);
    assert.equal((await h.done).lost, 1);
  });

  it('declares a lease lost as soon as the broker renews nothing', async () => {
    const h = harness([{ id: 'a' }, { id: 'b' }], { seconds: 30, everyMs: 10 * S });
    await h.advance(12 * S);
    h.broker.release('a');
    await h.advance(10 * S);
    const lost = h.of('lost');
    assert.equal(lost.length, 1);
    assert.ok(lost[0]?.event === 'lost' && lost[0].leaseId === 'a' && lost[0].reason === 'not-renewed');
    assert.equal(Date.parse(lost[0].at) - h.broker.start, 20 * S, 'at the next renewal: within one interval');
    assert.deepEqual(renewalTimes(h, 'a'), [0, 10 * S, 20 * S]);
    await h.advance(10 * S);
    assert.deepEqual(renewalTimes(h, 'b'), [0, 10 * S, 20 * S, 30 * S], 'the other lease goes on');
    h.scheduler.stop('for');
    const summary = await h.done;
    assert.deepEqual({ held: summary.held, lost: summary.lost }, { held: 1, lost: 1 });
  });

  it('declares a lease lost when its expiry passes during an outage, and sends nothing after', async () => {
    const h = harness([{ id: 'a' }], { seconds: 10, everyMs: 3 * S }, (broker) => {
      broker.outages = [{ from: 1 * S, to: 100 * S, kind: 'refused' }];
    });
    await h.advance(15 * S);
    const lost = h.of('lost');
    assert.equal(lost.length, 1);
    assert.equal(Date.parse(lost[0]?.at ?? '') - h.broker.start, 10 * S);
    assert.ok(h.broker.calls.every((call) => call.at < 10 * S));
    assert.ok(h.of('retry').length >= 5);
    const summary = await h.done;
    assert.equal(summary.lost, 1);
  });

  it('a refused token stops every lease at once', async () => {
    const h = harness(
      [{ id: 'a' }, { id: 'b' }, { id: 'c' }],
      { seconds: 30, everyMs: 10 * S },
      (broker) => (broker.refuseAuth = true),
    );
    await h.advance(15 * S);
    const summary = await h.done;
    assert.ok(summary.refused instanceof AuthError);
    assert.equal(h.broker.calls.length, 3, 'no retry of a refusal');
    assert.deepEqual(
      h.of('stopped').map((event) => event.event === 'stopped' && event.reason),
      ['error', 'error', 'error'],
    );
  });

  it("before the first renewal, a broker error that will not pass ends the lease's watch at once", async () => {
    const h = harness(
      [{ id: 'a' }],
      { seconds: 30 },
      (broker) => (broker.permanentError = new BrokerError('no lease route (HTTP 404)', false, 'check --server', 404)),
    );
    await h.advance(1 * S);
    const summary = await h.done;
    assert.equal(summary.failed, 1);
    assert.equal(h.broker.calls.length, 1);
    assert.deepEqual(h.scheduler.failure, {
      leaseId: 'a',
      message: 'no lease route (HTTP 404)',
      hint: 'check --server',
    });
  });

  it('after the first renewal, any broker error is retried while the lease has time', async () => {
    const h = harness([{ id: 'a' }], { seconds: 30, everyMs: 10 * S });
    await h.advance(5 * S);
    h.broker.permanentError = new BrokerError('the broker answered HTTP 404', false, undefined, 404);
    await h.advance(8 * S);
    h.broker.permanentError = null;
    await h.advance(10 * S);
    assert.ok(h.of('retry').length >= 3);
    assert.equal(h.of('lost').length, 0);
    h.scheduler.stop('for');
    await h.done;
  });
});

describe('watch scheduler: done when a 60-second lease survives a 20-second outage without a lapse', () => {
  // Every phase of the outage against the 20 s renewal grid, for both kinds of outage; fake
  // time at full scale (seconds 60, --every default 20 s, --timeout 10 s).
  for (const kind of ['refused', 'hang'] as const) {
    it(`outage of kind ${kind}, starting anywhere in the renewal interval`, async () => {
      for (let startMs = 20 * S; startMs < 40 * S; startMs += 2_500) {
        const h = harness([{ id: 'a' }], { seconds: 60 }, (broker) => {
          broker.outages = [{ from: startMs, to: startMs + 20 * S, kind }];
        });
        await h.advance(150 * S);
        const at = `outage ${startMs}..${startMs + 20 * S} ms`;
        assert.deepEqual(h.broker.lapses, [], at);
        assert.equal(h.of('lost').length, 0, at);
        const during = h.broker.calls.filter((call) => call.at >= startMs && call.at < startMs + 20 * S);
        assert.ok(during.length > 0, `${at}: a renewal met the outage`);
        if (kind === 'refused') assert.ok(h.of('retry').length > 0, `${at}: and was retried`);
        const last = h.of('renewed').at(-1);
        assert.ok(last && Date.parse(last.at) - h.broker.start > startMs + 20 * S, `${at}: renewed after the outage`);
        h.scheduler.stop('for');
        await h.done;
      }
    });
  }
});

describe('watch scheduler: many leases', () => {
  it('keeps the number of requests in flight within --concurrency', async () => {
    const ids = Array.from({ length: 50 }, (_, i) => ({ id: `lease-${i}` }));
    const h = harness(ids, { seconds: 30, everyMs: 10 * S, concurrency: 4 }, (broker) => (broker.latencyMs = 100));
    await h.advance(25 * S);
    assert.equal(h.broker.maxInFlight, 4);
    assert.equal(h.of('lost').length, 0);
    assert.ok(h.scheduler.everyLeaseRenewed);
    h.scheduler.stop('for');
    await h.done;
  });

  it('10,000 leases for a minute: no lapse, one renewal per lease per interval', async (t) => {
    const ids = Array.from({ length: 10_000 }, (_, i) => ({ id: `lease-${i}` }));
    const h = harness(ids, { seconds: 30, everyMs: 10 * S, concurrency: 16 }, (broker) => (broker.latencyMs = 5));
    // The work done, counted, not timed: a verdict on CPU time would depend on the machine.
    const cpu = process.cpuUsage();
    // A minute is six intervals: the burst at the start and five rounds in the steady state that
    // follows (a second minute only repeats them).
    await h.advance(60 * S);
    assert.equal(h.of('lost').length, 0);
    assert.deepEqual(h.broker.lapses, []);
    // At once and then every 10 s for 60 s: 7 per lease at most, 6 at least (the first
    // renewals of 10,000 leases through 16 slots take about 3 s).
    const perLease = h.broker.calls.length / ids.length;
    assert.ok(perLease >= 6 && perLease <= 7, `renewals per lease: ${perLease}`);
    h.scheduler.stop('for');
    await h.done;
    // One timer per request and a few more (63,144 for 60,016 requests when this was written): a
    // scheduler that woke per lease, or polled, would set many more.
    const sleeps = h.clock.sleeps.length;
    assert.ok(sleeps <= h.broker.calls.length * 1.1, `${sleeps} timers for ${h.broker.calls.length} requests`);
    const { user, system } = process.cpuUsage(cpu);
    t.diagnostic(`${Math.round((user + system) / 1000)} ms of CPU for ${h.broker.calls.length} renewals`);
  });
});

describe('watch scheduler: stopping', () => {
  it('stop() aborts the requests in flight and reports every lease still watched', async () => {
    const h = harness([{ id: 'a' }, { id: 'b' }], { seconds: 30 }, (broker) => {
      broker.outages = [{ from: 0, to: 100 * S, kind: 'hang' }];
    });
    await h.advance(1 * S);
    h.scheduler.stop('signal');
    const summary = await h.done;
    assert.deepEqual(
      h.of('stopped').map((event) => event.event === 'stopped' && [event.leaseId, event.reason]),
      [
        ['a', 'signal'],
        ['b', 'signal'],
      ],
    );
    assert.equal(h.broker.inFlight, 0);
    assert.equal(summary.lost, 0);
  });
});

describe('brokerClock.localDeadline: where a renewed lease expires on the local clock, erring early', () => {
  const renewal = (expiresAtMs: number, brokerDateMs: number): Renewal => ({
    result: { leaseId: 'a', success: true, renewed: 1, newExpiresAt: null, expiresAt: null, lease_expires_at: null },
    shape: 'documented',
    reason: null,
    expiresAtMs,
    brokerDateMs,
  });
  const sentAt = 1_000_000;

  it('sent at + seconds, whatever the two clocks say: the broker renewed after the request left', () => {
    for (const offset of [0, 3_600_000, -3_600_000]) {
      const brokerNow = sentAt + offset;
      assert.equal(localDeadline(renewal(brokerNow + 30_000, brokerNow), 30, sentAt, null), sentAt + 30_000);
    }
  });

  it('a longer reported expiry is placed through the Date header, assuming it lags by up to 2 s', () => {
    const brokerNow = sentAt + 3_600_000;
    assert.equal(localDeadline(renewal(brokerNow + 100_000, brokerNow), 30, sentAt, null), sentAt + 98_000);
  });

  it('an expiry that moved since the last renewal is brokerNow + seconds, however far it reads', () => {
    const brokerNow = sentAt;
    assert.equal(
      localDeadline(
        renewal(brokerNow + 5 * 3_600_000 + 30_000, brokerNow),
        30,
        sentAt,
        brokerNow + 5 * 3_600_000 + 20_000,
      ),
      sentAt + 30_000,
    );
  });
});

describe('MinHeap', () => {
  it('pops in order through pushes, updates and removals', () => {
    let seed = 42;
    const random = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const heap = new MinHeap<HeapItem & { id: number }>();
    const items = Array.from({ length: 500 }, (_, id) => ({ id, wakeAt: 0, heapIndex: -1 }));
    for (const item of items) heap.update(item, Math.floor(random() * 1000));
    for (const item of items.slice(0, 200)) heap.update(item, Math.floor(random() * 1000));
    for (const item of items.slice(200, 300)) heap.remove(item);
    const popped: number[] = [];
    for (let item = heap.pop(); item; item = heap.pop()) popped.push(item.wakeAt);
    assert.equal(popped.length, 400);
    assert.deepEqual(
      popped,
      [...popped].sort((a, b) => a - b),
    );
    assert.ok(items.every((item) => item.heapIndex === -1));
  });
});
