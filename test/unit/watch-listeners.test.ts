/**
 * A long watch leaves no listener behind (issue 33): an hour of fake time of the renewal scheduler
 * over the real broker client (7,200 requests: a listener left per request, or per timeout or
 * refusal, would count in the hundreds at the first sample; three hours cost three times the CPU
 * and showed nothing more), some requests hanging to their deadline and some refused, and the
 * abort listeners on the signals the watch hands down stay flat. The scheduler and the client call
 * setMaxListeners(0) on these signals (many requests in flight by design), so a leak there would
 * never be warned about: this test is what says there is none.
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { describe, it } from 'node:test';
import { BrokerClient, type RequestOptions } from '../../src/broker/client.js';
import type { RawAnswer } from '../../src/broker/contract.js';
import { TransportFailure, whenEnded, type Transport, type TransportRequest } from '../../src/broker/transport.js';
import { RenewalScheduler } from '../../src/renewal/scheduler.js';
import { FakeClock, runFor } from '../support/fakes.js';

/** A sample of the listener counts every 20 minutes of fake time, three in all. */
const SAMPLE_MS = 20 * 60_000;

/** A broker on the fake clock: renews; every 7th request hangs until its end, every 11th is refused. */
class FlakyTransport implements Transport {
  sent = 0;
  constructor(private readonly clock: FakeClock) {}

  async send(request: TransportRequest): Promise<RawAnswer> {
    this.sent += 1;
    if (this.sent % 11 === 0) throw new TransportFailure('refused', 'connect ECONNREFUSED', 'ECONNREFUSED');
    if (this.sent % 7 === 0) {
      return new Promise((_, reject) => {
        whenEnded(request, reject);
      });
    }
    const leaseId = decodeURIComponent(/\/lease\/([^/]+)\/extend$/.exec(request.path)![1]!);
    const seconds = (JSON.parse(request.body ?? '{}') as { seconds: number }).seconds;
    const now = this.clock.now();
    const expiry = new Date(now + seconds * 1000).toISOString();
    return {
      status: 200,
      headers: { date: new Date(now).toUTCString() },
      body: JSON.stringify({
        leaseId,
        success: true,
        renewed: 1,
        newExpiresAt: expiry,
        expiresAt: expiry,
        lease_expires_at: expiry,
      }),
    };
  }

  async close(): Promise<void> {}
}

describe('a long watch keeps its listener counts flat', () => {
  it('an hour of 20 leases renewed every 10 s, with timeouts and refusals', async () => {
    const clock = new FakeClock();
    const transport = new FlakyTransport(clock);
    const client = new BrokerClient({
      server: 'http://a.test:6632',
      timeoutMs: 2000,
      userAgent: 'test',
      transport,
      clock,
    });
    const signals = new Set<AbortSignal>();
    const watched: Pick<BrokerClient, 'extend'> = {
      extend: (leaseId: string, seconds: number, options?: RequestOptions) => {
        if (options?.signal) signals.add(options.signal);
        return client.extend(leaseId, seconds, options);
      },
    };
    const events: string[] = [];
    const leaseIds = Array.from({ length: 20 }, (_, index) => `lease-${index}`);
    const scheduler = new RenewalScheduler(
      leaseIds,
      { seconds: 30, everyMs: 10_000, requestTimeoutMs: 2000, concurrency: 4 },
      { client: watched, clock, random: () => 0.5 },
      { event: (event) => void events.push(event.event), warn: () => {}, cannotKeepUp: () => {} },
    );
    const listeners = (): number =>
      [...signals].reduce((sum, signal) => sum + getEventListeners(signal, 'abort').length, 0);
    const done = scheduler.run();
    const samples: number[] = [];
    for (let sample = 0; sample < 3; sample++) {
      await runFor(clock, SAMPLE_MS, () => {}, 100);
      samples.push(listeners());
    }
    const sent = transport.sent;
    scheduler.stop('signal');
    await done;
    assert.ok(sent > 3 * 120 * 20 * 0.9, `renewed all along (${sent} requests)`);
    assert.ok(!events.includes('lost') && events.includes('retry'), 'retried, lost nothing');
    assert.equal(signals.size, 1, 'every request listens to the one signal of the watch');
    assert.ok(
      samples.every((count) => count <= 4),
      `at most one listener per request in flight, sample after sample: ${samples.join(', ')}`,
    );
    assert.equal(listeners(), 0, 'none once the watch has stopped');
  });
});
