/**
 * The benchmark keeps working: its quick version runs end to end and prints the three
 * measurements. It judges no time (issue 6): the figures of a quick run on a shared machine
 * mean nothing, only that each row is there.
 */
import assert from 'node:assert/strict';
import { execFile as execFileCallback } from 'node:child_process';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const execFile = promisify(execFileCallback);
const BENCH = fileURLToPath(new URL('../../scripts/bench.js', import.meta.url));

it('npm run bench --quick measures start-up, bulk extend and watch', { timeout: 120_000 }, async () => {
  const { stdout } = await execFile(process.execPath, [BENCH, '--quick'], { timeout: 110_000 });
  for (const row of [
    /\| start-up, median of \d+ \| [\d.]+ ms \| node -e "": [\d.]+ ms \| [\d.]+x \|/,
    /\| bulk extend, peak RSS \|/,
    /\| watch, \d+ leases, .* \| exit 0, 0 lapses/,
  ]) {
    assert.match(stdout, row);
  }
});
