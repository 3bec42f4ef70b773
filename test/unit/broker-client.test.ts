/**
 * The broker client over a fake transport and a fake clock: what it sends, which replica it
 * asks next and when, how long it waits, and which typed error each failure becomes. Nothing
 * here opens a socket or waits in real time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BrokerClient, type BrokerClientOptions } from '../../src/broker/client.js';
import type { RawAnswer } from '../../src/broker/contract.js';
import {
  TransportFailure,
  type FailureKind,
  type Transport,
  type TransportRequest,
} from '../../src/broker/transport.js';
import { AuthError, BrokerError, ExitCode, QueenctlError } from '../../src/exit.js';
import { FakeClock } from '../support/fakes.js';

const TOKEN = 'eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXBheWxvYWQ.c2lnbmF0dXJlLWJ5dGVz';
const LEASE = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';
const EXPIRY = '2026-12-02T10:01:00.000000Z';
const A = 'http://a.test:6632';
const B = 'http://b.test:6632';
const C = 'http://c.test:6632';

type Handler = (request: TransportRequest) => RawAnswer | Promise<RawAnswer>;

/** A transport that records what it is handed and answers as each origin's handler says. */
class FakeTransport implements Transport {
  readonly sent: TransportRequest[] = [];
  closed = false;

  constructor(private readonly handlers: Record<string, Handler>) {}

  async send(request: TransportRequest): Promise<RawAnswer> {
    this.sent.push(request);
    const handler = this.handlers[request.origin];
    if (!handler) throw new Error(`no handler for ${request.origin}`);
    return handler(request);
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  origins(): string[] {
    return this.sent.map((request) => request.origin);
  }
}

function answer(status: number, body: unknown, headers: RawAnswer['headers'] = {}): RawAnswer {
  return { status, headers, body: typeof body === 'string' ? body : JSON.stringify(body) };
}

function renewed(request: TransportRequest): RawAnswer {
  const leaseId = decodeURIComponent(/\/lease\/([^/]+)\/extend$/.exec(request.path)![1]!);
  return answer(
    200,
    { leaseId, success: true, renewed: 1, newExpiresAt: EXPIRY, expiresAt: EXPIRY, lease_expires_at: EXPIRY },
    { date: 'Wed, 02 Dec 2026 10:00:00 GMT' },
  );
}

const notRenewed: Handler = () =>
  answer(200, {
    leaseId: LEASE,
    success: false,
    renewed: 0,
    newExpiresAt: null,
    expiresAt: null,
    lease_expires_at: null,
  });

/** A broker that never answers: the request ends only when its signal does, as with undici. */
const hang: Handler = (request) =>
  new Promise((_, reject) => {
    request.signal.addEventListener('abort', () => reject(request.signal.reason), { once: true });
  });

function failing(kind: FailureKind, code = '', message = `failed (${kind})`, viaProxy = false): Handler {
  return () => {
    throw new TransportFailure(kind, message, code, viaProxy);
  };
}

function client(
  transport: Transport,
  options: Partial<BrokerClientOptions> = {},
): { client: BrokerClient; clock: FakeClock; trace: string[] } {
  const clock = new FakeClock();
  const trace: string[] = [];
  const made = new BrokerClient({
    server: A,
    token: TOKEN,
    timeoutMs: 10_000,
    userAgent: 'queenctl/9.9.9',
    transport,
    clock,
    trace: (line) => trace.push(line),
    ...options,
  });
  return { client: made, clock, trace };
}

/** A fake clock that counts the sleeps still waiting. */
class CountingClock extends FakeClock {
  readonly started: number[] = [];
  waiting = 0;

  override sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.started.push(ms);
    this.waiting++;
    const done = (): void => void this.waiting--;
    const sleeping = super.sleep(ms, signal);
    sleeping.then(done, done);
    return sleeping;
  }
}

/** Lets every pending promise run, so the request reaches the transport before time moves. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** The settled state of a promise without waiting for it: 'pending' while it is not. */
async function state<T>(promise: Promise<T>): Promise<'pending' | 'resolved' | 'rejected'> {
  const marker = Symbol('pending');
  await settle();
  return Promise.race([promise, Promise.resolve(marker)]).then(
    (value) => (value === marker ? 'pending' : 'resolved'),
    () => 'rejected',
  );
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  assert.fail('expected the request to fail');
}

describe('what the client sends', () => {
  it('POSTs {"seconds": n} to the extend route with the Bearer token, its User-Agent and JSON content', async () => {
    const transport = new FakeTransport({ [A]: renewed });
    const { client: broker } = client(transport);
    const renewal = await broker.extend(LEASE, 90);
    assert.equal(renewal.result.renewed, 1);
    assert.equal(renewal.brokerDateMs, Date.parse('2026-12-02T10:00:00Z'));
    const [sent] = transport.sent;
    assert.equal(sent?.method, 'POST');
    assert.equal(sent?.origin, A);
    assert.equal(sent?.path, `/api/v1/lease/${LEASE}/extend`);
    assert.equal(sent?.body, '{"seconds":90}');
    assert.deepEqual(sent?.headers, {
      'content-type': 'application/json',
      'user-agent': 'queenctl/9.9.9',
      authorization: `Bearer ${TOKEN}`,
    });
  });

  it('sends no authorization header without a token', async () => {
    const transport = new FakeTransport({ [A]: renewed });
    await client(transport, { token: undefined }).client.extend(LEASE, 30);
    assert.equal(transport.sent[0]?.headers.authorization, undefined);
  });

  it('percent-encodes the lease id as one path segment, below the base path of the server URL', async () => {
    const transport = new FakeTransport({ [A]: renewed });
    const { client: broker } = client(transport, { server: `${A}/queen/` });
    const renewal = await broker.extend('jobs/42 ?#%', 30);
    assert.equal(transport.sent[0]?.path, '/queen/api/v1/lease/jobs%2F42%20%3F%23%25/extend');
    assert.equal(renewal.result.leaseId, 'jobs/42 ?#%');
  });

  it('close() closes the transport', async () => {
    const transport = new FakeTransport({});
    await client(transport).client.close();
    assert.ok(transport.closed);
  });
});

describe('failover across replicas', () => {
  const unreachable: Array<[string, Handler]> = [
    ['connection refused', failing('refused', 'ECONNREFUSED')],
    ['host not found', failing('host-not-found', 'ENOTFOUND')],
    ['connection reset', failing('reset', 'ECONNRESET')],
    ['a TLS failure', failing('tls', 'DEPTH_ZERO_SELF_SIGNED_CERT')],
    ['another transport failure', failing('other', 'UND_ERR_CLOSED')],
    ['HTTP 503', () => answer(503, { error: 'unavailable' })],
    ['HTTP 500 pool', () => answer(500, { error: 'pool' })],
    ['HTTP 500 renew failed', () => answer(500, { error: 'renew failed: deadlock' })],
  ];
  for (const [what, handler] of unreachable) {
    it(`${what} on one replica goes to the next, and later requests start at the one that answered`, async () => {
      const transport = new FakeTransport({ [A]: handler, [B]: renewed });
      const { client: broker } = client(transport, { server: `${A},${B}` });
      const renewal = await broker.extend(LEASE, 30);
      assert.equal(renewal.result.renewed, 1);
      assert.deepEqual(transport.origins(), [A, B]);
      assert.equal(broker.server, B);
      await broker.extend(LEASE, 30);
      assert.deepEqual(transport.origins(), [A, B, B]);
    });
  }

  const theBrokersWord: Array<[string, Handler, ExitCode]> = [
    ['HTTP 401', () => answer(401, { error: 'Authentication required' }), ExitCode.Auth],
    ['HTTP 403', () => answer(403, { error: 'Insufficient permissions' }), ExitCode.Auth],
    ['HTTP 400', () => answer(400, { error: 'Invalid JSON' }), ExitCode.Broker],
    ['HTTP 404', () => answer(404, '<html>not found</html>'), ExitCode.Broker],
    ['a lease not renewed', notRenewed, ExitCode.Ok],
    ['a 200 that is not JSON', () => answer(200, '<html>ok</html>'), ExitCode.Broker],
    ['an answer over the size cap', failing('too-large', '', 'larger than 1048576 bytes'), ExitCode.Broker],
  ];
  for (const [what, handler, code] of theBrokersWord) {
    it(`${what} is not asked of another replica`, async () => {
      const transport = new FakeTransport({ [A]: handler, [B]: renewed });
      const { client: broker } = client(transport, { server: `${A},${B}` });
      const outcome = await broker.extend(LEASE, 30).then(
        (renewal) => renewal.result.renewed,
        (error: QueenctlError) => error,
      );
      if (code === ExitCode.Ok) assert.equal(outcome, 0);
      else assert.equal((outcome as QueenctlError).exitCode, code, String(outcome));
      assert.deepEqual(transport.origins(), [A], 'B was never asked');
      assert.equal(broker.server, A);
    });
  }

  it('when every replica fails, one transient error names each of them', async () => {
    const transport = new FakeTransport({
      [A]: failing('refused', 'ECONNREFUSED'),
      [B]: () => answer(502, '<html>bad gateway</html>'),
      [C]: failing('reset', 'ECONNRESET'),
    });
    const { client: broker } = client(transport, { server: `${A},${B},${C}` });
    const error = await rejection(broker.extend(LEASE, 30));
    assert.ok(error instanceof BrokerError);
    assert.match(error.message, /^no replica of the broker could renew: /);
    assert.match(error.message, /cannot reach the broker at http:\/\/a\.test:6632: connection refused; /);
    assert.match(error.message, /http:\/\/b\.test:6632: the broker answered HTTP 502/);
    assert.match(error.message, /the connection to http:\/\/c\.test:6632 was closed before a full answer$/);
    assert.equal(error.transient, true);
    assert.deepEqual(transport.origins(), [A, B, C]);
  });

  it('-v says which replica failed, why, and which is asked next', async () => {
    const transport = new FakeTransport({ [A]: failing('refused', 'ECONNREFUSED'), [B]: renewed });
    const { client: broker, trace } = client(transport, { server: `${A},${B}` });
    await broker.extend(LEASE, 30);
    assert.match(
      trace[0]!,
      /^POST http:\/\/a\.test:6632\/api\/v1\/lease\/.+\/extend \(replica 1 of 2\) \{"seconds":30\}/,
    );
    assert.match(trace[1]!, /^no answer from http:\/\/a\.test:6632 \(replica 1 of 2\) after 0ms: failed/);
    assert.equal(
      trace[2],
      `${A} failed (cannot reach the broker at ${A}: connection refused); trying the next replica, ${B}`,
    );
    assert.match(trace[4]!, /^HTTP 200 from http:\/\/b\.test:6632 \(replica 2 of 2\) in 0ms: /);
  });
});

describe('deadlines', () => {
  it('a request with no answer is cut at --timeout: a transient error that says to raise it', async () => {
    const transport = new FakeTransport({ [A]: hang });
    const { client: broker, clock } = client(transport);
    const pending = broker.extend(LEASE, 30);
    await settle();
    clock.advance(9_999);
    assert.equal(await state(pending), 'pending');
    clock.advance(1);
    const error = await rejection(pending);
    assert.ok(error instanceof BrokerError);
    assert.equal(error.message, `no answer from ${A} within 10s`);
    assert.equal(error.transient, true);
    assert.match(error.hint ?? '', /raise --timeout/);
    assert.ok(transport.sent[0]?.signal.aborted, 'the transport was told to stop');
  });

  it("a request's own timeout (a watch's time left) replaces the client's", async () => {
    const transport = new FakeTransport({ [A]: hang });
    const { client: broker, clock } = client(transport);
    const pending = broker.extend(LEASE, 30, { timeoutMs: 2_500 });
    await settle();
    clock.advance(2_500);
    assert.equal((await rejection(pending)).message, `no answer from ${A} within 2.5s`);
  });

  it('a replica that hangs gets an equal share of the time, and the next one the rest', async () => {
    const transport = new FakeTransport({ [A]: hang, [B]: hang, [C]: renewed });
    const { client: broker, clock, trace } = client(transport, { server: `${A},${B},${C}`, timeoutMs: 9_000 });
    const pending = broker.extend(LEASE, 30);
    await settle();
    assert.deepEqual(transport.origins(), [A]);
    clock.advance(2_999);
    await settle();
    assert.deepEqual(transport.origins(), [A], 'A still has time');
    clock.advance(1);
    await settle();
    assert.deepEqual(transport.origins(), [A, B], 'A used its third; B gets half of what is left');
    clock.advance(3_000);
    const renewal = await pending;
    assert.equal(renewal.result.renewed, 1);
    assert.deepEqual(transport.origins(), [A, B, C]);
    assert.ok(
      trace.includes(
        `${A} failed (no answer from ${A} within 3s, its share of --timeout); trying the next replica, ${B}`,
      ),
    );
  });

  it('when the last replica hangs too, the deadline ends the request with every replica named', async () => {
    const transport = new FakeTransport({ [A]: hang, [B]: hang });
    const { client: broker, clock } = client(transport, { server: `${A},${B}`, timeoutMs: 4_000 });
    const pending = broker.extend(LEASE, 30);
    await settle();
    clock.advance(2_000);
    await settle();
    clock.advance(2_000);
    const error = await rejection(pending);
    assert.ok(error instanceof BrokerError);
    assert.equal(
      error.message,
      `no replica of the broker could renew: no answer from ${A} within 2s, its share of --timeout; ` +
        `no answer from ${B} within 4s`,
    );
    assert.equal(error.transient, true);
  });

  it('once the deadline has passed, a 5xx is the last word: no further replica is asked', async () => {
    const clock = new FakeClock();
    const late: Handler = async () => {
      clock.advance(10_000);
      await settle();
      return answer(503, { error: 'unavailable' });
    };
    const transport = new FakeTransport({ [A]: late, [B]: renewed });
    const { client: broker } = client(transport, { server: `${A},${B}`, clock });
    const error = await rejection(broker.extend(LEASE, 30));
    assert.match(error.message, /^the broker answered HTTP 503: unavailable$/);
    assert.deepEqual(transport.origins(), [A]);
  });

  it('a stop of the caller (a signal) ends the request with its reason, and no other replica is asked', async () => {
    const transport = new FakeTransport({ [A]: hang, [B]: renewed });
    const { client: broker } = client(transport, { server: `${A},${B}` });
    const stop = new AbortController();
    const pending = broker.extend(LEASE, 30, { signal: stop.signal });
    await settle();
    const reason = new Error('SIGINT');
    stop.abort(reason);
    assert.equal(await rejection(pending), reason);
    assert.deepEqual(transport.origins(), [A]);
  });

  it('a request that ends leaves no timer behind (thousands of ids in flight would hold them)', async () => {
    const clock = new CountingClock();
    const transport = new FakeTransport({ [A]: failing('refused', 'ECONNREFUSED'), [B]: renewed });
    const { client: broker } = client(transport, { server: `${A},${B}`, clock });
    await broker.extend(LEASE, 30);
    await settle();
    assert.deepEqual(clock.started, [10_000, 5_000], "the request's deadline, and A's share of it");
    assert.equal(clock.waiting, 0);

    const stopped = new CountingClock();
    const { client: hanging } = client(new FakeTransport({ [A]: hang }), { clock: stopped });
    const stop = new AbortController();
    const pending = hanging.extend(LEASE, 30, { signal: stop.signal });
    await settle();
    assert.equal(stopped.waiting, 1);
    stop.abort(new Error('stopped'));
    await rejection(pending);
    await settle();
    assert.equal(stopped.waiting, 0);
  });
});

describe('each failure, as the typed error a command reports', () => {
  const cases: Array<{
    what: string;
    handler: Handler;
    type: typeof AuthError | typeof BrokerError;
    message: RegExp;
    transient?: boolean;
    hint?: RegExp;
  }> = [
    {
      what: '401',
      handler: () => answer(401, { error: 'Authentication required' }),
      type: AuthError,
      message: /^the broker refused the credentials \(HTTP 401: Authentication required\)$/,
      hint: /--token-file/,
    },
    {
      what: '403',
      handler: () => answer(403, { error: 'Insufficient permissions' }),
      type: AuthError,
      message: /^the broker refused the renewal \(HTTP 403: Insufficient permissions\)$/,
      hint: /read-write role/,
    },
    {
      what: '503',
      handler: () => answer(503, '<html>down</html>'),
      type: BrokerError,
      message: /^the broker answered HTTP 503: "<html>down<\/html>"$/,
      transient: true,
    },
    {
      what: '500 pool',
      handler: () => answer(500, { error: 'pool' }),
      type: BrokerError,
      message: /no database connection free \(HTTP 500 pool\)/,
      transient: true,
    },
    {
      what: 'connection refused',
      handler: failing('refused', 'ECONNREFUSED'),
      type: BrokerError,
      message: /^cannot reach the broker at http:\/\/a\.test:6632: connection refused$/,
      transient: true,
      hint: /is the broker running/,
    },
    {
      what: 'host not found',
      handler: failing('host-not-found', 'ENOTFOUND'),
      type: BrokerError,
      message: /^cannot reach the broker at http:\/\/a\.test:6632: host not found$/,
      transient: true,
    },
    {
      what: 'connection reset',
      handler: failing('reset', 'ECONNRESET'),
      type: BrokerError,
      message: /^the connection to http:\/\/a\.test:6632 was closed before a full answer$/,
      transient: true,
    },
    {
      what: 'TLS',
      handler: failing('tls', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'),
      type: BrokerError,
      message: /^TLS connection to http:\/\/a\.test:6632 failed: self-signed certificate$/,
      transient: false,
      hint: /--cacert/,
    },
    {
      what: 'a bad address',
      handler: failing('bad-address', 'UND_ERR_INVALID_ARG', 'invalid origin'),
      type: BrokerError,
      message: /^cannot use http:\/\/a\.test:6632 as a broker address: invalid origin$/,
      transient: false,
    },
    {
      what: 'another transport failure',
      handler: failing('other', 'UND_ERR_CLOSED', 'the client is destroyed'),
      type: BrokerError,
      message: /^request to http:\/\/a\.test:6632 failed: the client is destroyed \(UND_ERR_CLOSED\)$/,
      transient: true,
    },
    {
      what: 'a failure through a proxy',
      handler: failing('refused', 'ECONNREFUSED', 'connect ECONNREFUSED', true),
      type: BrokerError,
      message: /^cannot reach the proxy in front of http:\/\/a\.test:6632: connection refused$/,
      transient: true,
      hint: /HTTPS_PROXY\/HTTP_PROXY.*NO_PROXY/,
    },
    {
      what: 'an answer over the size cap',
      handler: failing('too-large', '', 'larger than 1048576 bytes'),
      type: BrokerError,
      message: /^the broker's answer is larger than 1048576 bytes: not a lease renewal$/,
      transient: false,
    },
    {
      what: 'a 200 that is not JSON',
      handler: () => answer(200, 'OK'),
      type: BrokerError,
      message: /outside the lease contract: HTTP 200 with a body that is not JSON/,
      transient: false,
    },
  ];
  for (const { what, handler, type, message, transient, hint } of cases) {
    const retried = transient === undefined ? '' : transient ? ', transient' : ', not retried';
    it(`${what}: ${type.name}${retried}`, async () => {
      const error = await rejection(client(new FakeTransport({ [A]: handler })).client.extend(LEASE, 30));
      assert.ok(error instanceof type, `${error.name}: ${error.message}`);
      assert.match(error.message, message);
      if (transient !== undefined) assert.equal((error as BrokerError).transient, transient);
      if (hint) assert.match((error as QueenctlError).hint ?? '', hint);
    });
  }

  it('an error that is not a TransportFailure still becomes a transient BrokerError naming the replica', async () => {
    const transport = new FakeTransport({
      [A]: () => {
        throw new TypeError('surprise');
      },
    });
    const error = await rejection(client(transport).client.extend(LEASE, 30));
    assert.ok(error instanceof BrokerError);
    assert.equal(error.message, `request to ${A} failed: surprise`);
  });
});

describe('the token', () => {
  const echo = `Authorization: Bearer ${TOKEN}`;
  const echoing: Array<[string, Handler]> = [
    ['a 401 that quotes the request', () => answer(401, { error: echo })],
    ['a 400 in plain text', () => answer(400, `bad request from ${echo}`)],
    ['a 200 outside the contract', () => answer(200, { echo })],
    ['a transport failure that quotes it', failing('other', '', `proxy said ${echo}`)],
  ];
  for (const [what, handler] of echoing) {
    it(`never appears in an error message or a -v line: ${what}`, async () => {
      const { client: broker, trace } = client(new FakeTransport({ [A]: handler }));
      const error = await rejection(broker.extend(LEASE, 30));
      assert.ok(error instanceof QueenctlError, String(error));
      assert.ok(!error.message.includes(TOKEN), error.message);
      assert.ok(!(error.hint ?? '').includes(TOKEN));
      assert.match(error.message, /\[redacted\]/);
      for (const line of trace) assert.ok(!line.includes(TOKEN), line);
    });
  }

  it('not even in part, where a message quotes only the first bytes of a long body', async () => {
    const cut: Handler = () => answer(400, `${'x'.repeat(80)} ${echo}`);
    const { client: broker, trace } = client(new FakeTransport({ [A]: cut }));
    const error = await rejection(broker.extend(LEASE, 30));
    assert.match(error.message, /the broker answered HTTP 400: "x{80} Authorization: Bearer \[redacted\]"$/);
    for (const text of [error.message, ...trace]) assert.ok(!text.includes(TOKEN.slice(0, 12)), text);
  });

  it('never appears when every replica echoes it, in the combined message or the failover lines', async () => {
    const echo503: Handler = () => answer(503, { error: echo });
    const { client: broker, trace } = client(new FakeTransport({ [A]: echo503, [B]: echo503 }), {
      server: `${A},${B}`,
    });
    const error = await rejection(broker.extend(LEASE, 30));
    assert.match(error.message, /^no replica of the broker could renew/);
    assert.ok(!error.message.includes(TOKEN), error.message);
    assert.ok(trace.length > 0);
    for (const line of trace) assert.ok(!line.includes(TOKEN), line);
    assert.ok(trace.some((line) => line.includes('(authorization: Bearer [redacted])')));
  });
});
