/**
 * What every metrics endpoint shares: prom-client, loaded only here (its own file of the bundle,
 * scripts/bundle.mjs: a run without --metrics-address loads nothing of it), a registry with the
 * build's info and prom-client's process metrics, and a gauge whose samples are computed at
 * scrape time and may be absent (docs/metrics.md).
 */
import type { Registry } from 'prom-client';
import type { Clock } from '../clock.js';
import { VERSION } from '../version.js';
import { text, type Answer } from './server.js';

export type PromClient = typeof import('prom-client');

export async function loadPromClient(): Promise<PromClient> {
  const loaded = (await import('prom-client')) as PromClient & { default?: PromClient };
  // The bundle's require hands the module itself; Node's ESM loader may wrap it in `default`.
  return loaded.Registry ? loaded : (loaded.default as PromClient);
}

export interface Sample {
  labels: Record<string, string>;
  value: number;
  /** A histogram's `_bucket`, `_sum` and `_count`; the metric's own name otherwise. */
  metricName?: string;
}

/**
 * A series whose samples are read when scraped, kept by the caller in plain numbers: counting a
 * renewal is then an addition, not a call into prom-client's label hashing (docs/metrics.md, the
 * bench's CPU per renewal). May have no sample: the least time left is absent while no lease is
 * held, not 0, which would look like a lease about to expire.
 */
export function registerComputed(
  registry: Registry,
  metric: { name: string; help: string; type: 'gauge' | 'counter' | 'histogram' },
  samples: () => Sample[],
): void {
  const { name, help, type } = metric;
  const computed = {
    name,
    help,
    type,
    aggregator: 'sum',
    get: async () => ({ name, help, type, aggregator: 'sum', values: samples() }),
  };
  registry.registerMetric(computed as unknown as Parameters<Registry['registerMetric']>[0]);
}

/** Observations counted into fixed buckets, served as a Prometheus histogram. */
export class Buckets {
  private readonly counts: number[];
  private sum = 0;
  private count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = bounds.map(() => 0);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    for (let i = 0; i < this.bounds.length; i++) {
      if (value <= (this.bounds[i] as number)) {
        this.counts[i] = (this.counts[i] as number) + 1;
        return;
      }
    }
  }

  samples(name: string): Sample[] {
    const samples: Sample[] = [];
    let cumulative = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      cumulative += this.counts[i] as number;
      samples.push({ metricName: `${name}_bucket`, labels: { le: String(this.bounds[i]) }, value: cumulative });
    }
    samples.push({ metricName: `${name}_bucket`, labels: { le: '+Inf' }, value: this.count });
    samples.push({ metricName: `${name}_sum`, labels: {}, value: this.sum });
    samples.push({ metricName: `${name}_count`, labels: {}, value: this.count });
    return samples;
  }
}

const MISNAMED_DEFAULTS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/** A registry with `queenctl_build_info` and prom-client's process metrics. */
export function baseRegistry(prom: PromClient): Registry {
  const registry = new prom.Registry();
  const info = new prom.Gauge({
    name: 'queenctl_build_info',
    help: 'Always 1: the version of queenctl and of Node.js it runs on, as labels.',
    labelNames: ['version', 'node'],
    registers: [registry],
  });
  // The process itself is what these describe, as prom-client's own process metrics read it.
  info.set({ version: VERSION, node: process.version }, 1);
  prom.collectDefaultMetrics({ register: registry });
  // Gauges named like counters, which `promtool check metrics` refuses; the same counts stay,
  // by type, in nodejs_active_handles, nodejs_active_requests and nodejs_active_resources.
  for (const name of MISNAMED_DEFAULTS) registry.removeSingleMetric(name);
  return registry;
}

/** A scrape within this long of the last rendering gets that rendering again. */
export const RENDER_REUSE_MS = 100;

/**
 * GET /metrics. A rendering (~1 ms of CPU for the process metrics alone) is reused for
 * RENDER_REUSE_MS of the watch's clock, and scrapes that arrive while one is being made share it:
 * a thousand scrapes in a second cost ten renderings, and the renewals keep the CPU.
 */
export function metricsRoute(registry: Registry, clock: Clock): () => Promise<Answer> {
  let rendering: Promise<Answer> | null = null;
  let rendered: { at: number; answer: Answer } | null = null;
  return () => {
    const now = clock.now();
    if (rendered && now - rendered.at < RENDER_REUSE_MS && now >= rendered.at) return Promise.resolve(rendered.answer);
    rendering ??= registry.metrics().then(
      (body) => {
        rendering = null;
        const answer = { status: 200, contentType: registry.contentType, body };
        rendered = { at: now, answer };
        return answer;
      },
      (error: unknown) => {
        rendering = null;
        return text(500, `cannot render the metrics: ${String(error)}`);
      },
    );
    return rendering;
  };
}
