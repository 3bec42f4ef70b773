/**
 * How queenctl reaches the broker, end to end (run in-process): https with a certificate
 * made here, a proxy run here, several replicas, and a token that never shows in any output.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { NET_REQUESTS } from '../../src/commands/globals.js';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { runVerb } from '../reliability/harness.js';
import { FakeClock } from '../support/fakes.js';
import { deadPort, deadPorts } from '../support/ports.js';
import { runInProcess, startInProcess } from '../support/in-process.js';
import { startProxy, type TestProxy } from '../support/proxy.js';
import { makeCertificate, type TestCertificate } from '../support/tls.js';

const TOKEN = 'eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXBheWxvYWQ.c2lnbmF0dXJlLWJ5dGVz';
let plain: Simulator;
let secure: Simulator;
let certificate: TestCertificate;
let scratch: string;

before(async () => {
  certificate = makeCertificate();
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-transport-'));
  plain = await startSimulator({ tokens: { [TOKEN]: { role: 'read-write' } } });
  secure = await startSimulator({
    tls: { key: certificate.key, cert: certificate.cert },
    tokens: { [TOKEN]: { role: 'read-write' } },
  });
});
after(async () => {
  await plain.close();
  await secure.close();
});
beforeEach(() => {
  for (const sim of [plain, secure]) {
    sim.clearFaults();
    sim.resetLog();
  }
});

/**
 * The two ways a renewal goes out (src/commands/globals.ts): ids on the command line over
 * node:http, ids from standard input over undici. TLS must hold over each.
 */
const INVOCATIONS = [
  { transport: 'node:http', args: (leaseId: string) => ['lease', 'extend', leaseId], stdin: (_: string) => '' },
  { transport: 'undici', args: (_: string) => ['lease', 'extend', '-'], stdin: (leaseId: string) => `${leaseId}\n` },
];

for (const { transport, args, stdin } of INVOCATIONS) {
  describe(`https over ${transport}`, () => {
    const extend = (leaseId: string, flags: string[], env: Record<string, string> = {}) =>
      runInProcess([...args(leaseId), '-o', 'ndjson', ...flags], { stdin: stdin(leaseId), env });

    it("--cacert trusts the broker's CA: the renewal goes through, without a warning", async () => {
      const leaseId = secure.mint();
      const result = await extend(leaseId, [
        '--server',
        secure.url,
        '--token',
        TOKEN,
        '--cacert',
        certificate.certFile,
      ]);
      assert.equal(result.code, 0, result.stderr);
      assert.match(secure.url, /^https:/);
      assert.equal(JSON.parse(result.stdout).renewed, 1);
      assert.equal(secure.log[0]?.authorization, `Bearer ${TOKEN}`);
      assert.equal(result.stderr, '');
    });

    it('without --cacert a self-signed broker is refused: exit 2, a TLS message, nothing sent', async () => {
      const result = await extend('some-lease', ['--server', secure.url, '--token', TOKEN]);
      assert.equal(result.code, 2);
      assert.match(result.stderr, /TLS connection to https:\/\/127\.0\.0\.1:\d+ failed/);
      assert.match(result.stderr, /--cacert/);
      assert.equal(secure.log.length, 0, 'no request reached the broker');
    });

    it('--insecure connects anyway and warns that the certificate is not verified', async () => {
      const leaseId = secure.mint();
      const result = await extend(leaseId, ['--server', secure.url, '--token', TOKEN, '--insecure']);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(JSON.parse(result.stdout).renewed, 1);
      assert.match(result.stderr, /warning: --insecure: the TLS certificate of 127\.0\.0\.1:\d+ is not verified/);
    });

    it("a context's cacert is read relative to the config file", async () => {
      const directory = mkdtempSync(join(scratch, 'ctx-'));
      writeFileSync(join(directory, 'ca.pem'), certificate.cert);
      writeFileSync(
        join(directory, 'config.yaml'),
        `current-context: tls\ncontexts:\n  - name: tls\n    server: ${secure.url}\n    cacert: ca.pem\n`,
      );
      const leaseId = secure.mint();
      const result = await extend(leaseId, ['--token', TOKEN], { QUEEN_CONFIG: join(directory, 'config.yaml') });
      assert.equal(result.code, 0, result.stderr);
    });
  });
}

describe('which transport a run uses (-v names it)', () => {
  const chosen = (stderr: string): string | undefined => /^queenctl: transport: (\S+)/m.exec(stderr)?.[1];
  const server = (): string[] => ['--server', plain.url, '--token', TOKEN, '-v'];

  it('a few requests, fixed by the command line, go over node:net (node:http for https)', async () => {
    const leaseId = plain.mint();
    for (const args of [
      ['lease', 'extend', leaseId],
      ['lease', 'extend', leaseId, plain.mint()],
      ['lease', 'inspect', leaseId],
      ['lease', 'list'],
      ['ping'],
    ]) {
      const result = await runInProcess([...args, ...server(), '-o', 'json']);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(chosen(result.stderr), 'node:net', args.join(' '));
    }
  });

  it('ids from standard input, a watch, a listing with expiries or --watch go over undici', async () => {
    const leaseId = plain.mint();
    const runs: Array<[string[], { stdin?: string; env?: Record<string, string> }]> = [
      [['lease', 'extend', '-'], { stdin: `${leaseId}\n` }],
      [['lease', 'inspect', '-'], { stdin: `${leaseId}\n` }],
      [['lease', 'watch', leaseId, '--for', '300ms'], {}],
      [['lease', 'list', '--expiry'], {}],
      [['lease', 'list', '--expiring-within', '10m'], {}],
    ];
    for (const [args, options] of runs) {
      const result = await runInProcess([...args, ...server(), '-o', 'ndjson'], options);
      assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`);
      assert.equal(chosen(result.stderr), 'undici', args.join(' '));
    }
    const listWatch = startInProcess(['lease', 'list', '--watch', ...server(), '-o', 'ndjson']);
    await listWatch.waitForStderr(/^queenctl: transport: /m);
    listWatch.kill('SIGINT');
    assert.equal(chosen((await listWatch.exited).stderr), 'undici', 'lease list --watch');
  });

  it('ids past the first NET_REQUESTS on the command line go over undici: not a connection each', async () => {
    // A relay in front of the simulator counts the connections the run opens.
    let connections = 0;
    const relay = createServer((socket) => {
      connections++;
      const upstream = connect(plain.port, '127.0.0.1');
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    try {
      const ids = Array.from({ length: NET_REQUESTS + 200 }, () => plain.mint());
      const url = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
      const args = ['lease', 'extend', ...ids, '--server', url, '--token', TOKEN, '-v', '-o', 'name'];
      const result = await runInProcess(args);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout.trim().split('\n').length, ids.length, 'every lease renewed');
      assert.equal(chosen(result.stderr), 'node:net');
      assert.match(
        result.stderr,
        new RegExp(`^queenctl: transport: undici \\(more than ${NET_REQUESTS} requests\\)$`, 'm'),
      );
      // node:net's NET_REQUESTS, then undici's pool: 16 (--concurrency) in flight, a few more opened
      // while node:net's last ones end; a connection each would be 264.
      assert.ok(connections <= NET_REQUESTS + 32, `${connections} connections for ${ids.length} requests`);
    } finally {
      relay.close();
    }
  });
});

/** A broker URL of a name that resolves nowhere: only a test proxy diverting to `sim` reaches it. */
const NAMED = 'queen.example.test';
const named = (sim: Simulator, scheme = 'http'): string => `${scheme}://${NAMED}:${sim.port}`;

describe('proxies', () => {
  it("HTTPS_PROXY carries an https renewal through a CONNECT tunnel, with the broker's TLS inside it", async () => {
    const proxy = await startProxy({ host: '127.0.0.1', port: secure.port });
    try {
      const leaseId = secure.mint();
      const server = named(secure, 'https');
      const result = await runInProcess(
        ['lease', 'extend', leaseId, '--server', server, '--token', TOKEN, '--cacert', certificate.certFile, '-v'],
        { env: { HTTPS_PROXY: proxy.url, NO_PROXY: '' } },
      );
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(proxy.targets, [new URL(server).host]);
      assert.match(result.stderr, /^queenctl: transport: undici \(a proxy is in force\)$/m);
      assert.equal(secure.log.length, 1);
      // The tunnel carries TLS: the proxy never sees the token.
      assert.ok(!proxy.received().includes(TOKEN));
    } finally {
      await proxy.close();
    }
  });

  it('HTTP_PROXY carries plain http; HTTPS_PROXY alone does not (Go: neither stands in for the other)', async () => {
    const proxy = await startProxy({ host: '127.0.0.1', port: plain.port });
    try {
      const leaseId = plain.mint();
      const via = await runInProcess(['lease', 'extend', leaseId, '--server', named(plain), '--token', TOKEN], {
        env: { HTTP_PROXY: proxy.url },
      });
      assert.equal(via.code, 0, via.stderr);
      assert.deepEqual(proxy.targets, [`${NAMED}:${plain.port}`]);
      // undici's own rules sent http through HTTPS_PROXY when HTTP_PROXY was unset; Go's do not.
      const direct = await runInProcess(['lease', 'extend', leaseId, '--server', plain.url, '--token', TOKEN, '-v'], {
        env: { HTTPS_PROXY: proxy.url },
      });
      assert.equal(direct.code, 0, direct.stderr);
      assert.equal(proxy.targets.length, 1);
      assert.match(direct.stderr, /^queenctl: transport: node:net/m);
    } finally {
      await proxy.close();
    }
  });

  it('a proxy that closes the connection before answering CONNECT: each try asks it once, then exit 2', async () => {
    // undici 7 asked again at once and without end until --timeout (nodejs/undici#3897): about
    // 1,500 CONNECTs a second at the proxy (src/broker/undici-transport.ts, tunnelFailsOnce).
    const connects: string[] = [];
    const sockets = new Set<Socket>();
    const hangsUp = createServer((socket) => {
      sockets.add(socket);
      socket.once('data', (head) => {
        connects.push(head.toString('latin1').split('\r\n')[0] ?? '');
        socket.destroy();
      });
    });
    await new Promise<void>((resolve) => hangsUp.listen(0, '127.0.0.1', resolve));
    try {
      const proxyUrl = `http://127.0.0.1:${(hangsUp.address() as AddressInfo).port}`;
      const result = await runInProcess(
        ['lease', 'extend', 'a-lease', '--server', `http://${NAMED}:6632`, '--retries', '2', '--timeout', '1m'],
        { env: { HTTP_PROXY: proxyUrl } },
      );
      assert.equal(result.code, 2, result.stderr);
      assert.equal(result.stdout, '');
      assert.match(
        result.stderr,
        /^queenctl: a-lease: the connection to \S+ was closed before a full answer; retry 1 of 2/m,
      );
      assert.match(result.stderr, /requests go through the proxy of HTTPS_PROXY\/HTTP_PROXY/);
      assert.deepEqual(connects, Array(3).fill(`CONNECT ${NAMED}:6632 HTTP/1.1`), 'one CONNECT for each try');
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => hangsUp.close(resolve));
    }
  });
});

/**
 * Go's ProxyFromEnvironment (what the Go queenctl uses) never proxies localhost or a loopback
 * address, and skips NO_PROXY hosts: the bearer token must not go to a proxy for them, and a run
 * that sends no request through a proxy keeps node:http (docs/architecture.md#two-transports).
 */
describe('what never goes through the proxy', () => {
  let proxy: TestProxy;
  let v6: Simulator;
  before(async () => {
    proxy = await startProxy();
    v6 = await startSimulator({ host: '::1', tokens: { [TOKEN]: { role: 'read-write' } } });
  });
  after(async () => {
    await proxy.close();
    await v6.close();
  });

  const untouched = (what: string): void => {
    assert.deepEqual(proxy.targets, [], what);
    assert.equal(proxy.connections, 0, `${what}: a connection was made to the proxy`);
    assert.ok(!proxy.received().includes(TOKEN), `${what}: the token reached the proxy`);
  };

  it('localhost, 127.0.0.1 and [::1] go direct under HTTP_PROXY and HTTPS_PROXY, over node:net', async () => {
    const servers: Array<[string, Simulator]> = [
      [`http://localhost:${plain.port}`, plain],
      [plain.url, plain],
      [`http://[::1]:${v6.port}`, v6],
    ];
    for (const [server, sim] of servers) {
      for (const args of [
        ['lease', 'extend', sim.mint()],
        ['lease', 'extend', '-'],
      ]) {
        const stdin = args[2] === '-' ? `${sim.mint()}\n` : '';
        const result = await runInProcess([...args, '--server', server, '--token', TOKEN, '-v', '-o', 'json'], {
          stdin,
          env: { HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url, http_proxy: proxy.url, NO_PROXY: '' },
        });
        assert.equal(result.code, 0, `${server} ${args.join(' ')}: ${result.stderr}`);
        untouched(server);
        if (args[2] !== '-') assert.match(result.stderr, /^queenctl: transport: node:net/m, server);
        assert.match(result.stderr, /^queenctl: proxy: none for this broker/m, server);
      }
    }
  });

  it('a NO_PROXY host goes direct: by name, .suffix, name:port and *', async () => {
    for (const noProxy of [NAMED, '.example.test', `${NAMED}:${plain.port}`, '*']) {
      // The name resolves nowhere, so going direct fails (exit 2) where the proxy would have
      // carried it: proof that it went around.
      const result = await runInProcess(
        [
          'lease',
          'extend',
          plain.mint(),
          '--server',
          named(plain),
          '--token',
          TOKEN,
          '--retries',
          '0',
          '--timeout',
          '5s',
        ],
        { env: { HTTP_PROXY: proxy.url, NO_PROXY: noProxy } },
      );
      assert.equal(result.code, 2, `${noProxy}: ${result.stderr}`);
      untouched(noProxy);
    }
    // A port that is not the broker's exempts nothing: the proxy is asked (and cannot reach it).
    const other = await runInProcess(
      [
        'lease',
        'extend',
        plain.mint(),
        '--server',
        named(plain),
        '--token',
        TOKEN,
        '--retries',
        '0',
        '--timeout',
        '5s',
      ],
      { env: { HTTP_PROXY: proxy.url, NO_PROXY: `${NAMED}:1` } },
    );
    assert.equal(other.code, 2, other.stderr);
    assert.ok(proxy.targets.length > 0, 'the proxy was not asked');
    assert.deepEqual(new Set(proxy.targets), new Set([`${NAMED}:${plain.port}`]));
  });
});

describe('plain http and the token', () => {
  it('warns when the token would cross the network in clear text, and not for loopback', async () => {
    const proxy = await startProxy({ host: '127.0.0.1', port: plain.port });
    try {
      const leaseId = plain.mint();
      // The name resolves nowhere: only the proxy (which sends it to the simulator) can reach it.
      const remote = await runInProcess(
        ['lease', 'extend', leaseId, '--server', 'http://queen.example.test:6632', '--token', TOKEN],
        {
          env: { HTTP_PROXY: proxy.url },
        },
      );
      assert.equal(remote.code, 0, remote.stderr);
      assert.match(remote.stderr, /warning: the bearer token goes over plain http to queen\.example\.test:6632/);
      assert.deepEqual(proxy.targets, ['queen.example.test:6632']);
      const local = await runInProcess(['lease', 'extend', leaseId, '--server', plain.url, '--token', TOKEN]);
      assert.equal(local.code, 0, local.stderr);
      assert.doesNotMatch(local.stderr, /plain http/);
    } finally {
      await proxy.close();
    }
  });

  it('-v traces every request, and no byte of the token appears on stdout or stderr', async () => {
    const tokenFile = join(scratch, 'token');
    writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
    const leaseId = plain.mint();
    // A broker (or proxy) that quotes the request's headers back in its error: the worst case.
    plain.inject({
      kind: 'status',
      status: 503,
      body: JSON.stringify({ error: `upstream said: Authorization: Bearer ${TOKEN}` }),
      times: 1,
    });
    const dead = await deadPort();
    for (const args of [
      ['--token', TOKEN],
      ['--token-file', tokenFile],
    ]) {
      plain.inject({ kind: 'status', status: 400, body: `bad request from Bearer ${TOKEN}`, times: 1 });
      const result = await runInProcess([
        'lease',
        'extend',
        leaseId,
        'other-lease',
        '-v',
        '-o',
        'json',
        '--server',
        `http://127.0.0.1:${dead},${plain.url}`,
        ...args,
      ]);
      const output = result.stdout + result.stderr;
      assert.match(result.stderr, /POST http:\/\/127\.0\.0\.1:\d+\/api\/v1\/lease\//, 'the trace is there');
      assert.match(result.stderr, /authorization: Bearer \[redacted\]/);
      assert.ok(!output.includes(TOKEN), `the token leaked:\n${output}`);
      // Not even a long piece of it (a JWT's signature alone is a secret).
      assert.ok(!output.includes(TOKEN.slice(-20)), 'a piece of the token leaked');
    }
    const fromEnv = await runInProcess(['lease', 'extend', leaseId, '-v', '--server', plain.url], {
      env: { QUEEN_TOKEN: TOKEN },
    });
    assert.equal(fromEnv.code, 0, fromEnv.stderr);
    assert.ok(!(fromEnv.stdout + fromEnv.stderr).includes(TOKEN));
    assert.match(fromEnv.stderr, /token from QUEEN_TOKEN/);
  });
});

describe('replicas', () => {
  it('fails over from a dead replica to a live one, and -v says which answered', async () => {
    const dead = await deadPort();
    const leaseId = plain.mint();
    const result = await runInProcess([
      'lease',
      'extend',
      leaseId,
      '-v',
      '--token',
      TOKEN,
      '--server',
      `http://127.0.0.1:${dead},${plain.url}`,
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(JSON.parse(result.stdout).renewed, 1);
    assert.match(
      result.stderr,
      new RegExp(
        `http://127\\.0\\.0\\.1:${dead} failed \\(cannot reach the broker .*connection refused\\); ` +
          `trying the next replica, ${plain.url}`,
      ),
    );
    assert.match(result.stderr, new RegExp(`HTTP 200 from ${plain.url} \\(replica 2 of 2\\)`));
  });

  it('a 5xx from one replica goes to the next; a 4xx or a lost lease does not', async () => {
    const other = await startSimulator({ tokens: { [TOKEN]: { role: 'read-write' } } });
    try {
      const leaseId = plain.mint();
      other.inject({ kind: 'status', status: 503 });
      const servers = `${other.url},${plain.url}`;
      const failedOver = await runInProcess(['lease', 'extend', leaseId, '--token', TOKEN, '--server', servers]);
      assert.equal(failedOver.code, 0, failedOver.stderr);
      assert.equal(other.log.length, 1);
      assert.equal(plain.log.length, 1);

      other.clearFaults();
      other.resetLog();
      plain.resetLog();
      // The first replica answers "not renewed": that is the broker's word, not a failure.
      const lost = await runInProcess(['lease', 'extend', 'unknown-lease', '--token', TOKEN, '--server', servers]);
      assert.equal(lost.code, 4);
      assert.equal(other.log.length, 1);
      assert.equal(plain.log.length, 0, 'a lost lease is not asked of another replica');

      const refused = await runInProcess(['lease', 'extend', leaseId, '--token', 'wrong-token', '--server', servers]);
      assert.equal(refused.code, 3);
      assert.equal(plain.log.length, 0, 'a 401 is not asked of another replica');
    } finally {
      await other.close();
    }
  });

  it('a hanging replica gets its share of --timeout, then the next answers; later requests start there', {
    timeout: 20_000,
  }, async () => {
    const hung = await startSimulator({ tokens: { [TOKEN]: { role: 'read-write' } } });
    try {
      hung.inject({ kind: 'until-abandoned' });
      const leases = [plain.mint(), plain.mint(), plain.mint()];
      // The client's deadlines on a fake clock (as \`lease extend <ids>\` sends them, over
      // node:http): 1 s, the first replica's share of 2 s, passes once it holds the request, and
      // nothing else ever passes, so the verdict does not depend on how fast the next answers.
      const clock = new FakeClock();
      const run = runVerb('extend', leases, `${hung.url},${plain.url}`, {
        token: TOKEN,
        concurrency: 1,
        timeoutMs: 2_000,
        clientClock: clock,
        transport: 'node:http',
      });
      await hung.whenHeld(1);
      clock.advance(1_000);
      // Had the hung replica had the whole --timeout, 1 s would not end its attempt: the run
      // would never end (and the test fails on its time limit).
      const result = await run;
      assert.equal(result.code, 0, result.stderr);
      assert.equal(hung.heldCount().held, 1);
      assert.equal(hung.log.length, 1, 'after the failover, requests go to the replica that answered');
      assert.equal(plain.log.length, 3);
    } finally {
      await hung.close();
    }
  });

  it('when every replica fails, the error names each, and the exit code is 2', async () => {
    const [first, second] = (await deadPorts(2)) as [number, number];
    const result = await runInProcess([
      'lease',
      'extend',
      'some-lease',
      '--retries',
      '0',
      '--server',
      `http://127.0.0.1:${first},http://127.0.0.1:${second}`,
    ]);
    assert.equal(result.code, 2);
    assert.match(
      result.stderr,
      new RegExp(`no replica of the broker could renew: .*127\\.0\\.0\\.1:${first}.*; .*127\\.0\\.0\\.1:${second}`),
    );
  });
});
