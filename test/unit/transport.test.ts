/**
 * Every transport (undici, node:http, node:net) against a server on loopback: what goes on the wire, what
 * comes back (status, the headers the client reads, the body up to its cap), how a request ends
 * early, TLS, and how each failure is classified for the client to word. The proxy is undici's
 * alone.
 */
import assert from 'node:assert/strict';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { RawAnswer } from '../../src/broker/contract.js';
import { type Held, MAX_HEAD_BYTES, NetTransport } from '../../src/broker/net-transport.js';
import {
  type Cancellation,
  classify,
  type Transport,
  TransportFailure,
  type TransportRequest,
} from '../../src/broker/transport.js';
import { UndiciTransport } from '../../src/broker/undici-transport.js';
import { deadPort } from '../support/ports.js';
import { startProxy } from '../support/proxy.js';
import { makeCertificate } from '../support/tls.js';
import { makeTransport, TRANSPORTS } from '../support/transports.js';

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

let server: http.Server;
let origin: string;
const received: Received[] = [];
/** The server side of each request, by path, as it arrives: to see it closed. */
const arrived = new Map<string, IncomingMessage>();
/** What the server does, by request path. */
const routes = new Map<string, (req: IncomingMessage, res: ServerResponse) => void>();

before(async () => {
  server = http.createServer((req, res) => {
    arrived.set(req.url ?? '', req);
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

/** Resolves when the server sees the connection of the request to `path` closed. */
function closedOnServer(path: string): Promise<void> {
  const req = arrived.get(path);
  assert.ok(req, `${path} reached the server`);
  return new Promise((resolve) => {
    if (req.socket.destroyed) resolve();
    else req.socket.once('close', () => resolve());
  });
}

async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 10));
}

// A transport that missed an end would leave its test waiting: the timeout makes that a failure.
for (const name of TRANSPORTS)
  describe(`the ${name} transport`, { timeout: 30_000 }, () => {
    const transport = makeTransport(name, { maxBodyBytes: 1000 });
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

    it('shows each chunk to `inspect` as it comes; what it throws ends the request, the rest unread', async () => {
      routes.set('/inspected', (_req, res) => res.writeHead(200).end('{"a":[1,2]}'));
      const seen: string[] = [];
      const whole = await transport.send(
        request('/inspected', { inspect: (chunk) => void seen.push(Buffer.from(chunk).toString()) }),
      );
      assert.equal(whole.body, '{"a":[1,2]}');
      assert.equal(seen.join(''), '{"a":[1,2]}');
      // A body that never ends: only the inspection can end it, at its first chunk.
      routes.set('/endless', (_req, res) => {
        res.writeHead(200, { 'content-length': '1000' });
        res.write('x'.repeat(10));
      });
      const refusal = new Error('refused by its inspection');
      let chunks = 0;
      const ended = await transport
        .send(
          request('/endless', {
            inspect: () => {
              chunks++;
              throw refusal;
            },
          }),
        )
        .then(
          () => assert.fail('expected the inspection to end it'),
          (error: unknown) => error,
        );
      assert.equal(ended, refusal);
      assert.equal(chunks, 1);
      await closedOnServer('/endless');
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

    it('a request ended by its signal rejects at once with its reason, and its connection is dropped', async () => {
      routes.set('/hang-signal', () => {});
      const stop = new AbortController();
      const pending = transport.send(request('/hang-signal', { signal: stop.signal }));
      await until(() => arrived.has('/hang-signal'));
      const reason = new Error('deadline');
      stop.abort(reason);
      const error = await pending.then(
        () => assert.fail('expected the request to fail'),
        (caught: unknown) => caught,
      );
      assert.equal(error, reason, 'the reason of the end, not a TransportFailure (the caller knows why)');
      await closedOnServer('/hang-signal');
    });

    it('a signal already aborted ends the request before anything is sent', async () => {
      const stop = new AbortController();
      const reason = new Error('stopped');
      stop.abort(reason);
      const before = received.length;
      const error = await transport.send(request('/never', { signal: stop.signal })).then(
        () => assert.fail('expected the request to fail'),
        (caught: unknown) => caught,
      );
      assert.equal(error, reason);
      assert.equal(received.length, before);
    });

    it('a request ended by its Cancellation rejects at once with its reason, and never reads `signal`', async () => {
      routes.set('/hang-cancel', () => {});
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
      const sent = request('/hang-cancel', { cancel });
      Object.defineProperty(sent, 'signal', {
        get: () => assert.fail('the transport read `signal` although it was given `cancel`'),
      });
      const pending = transport.send(sent);
      await until(() => arrived.has('/hang-cancel'));
      assert.ok(listener, 'the transport listens to the Cancellation');
      const reason = new Error('deadline');
      (listener as (reason: unknown) => void)(reason);
      const error = await pending.then(
        () => assert.fail('expected the request to fail'),
        (caught: unknown) => caught,
      );
      assert.equal(error, reason);
      assert.equal(listener, null, 'the transport let go of the Cancellation once the request ended');
      await closedOnServer('/hang-cancel');
    });

    it('a request ended while it waits for a connection of the pool never goes out; the pool goes on', async () => {
      const single = makeTransport(name, { connections: 1 });
      try {
        routes.set('/busy', () => {});
        routes.set('/next', (_req, res) => res.writeHead(200).end('next'));
        const first = new AbortController();
        const busy = single.send(request('/busy', { signal: first.signal })).catch((error: unknown) => error);
        await until(() => arrived.has('/busy'));
        const waiting = new AbortController();
        const queued = single.send(request('/queued', { signal: waiting.signal }));
        const reason = new Error('deadline while queued');
        waiting.abort(reason);
        assert.equal(await queued.catch((error: unknown) => error), reason);
        first.abort(new Error('done'));
        await busy;
        assert.equal((await single.send(request('/next'))).body, 'next');
        assert.ok(!received.some((entry) => entry.url === '/queued'), 'the queued request was never sent');
      } finally {
        await single.close();
      }
    });

    it("what goes on the wire: Host, the caller's headers, a Content-Length and never chunked", async () => {
      const raw = await rawServer((text) => {
        const [head = '', body = ''] = text.split('\r\n\r\n');
        return head.includes('content-length') && body.length < 14
          ? undefined
          : 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok';
      });
      try {
        const answer = await transport.send(
          request('/api/v1/lease/x/extend', {
            origin: raw.origin,
            method: 'POST',
            headers: { 'content-type': 'application/json', 'user-agent': 'queenctl/1' },
            body: '{"seconds":30}',
          }),
        );
        assert.equal(answer.body, 'ok');
        const [head = '', body] = raw.text().split('\r\n\r\n');
        const [requestLine, ...lines] = head.split('\r\n');
        assert.equal(requestLine, 'POST /api/v1/lease/x/extend HTTP/1.1');
        const headers = Object.fromEntries(
          lines.map((line) => [
            line.slice(0, line.indexOf(':')).toLowerCase(),
            line.slice(line.indexOf(':') + 1).trim(),
          ]),
        );
        assert.equal(headers.host, new URL(raw.origin).host);
        assert.equal(headers['content-type'], 'application/json');
        assert.equal(headers['user-agent'], 'queenctl/1');
        assert.equal(headers['content-length'], '14');
        assert.equal(headers['transfer-encoding'], undefined, 'not chunked');
        assert.equal(body, '{"seconds":30}');
      } finally {
        await raw.close();
      }
    });

    it('hands back a repeated header as an array, and reads past a 1xx to the answer', async () => {
      const raw = await rawServer(() =>
        [
          'HTTP/1.1 103 Early Hints\r\nlink: </style.css>\r\nretry-after: 99\r\n\r\n',
          'HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nretry-after: 4\r\nDate: Wed, 02 Dec 2026 10:00:00 GMT',
          '\r\nX-Other: 1\r\ncontent-length: 4\r\n\r\nslow',
        ].join(''),
      );
      try {
        const answer = await transport.send(request('/', { origin: raw.origin }));
        assert.deepEqual(answer, {
          status: 429,
          headers: { 'retry-after': ['3', '4'], date: 'Wed, 02 Dec 2026 10:00:00 GMT' },
          body: 'slow',
        });
      } finally {
        await raw.close();
      }
    });

    it('an answer that is not HTTP is a failure, not an answer', async () => {
      const raw = await rawServer(() => 'SSH-2.0-OpenSSH_9.6\r\n');
      try {
        const failed = await failure(transport.send(request('/', { origin: raw.origin })));
        assert.equal(failed.kind, 'other');
      } finally {
        await raw.close();
      }
    });

    // Its own time limit, so that a transport waiting for the rest fails this test alone.
    it('a head that cannot be HTTP fails as soon as its first line shows it, the connection left open', {
      timeout: 10_000,
    }, async () => {
      // No end and no deadline: a transport that waited for the rest would leave the test to its timeout.
      for (const head of [
        'HTTP/2 200 OK\r\n',
        'HTTP/1.1 2x0 OK\r\n',
        'HTTP/1.1 200 OK\n',
        'HTTP/1.1 200 OK\r\nx-a: 1\n',
      ]) {
        const open = await rawServer(() => head, { keepOpen: true });
        try {
          const failed = await failure(transport.send(request('/', { origin: open.origin })));
          assert.equal(failed.kind, 'other', JSON.stringify(head));
        } finally {
          await open.close();
        }
      }
    });

    it('refuses what llhttp does in a body: two Content-Lengths, control bytes in framing, one on a 204', async () => {
      for (const reply of [
        'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nab',
        'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2;x=\x1b[31m\x00\r\nab\r\n0\r\n\r\n',
        'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n0\r\nx-t: \x1b]0;pwn\x07\r\n\r\n',
        'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2  \r\nab\r\n0\r\n\r\n',
        'HTTP/1.1 204 No Content\r\ncontent-length: 2\r\n\r\nab',
        'HTTP/1.1 304 Not Modified\r\ncontent-length: 2\r\n\r\nab',
      ]) {
        const raw = await rawServer(() => reply);
        try {
          const failed = await failure(transport.send(request('/', { origin: raw.origin })));
          assert.equal(failed.kind, 'other', JSON.stringify(reply));
        } finally {
          await raw.close();
        }
      }
    });

    it('reads what llhttp reads: CRLF before the status line, leading zeros, an answer after a 204', async () => {
      for (const [reply, status, body] of [
        ['\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok', 200, 'ok'],
        ['HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n00000000000002\r\nok\r\n0\r\n\r\n', 200, 'ok'],
        ['HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok', 204, ''],
      ] as const) {
        const raw = await rawServer(() => reply);
        try {
          const answer = await transport.send(request('/', { origin: raw.origin }));
          assert.deepEqual(answer, { status, headers: {}, body }, JSON.stringify(reply));
        } finally {
          await raw.close();
        }
      }
    });

    it('a host that does not resolve is `host-not-found`; an origin that is not a URL is `bad-address`', async () => {
      const unknown = await failure(transport.send(request('/', { origin: 'http://queen.invalid' })));
      assert.equal(unknown.kind, 'host-not-found');
      const bad = await failure(transport.send(request('/', { origin: 'http://exa mple:1' })));
      assert.equal(bad.kind, 'bad-address');
    });

    describe('https', () => {
      const certificate = makeCertificate();
      let secure: https.Server;
      let secureOrigin: string;
      before(async () => {
        secure = https.createServer({ key: certificate.key, cert: certificate.cert }, (_req, res) =>
          res.writeHead(200).end('secure'),
        );
        await new Promise<void>((resolve) => secure.listen(0, '127.0.0.1', resolve));
        secureOrigin = `https://127.0.0.1:${(secure.address() as net.AddressInfo).port}`;
      });
      after(async () => {
        secure.closeAllConnections();
        await new Promise<void>((resolve) => secure.close(() => resolve()));
      });

      it('trusts the CA it is given', async () => {
        const trusting = makeTransport(name, { ca: certificate.cert });
        try {
          assert.equal((await trusting.send(request('/', { origin: secureOrigin }))).body, 'secure');
        } finally {
          await trusting.close();
        }
      });

      it('refuses a certificate no CA it trusts signed: a `tls` failure', async () => {
        const failed = await failure(transport.send(request('/', { origin: secureOrigin })));
        assert.equal(failed.kind, 'tls');
        assert.match(failed.code, /SELF_SIGNED|UNABLE_TO_VERIFY/);
      });

      it('insecure: connects without verifying', async () => {
        const insecure = makeTransport(name, { insecure: true });
        try {
          assert.equal((await insecure.send(request('/', { origin: secureOrigin }))).body, 'secure');
        } finally {
          await insecure.close();
        }
      });
    });
  });

describe('the undici transport', () => {
  it('through a proxy: requests go via it, -v names it, a failure says it was in the way', async () => {
    routes.set('/through', (_req, res) => res.writeHead(200).end('ok'));
    // Loopback never goes through a proxy (Go's rules): a name only the proxy can reach does.
    const port = Number(new URL(origin).port);
    const proxy = await startProxy({ host: '127.0.0.1', port });
    const named = `http://queen.example.test:${port}`;
    const lines: string[] = [];
    const via = new UndiciTransport({
      proxy: { httpProxy: proxy.url, httpsProxy: undefined, noProxy: '' },
      trace: (line) => lines.push(line),
    });
    try {
      assert.equal((await via.send(request('/through', { origin: named }))).body, 'ok');
      assert.deepEqual(proxy.targets, [new URL(named).host]);
      assert.deepEqual(lines, [
        `through the proxy ${new URL(proxy.url).origin} for http (https goes direct), except localhost and loopback`,
      ]);
      // The same transport sends a loopback origin around the proxy, on its direct agent.
      assert.equal((await via.send(request('/through'))).body, 'ok');
      assert.equal(proxy.targets.length, 1);
    } finally {
      await via.close();
      await proxy.close();
    }
    const down = new UndiciTransport({
      proxy: { httpProxy: `http://127.0.0.1:${await deadPort()}`, httpsProxy: undefined, noProxy: '' },
    });
    try {
      const refused = await failure(down.send(request('/through', { origin: named })));
      assert.equal(refused.viaProxy, true);
      // Direct, beside the dead proxy: a failure there is not the proxy's.
      const direct = await failure(down.send(request('/through', { origin: `http://127.0.0.1:${await deadPort()}` })));
      assert.equal(direct.viaProxy, false);
    } finally {
      await down.close();
    }
  });
});

/**
 * What the node:net transport reads itself (src/broker/net-transport.ts), where node:http and
 * undici have a parser of their own: bodies by length, chunked or to the close, and the answers
 * their parsers refuse.
 */
describe('the node:net transport reads HTTP/1.1 as node:http does', { timeout: 30_000 }, () => {
  const transport = makeTransport('node:net');
  after(() => transport.close());
  const answerTo = async (reply: string): Promise<RawAnswer | TransportFailure> => {
    const raw = await rawServer(() => reply);
    try {
      return await transport.send(request('/', { origin: raw.origin })).catch((error: unknown) => {
        assert.ok(error instanceof TransportFailure, String(error));
        return error;
      });
    } finally {
      await raw.close();
    }
  };

  it('a chunked body, its framing split anywhere, and a body read to the close', async () => {
    const chunked = 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n6\r\n world\r\n0\r\n\r\n';
    assert.deepEqual(await answerTo(chunked), { status: 200, headers: {}, body: 'hello world' });
    const raw = await rawServer(() => undefined);
    const split = net.createServer((socket) => {
      socket.once('data', async () => {
        for (const byte of chunked) {
          socket.write(byte);
          await delay(1);
        }
      });
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => split.listen(0, '127.0.0.1', resolve));
    try {
      const origin = `http://127.0.0.1:${(split.address() as net.AddressInfo).port}`;
      assert.equal((await transport.send(request('/', { origin }))).body, 'hello world');
    } finally {
      split.close();
      await raw.close();
    }
    assert.deepEqual(await answerTo('HTTP/1.0 200 OK\r\n\r\nuntil the end'), {
      status: 200,
      headers: {},
      body: 'until the end',
    });
    assert.deepEqual(await answerTo('HTTP/1.1 204 No Content\r\n\r\n'), { status: 204, headers: {}, body: '' });
  });

  it('refuses what llhttp refuses: a folded header, a bad name, a control character, lengths that differ', async () => {
    for (const reply of [
      'HTTP/1.1 200 OK\r\nx-a: 1\r\n  folded\r\ncontent-length: 0\r\n\r\n',
      'HTTP/1.1 200 OK\r\nbad name: 1\r\ncontent-length: 0\r\n\r\n',
      'HTTP/1.1 200 OK\r\nx-a: a\x1b[31mb\r\ncontent-length: 0\r\n\r\n',
      'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nabc',
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n',
      `HTTP/1.1 200 OK\r\nx-big: ${'a'.repeat(MAX_HEAD_BYTES)}\r\ncontent-length: 0\r\n\r\n`,
      'HTTP/2 200\r\ncontent-length: 0\r\n\r\n',
    ]) {
      const failed = await answerTo(reply);
      assert.ok(failed instanceof TransportFailure, `refused: ${JSON.stringify(reply.slice(0, 60))}`);
      assert.equal(failed.kind, 'other');
    }
  });

  it('stricter than llhttp on purpose: a status under 100, control bytes in the reason, never quoted', async () => {
    for (const reply of [
      'HTTP/1.1 099 OK\r\ncontent-length: 0\r\n\r\n',
      'HTTP/1.1 200 \x1b[31mOK\x1b]0;owned\x07\r\ncontent-length: 0\r\n\r\n',
      'HTTP/1.1 200 O\x00K\r\ncontent-length: 0\r\n\r\n',
    ]) {
      const failed = await answerTo(reply);
      assert.ok(failed instanceof TransportFailure, JSON.stringify(reply));
      assert.equal(failed.kind, 'other');
      assert.doesNotMatch(failed.message, /[\0-\x1f]/);
    }
  });

  it("refuses chunk extensions over node:http's 16 KiB, counted over the whole body", async () => {
    const extended = `1;${'e'.repeat(9000)}\r\nx\r\n`;
    const failed = await answerTo(
      `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${extended}${extended}0\r\n\r\n`,
    );
    assert.ok(failed instanceof TransportFailure);
    assert.equal(failed.kind, 'other');
    assert.match(failed.message, /chunk extensions larger than 16384 bytes/);
  });

  it('bounds the framing of a chunked body as its data: tiny chunks with long size lines are too large', async () => {
    const small = makeTransport('node:net', { maxBodyBytes: 1000 });
    const raw = await rawServer(
      () =>
        `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${`${'0'.repeat(30)}1\r\nx\r\n`.repeat(700)}0\r\n\r\n`,
    );
    try {
      const failed = await failure(small.send(request('/', { origin: raw.origin })));
      assert.equal(failed.kind, 'too-large');
    } finally {
      await raw.close();
      await small.close();
    }
  });

  /** The most a socket read brings (Node reads 64 KiB at a time): what is held may include the rest of one. */
  const READ_BYTES = 64 * 1024;
  /** The most `held()` said while the body was read, and the body, for a chunked answer written in `pieces`. */
  const holding = async (pieces: string[]): Promise<{ most: Held; body: string }> => {
    const reader = new NetTransport();
    const most: Held = { buffers: 0, bytes: 0 };
    const writer = await pieceServer(['HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n', ...pieces, '0\r\n\r\n']);
    try {
      const inspect = (): void => {
        const now = reader.held();
        most.buffers = Math.max(most.buffers, now.buffers);
        most.bytes = Math.max(most.bytes, now.bytes);
      };
      const answer = await reader.send(request('/', { origin: writer.origin, inspect }));
      return { most, body: answer.body };
    } finally {
      await writer.close();
      await reader.close();
    }
  };

  it('keeps no view of what the socket read: a tiny chunk in a large read holds its own bytes only', async () => {
    // Each read is 8 KB of framing (leading zeros) around one byte of data: 40 such reads kept
    // alive would be 320 KB; what is held is the body's buffer and the rest of the read (64 KiB at most).
    const { most, body } = await holding(Array.from({ length: 40 }, () => `${'0'.repeat(8000)}1\r\nx\r\n`));
    assert.equal(body, 'x'.repeat(40));
    assert.ok(most.bytes <= READ_BYTES + 1024, `held ${most.bytes} bytes for a body of 40`);
  });

  it('holds the body of a flood of 1-byte chunks in one buffer, not one per chunk', async () => {
    const { most, body } = await holding(['1\r\nx\r\n'.repeat(20_000)]);
    assert.equal(body.length, 20_000);
    assert.ok(most.buffers <= 2, `held ${most.buffers} buffers`);
    assert.ok(most.bytes <= 2 * 20_000 + READ_BYTES, `held ${most.bytes} bytes for a body of 20000`);
  });

  it('sends the first requests of a run over node:net and the rest over the pooled transport', async () => {
    const raw = await rawServer(() => 'HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nnet');
    let opened = 0;
    const pooledPaths: string[] = [];
    const pooled: Transport = {
      send: async (sent) => {
        pooledPaths.push(sent.path);
        return { status: 200, headers: {}, body: 'pool' };
      },
      close: async () => {},
    };
    const reader = new NetTransport({
      overflow: {
        after: 2,
        open: async () => {
          opened++;
          return pooled;
        },
      },
    });
    try {
      const bodies = await Promise.all(
        ['/1', '/2', '/3', '/4', '/5'].map(
          async (path) => (await reader.send(request(path, { origin: raw.origin }))).body,
        ),
      );
      assert.deepEqual(bodies, ['net', 'net', 'pool', 'pool', 'pool']);
      assert.deepEqual(pooledPaths, ['/3', '/4', '/5']);
      assert.equal(opened, 1, 'the pooled transport is opened once');
      assert.equal(raw.text().match(/^GET /gm)?.length, 2, 'two connections over node:net');
    } finally {
      await reader.close();
      await raw.close();
    }
  });

  it('never sends a header or a path node:http would refuse: the request fails before it goes', async () => {
    const raw = await rawServer(() => 'HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n');
    try {
      for (const [path, headers] of [
        ['/', { authorization: 'Bearer a\r\nx-injected: 1' }],
        ['/a b', {}],
      ] as const) {
        const failed = await failure(transport.send(request(path, { origin: raw.origin, headers })));
        assert.equal(failed.kind, 'other');
      }
      assert.equal(raw.text(), '', 'nothing was sent');
    } finally {
      await raw.close();
    }
  });
});

/**
 * A server that reads a request's raw bytes and answers with `answer(text so far)` once it says
 * something (undefined: read on); for what node:http's server would hide or refuse to send.
 */
async function rawServer(
  answer: (text: string) => string | undefined,
  options: { keepOpen?: boolean } = {},
): Promise<{ origin: string; text(): string; close(): Promise<void> }> {
  let text = '';
  const sockets = new Set<net.Socket>();
  const raw = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (!text.includes('\r\n\r\n')) return;
      const reply = answer(text);
      if (reply === undefined) return;
      if (options.keepOpen) socket.write(reply);
      else socket.end(reply);
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(raw.address() as net.AddressInfo).port}`,
    text: () => text,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => raw.close(() => resolve()));
    },
  };
}

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
    // node:http's words for the same failures.
    ['socket hang up', Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }), 'reset'],
    ['ERR_INVALID_URL', Object.assign(new TypeError('Invalid URL'), { code: 'ERR_INVALID_URL' }), 'bad-address'],
    [
      'an altname',
      Object.assign(new Error('Hostname/IP does not match'), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' }),
      'tls',
    ],
    [
      'a parse error',
      Object.assign(new Error('Parse Error: Expected HTTP/'), { code: 'HPE_INVALID_CONSTANT' }),
      'other',
    ],
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

/** A server that answers any request with `pieces`, each written on its own once the last has drained. */
async function pieceServer(pieces: string[]): Promise<{ origin: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.once('data', async () => {
      for (const piece of pieces) {
        if (socket.destroyed) return;
        if (!socket.write(piece)) await new Promise((resolve) => socket.once('drain', resolve));
        await delay(1);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
