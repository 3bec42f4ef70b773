/**
 * `lease watch` at scale, on a fake clock against a fake broker: concurrency that adapts to a
 * slow broker, least time left first, the can't-keep-up warning, the outage breaker (few
 * requests and two events for an outage of thousands of leases) and Retry-After. Thousands of
 * leases over minutes of fake time, no real waiting.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RequestOptions } from '../../src/broker/client.js';
import type { Renewal } from '../../src/broker/contract.js';
import { BrokerError } from '../../src/exit.js';
import { cannotKeepUpWarning, eventWords, outageStillWords, spinnerText } from '../../src/output/watch.js';
import { capacityNeed } from '../../src/renewal/concurrency.js';
import type { WatchEvent } from '../../src/renewal/events.js';
import {
  RenewalScheduler,
  defaultEveryMs,
  type WatchStatus,
  type WatchSummary,
  type WatchTiming,
} from '../../src/renewal/scheduler.js';
import { FakeClock, fakeRenewal, runFor } from '../support/fakes.js';

const S = 1000;

interface Call {
  leaseId: string;
  /** Local ms since the start. */
  at: number;
  /** The lease's expiry on the broker when the request came, ms since the start; null when unknown. */
  expiresAt: number | null;
  /** Requests in flight at the broker when it came, this one included. */
  inFlight: number;
}

type Outage = { from: number; to: number } & (
  | { kind: 'refused' }
  | { kind: 'hang' }
  | { kind: 'status'; status: number; retryAfterMs?: number }
);

/**
 * A broker on the fake clock: renews as docs/broker.md#later-of-rule says (the later of the current
 * expiry and now + seconds, live leases only), answers in `latencyMs(inFlight)`, and can be
 * down for everyone (`outages`) or fail for one lease (`faults`).
 */
class FakeBroker {
  readonly calls: Call[] = [];
  readonly expiries = new Map<string, number>();
  readonly start: number;
  latencyMs: (inFlight: number) => number = () => 5;
  outages: Outage[] = [];
  /** Failures for one lease: the next `times` requests for it fail with `error`. */
  readonly faults = new Map<string, { times: number; error: () => BrokerError }>();
  inFlight = 0;
  maxInFlight = 0;
  readonly lapses = new Set<string>();

  constructor(readonly clock: FakeClock) {
    this.start = clock.now();
  }

  elapsed(): number {
    return this.clock.now() - this.start;
  }

  mint(leaseId: string, seconds: number): void {
    this.expiries.set(leaseId, this.clock.now() + seconds * S);
  }

  /**
   * A lease held by the watch whose expiry is behind the clock lapsed. Once true that stays true
   * while the watch holds the lease (an expiry moves only when a live lease is renewed), so the
   * harness checks each lease as the watch lets it go (lost, stopped) and every lease still held
   * at the end of each advance: every lapse a periodic check would see, and the short ones too.
   */
  checkLapses(held: Iterable<string>): void {
    for (const leaseId of held) {
      const expiresAt = this.expiries.get(leaseId);
      if (expiresAt !== undefined && expiresAt <= this.clock.now()) this.lapses.add(leaseId);
    }
  }

  callsBetween(from: number, to: number): Call[] {
    return this.calls.filter((call) => call.at >= from && call.at < to);
  }

  private outageNow(): Outage | undefined {
    const t = this.elapsed();
    return this.outages.find((outage) => t >= outage.from && t < outage.to);
  }

  readonly client = {
    extend: async (leaseId: string, seconds: number, options: RequestOptions = {}): Promise<Renewal> => {
      const timeoutMs = options.timeoutMs ?? 10_000;
      const expiresAt = this.expiries.get(leaseId);
      this.inFlight++;
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
      this.calls.push({
        leaseId,
        at: this.elapsed(),
        expiresAt: expiresAt === undefined ? null : expiresAt - this.start,
        inFlight: this.inFlight,
      });
      try {
        const outage = this.outageNow();
        if (outage?.kind === 'refused') throw new BrokerError('cannot reach the broker: connection refused', true);
        if (outage?.kind === 'status') {
          throw new BrokerError(`HTTP ${outage.status}`, true, undefined, outage.status, outage.retryAfterMs);
        }
        if (outage?.kind === 'hang') {
          // No answer until the outage ends or the request's timeout passes, whichever comes first
          // (the outages are fixed before the watch starts): one sleep, not one every 10 ms.
          const sentAt = this.elapsed();
          await this.clock.sleep(Math.min(outage.to - sentAt, timeoutMs), options.signal);
          if (this.elapsed() - sentAt >= timeoutMs) throw new BrokerError(`no answer within ${timeoutMs}ms`, true);
        }
        const fault = this.faults.get(leaseId);
        if (fault && fault.times > 0) {
          fault.times--;
          throw fault.error();
        }
        const latencyMs = this.latencyMs(this.inFlight);
        // The fake clock's sleep takes its listener off the signal itself (what pauseUnless adds for a
        // real clock): a promise fewer per renewal, each one costly under the test runner's hooks.
        if (latencyMs > 0) await this.clock.sleep(latencyMs, options.signal);
        // A broker that went down meanwhile does not answer what it had: the connection is cut.
        if (this.outageNow()?.kind === 'refused') throw new BrokerError('the connection was reset', true);
        return this.renew(leaseId, seconds);
      } finally {
        this.inFlight--;
      }
    },
  };

  private renew(leaseId: string, seconds: number): Renewal {
    const now = this.clock.now();
    const current = this.expiries.get(leaseId);
    const live = current !== undefined && current > now;
    if (current !== undefined && !live) this.lapses.add(leaseId);
    const expiresAtMs = live ? Math.max(current, now + seconds * S) : null;
    if (live) this.expiries.set(leaseId, expiresAtMs as number);
    return fakeRenewal(leaseId, expiresAtMs, now);
  }
}

interface Harness {
  broker: FakeBroker;
  scheduler: RenewalScheduler;
  events: WatchEvent[];
  warnings: Array<{ at: number; text: string }>;
  done: Promise<WatchSummary>;
  /** Moves fake time on from wake-up to wake-up, letting the scheduler run at each. */
  advance(ms: number): Promise<void>;
  of<K extends WatchEvent['event']>(kind: K): Array<Extract<WatchEvent, { event: K }>>;
  /** Ms since the start of an event. */
  when(event: WatchEvent): number;
  stop(): Promise<WatchSummary>;
}

/** The watch as `lease watch` runs it without --concurrency: from 16, adapting up to 256. */
const ADAPTIVE = { concurrency: 16, maxConcurrency: 256, concurrencyGiven: false };

function harness(
  count: number,
  timing: Partial<WatchTiming> & { seconds: number },
  setup: (broker: FakeBroker) => void = () => {},
  leaseSeconds: (index: number) => number = () => timing.seconds,
): Harness {
  const clock = new FakeClock();
  const broker = new FakeBroker(clock);
  setup(broker);
  const ids = Array.from({ length: count }, (_, i) => `lease-${i}`);
  for (const [i, id] of ids.entries()) broker.mint(id, leaseSeconds(i));
  const events: WatchEvent[] = [];
  const warnings: Array<{ at: number; text: string }> = [];
  const held = new Set(ids);
  const scheduler = new RenewalScheduler(
    ids,
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
      warn: (text) => warnings.push({ at: broker.elapsed(), text }),
      cannotKeepUp: (shortfall) => warnings.push({ at: broker.elapsed(), text: cannotKeepUpWarning(shortfall) }),
    },
  );
  const done = scheduler.run();
  return {
    broker,
    scheduler,
    events,
    warnings,
    done,
    async advance(ms) {
      await runFor(clock, ms, undefined, 10);
      broker.checkLapses(held);
    },
    of: (kind) => events.filter((event) => event.event === kind) as never,
    when: (event) => Date.parse(event.at) - broker.start,
    async stop() {
      scheduler.stop('for');
      return done;
    },
  };
}

const renewedLeases = (h: Harness): Set<string> => new Set(h.of('renewed').map((event) => event.leaseId));

describe('watch at scale: a slow broker', () => {
  it('3,000 leases with 20 s left, answers in 150 ms, default flags: all renewed, none lost or lapsed', async () => {
    const h = harness(3_000, { seconds: 20, ...ADAPTIVE }, (broker) => (broker.latencyMs = () => 150));
    await h.advance(60 * S);
    assert.equal(h.of('lost').length, 0);
    assert.deepEqual([...h.broker.lapses], []);
    assert.equal(renewedLeases(h).size, 3_000);
    // 16 at 150 ms give 107 renewals/s; 3,000 leases every 6.7 s need 450/s.
    assert.ok(h.broker.maxInFlight > 64, `adapted: at most ${h.broker.maxInFlight} in flight`);
    assert.ok(h.broker.maxInFlight <= 256);
    assert.deepEqual(h.warnings, [], 'no warning: the ceiling is enough');
    const summary = await h.stop();
    assert.equal(summary.held, 3_000);
  });

  it('at a fixed --concurrency 16 the same cannot keep up: said within seconds, naming the flag, once', async () => {
    const h = harness(3_000, { seconds: 20, concurrency: 16 }, (broker) => (broker.latencyMs = () => 150));
    await h.advance(60 * S);
    assert.equal(h.broker.maxInFlight, 16);
    assert.equal(h.warnings.length, 1, JSON.stringify(h.warnings));
    const [warning] = h.warnings;
    assert.ok((warning?.at ?? Number.POSITIVE_INFINITY) < 2 * S, `warned at ${warning?.at} ms`);
    assert.match(warning?.text ?? '', /cannot keep up: 3000 leases renewed every 6.7s need 450 renewals\/s/);
    assert.match(warning?.text ?? '', /broker gives about 107\/s at --concurrency 16 \(150ms a renewal\)/);
    assert.match(warning?.text ?? '', /raise --concurrency \(now 16\), raise --seconds/);
    assert.ok(h.of('lost').length > 0, 'and leases were lost: the warning was right');
    await h.stop();
  });

  it('a broker that queues past 64 requests: concurrency settles near 64 and every lease is kept', async () => {
    // Latency grows with what is in flight beyond 64: more requests buy no more renewals.
    const h = harness(3_000, { seconds: 30, ...ADAPTIVE }, (broker) => {
      broker.latencyMs = (inFlight) => 50 + Math.max(0, inFlight - 64) * 5;
    });
    await h.advance(90 * S);
    assert.equal(h.of('lost').length, 0);
    assert.deepEqual([...h.broker.lapses], []);
    const late = h.broker.calls.filter((call) => call.at > 30 * S);
    const inFlight = late.map((call) => call.inFlight).sort((a, b) => a - b);
    const p90 = inFlight[Math.floor(inFlight.length * 0.9)] as number;
    assert.ok(p90 <= 110, `in flight after the ramp, 90th percentile: ${p90}`);
    await h.stop();
  });

  it('renewals wait for a slot least time left first', async () => {
    // Leases with 100, 40, 70 and 30 s left on the broker: renewed for 30 s they keep the longer
    // expiry (the later-of rule), so at the second renewal, all due at once, their deadlines differ.
    const lefts = [100, 40, 70, 30];
    const h = harness(
      4,
      { seconds: 30, everyMs: 10 * S, concurrency: 1 },
      (broker) => (broker.latencyMs = () => (broker.elapsed() < 5 * S ? 0 : 200)),
      (i) => lefts[i] as number,
    );
    await h.advance(12 * S);
    assert.deepEqual(
      h.broker.callsBetween(0, 1).map((call) => call.leaseId),
      ['lease-0', 'lease-1', 'lease-2', 'lease-3'],
      'before the first renewal nothing is known: in the order given',
    );
    const second = h.broker.callsBetween(10 * S, 12 * S).map((call) => call.leaseId);
    assert.deepEqual(second, ['lease-3', 'lease-1', 'lease-2', 'lease-0']);
    await h.stop();
  });
});

describe('watch at scale: an outage is the broker’s, not each lease’s', () => {
  const outageFacts = (h: Harness, from: number, to: number) => {
    const during = h.events.filter((event) => h.when(event) >= from && h.when(event) < to);
    return {
      calls: h.broker.callsBetween(from, to),
      eventsDuring: during.filter((event) => event.event !== 'renewed'),
    };
  };

  it('2,000 leases, the broker refusing for 6 s from the start: few requests, two events, all renewed', async () => {
    const h = harness(2_000, { seconds: 30, ...ADAPTIVE }, (broker) => {
      broker.outages = [{ from: 0, to: 6 * S, kind: 'refused' }];
    });
    await h.advance(20 * S);
    const { calls, eventsDuring } = outageFacts(h, 0, 6 * S);
    assert.ok(calls.length <= 30, `${calls.length} requests during the outage`);
    assert.ok(eventsDuring.length <= 5, JSON.stringify(eventsDuring));
    const [outage] = h.of('outage');
    assert.equal(h.of('outage').length, 1);
    assert.deepEqual(
      { ...outage, at: undefined },
      {
        event: 'outage',
        at: undefined,
        error: 'cannot reach the broker: connection refused',
        leases: 2_000,
        remainingMs: null,
      },
    );
    const [recovered] = h.of('recovered');
    assert.equal(h.of('recovered').length, 1);
    assert.ok(
      recovered && h.when(recovered) >= 6 * S && h.when(recovered) < 8 * S,
      'found back within a probe interval',
    );
    assert.ok(recovered && recovered.downMs > 5 * S && recovered.downMs < 8 * S, `down ${recovered?.downMs} ms`);
    assert.ok(
      h.of('retry').every((event) => h.when(event) <= h.when(outage as WatchEvent)),
      'no per-lease retry once the outage is known',
    );
    assert.equal(renewedLeases(h).size, 2_000);
    assert.equal(h.of('lost').length, 0);
    assert.deepEqual([...h.broker.lapses], []);
    await h.stop();
  });

  it('the same in the middle, while renewals fall due: one probe at a time, then least time left first', async () => {
    // Answers in 50 ms: the first renewals spread over a second or two, and so do the next ones,
    // due from 10 s on; the broker goes down in the middle of them.
    const h = harness(2_000, { seconds: 30, ...ADAPTIVE }, (broker) => {
      broker.latencyMs = () => 50;
      broker.outages = [{ from: 10_500, to: 16_500, kind: 'refused' }];
    });
    await h.advance(40 * S);
    assert.ok(h.broker.callsBetween(10 * S, 10_500).length > 100, 'renewals were falling due');
    const { calls, eventsDuring } = outageFacts(h, 10_500, 16_500);
    assert.ok(calls.length <= 40, `${calls.length} requests during the outage`);
    assert.ok(eventsDuring.length <= 5, JSON.stringify(eventsDuring));
    const outage = h.of('outage')[0] as WatchEvent;
    const afterTrip = h.broker.callsBetween(h.when(outage) + 1, 16_500);
    assert.ok(afterTrip.length >= 2, 'probed');
    assert.ok(
      afterTrip.every((call) => call.inFlight === 1),
      'one probe at a time',
    );
    const [recovered] = h.of('recovered');
    assert.ok(recovered && recovered.leases > 500, `${recovered?.leases} leases waited for the broker`);
    // The waiting leases went out in deadline order: their expiries on the broker never go back.
    const burst = h.broker.callsBetween(h.when(recovered as WatchEvent), 40 * S).slice(0, recovered?.leases);
    for (let i = 1; i < burst.length; i++) {
      assert.ok(
        (burst[i]?.expiresAt as number) >= (burst[i - 1]?.expiresAt as number) - 1_000,
        `call ${i} out of order`,
      );
    }
    assert.equal(h.of('lost').length, 0);
    assert.deepEqual([...h.broker.lapses], []);
    await h.stop();
  });

  it('a broker that hangs (database down): requests time out, one outage, one probe at a time, no loss', async () => {
    const h = harness(500, { seconds: 60, ...ADAPTIVE }, (broker) => {
      broker.outages = [{ from: 35 * S, to: 60 * S, kind: 'hang' }];
    });
    await h.advance(90 * S);
    // The renewals due at 40 s hang until --timeout (10 s): then it is an outage.
    assert.equal(h.of('outage').length, 1);
    assert.match(h.of('outage')[0]?.error ?? '', /no answer within 10000ms/);
    assert.equal(h.when(h.of('outage')[0] as WatchEvent), 50 * S);
    assert.equal(h.of('recovered').length, 1);
    // What was in flight when it hung stays there; once it is known, one probe at a time.
    const probes = h.broker.callsBetween(50_001, 60 * S);
    assert.ok(probes.length >= 1 && probes.length <= 3, `${probes.length} probes`);
    assert.ok(
      probes.every((call) => call.inFlight === 1),
      'one probe at a time',
    );
    assert.equal(h.of('lost').length, 0);
    assert.deepEqual([...h.broker.lapses], []);
    await h.stop();
  });

  it('leases whose expiry passes during the outage are lost, with nothing sent for them after', async () => {
    const h = harness(20, { seconds: 10, ...ADAPTIVE }, (broker) => {
      broker.outages = [{ from: 4 * S, to: 100 * S, kind: 'refused' }];
    });
    await h.advance(20 * S);
    assert.equal(h.of('outage').length, 1);
    assert.equal(h.of('lost').length, 20);
    const lostAt = Math.max(...h.of('lost').map((event) => h.when(event)));
    assert.ok(lostAt <= 14 * S, 'each at its expiry');
    assert.ok(h.broker.calls.every((call) => call.at < 14 * S));
    assert.ok(h.of('retry').length < 3, 'no retry storm meanwhile');
    assert.equal((await h.done).lost, 20);
  });

  it('a failure of one lease that the broker does not share stays that lease’s retries', async () => {
    const h = harness(50, { seconds: 30, everyMs: 1 * S, ...ADAPTIVE }, (broker) => {
      broker.faults.set('lease-7', { times: 10, error: () => new BrokerError('the connection was reset', true) });
    });
    await h.advance(15 * S);
    assert.equal(h.of('outage').length, 0);
    const retries = h.of('retry');
    assert.ok(retries.length >= 5 && retries.every((event) => event.leaseId === 'lease-7'));
    assert.equal(h.of('lost').length, 0);
    await h.stop();
  });
});

describe('watch at scale: Retry-After', () => {
  it('a 503 or 429 with Retry-After: that lease tries again when asked, within the time it has left', async () => {
    const h = harness(3, { seconds: 30, everyMs: 10 * S, ...ADAPTIVE }, (broker) => {
      broker.faults.set('lease-0', { times: 1, error: () => new BrokerError('HTTP 503', true, undefined, 503, 3_000) });
      broker.faults.set('lease-1', { times: 1, error: () => new BrokerError('HTTP 429', true, undefined, 429, 2_000) });
      broker.faults.set('lease-2', {
        times: 1,
        error: () => new BrokerError('HTTP 503', true, undefined, 503, 60_000),
      });
    });
    await h.advance(20 * S);
    const times = (leaseId: string): number[] =>
      h.broker.calls.filter((call) => call.leaseId === leaseId).map((call) => call.at);
    assert.deepEqual(times('lease-0').slice(0, 2), [0, 3 * S]);
    assert.deepEqual(times('lease-1').slice(0, 2), [0, 2 * S]);
    assert.deepEqual(times('lease-2').slice(0, 2), [0, 15 * S], 'half the 30 s the lease had, not 60 s');
    assert.deepEqual(
      h.of('retry').map((event) => event.retryInMs),
      [3_000, 2_000, 15_000],
    );
    assert.equal(h.of('outage').length, 0, 'two failures of three leases, with an answer between');
    await h.stop();
  });

  it('an outage of 503s with Retry-After: probes wait what the broker asked', async () => {
    const h = harness(200, { seconds: 60, ...ADAPTIVE }, (broker) => {
      broker.outages = [{ from: 0, to: 12 * S, kind: 'status', status: 503, retryAfterMs: 4_000 }];
    });
    await h.advance(30 * S);
    assert.equal(h.of('outage').length, 1);
    const outageAt = h.when(h.of('outage')[0] as WatchEvent);
    const probes = h.broker.callsBetween(outageAt + 1, 12 * S).map((call) => call.at);
    assert.ok(probes.length >= 1 && probes.length <= 3, `probes at ${probes.join(', ')}`);
    for (let i = 1; i < probes.length; i++) assert.ok((probes[i] as number) - (probes[i - 1] as number) >= 4 * S);
    assert.equal(renewedLeases(h).size, 200);
    await h.stop();
  });
});

describe('watch at scale: what people see', () => {
  const at = '2026-12-02T10:00:05.000Z';

  it('the warning says how many renewals are needed, how many the broker gives, and what to change', () => {
    const text = cannotKeepUpWarning({
      ...capacityNeed(1_500, 3_000, 9, 2_250),
      everyMs: 3_000,
      givesPerSecond: 10,
      latencyMs: 200,
      ceiling: 2,
      concurrencyGiven: true,
    });
    assert.equal(
      text,
      'cannot keep up: 1500 leases renewed every 3s need 500 renewals/s (at least 222/s, or leases expire ' +
        'unrenewed), but the broker gives about 10/s at --concurrency 2 (200ms a renewal). To keep them: raise ' +
        '--concurrency (now 2), raise --seconds (longer leases need fewer renewals), or watch fewer leases per watch',
    );
    const atCeiling = cannotKeepUpWarning({
      ...capacityNeed(100_000, 10_000, 30, 7_500),
      everyMs: 10_000,
      givesPerSecond: 2_560,
      latencyMs: 100,
      ceiling: 256,
      concurrencyGiven: false,
    });
    assert.match(atCeiling, /at 256 requests in flight, the most without --concurrency/);
    assert.match(atCeiling, /--concurrency cannot go above 256, raise --seconds/);
  });

  it('an outage and its end, in one line each', () => {
    assert.equal(
      eventWords({
        event: 'outage',
        at,
        error: 'cannot reach the broker: connection refused',
        leases: 2000,
        remainingMs: 14_000,
      }),
      'the broker is down: cannot reach the broker: connection refused. 2000 leases wait for it, the first ' +
        'expires in 14s; one request at a time probes it until it answers',
    );
    assert.equal(
      eventWords({ event: 'recovered', at, downMs: 6_200, leases: 1_200 }),
      'the broker answers again after 6.2s down; renewing the 1200 leases that fell due meanwhile, ' +
        'least time left first',
    );
  });

  it('the spinner shows the outage instead of the next renewal; the log says it is still on', () => {
    const now = Date.parse(at);
    const status: WatchStatus = {
      watching: 2000,
      held: 2000,
      lost: 0,
      renewals: 4000,
      earliestDeadline: now + 12_000,
      nextRenewalAt: now,
      lastError: 'connection refused',
      lastErrorAt: now - 1_000,
      outage: { since: now - 4_000, error: 'connection refused', leases: 2000, nextProbeAt: now + 2_000 },
    };
    assert.equal(
      spinnerText(status, now, 2000, 'x'),
      '2000 leases: 2000 held, 0 lost, 4000 renewals, earliest expiry in 12s, BROKER DOWN for 4s, next probe in 2s, ' +
        'last error 1s ago: connection refused',
    );
    assert.equal(
      outageStillWords(status.outage as NonNullable<WatchStatus['outage']>, status, now),
      'the broker is still down after 4s: 2000 leases waiting, the first expires in 12s; ' +
        'last error: connection refused',
    );
  });
});
