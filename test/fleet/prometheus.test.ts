/**
 * queenctl under a real Prometheus (docs/metrics.md; `npm run test:fleet`, run by .ci/fleet):
 * Debian's `prometheus`, started here from the command line on loopback (never as a service),
 * scrapes `lease watch --metrics-address` of 100 simulated leases every second and evaluates
 * docs/examples/prometheus-alerts.yml every second. The simulator revokes one lease; queries
 * through Prometheus's HTTP API show the renewals rising, the lost lease and QueenctlLeaseLost
 * firing. Within a minute: every wait is bounded, and Prometheus is killed at the end.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startSimulator } from '../../tools/simulator/index.js';
import { startCli, startProcess, type RunningProcess } from '../support/cli.js';

const RULES = fileURLToPath(new URL('../../../docs/examples/prometheus-alerts.yml', import.meta.url));
/** The whole scenario, Prometheus's start included: CI's minute. */
const SCENARIO_MS = 60_000;
const LEASES = 100;

const installed = spawnSync('prometheus', ['--version'], { timeout: 30_000 }).status === 0;
const skip = installed
  ? false
  : 'prometheus is not installed (Debian: apt-get install --no-install-recommends prometheus; .ci/fleet does)';

/** A port free now, for Prometheus, which needs one named: it cannot pick its own and say which. */
function freePort(): Promise<number> {
  const server = createServer();
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

describe('a real Prometheus scrapes lease watch --metrics-address', { skip, timeout: SCENARIO_MS + 30_000 }, () => {
  it('renewals rising, a revoked lease lost, QueenctlLeaseLost firing, through the HTTP API', async () => {
    const deadline = Date.now() + SCENARIO_MS;
    const scratch = mkdtempSync(join(tmpdir(), 'queenctl-fleet-'));
    const sim = await startSimulator();
    let watch: RunningProcess | null = null;
    let prometheus: RunningProcess | null = null;
    try {
      const leaseIds = Array.from({ length: LEASES }, () => sim.mint({ seconds: 60 }));
      watch = startCli(
        ['lease', 'watch', '-', '--server', sim.url, '--seconds', '60', '--every', '2s', '-q'].concat([
          '--metrics-address',
          '127.0.0.1:0',
        ]),
        // Ended by SIGINT below once the scenario is seen: 130, as for any watch (docs/cli-contract.md).
        { stdin: `${leaseIds.join('\n')}\n`, timeoutMs: SCENARIO_MS + 10_000, exit: 130 },
      );
      const [, target] = await watch.waitForStderr(/serving metrics on http:\/\/(\S+)\/metrics/, 20_000);

      const port = await freePort();
      const config = join(scratch, 'prometheus.yml');
      writeFileSync(
        config,
        [
          'global:',
          '  scrape_interval: 1s',
          '  scrape_timeout: 1s',
          '  evaluation_interval: 1s',
          'rule_files:',
          `  - ${JSON.stringify(RULES)}`,
          'scrape_configs:',
          '  - job_name: queenctl',
          '    static_configs:',
          `      - targets: [${JSON.stringify(target)}]`,
          '',
        ].join('\n'),
      );
      prometheus = startProcess(
        'prometheus',
        [
          `--config.file=${config}`,
          `--storage.tsdb.path=${join(scratch, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
        ],
        // Ended by SIGTERM at the end; Prometheus then exits 0.
        { timeoutMs: SCENARIO_MS + 10_000, cwd: scratch, exit: [0, 'SIGTERM'] },
      );
      const api = `http://127.0.0.1:${port}`;
      const running = prometheus;

      /** Polls Prometheus until `check` gives a value; fails at the scenario's deadline. */
      const eventually = async <T>(what: string, check: () => Promise<T | undefined>): Promise<T> => {
        for (;;) {
          const value = await check().catch(() => undefined);
          if (value !== undefined) return value;
          if (Date.now() > deadline)
            assert.fail(`timed out waiting for ${what}\n--- prometheus\n${running.stderr().slice(-3000)}`);
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      };
      const query = async (promql: string): Promise<Sample[]> => {
        const response = await fetch(`${api}/api/v1/query?query=${encodeURIComponent(promql)}`, {
          signal: AbortSignal.timeout(5_000),
        });
        const body = (await response.json()) as { status: string; data: { result: Sample[] } };
        assert.equal(body.status, 'success');
        return body.data.result;
      };
      const scalar = async (promql: string): Promise<number | undefined> => {
        const [first] = await query(promql);
        return first ? Number(first.value[1]) : undefined;
      };

      await eventually('Prometheus ready', async () => {
        const response = await fetch(`${api}/-/ready`, { signal: AbortSignal.timeout(5_000) });
        return response.ok ? true : undefined;
      });
      await eventually('the target up', async () => ((await scalar('up{job="queenctl"}')) === 1 ? true : undefined));
      const renewed = 'queenctl_renewals_total{job="queenctl",result="renewed"}';
      const first = await eventually('every lease renewed once, as scraped', async () => {
        const value = await scalar(renewed);
        return value !== undefined && value >= LEASES ? value : undefined;
      });
      await eventually('the renewals rising', async () => {
        const value = await scalar(renewed);
        return value !== undefined && value >= first + LEASES ? value : undefined;
      });
      assert.equal(await scalar('queenctl_leases{job="queenctl",state="held"}'), LEASES);
      assert.equal(await scalar('queenctl_broker_up{job="queenctl"}'), 1);

      // Revoked: released on the broker, so the next renewal renews nothing.
      const revoked = leaseIds[37] as string;
      assert.ok(sim.release(revoked));
      await eventually('the lost lease', async () =>
        (await scalar('queenctl_leases{job="queenctl",state="lost"}')) === 1 ? true : undefined,
      );
      assert.equal(await scalar('queenctl_leases{job="queenctl",state="held"}'), LEASES - 1);
      assert.equal(await scalar('queenctl_renewals_total{job="queenctl",result="not_renewed"}'), 1);
      await eventually('QueenctlLeaseLost firing', async () => {
        const response = await fetch(`${api}/api/v1/alerts`, { signal: AbortSignal.timeout(5_000) });
        const body = (await response.json()) as {
          data: { alerts: Array<{ labels: Record<string, string>; state: string }> };
        };
        return body.data.alerts.some(
          (alert) => alert.labels.alertname === 'QueenctlLeaseLost' && alert.state === 'firing',
        )
          ? true
          : undefined;
      });
      // The others are quiet: the broker is up, and the leases have time.
      const firing = await query('ALERTS{alertstate="firing"}');
      assert.deepEqual(
        firing.map((sample) => sample.metric.alertname),
        ['QueenctlLeaseLost'],
      );

      watch.kill('SIGINT');
      const ended = await watch.exited;
      assert.equal(ended.code, 130, ended.stderr);
      assert.match(ended.stderr, new RegExp(`lease ${revoked}.*(lost|not renewed)`, 'i'));
    } finally {
      watch?.kill('SIGKILL');
      if (prometheus) {
        prometheus.kill('SIGTERM');
        await prometheus.exited;
      }
      await sim.close();
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
