/**
 * `npm run demo` runs to the end without a terminal, and every command in it exits as its step
 * says it does: the demo checks each status itself and exits 1 on any other (scripts/demo.ts,
 * `run`), so a step whose words went untrue fails here. The one step docs/tour.md shows but
 * the doc tests cannot run (13: a lease lost during `lease run`) is compared with the demo's. A
 * process test: the demo is a script that starts the built binary through bash, as a user types
 * it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { describeRun, runProcess } from '../support/cli.js';
import { outputMismatch, parseMarkdown, ROOT } from '../support/doctest.js';

const DEMO = fileURLToPath(new URL('../../scripts/demo.js', import.meta.url));

/** What the demo printed for `command`: the lines after its `$ ` line, up to its `[exit N]`. */
function shownFor(output: string, command: string, code: number): string {
  const start = output.indexOf(`$ ${command}\n`);
  assert.ok(start >= 0, `the demo runs ${command}`);
  const from = start + command.length + 3;
  const end = output.indexOf(`[exit ${code}]\n`, from);
  assert.ok(end >= 0, `${command} ends with [exit ${code}]\n${output.slice(from, from + 4000)}`);
  return output.slice(from, end);
}

it('npm run demo: every step runs, in order, exits as it says, and prints what the tour shows', {
  timeout: 170_000,
}, async () => {
  const titles = [...readFileSync(join(ROOT, 'scripts/demo.ts'), 'utf8').matchAll(/step\(\s*'(\d+\. [^']+)'/g)].map(
    (match) => match[1] as string,
  );
  assert.ok(titles.length >= 13, `the demo's steps: ${titles.join(', ')}`);
  // Both streams in one pipe, interleaved as on a terminal. No time is judged: the limit only
  // stops a demo that hangs.
  const result = await runProcess('bash', ['-c', `exec "${process.execPath}" "${DEMO}" 2>&1`], {
    exit: 0,
    timeoutMs: 160_000,
  });
  assert.equal(result.code, 0, describeRun(result));
  const output = result.stdout;
  let at = 0;
  for (const title of titles) {
    const found = output.indexOf(`── ${title}\n`, at);
    assert.ok(found >= at, `step "${title}" is not shown after the one before it\n${describeRun(result)}`);
    at = found;
  }
  assert.doesNotMatch(output, /demo: this exit status should have been/, describeRun(result));
  // Step 13, which the doc tests cannot run (the lease is expired during the command): what
  // docs/tour.md shows is what the demo prints, compared as the doc tests compare.
  const readme = readFileSync(join(ROOT, 'docs/tour.md'), 'utf8');
  const block = parseMarkdown(readme, 'docs/tour.md').find((candidate) =>
    candidate.commands.some((command) => command.text.startsWith('queenctl lease run reports ')),
  );
  assert.ok(block?.skip, 'docs/tour.md shows step 13 in a block the doc tests skip');
  const [lost, acquired] = block.commands;
  assert.ok(lost && acquired && lost.expectedOutput && acquired.expectedOutput, 'step 13 shows both outputs');
  assert.equal(lost.expectedCode, 4);
  const mismatch =
    outputMismatch(lost.expectedOutput, shownFor(output, lost.text, 4)) ??
    outputMismatch(acquired.expectedOutput, shownFor(output, acquired.text, 0));
  assert.equal(mismatch, undefined, mismatch);
});
