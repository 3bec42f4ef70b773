/**
 * The docs are tests: every `sh` and `console` block of README.md and docs/ that runs queenctl is
 * run against a simulator, its exit codes and output shape checked (test/support/doctest.ts has
 * the rules; docs/doctests.md explains them to writers). Skipped blocks are listed as skipped
 * tests, by file and line, with their reason.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { withSimulator } from '../support/shared.js';
import { checkBlock, type DocBlock, documents, parseMarkdown, ROOT } from '../support/doctest.js';

const blocks: DocBlock[] = documents().flatMap((file) => parseMarkdown(readFileSync(join(ROOT, file), 'utf8'), file));
const executed = blocks.filter((block) => block.runsQueenctl);

// Sixteen blocks at a time: most of a block's time is a wait the doc shows (`sleep 3`, `--for 2s`,
// `--wait 1s`), not CPU, so two at a time left the file ~12 s long for ~3 CPU-s. Each block has
// its own simulator and HOME; what they share (the in-process server, the one bash that runs
// them, the code caches) serves any number at once.
describe('the docs run as written', { concurrency: 16 }, () => {
  it('finds the blocks of the README and the runbooks', () => {
    const files = new Set(executed.filter((block) => !block.skip).map((block) => block.file));
    for (const file of ['README.md', 'docs/runbooks.md', 'docs/commands.md', 'docs/config.md'])
      assert.ok(files.has(file), `${file} has blocks that run`);
  });
  for (const block of executed) {
    const name = `${block.file}:${block.line} (${block.lang})`;
    it(name, { skip: block.skip ? `doctest: skip (${block.skip})` : false }, async () => {
      await withSimulator(async (sim) => {
        const problems = await checkBlock(block, sim);
        assert.deepEqual(problems, [], problems.join('\n\n'));
      });
    });
  }
});

describe("the tour (docs/tour.md) is the demo's", () => {
  it('has the steps of scripts/demo.ts, in its order and with its titles', () => {
    const demo = readFileSync(join(ROOT, 'scripts/demo.ts'), 'utf8');
    const readme = readFileSync(join(ROOT, 'docs/tour.md'), 'utf8');
    const demoSteps = [...demo.matchAll(/step\(\s*'(\d+\. [^']+)'/g)].map((match) => match[1]);
    const tourSteps = [...readme.matchAll(/^\*\*(\d+\. [^*]+?)\.\*\*/gm)].map((match) => match[1]);
    assert.ok(demoSteps.length >= 10, `the demo's steps: ${demoSteps.join(', ')}`);
    assert.deepEqual(tourSteps, demoSteps);
  });

  it('runs the commands of steps 1 to 9 as the tour shows them, on the same leases', () => {
    const demo = readFileSync(join(ROOT, 'scripts/demo.ts'), 'utf8');
    const readme = readFileSync(join(ROOT, 'docs/tour.md'), 'utf8');
    // The demo's commands: run('…') and run(`…`) with no interpolation (step 10 acks its own lease).
    const commands = [...demo.matchAll(/\brun\(\s*(?:'([^']*)'|`([^`$]*(?:\$(?!\{)[^`$]*)*)`)/g)]
      .map((match) => (match[1] ?? (match[2] as string).replaceAll('\\\\', '\\')).split('\n')[0] as string)
      .filter((command) => command.startsWith('queenctl') || command.startsWith('printf'));
    assert.ok(commands.length >= 10, `the demo's commands: ${commands.join('\n')}`);
    for (const command of commands) {
      const shown = readme.includes(`$ ${command}\n`) || readme.includes(`\n${command}\n`);
      assert.ok(shown, `the demo runs, and docs/tour.md does not show:\n${command}`);
    }
    assert.match(demo, /mintTourScene\(sim\)/, 'the demo mints the leases the doc tests run the tour on');
  });
});
