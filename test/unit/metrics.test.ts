/**
 * `lease watch --metrics-address` on fake time (docs/metrics.md): the series follow the watch's
 * events, the probes say what the renewal loop and the leases are doing, and nothing served waits
 * on the broker. The listener is real, on loopback; the watch's time is the fake clock's.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BrokerError, UsageError } from '../../src/exit.js';
import { parseMetricsAddress } from '../../src/metrics/address.js';
import { RENDER_REUSE_MS } from '../../src/metrics/registry.js';
import { serveWatchMetrics, type WatchSource } from '../../src/metrics/watch.js';
import type { WatchStatus } from '../../src/renewal/scheduler.js';
import { FakeClock } from '../support/fakes.js';
import { sampleValue, samplesOf } from '../support/prometheus-text.js';
import { ignoresSignals, S, startWatch, type WatchHarnessOptions } from './watch-fakes.js';

/** Turns a listener that never answers into a failure, well below the runner's limit. */
const ANSWER_WITHIN_MS = 5_000;

async function get(address: string, path: string): Promise<{ status: number; body: string; type: string | null }> {
  const response = await fetch(`http://${address}${path}`, { signal: AbortSignal.timeout(ANSWER_WITHIN_MS) });
  return { status: response.status, body: await response.text(), type: response.headers.get('content-type') };
}

/** A watch on fake time serving metrics on a free loopback port; resolves once it listens. */
async function watchWithMetrics(harness: WatchHarnessOptions) {
  // Object.assign, not a spread: the harness has getters that fail when read too early.
  const w = startWatch({
    ...harness,
    options: { metricsAddress: parseMetricsAddress('127.0.0.1:0'), ...harness.options },
  });
  const started = Date.now();
  const printed = () => /serving metrics on http:\/\/(\S+)\/metrics/.exec(w.io.stderr.text);
  for (let match = printed(); ; match = printed()) {
    if (match) return Object.assign(w, { address: match[1] as string, scrape: () => scrape(match[1] as string) });
    if (Date.now() - started > ANSWER_WITHIN_MS) assert.fail(`no address printed:\n${w.io.stderr.text}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function scrape(address: string): Promise<string> {
  return (await get(address, '/metrics')).body;
}

describe('--metrics-address: what it accepts', () => {
  const good: Array<[string, string | undefined, number]> = [
    [':9464', undefined, 9464],
    ['127.0.0.1:9464', '127.0.0.1', 9464],
    ['[::1]:0', '::1', 0],
    ['localhost:65535', 'localhost', 65535],
  ];
  for (const [text, host, port] of good) {
    it(`${text}: host ${host ?? '(every interface)'}, port ${port}`, () => {
      const address = parseMetricsAddress(text);
      assert.equal(address.host, host);
      assert.equal(address.port, port);
    });
  }
  const bad: Array<[string, RegExp]> = [
    ['9464', /is not \[host\]:port/],
    ['127.0.0.1', /is not \[host\]:port/],
    [':65536', /port 65536 is out of range/],
    [':99999999', /out of range/],
    ['::1:9464', /is not \[host\]:port/],
    ['[127.0.0.1]:80', /brackets are for IPv6/],
    [':-1', /is not \[host\]:port/],
  ];
  for (const [text, message] of bad) {
    it(`${JSON.stringify(text)} is a usage error`, () => {
      assert.throws(
        () => parseMetricsAddress(text),
        (error: unknown) => error instanceof UsageError && message.test(error.message),
      );
    });
  }
});

describe('lease watch --metrics-address: the series follow the watch', () => {
  it('renewals, leases by state, the least time left; a lease lost shows, and /readyz says so', async () => {
    const w = await watchWithMetrics({ leaseIds: ['a', 'b'] });
    await w.advance(1.5 * S);
    let text = await w.scrape();
    assert.equal(sampleValue(text, 'queenctl_renewals_total', { result: 'renewed' }), 4);
    assert.equal(sampleValue(text, 'queenctl_renewals_total', { result: 'not_renewed' }), 0);
    assert.equal(sampleValue(text, 'queenctl_leases', { state: 'held' }), 2);
    assert.equal(sampleValue(text, 'queenctl_leases', { state: 'lost' }), 0);
    assert.equal(sampleValue(text, 'queenctl_broker_up'), 1);
    assert.equal(sampleValue(text, 'queenctl_renewal_duration_seconds_count'), 4);
    // The fake broker answers at once: every renewal in the first bucket, and in every one after.
    assert.equal(sampleValue(text, 'queenctl_renewal_duration_seconds_bucket', { le: '0.005' }), 4);
    assert.equal(sampleValue(text, 'queenctl_renewal_duration_seconds_bucket', { le: '+Inf' }), 4);
    // Renewed at 1s for 3s on the fake broker: 2.5s left at 1.5s.
    assert.equal(sampleValue(text, 'queenctl_lease_min_remaining_seconds'), 2.5);
    assert.deepEqual(samplesOf(text, 'queenctl_lease_remaining_seconds'), [], 'per lease only when asked');
    assert.deepEqual(samplesOf(text, 'queenctl_command_running'), [], 'no command, no series');
    assert.match(text, /^queenctl_build_info\{version="\d+\.\d+\.\d+[^"]*",node="v\d+[^"]*"\} 1$/m);
    assert.ok(sampleValue(text, 'process_cpu_seconds_total') !== undefined, "prom-client's process metrics");
    assert.equal((await get(w.address, '/readyz')).status, 200);

    w.broker.expiries.delete('b');
    await w.advance(1 * S);
    text = await w.scrape();
    assert.equal(sampleValue(text, 'queenctl_renewals_total', { result: 'not_renewed' }), 1);
    assert.equal(sampleValue(text, 'queenctl_leases', { state: 'lost' }), 1);
    assert.equal(sampleValue(text, 'queenctl_leases', { state: 'held' }), 1);
    const ready = await get(w.address, '/readyz');
    assert.equal(ready.status, 503);
    assert.match(ready.body, /1 of 2 leases lost/);
    w.signal('SIGINT');
    await w.done;
  });

  it('/readyz is 503 until every lease has been renewed once', async () => {
    const w = await watchWithMetrics({
      leaseIds: ['a', 'b'],
      setup: (broker) => broker.failOnce.set('b', transient()),
    });
    await w.advance(10);
    const early = await get(w.address, '/readyz');
    assert.equal(early.status, 503);
    assert.match(early.body, /1 of 2 leases not renewed yet/);
    await w.advance(1 * S);
    assert.equal((await get(w.address, '/readyz')).status, 200);
    w.signal('SIGINT');
    await w.done;
  });

  it('--metrics-per-lease: a series per held lease, gone once the lease is lost', async () => {
    const w = await watchWithMetrics({ leaseIds: ['a', 'b'], options: { metricsPerLease: true } });
    await w.advance(1.5 * S);
    let text = await w.scrape();
    assert.equal(sampleValue(text, 'queenctl_lease_remaining_seconds', { lease_id: 'a' }), 2.5);
    assert.equal(sampleValue(text, 'queenctl_lease_remaining_seconds', { lease_id: 'b' }), 2.5);
    w.broker.expiries.delete('b');
    await w.advance(1 * S);
    text = await w.scrape();
    assert.deepEqual(
      samplesOf(text, 'queenctl_lease_remaining_seconds').map((line) => line.split(' ')[0]),
      ['queenctl_lease_remaining_seconds{lease_id="a"}'],
    );
    w.signal('SIGINT');
    await w.done;
  });

  it('an outage: broker_up 0, the leases waiting it out, errors counted though no event reports them', async () => {
    const w = await watchWithMetrics({ leaseIds: ['a', 'b', 'c'], options: { seconds: 30, everyMs: S } });
    await w.advance(1.5 * S);
    w.broker.failure = transient();
    await w.advance(1 * S);
    assert.ok(
      w.events().some((event) => event.event === 'outage'),
      w.io.stdout.text,
    );
    const text = await w.scrape();
    assert.equal(sampleValue(text, 'queenctl_broker_up'), 0);
    assert.equal(sampleValue(text, 'queenctl_outages_total'), 1);
    assert.equal(sampleValue(text, 'queenctl_leases', { state: 'outage' }), 3);
    assert.equal(sampleValue(text, 'queenctl_leases', { state: 'held' }), 0);
    assert.ok((sampleValue(text, 'queenctl_renewals_total', { result: 'error' }) ?? 0) >= 3, text);
    w.broker.failure = null;
    await w.advance(2 * S);
    const after = await w.scrape();
    assert.equal(sampleValue(after, 'queenctl_broker_up'), 1);
    assert.equal(sampleValue(after, 'queenctl_leases', { state: 'held' }), 3);
    w.signal('SIGINT');
    await w.done;
  });

  it('retries are counted', async () => {
    const w = await watchWithMetrics({ leaseIds: ['a'], setup: (broker) => broker.failOnce.set('a', transient()) });
    await w.advance(1 * S);
    assert.equal(sampleValue(await w.scrape(), 'queenctl_retries_total'), 1);
    w.signal('SIGINT');
    await w.done;
  });

  it('a scrape while every renewal hangs on the broker answers at once: nothing served waits on it', async () => {
    const w = await watchWithMetrics({ leaseIds: ['a', 'b'], options: { seconds: 30 } });
    await w.advance(1.5 * S);
    // Held until the watch's end aborts it, as a broker whose database is down holds a request.
    w.broker.client.extend = (_leaseId, _seconds, request) =>
      new Promise((_, reject) => request?.signal?.addEventListener('abort', () => reject(request.signal?.reason)));
    await w.advance(2 * S);
    assert.equal(sampleValue(await w.scrape(), 'queenctl_leases', { state: 'held' }), 2);
    assert.equal((await get(w.address, '/readyz')).status, 200);
    assert.equal((await get(w.address, '/livez')).status, 200);
    w.signal('SIGINT');
    await w.done;
  });
});

describe('lease watch --metrics-address: the listener lives as long as the watch', () => {
  it('/livez is answered by the renewal loop while it runs; the listener is closed when the watch ends', async () => {
    const w = await watchWithMetrics({ leaseIds: ['a'], options: { forMs: 2 * S } });
    await w.advance(1 * S);
    const live = await get(w.address, '/livez');
    assert.equal(live.status, 200, live.body);
    await w.advance(2 * S);
    assert.equal(w.status(), 0);
    await assert.rejects(get(w.address, '/metrics'), 'nothing listens once the watch has ended');
  });

  it('with a command: up until the command has ended, with its state, after the loop has stopped', async () => {
    // It ignores the SIGTERM a loss sends: it runs on until SIGKILL, --kill-after (10s) later.
    const w = await watchWithMetrics({
      leaseIds: ['a'],
      options: { command: ['job'] },
      command: (command) => command.leaderReacts(ignoresSignals),
    });
    await w.advance(1.5 * S);
    assert.equal(sampleValue(await w.scrape(), 'queenctl_command_running'), 1);
    w.broker.expiries.delete('a');
    await w.advance(1 * S);
    const text = await w.scrape();
    assert.equal(sampleValue(text, 'queenctl_leases', { state: 'lost' }), 1);
    assert.equal(sampleValue(text, 'queenctl_command_running'), 1);
    const live = await get(w.address, '/livez');
    assert.equal(live.status, 503);
    assert.match(live.body, /the renewal loop is not running/);
    await w.advance(11 * S);
    assert.equal(w.status(), 4);
    await assert.rejects(get(w.address, '/metrics'));
  });
});

/** The metrics of one lease's watch, on a loopback port of its own, with no watch behind them. */
function serveMadeUp(clock: FakeClock, { everyMs, command }: { everyMs: number; command: boolean }) {
  const address = parseMetricsAddress('127.0.0.1:0');
  return serveWatchMetrics({ address, perLease: false, leaseCount: 1, everyMs, command, clock });
}

describe('/livez and the command series, on a watch made up', () => {
  const status: WatchStatus = {
    watching: 1,
    held: 1,
    lost: 0,
    renewals: 1,
    earliestDeadline: null,
    nextRenewalAt: null,
    lastError: null,
    lastErrorAt: null,
  };

  it('a loop that does not answer within a renewal interval: 503, not 200', async () => {
    const clock = new FakeClock();
    const metrics = await serveMadeUp(clock, { everyMs: 20 * S, command: false });
    let beats = 0;
    const stuck: WatchSource = { status: () => status, running: true, heartbeat: () => new Promise(() => beats++) };
    metrics.attach(stuck);
    try {
      const answer = get(metrics.address, '/livez');
      while (!clock.sleeps.includes(20 * S)) await new Promise((resolve) => setTimeout(resolve, 5));
      clock.advance(20 * S - 1);
      clock.advance(1);
      const { status: code, body } = await answer;
      assert.equal(code, 503);
      assert.match(body, /did not answer within a renewal interval \(20s\)/);
      assert.equal(beats, 1, 'the loop was asked');

      metrics.attach({ ...stuck, heartbeat: () => Promise.resolve() });
      assert.equal((await get(metrics.address, '/livez')).status, 200);
    } finally {
      await metrics.close();
    }
  });

  it('queenctl_command_exit_code appears only once the command has ended', async () => {
    const clock = new FakeClock();
    const metrics = await serveMadeUp(clock, { everyMs: S, command: true });
    try {
      const scrape = async () => {
        clock.advance(RENDER_REUSE_MS);
        return (await get(metrics.address, '/metrics')).body;
      };
      assert.equal(sampleValue(await scrape(), 'queenctl_command_running'), 0);
      assert.equal(sampleValue(await scrape(), 'queenctl_command_exit_code'), undefined);
      metrics.notice({ kind: 'started', pid: 4242 });
      assert.equal(sampleValue(await scrape(), 'queenctl_command_running'), 1);
      metrics.notice({ kind: 'exited', exit: { status: 3, code: 3, signal: null } });
      const text = await scrape();
      assert.equal(sampleValue(text, 'queenctl_command_running'), 0);
      assert.equal(sampleValue(text, 'queenctl_command_exit_code'), 3);
    } finally {
      await metrics.close();
    }
  });

  it('scrapes within 100ms of a rendering get it again: a flood of scrapes costs a few renderings', async () => {
    const clock = new FakeClock();
    const metrics = await serveMadeUp(clock, { everyMs: S, command: false });
    try {
      const renewals = async () =>
        sampleValue((await get(metrics.address, '/metrics')).body, 'queenctl_renewals_total', { result: 'renewed' });
      assert.equal(await renewals(), 0);
      metrics.attempt({ result: 'renewed', durationMs: 5 });
      clock.advance(RENDER_REUSE_MS - 1);
      assert.equal(await renewals(), 0, 'the rendering of 99ms ago');
      clock.advance(1);
      assert.equal(await renewals(), 1);
    } finally {
      await metrics.close();
    }
  });
});

function transient(): BrokerError {
  return new BrokerError('cannot reach the broker at http://broker.test: connection refused', true);
}
