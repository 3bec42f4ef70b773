/**
 * What Prometheus's own tool says of queenctl's metrics and of the alert rules shipped in
 * docs/examples/ (docs/metrics.md): `promtool check metrics` on a scrape of a watch and of
 * `lease list --watch` (a lease run's: test/unit/metrics-run.test.ts), `promtool check rules` and
 * `promtool test rules` on the watch's rules and the run's. Skipped, saying why, where promtool is
 * not installed; CI installs it (.ci/fleet).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startInProcess } from '../support/in-process.js';
import { sharedSimulator } from '../support/shared.js';

const EXAMPLES = fileURLToPath(new URL('../../../docs/examples/', import.meta.url));
/** promtool answers in well under a second; this only turns a hang into a failure. */
const PROMTOOL_WITHIN_MS = 30_000;

function promtool(args: string[], input?: string): { status: number | null; output: string } {
  const result = spawnSync('promtool', args, {
    cwd: EXAMPLES,
    input,
    encoding: 'utf8',
    timeout: PROMTOOL_WITHIN_MS,
  });
  if (result.error) throw result.error;
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

const installed = spawnSync('promtool', ['--version'], { timeout: PROMTOOL_WITHIN_MS }).status === 0;
const skip = installed
  ? false
  : 'promtool is not installed (Debian: apt-get install --no-install-recommends prometheus; CI installs it)';
const simulator = sharedSimulator();

/** The first scrape `ready` accepts (polled, not slept on); the limit only turns a hang into a failure. */
async function scrapeOf(args: string[], ready: (text: string) => boolean): Promise<string> {
  // Before any `--`: what follows it is the command's.
  const run = startInProcess([...args.slice(0, 2), '--metrics-address', '127.0.0.1:0', ...args.slice(2)]);
  const [, address] = await run.waitForStderr(/serving metrics on http:\/\/(\S+)\/metrics/);
  const started = Date.now();
  let text = '';
  for (;;) {
    const response = await fetch(`http://${address}/metrics`, { signal: AbortSignal.timeout(PROMTOOL_WITHIN_MS) });
    text = await response.text();
    if (ready(text) || Date.now() - started > PROMTOOL_WITHIN_MS) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  run.kill('SIGINT');
  const result = await run.exited;
  assert.equal(result.code, 130, result.stderr);
  return text;
}

describe('promtool', { skip }, () => {
  it('check rules: docs/examples/prometheus-alerts.yml', () => {
    const { status, output } = promtool(['check', 'rules', 'prometheus-alerts.yml']);
    assert.equal(status, 0, output);
    assert.match(output, /SUCCESS: 3 rules found/);
  });

  it('test rules: docs/examples/prometheus-alerts.test.yml', () => {
    const { status, output } = promtool(['test', 'rules', 'prometheus-alerts.test.yml']);
    assert.equal(status, 0, output);
    assert.match(output, /SUCCESS/);
  });

  it('check rules: docs/examples/prometheus-alerts-run.yml (lease run)', () => {
    const { status, output } = promtool(['check', 'rules', 'prometheus-alerts-run.yml']);
    assert.equal(status, 0, output);
    assert.match(output, /SUCCESS: 5 rules found/);
  });

  it('test rules: docs/examples/prometheus-alerts-run.test.yml (lease run)', () => {
    const { status, output } = promtool(['test', 'rules', 'prometheus-alerts-run.test.yml']);
    assert.equal(status, 0, output);
    assert.match(output, /SUCCESS/);
  });

  it('check metrics: a watch with a command and --metrics-per-lease, every series present', async () => {
    const sim = simulator();
    const series = [
      'queenctl_renewals_total',
      'queenctl_leases',
      'queenctl_lease_min_remaining_seconds',
      'queenctl_renewal_duration_seconds_bucket',
      'queenctl_retries_total',
      'queenctl_outages_total',
      'queenctl_broker_up',
      'queenctl_command_running',
      'queenctl_build_info',
      'queenctl_lease_remaining_seconds',
      'process_cpu_seconds_total',
    ].map((name) => new RegExp(`^${name}[ {]`, 'm'));
    const text = await scrapeOf(
      [
        'lease',
        'watch',
        sim.mint({ seconds: 60 }),
        sim.mint({ seconds: 60 }),
        '--server',
        sim.url,
        '--seconds',
        '60',
        '-o',
        'ndjson',
        '--metrics-per-lease',
        '--',
        'sleep',
        '30',
      ],
      // Both leases renewed once: every series has its samples.
      (scrape) =>
        series.every((pattern) => pattern.test(scrape)) && /^queenctl_leases\{state="held"\} 2$/m.test(scrape),
    );
    for (const pattern of series) assert.match(text, pattern, `${pattern.source} is served`);
    const { status, output } = promtool(['check', 'metrics'], text);
    assert.equal(status, 0, output);
    assert.equal(output, '');
  });

  it('check metrics: lease list --watch', async () => {
    const sim = simulator();
    sim.mint({ group: 'billing', queue: 'orders', seconds: 60 });
    const text = await scrapeOf(
      ['lease', 'list', '--watch', '--interval', '100ms', '--server', sim.url, '-o', 'ndjson'],
      (scrape) => /^queenctl_list_held_leases\{/m.test(scrape),
    );
    assert.match(text, /^queenctl_list_held_leases\{group="billing",queue="orders"\} 1$/m);
    const { status, output } = promtool(['check', 'metrics'], text);
    assert.equal(status, 0, output);
    assert.equal(output, '');
  });
});
