/**
 * docs/reference/ cannot drift from the commands: the committed pages are what the command tree
 * renders now (else: the file, its first differing line, and `npm run docs`), and the renderer
 * (src/docs/reference.ts) documents every visible command with its flags, defaults, exit codes
 * and examples, escaped for Markdown.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import { describeProgram, everyCommand } from '../../src/docs/model.js';
import { EXAMPLES_SKIP, GENERATED_MARK, markdownEscape, referencePages } from '../../src/docs/reference.js';
import { docsTree } from '../../src/docs/tree.js';

const REFERENCE = fileURLToPath(new URL('../../../docs/reference/', import.meta.url));
const tree = docsTree();
const pages = referencePages(tree);
const page = (file: string): string => {
  const found = pages.find((candidate) => candidate.file === file);
  assert.ok(found, `no page ${file}`);
  return found.text;
};

/** Where `committed` first differs from `generated`, for a message a person can act on. */
function firstDifference(committed: string, generated: string): string | undefined {
  if (committed === generated) return undefined;
  const ours = committed.split('\n');
  const theirs = generated.split('\n');
  const index = ours.findIndex((line, at) => line !== theirs[at]);
  const at = index === -1 ? ours.length : index;
  const shown = (line: string | undefined): string => JSON.stringify(line ?? '(end of file)');
  return `line ${at + 1}\n  committed: ${shown(ours[at])}\n  generated: ${shown(theirs[at])}`;
}

describe('docs/reference', () => {
  it('is what the command tree renders now (run npm run docs to update)', () => {
    const problems: string[] = [];
    for (const { file, text } of pages) {
      const path = join(REFERENCE, file);
      if (!existsSync(path)) {
        problems.push(`docs/reference/${file} is missing`);
        continue;
      }
      const difference = firstDifference(readFileSync(path, 'utf8'), text);
      if (difference) problems.push(`docs/reference/${file} differs from the command tree at ${difference}`);
    }
    for (const name of readdirSync(REFERENCE)) {
      const stale = name.endsWith('.md') && !pages.some((candidate) => candidate.file === name);
      if (stale && readFileSync(join(REFERENCE, name), 'utf8').startsWith(GENERATED_MARK)) {
        problems.push(`docs/reference/${name} documents commands that no longer exist`);
      }
    }
    assert.equal(problems.length, 0, `${problems.join('\n')}\nrun npm run docs to update docs/reference/`);
  });

  it('has one page per group and one for queenctl and its verbs', () => {
    assert.deepEqual(pages.map((candidate) => candidate.file).sort(), ['config.md', 'lease.md', 'queenctl.md']);
  });

  it('documents every visible command once, and never __complete or a group help', () => {
    const all = pages.map((candidate) => candidate.text).join('\n');
    for (const command of everyCommand(tree)) {
      const headings = all.match(new RegExp(`^#{1,2} ${command.fullName}$`, 'gm')) ?? [];
      assert.equal(headings.length, 1, `${command.fullName}: ${headings.length} headings`);
    }
    assert.equal(everyCommand(tree).length, 21);
    assert.doesNotMatch(all, /__complete|queenctl lease help|queenctl config help/);
  });

  it('shows each flag with its default and choices, the global options, exit codes and examples', () => {
    const lease = page('lease.md');
    assert.match(lease, /^\| `--seconds <n>` \| extend to now \+ seconds on the broker clock .* \| `60` \|$/m);
    assert.match(lease, /^\| `--kill-after <duration>` \| .* \| `10s` \|$/m);
    assert.match(lease, /^\| `--timeout <duration>` \| deadline of one HTTP request: 250ms, 10s, 1m \| `10s` \|$/m);
    assert.match(lease, /^\| `-o, --output <format>` \| table\\\|wide\\\|json/m);
    assert.match(lease, /^\| 129\/130\/143 \| stopped by SIGHUP\/SIGINT\/SIGTERM \(without a command\) \|$/m);
    assert.match(lease, /^With several ids the status is the first that applies of 3, 2, 4, 0\.$/m);
    assert.match(
      page('queenctl.md'),
      /^\| `<shell>` \| the shell to complete in \(choices: `bash`, `zsh`, `fish`\) \|$/m,
    );
    assert.match(page('queenctl.md'), /^\| `QUEEN_CONFIG` \|/m);
    assert.match(page('config.md'), /^\| 1 \| usage or configuration error: a bad flag or argument/m);
    // Every example block is kept from the doc tests, which would run it against the simulator.
    for (const { file, text } of pages) {
      const fences = text.match(/^```sh$/gm) ?? [];
      const skipped = text.match(new RegExp(`^${EXAMPLES_SKIP.replace(/[()]/g, '\\$&')}\n\`\`\`sh$`, 'gm')) ?? [];
      assert.ok(fences.length > 0, file);
      assert.equal(skipped.length, fences.length, file);
    }
    assert.ok(lease.includes('```sh\nqueenctl lease extend 0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90 --seconds 120\n'));
  });

  it('escapes help text that Markdown would read as markup', () => {
    assert.equal(
      markdownEscape('a|b <x> *y* _z_ [l](u) `c` \\'),
      'a\\|b \\<x\\> \\*y\\* \\_z\\_ \\[l\\](u) \\`c\\` \\\\',
    );
    assert.equal(markdownEscape('# not a heading'), '\\# not a heading');
    assert.equal(markdownEscape('- not a list'), '\\- not a list');
    assert.equal(markdownEscape('1. not a list'), '1\\. not a list');
    const hostile = new Command('queenctl').addOption(
      new Option('--mode <m>', 'one|two <b>bold</b> `x`').choices(['a|b', 'c']).default('a|b'),
    );
    const [rendered] = referencePages(describeProgram(hostile));
    const row = rendered!.text.split('\n').find((line) => line.startsWith('| `--mode <m>`'));
    assert.ok(row, rendered!.text);
    // Four cells, whatever pipes the text holds.
    assert.equal(row.split(/(?<!\\)\|/).length, 5, row);
    assert.ok(row.includes('one\\|two \\<b\\>bold\\</b\\> \\`x\\`'), row);
    assert.ok(row.includes('`a\\|b`'), row);
  });
});
