/**
 * `lease run --metrics-address` (src/metrics/run.ts, docs/metrics.md "Series of lease run"): the
 * series follow what the run reports, /readyz follows the last pop, /livez answers while the
 * process does, and a scrape is one `promtool check metrics` finds nothing to say about (where
 * promtool is installed). The listener is real, on loopback; time is a fake clock's.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { parseMetricsAddress } from '../../src/metrics/address.js';
import { RENDER_REUSE_MS } from '../../src/metrics/registry.js';
import { type RunMetrics, serveRunMetrics } from '../../src/metrics/run.js';
import { FakeClock } from '../support/fakes.js';
import { sampleValue, samplesOf } from '../support/prometheus-text.js';

/** Turns a listener that never answers into a failure, well below the runner's limit. */
const ANSWER_WITHIN_MS = 5_000;
/** promtool answers in well under a second; this only turns a hang into a failure. */
const PROMTOOL_WITHIN_MS = 30_000;

async function get(address: string, path: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`http://${address}${path}`, { signal: AbortSignal.timeout(ANSWER_WITHIN_MS) });
  return { status: response.status, body: await response.text() };
}

/** The metrics of a run made up, on a free loopback port, closed when `body` is done. */
async function withRunMetrics(
  body: (metrics: RunMetrics, scrape: () => Promise<string>) => Promise<void>,
  parallel = 4,
): Promise<void> {
  const clock = new FakeClock();
  const metrics = await serveRunMetrics({ address: parseMetricsAddress('127.0.0.1:0'), clock, parallel });
  // Past the rendering reused for 100ms: each scrape renders what the run reported until then.
  const scrape = async (): Promise<string> => {
    clock.advance(RENDER_REUSE_MS);
    return (await get(metrics.address, '/metrics')).body;
  };
  try {
    await body(metrics, scrape);
  } finally {
    await metrics.close();
  }
}

describe('lease run --metrics-address: the series', () => {
  it('before anything happened: every counter at 0 for every label value, the gauges, no command yet', () =>
    withRunMetrics(async (metrics, scrape) => {
      assert.match(metrics.address, /^127\.0\.0\.1:\d+$/);
      const text = await scrape();
      assert.equal(sampleValue(text, 'queenctl_run_batches_total'), 0);
      for (const status of ['completed', 'retry', 'failed', 'dlq'])
        assert.equal(sampleValue(text, 'queenctl_run_messages_total', { status }), 0, status);
      for (const result of ['batch', 'empty', 'held', 'error'])
        assert.equal(sampleValue(text, 'queenctl_run_pops_total', { result }), 0, result);
      assert.equal(sampleValue(text, 'queenctl_run_leases_lost_total'), 0);
      assert.equal(sampleValue(text, 'queenctl_run_in_flight'), 0);
      assert.equal(sampleValue(text, 'queenctl_run_parallel'), 4);
      assert.equal(sampleValue(text, 'queenctl_run_broker_up'), 0);
      assert.equal(sampleValue(text, 'queenctl_run_command_seconds_count'), 0);
      assert.equal(sampleValue(text, 'queenctl_run_command_seconds_bucket', { le: '+Inf' }), 0);
      assert.match(text, /^queenctl_build_info\{version="[^"]+",node="v\d+[^"]*"\} 1$/m);
      assert.ok(sampleValue(text, 'process_cpu_seconds_total') !== undefined, "prom-client's process metrics");
      // The watch's series are a watch's: a run serves none of them.
      assert.deepEqual(samplesOf(text, 'queenctl_renewals_total'), []);
      assert.deepEqual(samplesOf(text, 'queenctl_leases'), []);
    }));

  it('batches, messages by status, lost leases, pops by result, the commands running and their time', () =>
    withRunMetrics(async (metrics, scrape) => {
      metrics.pop('batch');
      metrics.batchTaken();
      metrics.pop('batch');
      metrics.batchTaken();
      metrics.inFlight(2);
      let text = await scrape();
      assert.equal(sampleValue(text, 'queenctl_run_batches_total'), 2);
      assert.equal(sampleValue(text, 'queenctl_run_in_flight'), 2);
      assert.equal(sampleValue(text, 'queenctl_run_pops_total', { result: 'batch' }), 2);

      metrics.commandEnded(0.3);
      metrics.messages('completed', 7);
      metrics.messages('retry', 1);
      metrics.messages('failed', 0);
      metrics.commandEnded(42);
      metrics.leaseLost();
      metrics.inFlight(0);
      metrics.pop('empty');
      metrics.pop('held');
      metrics.pop('error');
      metrics.messages('failed', 1);
      metrics.messages('dlq', 1);
      text = await scrape();
      assert.equal(sampleValue(text, 'queenctl_run_messages_total', { status: 'completed' }), 7);
      assert.equal(sampleValue(text, 'queenctl_run_messages_total', { status: 'retry' }), 1);
      assert.equal(sampleValue(text, 'queenctl_run_messages_total', { status: 'failed' }), 1);
      assert.equal(sampleValue(text, 'queenctl_run_messages_total', { status: 'dlq' }), 1);
      assert.equal(sampleValue(text, 'queenctl_run_leases_lost_total'), 1);
      assert.equal(sampleValue(text, 'queenctl_run_in_flight'), 0);
      for (const result of ['empty', 'held', 'error'])
        assert.equal(sampleValue(text, 'queenctl_run_pops_total', { result }), 1, result);
      assert.equal(sampleValue(text, 'queenctl_run_command_seconds_count'), 2);
      assert.equal(sampleValue(text, 'queenctl_run_command_seconds_sum'), 42.3);
      assert.equal(sampleValue(text, 'queenctl_run_command_seconds_bucket', { le: '0.25' }), 0);
      assert.equal(sampleValue(text, 'queenctl_run_command_seconds_bucket', { le: '0.5' }), 1);
      assert.equal(sampleValue(text, 'queenctl_run_command_seconds_bucket', { le: '30' }), 1);
      assert.equal(sampleValue(text, 'queenctl_run_command_seconds_bucket', { le: '60' }), 2);
      assert.equal(sampleValue(text, 'queenctl_run_command_seconds_bucket', { le: '+Inf' }), 2);
    }));

  it('queenctl_run_broker_up: 1 once a pop is answered, 0 in an outage, 1 when it ends or a pop is answered', () =>
    withRunMetrics(async (metrics, scrape) => {
      metrics.pop('error');
      assert.equal(sampleValue(await scrape(), 'queenctl_run_broker_up'), 0, 'no answer yet');
      metrics.pop('empty');
      assert.equal(sampleValue(await scrape(), 'queenctl_run_broker_up'), 1);
      metrics.outage(true);
      assert.equal(sampleValue(await scrape(), 'queenctl_run_broker_up'), 0);
      metrics.outage(false);
      assert.equal(sampleValue(await scrape(), 'queenctl_run_broker_up'), 1);
      metrics.outage(true);
      metrics.pop('held');
      assert.equal(sampleValue(await scrape(), 'queenctl_run_broker_up'), 1, 'an answered pop is the broker up');
    }));
});

describe('lease run --metrics-address: the probes', () => {
  it('/readyz: 503 before the first pop and while pops fail, 200 once the last pop was answered', () =>
    withRunMetrics(async (metrics) => {
      let ready = await get(metrics.address, '/readyz');
      assert.equal(ready.status, 503);
      assert.equal(ready.body, 'no pop has been answered yet\n');

      for (const result of ['batch', 'empty', 'held'] as const) {
        metrics.pop(result);
        ready = await get(metrics.address, '/readyz');
        assert.equal(ready.status, 200, result);
        assert.equal(ready.body, `ok: the broker answered the last pop (${result})\n`);
      }

      metrics.pop('error');
      ready = await get(metrics.address, '/readyz');
      assert.equal(ready.status, 503);
      assert.equal(ready.body, 'the broker did not answer the last pop\n');
      metrics.pop('error');
      metrics.pop('error');
      assert.equal((await get(metrics.address, '/readyz')).body, 'the broker did not answer the last 3 pops\n');

      metrics.pop('empty');
      assert.equal((await get(metrics.address, '/readyz')).status, 200);
      // An outage the run reports between pops (acks failing, say) is not ready either.
      metrics.outage(true);
      ready = await get(metrics.address, '/readyz');
      assert.equal(ready.status, 503);
      assert.match(ready.body, /^the broker is down/);
      metrics.outage(false);
      assert.equal((await get(metrics.address, '/readyz')).status, 200);
    }));

  it('/livez: 200 while the process answers, before the first pop and in an outage alike', () =>
    withRunMetrics(async (metrics) => {
      let live = await get(metrics.address, '/livez');
      assert.equal(live.status, 200);
      assert.equal(live.body, 'ok: the run is alive, 0 of 2 batches running\n');
      metrics.outage(true);
      metrics.pop('error');
      metrics.inFlight(1);
      live = await get(metrics.address, '/livez');
      assert.equal(live.status, 200);
      assert.equal(live.body, 'ok: the run is alive, 1 of 2 batches running\n');
    }, 2));

  it('other routes are 404, other methods 405, as for a watch; closed, nothing listens', async () => {
    let address = '';
    await withRunMetrics(async (metrics) => {
      address = metrics.address;
      assert.equal((await get(address, '/nope')).status, 404);
      const posted = await fetch(`http://${address}/readyz`, {
        method: 'POST',
        signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
      });
      assert.equal(posted.status, 405);
      await posted.text();
    });
    await assert.rejects(get(address, '/metrics'));
  });
});

const promtoolInstalled = spawnSync('promtool', ['--version'], { timeout: PROMTOOL_WITHIN_MS }).status === 0;

describe('lease run --metrics-address: promtool', {
  skip: promtoolInstalled
    ? false
    : 'promtool is not installed (Debian: apt-get install --no-install-recommends prometheus; CI installs it)',
}, () => {
  it('check metrics: a scrape with every series, after a run did a bit of everything', () =>
    withRunMetrics(async (metrics, scrape) => {
      metrics.pop('batch');
      metrics.batchTaken();
      metrics.inFlight(1);
      metrics.commandEnded(1.5);
      metrics.messages('completed', 3);
      metrics.messages('dlq', 1);
      metrics.leaseLost();
      metrics.pop('error');
      metrics.outage(true);
      const text = await scrape();
      const result = spawnSync('promtool', ['check', 'metrics'], {
        input: text,
        encoding: 'utf8',
        timeout: PROMTOOL_WITHIN_MS,
      });
      if (result.error) throw result.error;
      const output = `${result.stdout}${result.stderr}`;
      assert.equal(result.status, 0, output);
      assert.equal(output, '');
    }));
});
