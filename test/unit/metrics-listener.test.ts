/**
 * The listener of --metrics-address, on loopback (docs/metrics.md, "Who may connect";
 * docs/security.md): past its cap a new connection is closed at once while the others are still
 * served; a client that trickles its headers is cut; a request addressed to another name than an
 * IP address, localhost or the name it listens on gets 421. Limits are shrunk where a test waits
 * for one, and every wait has a limit far above it that only turns a hang into a failure.
 * (A flood of a real watch under ulimit -n 256: test/process/metrics-flood.test.ts.)
 */
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { parseMetricsAddress } from '../../src/metrics/address.js';
import {
  isAllowedHost,
  LISTENER_LIMITS,
  type ListenerLimits,
  type MetricsServer,
  serveMetrics,
  text,
} from '../../src/metrics/server.js';

/** Turns a listener that never answers, or never closes, into a failure. */
const WITHIN_MS = 10_000;
/** Limits no test here waits for: whatever a test sees happen, these did not do it. */
const LONG: ListenerLimits = {
  maxConnections: 1_000,
  headersTimeoutMs: 60_000,
  requestTimeoutMs: 60_000,
  checkIntervalMs: 30_000,
  keepAliveTimeoutMs: 60_000,
  answerTimeoutMs: 60_000,
};
const ROUTES = { '/metrics': () => text(200, 'queenctl_up 1'), '/livez': () => text(200, 'ok') };

const servers: MetricsServer[] = [];
after(() => Promise.all(servers.map((server) => server.close())));

async function listen(limits: Partial<ListenerLimits>, address = '127.0.0.1:0'): Promise<MetricsServer> {
  const server = await serveMetrics(parseMetricsAddress(address), ROUTES, { ...LONG, ...limits });
  servers.push(server);
  return server;
}

function portOf(server: MetricsServer): number {
  return Number(server.address.slice(server.address.lastIndexOf(':') + 1));
}

/** A raw connection: what a test writes is what the listener reads, byte for byte. */
interface Connection {
  socket: Socket;
  /** Everything received so far. */
  received(): string;
  /** Resolves once the listener closed it (ended or reset), with the ms since it connected. */
  closed: Promise<number>;
  /** Sends a GET and resolves with the answer's status and body (one answer at a time). */
  get(path: string, host?: string): Promise<{ status: number; body: string }>;
}

async function open(server: MetricsServer): Promise<Connection> {
  const socket = connect(portOf(server), '127.0.0.1');
  const connectedAt = Date.now();
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let data = '';
  let consumed = 0;
  const waiters = new Set<() => void>();
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    data += chunk;
    for (const waiter of [...waiters]) waiter();
  });
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - connectedAt)));
  void closed.then(() => {
    for (const waiter of [...waiters]) waiter();
  });
  const answer = (): { status: number; body: string; length: number } | undefined => {
    const rest = data.slice(consumed);
    const headEnd = rest.indexOf('\r\n\r\n');
    if (headEnd < 0) return undefined;
    const head = rest.slice(0, headEnd);
    const length = Number(/^content-length: *(\d+)$/im.exec(head)?.[1] ?? 0);
    const body = rest.slice(headEnd + 4, headEnd + 4 + length);
    if (Buffer.byteLength(body) < length) return undefined;
    return { status: Number(head.split(' ')[1]), body, length: headEnd + 4 + body.length };
  };
  return {
    socket,
    received: () => data,
    closed,
    get: (path, host = '127.0.0.1') =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => fail('no answer'), WITHIN_MS);
        const fail = (why: string): void => {
          clearTimeout(timer);
          waiters.delete(check);
          reject(new Error(`GET ${path}: ${why}; received ${JSON.stringify(data.slice(consumed))}`));
        };
        const check = (): void => {
          const found = answer();
          if (found) {
            clearTimeout(timer);
            waiters.delete(check);
            consumed += found.length;
            resolve({ status: found.status, body: found.body });
          } else if (socket.destroyed || socket.readableEnded) fail('the listener closed the connection');
        };
        waiters.add(check);
        socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      }),
  };
}

/** Resolves with `promise`, or fails after WITHIN_MS saying what did not happen. */
async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${WITHIN_MS} ms`)), WITHIN_MS);
  });
  try {
    return await Promise.race([promise, limit]);
  } finally {
    clearTimeout(timer);
  }
}

describe('--metrics-address listener: the defaults', () => {
  it('a few dozen connections, headers within seconds, a short keep-alive', () => {
    assert.ok(LISTENER_LIMITS.maxConnections >= 8 && LISTENER_LIMITS.maxConnections <= 64);
    assert.ok(LISTENER_LIMITS.headersTimeoutMs <= 10_000);
    assert.ok(LISTENER_LIMITS.headersTimeoutMs + LISTENER_LIMITS.checkIntervalMs <= 10_000);
    assert.ok(LISTENER_LIMITS.requestTimeoutMs >= LISTENER_LIMITS.headersTimeoutMs);
    assert.ok(LISTENER_LIMITS.keepAliveTimeoutMs <= 5_000);
  });
});

describe('--metrics-address listener: the cap on connections', () => {
  it('connection N+1 is closed at once, unanswered; the N open are still served; a freed slot is reused', async () => {
    const cap = 4;
    const server = await listen({ maxConnections: cap });
    const held: Connection[] = [];
    // Each answered once: the listener has accepted and counts them all.
    for (let i = 0; i < cap; i++) {
      const connection = await open(server);
      assert.equal((await connection.get('/metrics')).status, 200);
      held.push(connection);
    }
    const extra = await open(server);
    extra.socket.write('GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    const closedAfterMs = await within(extra.closed, 'connection N+1 closed');
    assert.equal(extra.received(), '', 'connection N+1 got no answer');
    // No timer of the listener's had run out (the shortest is LONG's 30 s): the cap closed it.
    assert.ok(closedAfterMs < LONG.checkIntervalMs, `closed after ${closedAfterMs} ms`);
    for (const connection of held) assert.equal((await connection.get('/livez')).status, 200);

    // One goes; its slot is free once the listener has seen it go.
    held.pop()?.socket.destroy();
    const started = Date.now();
    for (;;) {
      const next = await open(server);
      const answered = await next.get('/metrics').catch(() => null);
      if (answered) {
        assert.equal(answered.status, 200);
        break;
      }
      assert.ok(Date.now() - started < WITHIN_MS, 'a freed slot was never reused');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    for (const connection of held) connection.socket.destroy();
  });
});

// Each waits on the wall clock for a timeout of its own listener: side by side, the group takes its
// longest wait (the keep-alive one), not the sum of the three.
describe('--metrics-address listener: clients that hold connections without asking', { concurrency: true }, () => {
  const HEADERS_MS = 500;
  const limits = { headersTimeoutMs: HEADERS_MS, requestTimeoutMs: 1_000, checkIntervalMs: 100 };

  it('a client trickling its headers a byte at a time is cut; another is answered meanwhile', async () => {
    const server = await listen(limits);
    const slow = await open(server);
    slow.socket.write('GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
    let sent = 0;
    const trickle = setInterval(() => {
      if (!slow.socket.destroyed) slow.socket.write('a');
      sent++;
    }, 50);
    try {
      const other = await open(server);
      assert.equal((await other.get('/metrics')).status, 200);
      const closedAfterMs = await within(slow.closed, 'the trickling client cut');
      assert.ok(closedAfterMs >= HEADERS_MS, `cut after ${closedAfterMs} ms, before its ${HEADERS_MS} ms`);
      assert.doesNotMatch(slow.received(), /^HTTP\/1\.1 200/, 'never answered');
      assert.ok(sent > 0, 'it was still sending');
      other.socket.destroy();
    } finally {
      clearInterval(trickle);
    }
  });

  it('a connection that sends nothing is closed', async () => {
    const server = await listen(limits);
    const idle = await open(server);
    const closedAfterMs = await within(idle.closed, 'the idle connection closed');
    assert.ok(closedAfterMs >= HEADERS_MS, `closed after ${closedAfterMs} ms`);
  });

  it('an idle keep-alive connection is closed once its answer is sent', async () => {
    const server = await listen({ keepAliveTimeoutMs: 300 });
    const connection = await open(server);
    assert.equal((await connection.get('/metrics')).status, 200);
    await within(connection.closed, 'the keep-alive connection closed');
  });
});

describe('--metrics-address listener: the Host a request names', () => {
  /** A GET with the Host header as given (fetch would not let a test choose it). */
  function getWithHost(server: MetricsServer, path: string, host: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const request = httpRequest(
        { host: '127.0.0.1', port: portOf(server), path, headers: { host }, setHost: false, timeout: WITHIN_MS },
        (response) => {
          let body = '';
          response.setEncoding('utf8').on('data', (chunk: string) => {
            body += chunk;
          });
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
        },
      );
      request.on('timeout', () => request.destroy(new Error(`GET ${path}: no answer`)));
      request.on('error', reject);
      request.end();
    });
  }

  it('421 for a name of another site (DNS rebinding), on every route; nothing of /metrics in it', async () => {
    const server = await listen({});
    const port = portOf(server);
    for (const host of [
      'evil.example',
      `evil.example:${port}`,
      `127.0.0.1.evil.example:${port}`,
      `localhost.:${port}`,
    ]) {
      for (const path of ['/metrics', '/livez', '/nowhere']) {
        const { status, body } = await getWithHost(server, path, host);
        assert.equal(status, 421, `${host} ${path}`);
        assert.match(body, /^misdirected request: .*by address/);
        assert.doesNotMatch(body, /queenctl_up/);
      }
    }
  });

  it('200 for 127.0.0.1, [::1], localhost and the address it is bound to', async () => {
    const server = await listen({});
    const port = portOf(server);
    for (const host of ['127.0.0.1', `127.0.0.1:${port}`, `[::1]:${port}`, 'localhost', `LocalHost:${port}`]) {
      const { status, body } = await getWithHost(server, '/metrics', host);
      assert.equal(status, 200, host);
      assert.equal(body, 'queenctl_up 1\n');
    }
    assert.equal((await getWithHost(server, '/metrics', server.address)).status, 200, server.address);
  });

  it('200 for the host name --metrics-address names, 421 for another', async () => {
    const server = await listen({}, 'localhost:0');
    assert.equal((await getWithHost(server, '/metrics', `localhost:${portOf(server)}`)).status, 200);
    assert.ok(isAllowedHost('worker-1.queen.svc:9464', 'worker-1.queen.svc'));
    assert.ok(isAllowedHost('WORKER-1:9464', 'worker-1'));
    assert.equal(isAllowedHost('worker-1:9464', undefined), false, 'listening on every interface');
    assert.equal(isAllowedHost('worker-2:9464', 'worker-1'), false);
  });

  it('what counts as an address: IPv4 and bracketed IPv6 literals, and nothing that only looks like one', () => {
    for (const host of ['10.1.2.3:9464', '10.1.2.3', '[fd00::1]:9464', '[::ffff:127.0.0.1]', undefined])
      assert.ok(isAllowedHost(host, undefined), String(host));
    for (const host of [
      '',
      ':9464',
      'fd00::1',
      '[evil.example]:9464',
      '10.1.2.3.evil.example',
      '2130706433',
      '0x7f.1',
      '10.1.2.3:9464:1',
      'evil.example:abc',
      'localhost.evil.example',
    ])
      assert.equal(isAllowedHost(host, '10.1.2.3'), false, host);
  });
});
