/**
 * `npm run demo`: a guided run of queenctl against the lease simulator on a free loopback port.
 * Every step is a real invocation of the built binary; the commands are shown as you would type
 * them, with their output and exit code.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import wrapAnsi from 'wrap-ansi';
import { mintTourScene, startSimulator, type Simulator } from '../tools/simulator/index.js';

const BIN = fileURLToPath(new URL('../../bin/queenctl.cjs', import.meta.url));
const color = process.stdout.isTTY && !process.env.NO_COLOR;
const bold = (text: string): string => (color ? `\u001b[1m${text}\u001b[0m` : text);
const dim = (text: string): string => (color ? `\u001b[2m${text}\u001b[0m` : text);
/** The demo's own prose fits the terminal it is on (at most 100 columns), as queenctl's does. */
const columns = process.stdout.isTTY ? Math.min(process.stdout.columns || 80, 100) : undefined;
const prose = (text: string): string =>
  columns === undefined ? text : wrapAnsi(text, columns, { hard: true, trim: false });

/** A folder with `queenctl` in it, put first on PATH, so the snippets read as users type them. */
function pathWithQueenctl(): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'queenctl-demo-'));
  symlinkSync(BIN, join(dir, 'queenctl'));
  return { dir, path: `${dir}${delimiter}${process.env.PATH ?? ''}` };
}

function step(title: string, explanation: string): void {
  process.stdout.write(`\n${bold(prose(`── ${title}`))}\n${dim(prose(explanation))}\n`);
}

/** Steps whose command did not exit as the demo says it does: the demo then exits 1. */
const untrue: string[] = [];

/**
 * Runs a shell snippet with inherited output, in the demo's scratch directory (a batch file
 * written there is gone after the demo); the simulator keeps answering meanwhile. `expected` is
 * the exit status the step's text promises: any other is reported, and fails the demo.
 */
function run(snippet: string, env: NodeJS.ProcessEnv, expected = 0): Promise<number> {
  process.stdout.write(`${bold('$')} ${snippet}\n`);
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', snippet], { env, cwd: scratch, stdio: 'inherit' });
    child.on('error', reject);
    child.on('close', (code) => {
      process.stdout.write(dim(`[exit ${code}]\n`));
      if (code !== expected) {
        untrue.push(`${snippet.split('\n')[0]}: exit ${code}, where the demo says ${expected}`);
        process.stdout.write(`demo: this exit status should have been ${expected}\n`);
      }
      resolve(code ?? 1);
    });
  });
}

/**
 * Expires, `afterMs` after it was first renewed, the lease of the first renewal the simulator
 * gets from now on: the lease a run took (run renews a batch's lease before it starts the
 * command). Stops looking when `stop` is aborted.
 */
async function expireNextLease(sim: Simulator, afterMs: number, stop: AbortSignal): Promise<void> {
  const since = sim.log.length;
  while (!stop.aborted) {
    const leaseId = sim.log.slice(since).find((entry) => entry.leaseId !== null)?.leaseId;
    if (leaseId) {
      await delay(afterMs, undefined, { signal: stop }).then(
        () => sim.expire(leaseId),
        () => {},
      );
      return;
    }
    await delay(50);
  }
}

async function demo(sim: Simulator, env: NodeJS.ProcessEnv): Promise<void> {
  process.stdout.write(
    prose(`queenctl demo: a lease simulator is answering on ${sim.url} (QUEEN_SERVER points there).\n`) +
      dim(prose('Leases are minted through its control interface, as a pop would hand them to a consumer.\n')),
  );

  // The leases of the tour (docs/tour.md) (tools/simulator/scene.ts), named as the tour names them: the
  // commands below are the tour's, character for character (test/docs/doctest.test.ts).
  const scene = mintTourScene(sim);
  Object.assign(env, scene);
  process.stdout.write(
    dim(
      prose(
        '$LEASE3 holds queue invoices, partition x, for 60 s; $LEASE, orders p6 and p7 (queue mode), 120 s; ' +
          '$LEASE2, orders p7 for consumer group billing, 300 s; $DEAD was acked. ' +
          'Queue jobs holds four messages (three in partition p1, one in p2), queue emails three.\n',
      ),
    ),
  );

  step(
    '1. Renew a lease',
    'renewed counts what the broker extended; the three expiry keys carry one value; LEFT is on the broker clock.',
  );
  await run('queenctl lease extend "$LEASE3" --seconds 120 -o table', env);

  step(
    '2. A multi-partition lease',
    'One lease id covers every partition a pop claimed: one call renews them all, and renewed says how many.',
  );
  await run('queenctl lease extend "$LEASE" --seconds 90 -o table', env);

  step(
    '3. Inspect without shortening',
    'inspect asks for one second: the broker keeps the later deadline, so a live lease is left as it was.',
  );
  await run('queenctl lease inspect "$LEASE" "$LEASE3" -o table', env);

  step(
    '4. A lease that is gone',
    'The batch was acked (or the lease expired): the broker answers HTTP 200 with renewed 0. queenctl exits 4.',
  );
  await run('queenctl lease extend "$DEAD" -o table', env, 4);

  step(
    '5. Machine output for scripts',
    'In a pipe queenctl prints JSON; - reads ids from stdin; -o ndjson prints one object per line, in input order.',
  );
  await run(
    `printf '%s\\n' "$LEASE" "$LEASE2" lost-lease-id "$LEASE3" | queenctl lease extend - -o ndjson 2>/dev/null`,
    env,
    4,
  );
  await run(
    `queenctl lease extend "$LEASE" -q
case $? in
  0) echo "still ours: carry on" ;;
  4) echo "lease lost: stop work that is not idempotent" ;;
  3) echo "token refused: fix credentials" ;;
  *) echo "broker trouble: retry later" ;;
esac`,
    env,
  );

  sim.setShape('array');
  step(
    '6. An older broker',
    'Older brokers answer with an array; queenctl maps it to the same six keys (renewed is 1 or 0) ' +
      'and shows their reason.',
  );
  await run('queenctl lease extend "$LEASE2" lost-lease-id -o wide', env, 4);
  sim.setShape('documented');

  step(
    '7. Find the lease that holds a partition',
    'Partition p7 of orders has not moved: list names its holders by group (the broker has no lease listing, ' +
      'its consumer groups name each partition holder), --expiry adds the time left without shortening it.',
  );
  await run('queenctl lease list --queue orders --partition p7 --expiry -o table', env);
  step(
    '8. Extend everything on a queue before a maintenance window',
    '-o name prints the lease ids alone, one per line: what extend -, inspect - and watch - read; ' +
      '--allow-empty makes a queue with no lease nothing to do (exit 0), as xargs -r does.',
  );
  await run(
    'queenctl lease list --queue orders -o name | queenctl lease extend - --allow-empty --seconds 600 -o table',
    env,
  );

  step(
    '9. Keep a lease alive around a job',
    "watch renews on a timer and starts the command only once the lease is renewed; its exit status is queenctl's.",
  );
  await run(
    `queenctl lease watch "$LEASE" --seconds 6 -- sh -c 'echo "working on $QUEEN_LEASE_ID"; sleep 3; echo "done"'`,
    env,
  );

  const doomed = sim.mint({ seconds: 6 });
  step(
    '10. A lease lost in the middle of a job',
    'Another worker acks the batch after 2 s: watch sees renewed 0, stops the job (SIGTERM to its process group) ' +
      'and exits 4.',
  );
  const release = setTimeout(() => sim.release(doomed), 2_000);
  // The loop's stderr goes to /dev/null: the shell reports the `sleep` that SIGTERM ended as a
  // bare "Terminated" there, which reads as if queenctl had been killed (issue 33).
  const stoppable = `sh -c 'trap "echo job: stopping cleanly; exit 143" TERM; while :; do sleep 0.2; done 2>/dev/null'`;
  await run(`queenctl lease watch ${doomed} --seconds 6 --every 1s -- ${stoppable}`, env, 4);
  clearTimeout(release);

  step(
    '11. Take a batch, then ack it',
    'acquire pops up to --batch messages of queue jobs with a lease and writes the batch record; ack acks ' +
      'every message with its lease id, which releases the lease. A second ack is refused: exit 4.',
  );
  await run('queenctl lease acquire jobs --batch 10 -o json > batch.json', env);
  await run('queenctl lease ack batch.json -o table', env);
  await run('queenctl lease ack batch.json -o table', env, 4);

  step(
    '12. A consumer in one line',
    'run takes a batch, gives the command its messages on stdin (one JSON object per line), renews the lease ' +
      'while it runs and acks completed when it exits 0; --until-empty goes on until a pop finds nothing.',
  );
  await run(`queenctl lease run emails --batch 2 --until-empty -- grep -o '"to":"[^"]*"'`, env);

  sim.createQueue({ name: 'reports', partitions: ['p1'], leaseTime: 120 });
  sim.push('reports', [{ report: 'monthly' }], 'p1');
  step(
    '13. A run whose lease is lost',
    'The demo expires the lease 2 s after run took it, as if the job had outlived its lease: run stops the ' +
      'command (SIGTERM to its process group), acks nothing and exits 4. The message goes to the next pop.',
  );
  const ran = new AbortController();
  const expiring = expireNextLease(sim, 2_000, ran.signal);
  const report =
    `sh -c 'trap "echo report: stopping cleanly; exit 143" TERM; echo "report: started"; ` +
    `while :; do sleep 0.2; done 2>/dev/null'`;
  await run(`queenctl lease run reports --every 1s -- ${report}`, env, 4);
  ran.abort();
  await expiring;
  await run('queenctl lease acquire reports -o table', env);

  process.stdout.write(`\n${bold('Done.')} Next: npm test, and queenctl lease --help.\n`);
  if (untrue.length > 0) {
    process.stderr.write(`demo: ${untrue.length} step(s) did not exit as shown:\n  ${untrue.join('\n  ')}\n`);
    process.exitCode = 1;
  }
}

const sim = await startSimulator();
const { dir: scratch, path } = pathWithQueenctl();
try {
  await demo(sim, {
    ...process.env,
    PATH: path,
    QUEEN_SERVER: sim.url,
    QUEEN_TOKEN: undefined,
    QUEEN_CONTEXT: undefined,
    // What the steps keep (acquire's record of a batch shown as tables) goes with the scratch.
    TMPDIR: scratch,
  });
} finally {
  await sim.close();
  rmSync(scratch, { recursive: true, force: true });
}
