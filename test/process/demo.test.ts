/**
 * `npm run demo` runs to the end without a terminal, and every command in it exits as its step
 * says it does: the demo checks each status itself and exits 1 on any other (scripts/demo.ts,
 * `run`), so a step whose words went untrue fails here. A process test: the demo is a script
 * that starts the built binary through bash, as a user types it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { describeRun, runProcess } from '../support/cli.js';
import { ROOT } from '../support/doctest.js';

const DEMO = fileURLToPath(new URL('../../scripts/demo.js', import.meta.url));

it('npm run demo: every step runs, in order, and exits as the demo says', { timeout: 170_000 }, async () => {
  const titles = [...readFileSync(join(ROOT, 'scripts/demo.ts'), 'utf8').matchAll(/step\(\s*'(\d+\. [^']+)'/g)].map(
    (match) => match[1] as string,
  );
  assert.ok(titles.length >= 13, `the demo's steps: ${titles.join(', ')}`);
  // No time is judged: the limit only stops a demo that hangs.
  const result = await runProcess(process.execPath, [DEMO], { exit: 0, timeoutMs: 160_000 });
  assert.equal(result.code, 0, describeRun(result));
  let at = 0;
  for (const title of titles) {
    const found = result.stdout.indexOf(`── ${title}\n`, at);
    assert.ok(found >= at, `step "${title}" is not shown after the one before it\n${describeRun(result)}`);
    at = found;
  }
  assert.doesNotMatch(result.stdout, /demo: this exit status should have been/, describeRun(result));
  // Step 13: the command was stopped by the lost lease, and its batch was not acked.
  const lost = result.stdout.slice(result.stdout.indexOf('── 13.'));
  assert.match(lost, /report: started/, describeRun(result));
  assert.match(lost, /report: stopping cleanly\n(?:.*\n)*?\[exit 4\]/, describeRun(result));
  assert.match(lost, /\{"report":"monthly"\}\n\[exit 0\]/, 'the message of the lost batch goes to the next pop');
});
