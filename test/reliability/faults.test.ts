/**
 * The fault matrix: every way the broker (or whatever answers in its place) can fail, for
 * `lease extend` and `lease inspect`, against the simulator over loopback. Each row proves the
 * documented exit code, one line of reason on stderr (a hint may follow), no stack trace, and
 * nothing on stdout a script could take for success. Transient kinds must be retried and
 * recover; the others must be sent once even when retries are allowed.
 *
 * Every row runs the verb in this process (the real broker client over loopback, buffers for
 * the streams: a process per row would cost half a second each), over each transport (undici and
 * node:http: src/commands/globals.ts chooses one per run); one row of each kind runs
 * again through the whole command line (run() of src/cli.ts, in this process), for the exit
 * status and streams a shell sees; each exit status through the real binary is
 * test/process/exit-codes.test.ts. Rows run with --retries 0
 * when they are transient (retrying would only slow them down) and with --retries 2 when they
 * are not (so `sent: 1` proves they are not retried). Faults are scoped to the row's own lease
 * id, so rows run concurrently on one simulator.
 *
 * No verdict depends on the machine's speed: in this process the client's deadlines run on a
 * fake clock, so a deadline passes only when a row about deadlines moves it, once the broker
 * holds that row's request (`until-abandoned`: held until the client gives up, never answered);
 * every other row has all the time it needs, however busy the machine.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startSimulator, type Fault, type Simulator } from '../../tools/simulator/index.js';
import { FakeClock, instantClock } from '../support/fakes.js';
import { TRANSPORTS } from '../support/transports.js';
import {
  assertNoStackTrace,
  assertOneLineReason,
  closedPort,
  describeResult,
  records,
  runQueenctl,
  runVerb,
} from './harness.js';

type Verb = 'extend' | 'inspect';
const VERBS: Verb[] = ['extend', 'inspect'];
const T = '2099-07-30T11:06:44.512873Z';
const TEN_MB = 10 * 1024 * 1024;
/**
 * The 10 MB answers, made once: every row that sends one shares them (made per request, they
 * cost a busy machine seconds of allocation and collection across the matrix).
 */
const TEN_MB_ARRAY = `[${'"x",'.repeat(TEN_MB / 4)}"x"]`;
const TEN_MB_PAGE = 'E'.repeat(TEN_MB);

let sim: Simulator;
/** Nothing listens here. */
let refusedUrl: string;
/** Sends headers and half a body, then nothing: slower than any --timeout. */
let stallingUrl: string;
/** Requests the stalling server got, by lease id, and what waits for them. */
const stalled = new Map<string, number>();
const stallWaiters = new Set<() => void>();
/** Speaks something that is not HTTP (an SSH banner), as a wrong --server port would. */
let notHttpUrl: string;
const rawServers: Array<Server | http.Server> = [];
const rawSockets = new Set<Socket>();

/** A documented answer about `leaseId`, with `overrides`. */
function documented(leaseId: string, overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({
    leaseId,
    success: true,
    renewed: 1,
    newExpiresAt: T,
    expiresAt: T,
    lease_expires_at: T,
    ...overrides,
  });
}

/** An older broker's array entry about `leaseId`, with `overrides`. */
function arrayEntry(leaseId: string, overrides: Record<string, unknown> = {}): string {
  return JSON.stringify([
    { error: null, expiresAt: '2099-12-02T09:38:24.534Z', index: 0, leaseId, success: true, ...overrides },
  ]);
}

interface Row {
  name: string;
  /** The fault for this row's lease; absent when `server` alone makes the failure. */
  fault?: (leaseId: string) => Fault;
  /** Where queenctl is pointed (default: the simulator). */
  server?: () => string;
  code: number;
  reason: RegExp;
  /** Retried, and recovers when the fault passes. */
  transient: boolean;
  /**
   * Requests the simulator sees for this lease; null where it is not the simulator, or where
   * a deadline decides (a loaded machine may reach it before the request does).
   */
  sent: 1 | null;
  timeout?: string;
  /**
   * The row is about a deadline: the answer never comes (until-abandoned, or the stalling
   * server), and the test passes the client's deadline once the request is held.
   */
  deadline?: true;
}

const body =
  (make: (leaseId: string) => string) =>
  (leaseId: string): Fault => ({ kind: 'body', leaseId, body: make(leaseId) });
const status =
  (code: number, text?: string, headers?: Record<string, string>) =>
  (leaseId: string): Fault => ({
    kind: 'status',
    leaseId,
    status: code,
    ...(text !== undefined && { body: text }),
    ...(headers && { headers }),
  });

const ROWS: Row[] = [
  // --- transport --------------------------------------------------------------------------
  {
    name: 'connection refused',
    server: () => refusedUrl,
    code: 2,
    reason: /cannot reach the broker at http:\/\/127\.0\.0\.1:\d+: connection refused/,
    transient: true,
    sent: null,
  },
  {
    name: 'connection closed before any answer',
    fault: (leaseId) => ({ kind: 'drop', leaseId }),
    code: 2,
    reason: /closed before a full answer/,
    transient: true,
    sent: 1,
  },
  {
    name: 'connection reset in the middle of the response',
    fault: (leaseId) => ({ kind: 'reset-mid-body', leaseId }),
    code: 2,
    reason: /closed before a full answer/,
    transient: true,
    sent: 1,
  },
  {
    name: 'slower than --timeout',
    fault: (leaseId) => ({ kind: 'until-abandoned', leaseId }),
    timeout: '300ms',
    deadline: true,
    code: 2,
    reason: /no answer from http:\/\/127\.0\.0\.1:\d+ within 300ms/,
    transient: true,
    sent: 1,
  },
  {
    name: 'headers, then a body that stalls past --timeout',
    server: () => stallingUrl,
    timeout: '300ms',
    deadline: true,
    code: 2,
    reason: /no answer from .* within 300ms/,
    transient: true,
    sent: null,
  },
  {
    name: 'a server that does not speak HTTP',
    server: () => notHttpUrl,
    code: 2,
    reason: /request to .* failed/,
    transient: true,
    sent: null,
  },
  // --- statuses ---------------------------------------------------------------------------
  {
    name: '500 {"error":"pool"}',
    fault: status(500, '{"error":"pool"}'),
    code: 2,
    reason: /no database connection free \(HTTP 500 pool\)/,
    transient: true,
    sent: 1,
  },
  {
    name: '500 {"error":"renew failed: ..."}',
    fault: status(500, '{"error":"renew failed: deadlock detected"}'),
    code: 2,
    reason: /renewal query failed \(HTTP 500: renew failed: deadlock detected\)/,
    transient: false,
    sent: 1,
  },
  {
    name: "500 with the JSON library's type error",
    fault: status(500, '{"error":"[json.exception.type_error.302] type must be number, but is string"}'),
    code: 2,
    reason: /HTTP 500: \[json\.exception/,
    transient: false,
    sent: 1,
  },
  {
    name: '502 from a proxy, with HTML',
    fault: status(502, '<html><body>Bad Gateway</body></html>'),
    code: 2,
    reason: /HTTP 502: "<html><body>Bad Gateway/,
    transient: true,
    sent: 1,
  },
  { name: '503', fault: status(503), code: 2, reason: /HTTP 503: Service Unavailable/, transient: true, sent: 1 },
  {
    name: '504 with an empty body',
    fault: status(504, ''),
    code: 2,
    reason: /HTTP 504(; lease \S+ may or may not be held)?$/,
    transient: true,
    sent: 1,
  },
  {
    name: '404: no lease route, is this a Queen broker?',
    server: () => `${sim.url}/not-a-queen-broker`,
    code: 2,
    reason: /has no lease route \(HTTP 404\): is it a Queen broker\?/,
    transient: false,
    sent: 1,
  },
  {
    name: "404 with the broker's HTML page",
    fault: status(404, '<html><body><h1>File Not Found</h1></body></html>'),
    code: 2,
    reason: /has no lease route \(HTTP 404\): is it a Queen broker\?/,
    transient: false,
    sent: 1,
  },
  ...[405, 501].map(
    (code): Row => ({
      name: `${code} with a web server's HTML page: is this a Queen broker?`,
      fault: status(code, '<!DOCTYPE HTML><html><body><h1>Error response</h1><p>Unsupported method</p></body></html>'),
      code: 2,
      reason: new RegExp(`does not take this request \\(HTTP ${code}: .*\\): is it a Queen broker\\?`),
      transient: false,
      sent: 1,
    }),
  ),
  ...[301, 302, 307, 308].map(
    (code): Row => ({
      name: `a ${code} redirect (not followed)`,
      fault: (leaseId) => status(code, '', { location: `${sim.url}/api/v1/lease/followed-${code}/extend` })(leaseId),
      code: 2,
      reason: new RegExp(
        `redirect \\(HTTP ${code} to http://127\\.0\\.0\\.1:\\d+/api/v1/lease/followed-${code}/extend\\)`,
      ),
      transient: false,
      sent: 1,
    }),
  ),
  // --- 200s outside the contract ----------------------------------------------------------
  {
    name: '200 that is not JSON',
    fault: body(() => '<html><body>gateway</body></html>'),
    code: 2,
    reason: /not JSON; it sent "<html><body>gateway/,
    transient: false,
    sent: 1,
  },
  { name: '200 with an empty body', fault: body(() => ''), code: 2, reason: /not JSON/, transient: false, sent: 1 },
  {
    name: '200 with truncated JSON',
    fault: body((id) => documented(id).slice(0, 50)),
    code: 2,
    reason: /not JSON/,
    transient: false,
    sent: 1,
  },
  {
    name: '200 of JSON that is not an object (a number)',
    fault: body(() => '42'),
    code: 2,
    reason: /JSON that is not an object/,
    transient: false,
    sent: 1,
  },
  {
    name: '200 of JSON null',
    fault: body(() => 'null'),
    code: 2,
    reason: /JSON that is not an object/,
    transient: false,
    sent: 1,
  },
  {
    name: '200 of an object with neither renewed nor the older shape',
    fault: body(() => '{"ok":true}'),
    code: 2,
    reason: /neither renewed nor/,
    transient: false,
    sent: 1,
  },
  {
    name: 'wrong type: renewed is a string',
    fault: body((id) => documented(id, { renewed: '1' })),
    code: 2,
    reason: /renewed is not a whole number/,
    transient: false,
    sent: 1,
  },
  {
    name: 'wrong type: renewed is a fraction',
    fault: body((id) => documented(id, { renewed: 0.5 })),
    code: 2,
    reason: /renewed is not a whole number/,
    transient: false,
    sent: 1,
  },
  {
    name: 'wrong type: renewed is negative',
    fault: body((id) => documented(id, { renewed: -1 })),
    code: 2,
    reason: /renewed is not a whole number/,
    transient: false,
    sent: 1,
  },
  {
    name: 'wrong type: renewed is null',
    fault: body((id) => documented(id, { renewed: null })),
    code: 2,
    reason: /renewed is not a whole number/,
    transient: false,
    sent: 1,
  },
  {
    name: 'wrong type: success is a string',
    fault: body((id) => documented(id, { success: 'true' })),
    code: 2,
    reason: /success is not a boolean/,
    transient: false,
    sent: 1,
  },
  {
    name: 'wrong type: an expiry is a number',
    fault: body((id) =>
      documented(id, { newExpiresAt: 1785409604512, expiresAt: 1785409604512, lease_expires_at: 1785409604512 }),
    ),
    code: 2,
    reason: /newExpiresAt is not a timestamp/,
    transient: false,
    sent: 1,
  },
  {
    name: 'wrong type: an expiry is a string but no timestamp ("1")',
    fault: body((id) => documented(id, { newExpiresAt: '1', expiresAt: '1', lease_expires_at: '1' })),
    code: 2,
    reason: /newExpiresAt is not a timestamp/,
    transient: false,
    sent: 1,
  },
  {
    name: 'wrong type: an expiry in words ("July 4")',
    fault: body((id) => documented(id, { newExpiresAt: 'July 4', expiresAt: 'July 4', lease_expires_at: 'July 4' })),
    code: 2,
    reason: /newExpiresAt is not a timestamp/,
    transient: false,
    sent: 1,
  },
  {
    name: 'wrong type: leaseId is a number',
    fault: body((id) => documented(id, { leaseId: 42 })),
    code: 2,
    reason: /leaseId is missing or not a string/,
    transient: false,
    sent: 1,
  },
  {
    name: 'renewed leases without any expiry',
    fault: body((id) => documented(id, { newExpiresAt: null, expiresAt: null, lease_expires_at: null })),
    code: 2,
    reason: /renewed leases without an expiry/,
    transient: false,
    sent: 1,
  },
  {
    name: 'disagreeing expiry keys',
    fault: body((id) => documented(id, { lease_expires_at: '2099-07-30T12:06:44.512873Z' })),
    code: 2,
    reason: /the three expiry keys disagree/,
    transient: false,
    sent: 1,
  },
  {
    name: 'an answer about another lease',
    fault: body(() => documented('someone-else')),
    code: 2,
    reason: /another lease id/,
    transient: false,
    sent: 1,
  },
  {
    name: '200 {success:false,error} without renewed (a failed database query)',
    fault: body(() => '{"success":false,"error":"could not serialize access"}'),
    code: 2,
    reason: /could not run the renewal: could not serialize access/,
    transient: false,
    sent: 1,
  },
  {
    name: 'an empty array',
    fault: body(() => '[]'),
    code: 2,
    reason: /no entry for this lease id/,
    transient: false,
    sent: 1,
  },
  {
    name: 'an array about another lease only',
    fault: body(() => arrayEntry('someone-else')),
    code: 2,
    reason: /no entry for this lease id/,
    transient: false,
    sent: 1,
  },
  {
    name: 'array, wrong type: success is a string',
    fault: body((id) => arrayEntry(id, { success: 'true' })),
    code: 2,
    reason: /success is not a boolean/,
    transient: false,
    sent: 1,
  },
  {
    name: 'array, wrong type: expiresAt is a number',
    fault: body((id) => arrayEntry(id, { expiresAt: 5 })),
    code: 2,
    reason: /expiresAt is not a timestamp/,
    transient: false,
    sent: 1,
  },
  {
    name: 'array, wrong type: error is a number',
    fault: body((id) => arrayEntry(id, { error: 7, success: false, expiresAt: null })),
    code: 2,
    reason: /error is not a string/,
    transient: false,
    sent: 1,
  },
  {
    name: 'array: success without an expiry',
    fault: body((id) => arrayEntry(id, { expiresAt: null })),
    code: 2,
    reason: /success without an expiry/,
    transient: false,
    sent: 1,
  },
  {
    name: 'a 10 MB body',
    fault: (leaseId) => ({ kind: 'body', leaseId, body: TEN_MB_ARRAY }),
    code: 2,
    reason: /larger than 1048576 bytes: not a lease renewal/,
    transient: false,
    sent: 1,
  },
  {
    name: 'a 10 MB error page with 500',
    fault: (leaseId) => ({ kind: 'status', leaseId, status: 500, body: TEN_MB_PAGE }),
    code: 2,
    reason: /larger than 1048576 bytes/,
    transient: false,
    sent: 1,
  },
];

/**
 * Requests the simulator received for this lease, whatever route they reached: by the lease id
 * the simulator read from the path, or, on a route it did not take for the extend route (no lease
 * id read), by the path. Every row's check reads the whole log, so the path is searched only there.
 */
function sentFor(leaseId: string): number {
  const segment = `/${encodeURIComponent(leaseId)}/`;
  return sim.log.filter(
    (entry) => entry.leaseId === leaseId || (entry.leaseId === null && entry.rawPath.includes(segment)),
  ).length;
}

before(async () => {
  sim = await startSimulator();
  refusedUrl = `http://127.0.0.1:${await closedPort()}`;

  const stalling = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
    res.write('{"leaseId":', () => {
      // Counted once the headers and half a body are on their way: the client is reading.
      const leaseId = decodeURIComponent(req.url?.split('/')[4] ?? '');
      stalled.set(leaseId, (stalled.get(leaseId) ?? 0) + 1);
      for (const wake of [...stallWaiters]) wake();
    });
  });
  const notHttp = createServer((socket) => socket.end('SSH-2.0-OpenSSH_9.6\r\nProtocol mismatch.\r\n'));
  for (const server of [stalling, notHttp]) {
    server.on('connection', (socket: Socket) => {
      rawSockets.add(socket);
      socket.once('close', () => rawSockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    rawServers.push(server);
  }
  const port = (server: Server | http.Server): number => (server.address() as { port: number }).port;
  stallingUrl = `http://127.0.0.1:${port(stalling)}`;
  notHttpUrl = `http://127.0.0.1:${port(notHttp)}`;
});

after(async () => {
  for (const socket of rawSockets) socket.destroy();
  await Promise.all(rawServers.map((server) => new Promise((resolve) => server.close(resolve))));
  await sim.close();
});

/**
 * One row of each kind again through the command line: the exit status, stderr and stdout a script sees.
 * (The rows left out differ from these only inside the parser, which the matrix above covers.)
 */
const THROUGH_THE_COMMAND_LINE = new Set([
  'connection refused',
  'connection reset in the middle of the response',
  'slower than --timeout',
  '500 {"error":"pool"}',
  '404: no lease route, is this a Queen broker?',
  'a 302 redirect (not followed)',
  '200 with truncated JSON',
  'a 10 MB body',
]);

/**
 * A lease that must still be held when its answer finally comes: every row runs at once, and on a
 * machine loaded enough a row took 37 s of real time, past the simulator's 30 s default, and
 * failed as "not renewed" (exit 4, renewed 0). An hour leaves the verdict to the faults.
 */
const ROOM = { seconds: 3600 };

const retriesFor = (row: Row): number => (row.transient ? 0 : 2);
/** On the fake clock of the client: only the rows about a deadline ever pass it. */
const timeoutMsFor = (row: Row): number => (row.timeout === '300ms' ? 300 : 10_000);
/**
 * Through the command line the deadline runs on real time: a row not about deadlines gets one
 * the test's own limit would meet first, so a busy machine cannot change its verdict.
 */
const cliTimeoutFor = (row: Row): string => row.timeout ?? '5m';

/** Resolves once the `n`th request of the row's lease is held: by the simulator, or stalling. */
function held(row: Row, leaseId: string, n: number): Promise<void> {
  if (row.server === undefined) return sim.whenHeld(n, leaseId);
  return new Promise((resolve) => {
    const check = (): void => {
      if ((stalled.get(leaseId) ?? 0) < n) return;
      stallWaiters.delete(check);
      resolve();
    };
    stallWaiters.add(check);
    check();
  });
}

/**
 * Passes the client's deadline for each of the row's first `attempts` requests, each once the
 * request is held; stops early when the run ends first (it then fails on its own assertions).
 */
async function passDeadlines(
  row: Row,
  leaseId: string,
  clock: FakeClock,
  attempts: number,
  run: Promise<unknown>,
): Promise<void> {
  const ended = run.then(
    () => false,
    () => false,
  );
  for (let n = 1; n <= attempts; n++) {
    const holding = held(row, leaseId, n).then(() => true);
    holding.catch(() => {});
    if (!(await Promise.race([holding, ended]))) return;
    clock.advance(timeoutMsFor(row));
  }
}

// Every row of the file runs at once, so on a busy machine each takes about as long as the whole
// file: a row's time limit only turns a hang into a failure, well inside the runner's.
// The suites share one simulator (faults are scoped to each row's lease id) and run side by
// side, so the rows that wait for a timeout overlap.
describe('the fault matrix', { concurrency: true }, () => {
  for (const verb of VERBS) {
    for (const transport of TRANSPORTS)
      describe(`lease ${verb} over ${transport}: each failure, its exit code and one line of reason`, {
        concurrency: 8,
      }, () => {
        for (const row of ROWS) {
          it(`${row.name}: exit ${row.code}, ${row.transient ? 'transient' : 'not retried'}`, {
            timeout: 90_000,
          }, async () => {
            const leaseId = sim.mint();
            if (row.fault) sim.inject(row.fault(leaseId));
            const clock = new FakeClock();
            const run = runVerb(verb, [leaseId], row.server?.() ?? sim.url, {
              retries: retriesFor(row),
              timeoutMs: timeoutMsFor(row),
              clientClock: clock,
              transport,
            });
            if (row.deadline) await passDeadlines(row, leaseId, clock, 1, run);
            const result = await run;
            assert.equal(result.code, row.code, describeResult(result));
            assertOneLineReason(result.stderr, row.reason);
            assert.equal(result.stdout, '', 'a failed lease prints nothing on stdout');
            if (row.sent !== null) assert.equal(sentFor(leaseId), row.sent, 'requests the broker received');
            assert.equal(
              sim.log.filter((entry) => entry.leaseId?.startsWith('followed-')).length,
              0,
              'no redirect was followed',
            );
          });
        }
      });

    describe(`lease ${verb}: the same failures through the command line`, { concurrency: 4 }, () => {
      for (const row of ROWS.filter((candidate) => THROUGH_THE_COMMAND_LINE.has(candidate.name))) {
        it(`${row.name}: exit status ${row.code}, one line on stderr, nothing on stdout`, {
          timeout: 90_000,
        }, async () => {
          const leaseId = sim.mint();
          if (row.fault) sim.inject(row.fault(leaseId));
          const result = await runQueenctl([
            'lease',
            verb,
            leaseId,
            '--server',
            row.server?.() ?? sim.url,
            '--retries',
            String(retriesFor(row)),
            '--timeout',
            cliTimeoutFor(row),
            '-o',
            'json',
          ]);
          assert.equal(result.code, row.code, describeResult(result));
          assertOneLineReason(result.stderr, row.reason);
          assert.equal(result.stdout, '');
        });
      }
    });

    for (const transport of TRANSPORTS)
      describe(`lease ${verb} over ${transport}: transient failures are retried and recover`, {
        concurrency: 8,
      }, () => {
        for (const row of ROWS.filter((candidate) => candidate.transient)) {
          const recovers = row.fault !== undefined;
          const outcome = recovers
            ? 'twice, then the answer: exit 0 after 3 requests'
            : 'retried as many times as asked, then exit 2';
          it(`${row.name}: ${outcome}`, {
            timeout: 90_000,
          }, async () => {
            const leaseId = sim.mint(ROOM);
            if (row.fault) sim.inject({ ...row.fault(leaseId), times: 2 });
            // The third request meets no deadline: only the test moves the client's clock, and
            // only for the two requests the broker holds (or all three the stalling server does).
            const clock = new FakeClock();
            const run = runVerb(verb, [leaseId], row.server?.() ?? sim.url, {
              retries: 2,
              timeoutMs: timeoutMsFor(row),
              clock: instantClock,
              clientClock: clock,
              transport,
            });
            if (row.deadline) await passDeadlines(row, leaseId, clock, recovers ? 2 : 3, run);
            const result = await run;
            assertNoStackTrace(result.stderr);
            assert.match(result.stderr, /retry 1 of 2 in \d+ms\n/);
            assert.match(result.stderr, /retry 2 of 2 in \d+ms\n/);
            if (!recovers) {
              assert.equal(result.code, 2, describeResult(result));
              assert.equal(result.stdout, '');
              return;
            }
            assert.equal(result.code, 0, describeResult(result));
            assert.equal(sentFor(leaseId), 3);
            const [record] = records(result.stdout);
            if (verb === 'extend') assert.equal(record?.renewed, 1);
            else assert.equal(record?.live, true);
          });
        }
      });

    for (const transport of TRANSPORTS)
      describe(`lease ${verb} over ${transport}: one run over many failing leases`, () => {
        it('gives every failing lease a record that cannot read as success, keeps the good one, and exits 2', {
          timeout: 90_000,
        }, async () => {
          // The slow row last: the run reads its answers in input order, so every lease before it
          // is sent and answered while it is held.
          const rows = ROWS.filter((row) => row.fault !== undefined && row.server === undefined).sort(
            (a, b) => Number(a.deadline ?? false) - Number(b.deadline ?? false),
          );
          const failing = rows.map((row) => {
            const leaseId = sim.mint();
            sim.inject((row.fault as (id: string) => Fault)(leaseId));
            return leaseId;
          });
          const good = sim.mint({ ...ROOM, partitions: 2 });
          const ids = [...failing, good];
          // Only the slow row meets its deadline, on the client's fake clock: moved once every
          // other request has its answer (or failure) and the broker holds the slow one. On real
          // time, a loaded machine made healthy answers late enough to read as a broker that is
          // down, which stops the run early (renew-all.ts).
          const clock = new FakeClock();
          const slow = failing[rows.findIndex((row) => row.deadline)] as string;
          let settled = 0;
          let others: () => void = () => {};
          const othersSettled = new Promise<void>((resolve) => {
            others = resolve;
          });
          const run = runVerb(verb, ids, sim.url, {
            timeoutMs: 300,
            clientClock: clock,
            transport,
            onSettled: () => {
              if (++settled === ids.length - 1) others();
            },
          });
          await Promise.all([othersSettled, sim.whenHeld(1, slow)]);
          clock.advance(300);
          const result = await run;
          assert.equal(result.code, 2, describeResult(result));
          assertNoStackTrace(result.stderr);
          const printed = records(result.stdout);
          assert.deepEqual(
            printed.map((record) => record.leaseId),
            ids,
            'one record per lease, in input order',
          );
          printed.slice(0, -1).forEach((record, i) => {
            const row = rows[i] as Row;
            assert.match(String(record.error), unanchored(row.reason), row.name);
            if (verb === 'extend') {
              assert.equal(record.renewed, null, row.name);
              assert.equal(record.success, false, row.name);
              assert.equal(record.expiresAt, null, row.name);
            } else {
              assert.equal(record.live, null, row.name);
              assert.equal(record.held, null, row.name);
              assert.equal(record.remainingMs, null, row.name);
            }
          });
          const last = printed.at(-1);
          if (verb === 'extend') assert.equal(last?.renewed, 2);
          else assert.equal(last?.held, 2);
          // Every reason is said on stderr, naming its leases.
          for (const row of rows) assert.match(result.stderr, unanchored(row.reason), row.name);
        });
      });

    describe(`lease ${verb}: 200s that disagree with themselves: renewed decides`, () => {
      it('success: true with renewed: 0 exits 4 and says the lease is not held', async () => {
        const leaseId = sim.mint();
        sim.inject({
          kind: 'body',
          leaseId,
          body: documented(leaseId, {
            success: true,
            renewed: 0,
            newExpiresAt: null,
            expiresAt: null,
            lease_expires_at: null,
          }),
        });
        // A deadline the test's own limit would meet first: a busy machine cannot change the verdict.
        const result = await runQueenctl([
          'lease',
          verb,
          leaseId,
          '--server',
          sim.url,
          '--timeout',
          '5m',
          '-o',
          'json',
        ]);
        assert.equal(result.code, 4, describeResult(result));
        assertNoStackTrace(result.stderr);
        assert.match(result.stderr, new RegExp(`^queenctl: lease ${leaseId} (was not renewed|is not held)`));
        const [record] = records(result.stdout);
        if (verb === 'extend') assert.equal(record?.renewed, 0);
        else assert.deepEqual(record, { leaseId, live: false, held: 0, expiresAt: null, remainingMs: null });
      });

      it('success: false with renewed: 1 and an expiry exits 0: the lease is held', async () => {
        const leaseId = sim.mint();
        sim.inject({ kind: 'body', leaseId, body: documented(leaseId, { success: false, renewed: 1 }) });
        const result = await runVerb(verb, [leaseId], sim.url, { clientClock: new FakeClock() });
        assert.equal(result.code, 0, describeResult(result));
        const [record] = records(result.stdout);
        if (verb === 'extend') assert.equal(record?.renewed, 1);
        else assert.equal(record?.live, true);
      });

      it("an older broker's success: false with an expiry exits 4", async () => {
        const leaseId = sim.mint();
        sim.inject({ kind: 'body', leaseId, body: arrayEntry(leaseId, { success: false, error: 'Lease not active' }) });
        const result = await runVerb(verb, [leaseId], sim.url, { clientClock: new FakeClock() });
        assert.equal(result.code, 4, describeResult(result));
        assert.match(result.stderr, /broker said: Lease not active/);
        const [record] = records(result.stdout);
        if (verb === 'extend') assert.equal(record?.renewed, 0);
        else assert.equal(record?.live, false);
      });
    });
  }
});

/** A row's reason as it reads inside a longer line (several leases, or a record's error). */
function unanchored(reason: RegExp): RegExp {
  return new RegExp(reason.source.replace(/^\^/, '').replace(/\$$/, ''));
}
