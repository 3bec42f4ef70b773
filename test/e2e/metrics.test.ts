/**
 * `--metrics-address` end to end, in-process against the simulator (docs/metrics.md): a bad,
 * busy or out-of-range address is a usage error before anything reaches the broker; a watch
 * keeps renewing while it is scraped a thousand times; `lease list --watch` serves what its polls
 * find. (The series on fake time: test/unit/metrics.test.ts; a real Prometheus: test/fleet/.)
 */
import assert from 'node:assert/strict';
import { Agent, get as httpGet, request as httpRequest } from 'node:http';
import { connect, createServer, type Server } from 'node:net';
import { describe, it } from 'node:test';
import { LISTENER_LIMITS } from '../../src/metrics/server.js';
import { startCli } from '../support/cli.js';
import { runInProcess, startInProcess } from '../support/in-process.js';
import { sampleValue } from '../support/prometheus-text.js';
import { sharedSimulator, withSimulator } from '../support/shared.js';

const simulator = sharedSimulator();
/** Turns a listener that never answers into a failure, well below the runner's limit. */
const ANSWER_WITHIN_MS = 10_000;
/** A thousand scrapes on a machine shared by several suites: only a hang fails. */
const FLOOD_WITHIN_MS = 60_000;

async function get(url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(ANSWER_WITHIN_MS) });
  return { status: response.status, body: await response.text() };
}

/** Polls `check` until it gives a value; fails after a limit that only turns a hang into a failure. */
async function eventually<T>(check: () => Promise<T | undefined>, what: string): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() - started > ANSWER_WITHIN_MS) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function listenAnywhere(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve({ server, port: typeof address === 'object' && address ? address.port : 0 });
    }),
  );
}

describe('--metrics-address: usage errors before anything is sent', () => {
  const cases: Array<[string, string[], RegExp]> = [
    ['no port', ['--metrics-address', '127.0.0.1'], /--metrics-address "127\.0\.0\.1" is not \[host\]:port/],
    ['a port out of range', ['--metrics-address', ':70000'], /port 70000 is out of range \(0 to 65535\)/],
    ['--metrics-per-lease alone', ['--metrics-per-lease'], /--metrics-per-lease adds series to --metrics-address/],
    [
      'an address of no interface here',
      ['--metrics-address', '192.0.2.1:9464'],
      /--metrics-address 192\.0\.2\.1:9464: cannot listen: no interface of this machine has that address/,
    ],
  ];
  for (const [what, flags, message] of cases) {
    it(`lease watch: ${what}: exit 1, naming the address`, async () => {
      const sim = simulator();
      const result = await runInProcess(['lease', 'watch', sim.mint(), '--server', sim.url, ...flags]);
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, message);
      assert.equal(sim.log.length, 0, 'nothing reached the broker');
    });
  }

  it('lease watch and lease list --watch: a port in use: exit 1, naming it, nothing sent', async () => {
    const sim = simulator();
    const { server, port } = await listenAnywhere();
    try {
      for (const args of [
        ['lease', 'watch', sim.mint()],
        ['lease', 'list', '--watch'],
      ]) {
        const result = await runInProcess([...args, '--server', sim.url, '--metrics-address', `127.0.0.1:${port}`]);
        assert.equal(result.code, 1, result.stderr);
        assert.match(
          result.stderr,
          new RegExp(`--metrics-address 127\\.0\\.0\\.1:${port}: cannot listen: the port is in use`),
        );
      }
      assert.equal(sim.log.length, 0, 'nothing reached the broker');
    } finally {
      server.close();
    }
  });

  it('lease list: --metrics-address without --watch is a usage error', async () => {
    const sim = simulator();
    const result = await runInProcess(['lease', 'list', '--server', sim.url, '--metrics-address', ':0']);
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /--metrics-address serves what --watch finds/);
  });
});

describe('--metrics-address under load', () => {
  it('1,000 scrapes in a second: every one answered, and every lease renewed on its grid meanwhile', async () => {
    const sim = simulator();
    const leaseIds = Array.from({ length: 20 }, () => sim.mint({ seconds: 60 }));
    const run = startInProcess([
      'lease',
      'watch',
      ...leaseIds,
      '--server',
      sim.url,
      '--seconds',
      '60',
      '--every',
      '500ms',
      '-o',
      'ndjson',
      '--metrics-address',
      '127.0.0.1:0',
    ]);
    const [, address] = await run.waitForStderr(/serving metrics on http:\/\/(\S+)\/metrics/);
    const url = `http://${address}`;
    const renewed = async (): Promise<number> =>
      sampleValue((await get(`${url}/metrics`)).body, 'queenctl_renewals_total', { result: 'renewed' }) ?? 0;
    await eventually(async () => ((await renewed()) >= 20 ? true : undefined), 'the first renewals');
    const before = await renewed();
    const started = Date.now();
    // Sent at once over 20 connections, as many Prometheus servers and probes would scrape (the
    // listener holds LISTENER_LIMITS.maxConnections at most); node:http, the lighter client, so
    // that the scrapes' own cost in this process stays small.
    const agent = new Agent({ keepAlive: true, maxSockets: 20 });
    const scrape = (path: string): Promise<number> =>
      new Promise((resolve, reject) =>
        httpGet(`${url}${path}`, { agent, timeout: FLOOD_WITHIN_MS }, (response) => {
          response.resume();
          response.on('end', () => resolve(response.statusCode ?? 0));
        }).on('error', reject),
      );
    const statuses = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => scrape(i % 10 === 0 ? '/livez' : i % 10 === 1 ? '/readyz' : '/metrics')),
    );
    agent.destroy();
    const tookMs = Date.now() - started;
    assert.deepEqual(new Set(statuses), new Set([200]));
    assert.ok(agent.maxSockets < LISTENER_LIMITS.maxConnections);
    // However long the scrapes took, the renewals due in that time went on: at least one more
    // round of every lease once the scrapes are answered (waited for, not slept on).
    await eventually(
      async () => ((await renewed()) >= before + 20 ? true : undefined),
      `renewals to go on (scrapes took ${tookMs} ms)`,
    );
    run.kill('SIGINT');
    const result = await run.exited;
    assert.equal(result.code, 130, result.stderr);
    assert.doesNotMatch(result.stdout, /"event":"(lost|retry)"/);
    assert.doesNotMatch(result.stderr, /cannot keep up|cannot renew/i);
  });
});

describe('--metrics-address: who may ask', () => {
  it('lease watch: 421 for a request addressed to another site (DNS rebinding), 200 by address', async () => {
    const sim = simulator();
    const leaseId = sim.mint({ seconds: 60 });
    const run = startInProcess(
      ['lease', 'watch', leaseId, '--server', sim.url, '--seconds', '60', '--metrics-per-lease'].concat([
        '--metrics-address',
        '127.0.0.1:0',
      ]),
    );
    const [, address] = await run.waitForStderr(/serving metrics on http:\/\/(\S+)\/metrics/);
    const [host, port] = (address as string).split(':') as [string, string];
    const getAs = (name: string, path: string): Promise<{ status: number; body: string }> =>
      new Promise((resolve, reject) => {
        const request = httpRequest(
          { host, port, path, headers: { host: name }, setHost: false, timeout: ANSWER_WITHIN_MS },
          (response) => {
            let body = '';
            response.setEncoding('utf8').on('data', (chunk: string) => {
              body += chunk;
            });
            response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
          },
        );
        request.on('timeout', () => request.destroy(new Error(`GET ${path} as ${name}: no answer`)));
        request.on('error', reject);
        request.end();
      });
    await eventually(
      async () => ((await getAs(address as string, '/readyz')).status === 200 ? true : undefined),
      'the lease renewed',
    );
    for (const path of ['/metrics', '/livez', '/readyz']) {
      const refused = await getAs(`rebound.evil.example:${port}`, path);
      assert.equal(refused.status, 421, path);
      assert.doesNotMatch(refused.body, new RegExp(leaseId), 'no lease id in the refusal');
    }
    for (const name of [address as string, `localhost:${port}`, `[::1]:${port}`]) {
      const answered = await getAs(name, '/metrics');
      assert.equal(answered.status, 200, name);
      assert.match(answered.body, new RegExp(`queenctl_lease_remaining_seconds\\{lease_id="${leaseId}"\\}`));
    }
    run.kill('SIGINT');
    assert.equal((await run.exited).code, 130);
  });
});

describe('--metrics-address: the process', () => {
  // The process is the point: an open connection must not keep it alive.
  it('a scraper in the middle of a request does not keep queenctl running once the watch ends', async () => {
    const sim = simulator();
    const run = startCli(
      ['lease', 'watch', sim.mint({ seconds: 60 }), '--server', sim.url, '--for', '2s', '-q'].concat([
        '--metrics-address',
        '127.0.0.1:0',
      ]),
      { timeoutMs: 30_000, exit: 0 },
    );
    const [, address] = await run.waitForStderr(/serving metrics on http:\/\/(\S+)\/metrics/);
    // A scraper in the middle of a request (its headers not finished): not an idle connection,
    // which closing the server would end by itself.
    const [host, port] = (address as string).split(':') as [string, string];
    const socket = connect(Number(port), host);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.on('error', () => {});
    socket.write('GET /metrics HTTP/1.1\r\nHost: queenctl\r\n');
    const result = await run.exited;
    socket.destroy();
    assert.equal(result.killed, false, 'it ended by itself');
    assert.equal(result.code, 0, result.stderr);
  });
});

describe('lease list --watch --metrics-address', () => {
  it('held leases by group and queue, changes seen, polls failing', () =>
    withSimulator(async (sim) => {
      sim.mint({ group: 'billing', queue: 'orders', seconds: 60 });
      sim.mint({ group: 'billing', queue: 'orders', seconds: 60 });
      sim.mint({ group: 'audit', queue: 'events', seconds: 60 });
      const run = startInProcess([
        'lease',
        'list',
        '--watch',
        '--interval',
        '100ms',
        '--server',
        sim.url,
        '-o',
        'ndjson',
        '--metrics-address',
        '127.0.0.1:0',
      ]);
      const [, address] = await run.waitForStderr(/serving metrics on http:\/\/(\S+)\/metrics/);
      const scrape = async (): Promise<string> => (await get(`http://${address}/metrics`)).body;
      let text = await eventually(async () => {
        const body = await scrape();
        return sampleValue(body, 'queenctl_list_changes_total') === 3 ? body : undefined;
      }, 'the first listing counted');
      assert.equal(sampleValue(text, 'queenctl_list_held_leases', { group: 'billing', queue: 'orders' }), 2);
      assert.equal(sampleValue(text, 'queenctl_list_held_leases', { group: 'audit', queue: 'events' }), 1);
      assert.equal(sampleValue(text, 'queenctl_list_poll_failures_total'), 0);
      sim.inject({ kind: 'status', status: 503 });
      text = await eventually(async () => {
        const body = await scrape();
        return (sampleValue(body, 'queenctl_list_poll_failures_total') ?? 0) >= 2 ? body : undefined;
      }, 'failed polls counted');
      // What was held stays as the last listing that worked said.
      assert.equal(sampleValue(text, 'queenctl_list_held_leases', { group: 'billing', queue: 'orders' }), 2);
      run.kill('SIGINT');
      const result = await run.exited;
      assert.equal(result.code, 130, result.stderr);
      await assert.rejects(get(`http://${address}/metrics`), 'nothing listens once the watch has ended');
    }));
});
