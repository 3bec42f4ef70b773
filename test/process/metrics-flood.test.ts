/**
 * The metrics listener cannot cost the lease (docs/security.md, "The metrics listener"): a real
 * `lease watch` under `ulimit -n 256`, its metrics port flooded by idle connections and by
 * clients that trickle their headers a byte at a time (slowloris), keeps renewing every lease and
 * loses none. Without the listener's cap and timeouts, the idle connections take the process's
 * file descriptors until renewals fail with EMFILE and the leases run out.
 * (The cap, the timeouts and the Host check, one by one: test/unit/metrics-listener.test.ts.)
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { startTcpFront } from '../../tools/simulator/index.js';
import { cliCommandLine, startProcess } from '../support/cli.js';
import { watchScenario, withSimulator } from '../support/watch-scenario.js';

/** The file descriptors queenctl may hold: fewer than the flood's connections. */
const FD_LIMIT = 256;
const IDLE = 400;
const TRICKLING = 20;
const LEASES = 10;
/**
 * Each wait for a round of renewals lasts longer than a lease (--seconds): a watch whose renewals
 * fail in the flood loses its leases and fails the wait; one that keeps renewing has a whole lease
 * of room for a machine that is slow at times. The watch is stopped (SIGINT) once every lease was
 * renewed over new connections in the flood: that round is the proof, and running on to a --for
 * only waited (10 of the test's 16 s), with every lease renewed a moment before.
 */
const LEASE_SECONDS = 10;
/** A connection the listener closed is opened again after this: a flood, not a busy loop. */
const REOPEN_MS = 1_000;

interface Flood {
  /** Connections the listener closed (the cap, the timeouts), and trickling ones it cut. */
  closedIdle: number;
  cutTrickling: number;
  stop(): void;
}

/**
 * Holds `IDLE` connections that send nothing and `TRICKLING` that send a request's headers one
 * byte every 200 ms and never finish them, against host:port; each one the listener closes is
 * opened again after REOPEN_MS, until stop().
 */
function flood(host: string, port: number): Flood {
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  const state: Flood = {
    closedIdle: 0,
    cutTrickling: 0,
    stop() {
      stopped = true;
      for (const timer of timers) clearInterval(timer);
      for (const socket of sockets) socket.destroy();
    },
  };
  const open = (trickle: boolean): void => {
    if (stopped) return;
    const socket = connect(port, host);
    sockets.add(socket);
    socket.on('error', () => {});
    socket.resume();
    let trickler: NodeJS.Timeout | undefined;
    if (trickle) {
      socket.once('connect', () => {
        socket.write(`GET /metrics HTTP/1.1\r\nHost: ${host}\r\nX-Slow: `);
        trickler = setInterval(() => socket.write('a'), 200);
        timers.add(trickler);
      });
    }
    socket.once('close', () => {
      sockets.delete(socket);
      if (trickler) {
        clearInterval(trickler);
        timers.delete(trickler);
      }
      if (stopped) return;
      if (trickle) state.cutTrickling++;
      else state.closedIdle++;
      const again = setTimeout(() => {
        timers.delete(again);
        open(trickle);
      }, REOPEN_MS);
      timers.add(again);
    });
  };
  for (let i = 0; i < IDLE; i++) open(false);
  for (let i = 0; i < TRICKLING; i++) open(true);
  return state;
}

describe('lease watch --metrics-address: a flood of the metrics port', () => {
  const what = `ulimit -n ${FD_LIMIT}, ${IDLE} idle and ${TRICKLING} trickling connections`;
  it(`${what}: every lease renewed, none lost`, (t) =>
    withSimulator(async (sim) => {
      const front = await startTcpFront({ host: '127.0.0.1', port: sim.port });
      const leaseIds = Array.from({ length: LEASES }, () => sim.mint({ seconds: LEASE_SECONDS }));
      const args = [
        ...['lease', 'watch', ...leaseIds, '--server', front.url, '-o', 'ndjson'],
        ...['--seconds', String(LEASE_SECONDS), '--every', '2s'],
        ...['--metrics-address', '127.0.0.1:0'],
      ];
      const run = startProcess(
        'bash',
        ['-c', `ulimit -n ${FD_LIMIT} && exec ${cliCommandLine()} "$@"`, 'bash', ...args],
        {
          // Stopped by SIGINT below; the limit outlasts the waits below put together.
          exit: 130,
          timeoutMs: 90_000,
        },
      );
      const watching = watchScenario(run);
      const [, address] = await run.waitForStderr(/serving metrics on http:\/\/(\S+)\/metrics/);
      const [host, port] = (address as string).split(':') as [string, string];
      const renewed = (since: number): Set<string> =>
        new Set(
          watching
            .events()
            .slice(since)
            .filter((event) => event.event === 'renewed')
            .map((event) => event.leaseId as string),
        );
      await run.until(() => (renewed(0).size === LEASES ? true : undefined), 'the first renewal of every lease');
      const attack = flood(host, Number(port));
      let result: Awaited<typeof run.exited>;
      try {
        // A round of renewals once the flood is in place: over the connections the watch holds.
        const flooded = watching.events().length;
        await run.until(
          () => (renewed(flooded).size === LEASES ? true : undefined),
          'a round of renewals in the flood',
        );
        // The connections to the broker are cut (a restart, a load balancer, a network blip): the
        // renewals need new ones, hence file descriptors, while the flood lasts.
        const cutAt = watching.events().length;
        const acceptedBefore = front.accepted;
        await front.refuse(0);
        await run.until(
          () => (renewed(cutAt).size === LEASES ? true : undefined),
          'every lease renewed over new connections',
          (LEASE_SECONDS + 10) * 1000,
        );
        assert.ok(front.accepted > acceptedBefore, 'the renewals after the cut went over new connections');
        run.kill('SIGINT');
        result = await run.exited;
      } finally {
        attack.stop();
        await front.close();
      }
      const closed = `${attack.closedIdle} idle and ${attack.cutTrickling} trickling connections closed`;
      const said = `${closed}\n${result.stderr.slice(-3000)}`;
      const events = watching.events();
      assert.deepEqual(
        events.filter((event) => event.event === 'lost'),
        [],
        said,
      );
      assert.doesNotMatch(result.stdout + result.stderr, /EMFILE/, said);
      // What the listener did with them (cut by the cap or the header timeout): for the record.
      t.diagnostic(closed);
    }));
});
