/**
 * The benchmark keeps working: its quick version runs end to end and prints every row measured
 * against a reference (start-up of each kind of run, bulk against raw undici, watch, lease run
 * against a loop of curl, a --follow worker against eight). It judges
 * no time (issue 6): the figures of a quick run on a shared machine mean nothing, only that each
 * row is there.
 *
 * Left out of `npm test` (it takes 10 s or more of a 2-core machine): `npm run test:slow` runs it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runProcess } from '../support/cli.js';

const BENCH = fileURLToPath(new URL('../../scripts/bench.js', import.meta.url));
/** The bench's curl loop needs jq (scripts/bench.ts, CURL_LOOP); without it, it says so. */
const hasJq = spawnSync('jq', ['--version']).status === 0;
const RUN = String.raw`\| lease run --until-empty, \d+ messages, batch 10, handler cat, median of \d+`;
const RUN_ROWS = [
  new RegExp(
    String.raw`${RUN}, CPU per batch .*\| [\d.]+ ms \| bash loop: curl pop, .*: [\d.]+ ms \| [\d.]+x \| <= 0\.33x \|`,
  ),
  new RegExp(String.raw`${RUN}, throughput \| \d+ msgs/s \| bash loop: .*: \d+ msgs/s \| [\d.]+x \| >= 2x \|`),
  new RegExp(String.raw`${RUN}, CPU per batch of the queenctl process alone \(sampled\) \| [\d.]+ ms; its children`),
];

const FLEET =
  String.raw`\| lease run --follow --parallel 8, \d+ messages in 16 partitions, ` + 'batch 10, handler sleep 20 ms';
const FLEET_ROWS = [
  new RegExp(
    String.raw`${FLEET}, median of \d+, throughput \| \d+ msgs/s \| 8 bash loops .*: \d+ msgs/s \| [\d.]+x \|`,
  ),
  new RegExp(
    String.raw`${FLEET}, median of \d+, CPU per message .* \| \d+ µs \| 8 bash loops .*: \d+ µs \| [\d.]+x \|`,
  ),
];

it('npm run bench --quick measures start-up, bulk extend, watch and lease run', { timeout: 180_000 }, async () => {
  const { code, stdout, stderr } = await runProcess(process.execPath, [BENCH, '--quick'], {
    exit: 0,
    timeoutMs: 170_000,
  });
  assert.equal(code, 0, stderr);
  // A measure that takes a while names the machine's load while it ran: `(load 1.2 → 1.4)`.
  const LOAD = String.raw`(?: \(load [\d.]+ → [\d.]+\))?`;
  const [MS, BARE, POOL] = [
    String.raw`[\d.]+ ms`,
    String.raw`node -e "": [\d.]+ ms`,
    String.raw`raw undici Pool .*: [\d.]+ s`,
  ];
  for (const row of [
    new RegExp(
      String.raw`\| start-up, median of \d+: one node:http request${LOAD} \| - \| ${BARE}; node:http POST: ${MS} \|`,
    ),
    new RegExp(
      String.raw`\| start-up, median of \d+: one node:net request, HTTP by hand \| - \| ${BARE}; ` +
        String.raw`node:net POST: ${MS} \|`,
    ),
    ...['--version', 'help', 'completion bash', 'config get-contexts', 'a usage error', 'lease extend <id>'].map(
      (run) => new RegExp(`\\| start-up: queenctl ${run} \\| [\\d.]+ ms \\| node -e "": [\\d.]+ ms \\| [\\d.]+x \\|`),
    ),
    new RegExp(String.raw`\| bulk extend, \d+ ids, CPU, median of \d+${LOAD} \| [\d.]+ s .* \| ${POOL} \| [\d.]+x \|`),
    new RegExp(String.raw`\| bulk extend, \d+ ids, wall, median of \d+${LOAD} \| [\d.]+ s \| ${POOL} \| [\d.]+x \|`),
    /\| bulk extend, peak RSS \|/,
    new RegExp(
      String.raw`\| watch, \d+ leases every 2 s for \d+ s, CPU per renewal${LOAD} \| ` +
        String.raw`[\d.]+ ms \(\d+ renewals, exit 0\) \|`,
    ),
    /\| watch, \d+ leases, .* \| exit 0, 0 lapses/,
    ...(hasJq ? RUN_ROWS : [/\| lease run --until-empty, .* \| no jq: the curl loop was not run \|/]),
    ...(hasJq ? FLEET_ROWS : [/\| lease run --follow --parallel 8, .* \| no jq: the curl loops were not run \|/]),
    /\| lease run --follow --parallel 64, \d+ messages in 64 partitions, peak RSS .* \| \d+ MB \| --parallel 1 /,
  ]) {
    assert.match(stdout, row);
  }
});
