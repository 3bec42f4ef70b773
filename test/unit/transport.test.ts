/**
 * The undici transport against a server on loopback: what goes on the wire, what comes back
 * (status, the headers the client reads, the body up to its cap), and how each failure is
 * classified for the client to word.
 */
import assert from 'node:assert/strict';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { classify, TransportFailure, type Cancellation, type TransportRequest } from '../../src/broker/transport.js';
import { UndiciTransport } from '../../src/broker/undici-transport.js';
import { startProxy } from '../support/proxy.js';

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

let server: http.Server;
let origin: string;
const received: Received[] = [];
/** What the server does, by request path. */
const routes = new Map<string, (req: IncomingMessage, res: ServerResponse) => void>();

before(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      const route = routes.get(req.url ?? '');
      if (route) route(req, res);
      else res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function request(path: string, overrides: Partial<TransportRequest> = {}): TransportRequest {
  return { method: 'GET', origin, path, headers: {}, signal: new AbortController().signal, ...overrides };
}

async function failure(promise: Promise<unknown>): Promise<TransportFailure> {
  const error = await promise.then(
    () => assert.fail('expected the request to fail'),
    (caught: unknown) => caught,
  );
  assert.ok(error instanceof TransportFailure, String(error));
  return error;
}

async function deadPort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe('UndiciTransport', () => {
  const transport = new UndiciTransport({ maxBodyBytes: 1000 });
  after(() => transport.close());

  it('sends the request as given; hands back the status, the body and the headers the client reads', async () => {
    routes.set('/base/api/v1/lease/a%2Fb/extend', (_req, res) =>
      res
        .writeHead(503, {
          date: 'Wed, 02 Dec 2026 10:00:00 GMT',
          'retry-after': '7',
          'content-type': 'application/json',
          'x-internal': 'not for the client',
        })
        .end('{"error":"unavailable"}'),
    );
    const answer = await transport.send(
      request('/base/api/v1/lease/a%2Fb/extend', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer t0ken', 'user-agent': 'queenctl/1' },
        body: '{"seconds":30}',
      }),
    );
    assert.deepEqual(answer, {
      status: 503,
      headers: { date: 'Wed, 02 Dec 2026 10:00:00 GMT', 'retry-after': '7' },
      body: '{"error":"unavailable"}',
    });
    const sent = received.at(-1)!;
    assert.equal(sent.method, 'POST');
    assert.equal(sent.url, '/base/api/v1/lease/a%2Fb/extend', 'the path goes out as given, never re-encoded');
    assert.equal(sent.headers.authorization, 'Bearer t0ken');
    assert.equal(sent.headers['user-agent'], 'queenctl/1');
    assert.equal(sent.body, '{"seconds":30}');
  });

  it('a GET goes without a body, and a redirect is handed back with its location, not followed', async () => {
    routes.set('/api/v1/consumer-groups', (_req, res) => res.writeHead(302, { location: '/elsewhere' }).end());
    const answer = await transport.send(request('/api/v1/consumer-groups'));
    assert.equal(answer.status, 302);
    assert.equal(answer.headers.location, '/elsewhere');
    assert.equal(received.at(-1)?.method, 'GET');
    assert.equal(received.at(-1)?.body, '');
  });

  it('reads a body up to its cap, and refuses one byte more', async () => {
    routes.set('/at-cap', (_req, res) => res.writeHead(200).end('x'.repeat(1000)));
    routes.set('/over-cap', (_req, res) => res.writeHead(200).end('x'.repeat(1001)));
    assert.equal((await transport.send(request('/at-cap'))).body.length, 1000);
    const tooLarge = await failure(transport.send(request('/over-cap')));
    assert.equal(tooLarge.kind, 'too-large');
    assert.equal(tooLarge.message, 'larger than 1000 bytes');
  });

  it('a refused connection is a `refused` failure with its code', async () => {
    const refused = await failure(transport.send(request('/', { origin: `http://127.0.0.1:${await deadPort()}` })));
    assert.equal(refused.kind, 'refused');
    assert.equal(refused.code, 'ECONNREFUSED');
    assert.equal(refused.viaProxy, false);
  });

  it('a connection closed in the middle of the body is a `reset` failure', async () => {
    routes.set('/half', (_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('{"leaseId":');
      setImmediate(() => res.socket?.destroy());
    });
    assert.equal((await failure(transport.send(request('/half')))).kind, 'reset');
  });

  it('a request ended by its signal rejects at once, with no TransportFailure (the caller knows why)', async () => {
    routes.set('/hang', () => {});
    const stop = new AbortController();
    const pending = transport.send(request('/hang', { signal: stop.signal }));
    stop.abort(new Error('deadline'));
    const error = await pending.then(
      () => assert.fail('expected the request to fail'),
      (caught: unknown) => caught,
    );
    assert.ok(!(error instanceof TransportFailure), String(error));
  });

  it('a request ended by its Cancellation rejects at once with its reason, and never reads `signal`', async () => {
    routes.set('/hang', () => {});
    let listener: ((reason: unknown) => void) | null = null;
    const cancel: Cancellation = {
      cancelled: false,
      reason: undefined,
      onCancel: (next) => {
        listener = next;
      },
    };
    // The client makes this AbortSignal only when it is read (issue 19): a transport given
    // `cancel` must not read it.
    const sent = request('/hang', { cancel });
    Object.defineProperty(sent, 'signal', {
      get: () => assert.fail('the transport read `signal` although it was given `cancel`'),
    });
    const pending = transport.send(sent);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(listener, 'the transport listens to the Cancellation');
    const reason = new Error('deadline');
    (listener as (reason: unknown) => void)(reason);
    const error = await pending.then(
      () => assert.fail('expected the request to fail'),
      (caught: unknown) => caught,
    );
    assert.equal(error, reason);
    assert.equal(listener, null, 'the transport let go of the Cancellation once the request ended');
  });

  it('through a proxy: requests go via it, -v names it, a failure says it was in the way', async () => {
    const proxy = await startProxy();
    const lines: string[] = [];
    const via = new UndiciTransport({
      proxy: { httpProxy: proxy.url, httpsProxy: undefined, noProxy: '' },
      trace: (line) => lines.push(line),
    });
    try {
      routes.set('/through', (_req, res) => res.writeHead(200).end('ok'));
      assert.equal((await via.send(request('/through'))).body, 'ok');
      assert.deepEqual(proxy.targets, [new URL(origin).host]);
      assert.deepEqual(lines, [`through the proxy ${new URL(proxy.url).origin}`]);
    } finally {
      await via.close();
      await proxy.close();
    }
    const down = new UndiciTransport({
      proxy: { httpProxy: `http://127.0.0.1:${await deadPort()}`, httpsProxy: undefined, noProxy: '' },
    });
    try {
      const refused = await failure(down.send(request('/through')));
      assert.equal(refused.viaProxy, true);
    } finally {
      await down.close();
    }
  });
});

describe('classify', () => {
  const cases: Array<[string, unknown, string]> = [
    ['ECONNREFUSED', Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), 'refused'],
    ['ENOTFOUND', Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' }), 'host-not-found'],
    ['EAI_AGAIN', Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' }), 'host-not-found'],
    ['ECONNRESET', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), 'reset'],
    ['UND_ERR_SOCKET', Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }), 'reset'],
    ['EPIPE', Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }), 'reset'],
    ['a code in the cause', new Error('fetch failed', { cause: { code: 'ECONNREFUSED' } }), 'refused'],
    ['a certificate code', Object.assign(new Error('self-signed'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }), 'tls'],
    ['TLS named in the message', new Error('ERR_SSL_WRONG_VERSION_NUMBER'), 'tls'],
    ['UND_ERR_INVALID_ARG', Object.assign(new Error('invalid origin'), { code: 'UND_ERR_INVALID_ARG' }), 'bad-address'],
    ['anything else', Object.assign(new Error('client destroyed'), { code: 'UND_ERR_DESTROYED' }), 'other'],
    ['not an Error', 'a string', 'other'],
  ];
  for (const [what, error, kind] of cases) {
    it(`${what} is ${kind}`, () => {
      const classified = classify(error, false);
      assert.equal(classified.kind, kind);
      assert.equal(classified.message, error instanceof Error ? error.message : String(error));
    });
  }
});
