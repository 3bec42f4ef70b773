/**
 * Every relative link of README.md and docs/ leads to a file of the repository, and every
 * `#anchor` to a heading of that file (GitHub's anchors: lower case, punctuation dropped,
 * spaces to dashes).
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, it } from 'node:test';
import { documents, ROOT } from '../support/doctest.js';

/** GitHub's anchor of a heading. */
export function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N}\s-]/gu, '')
    .replace(/\s/g, '-');
}

function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  let inFence = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) inFence = !inFence;
    const heading = !inFence && /^#{1,6}\s+(.*)$/.exec(line);
    if (!heading) continue;
    const base = anchorOf(heading[1] ?? '');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    found.add(count === 0 ? base : `${base}-${count}`);
  }
  return found;
}

/** The relative links of a Markdown text, outside code: `[text](target)`. */
function links(markdown: string): string[] {
  const prose = markdown.replace(/^\s*(```|~~~)[\s\S]*?^\s*\1.*$/gm, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((match) => match[1] as string)
    .filter((target) => !/^[a-z]+:/i.test(target));
}

describe('the docs link to what exists', () => {
  it('computes anchors as GitHub does', () => {
    assert.equal(
      anchorOf('What a run loads, and the code caches it starts from'),
      'what-a-run-loads-and-the-code-caches-it-starts-from',
    );
    assert.equal(anchorOf('`queenctl lease extend <leaseId...>`'), 'queenctl-lease-extend-leaseid');
  });
  for (const file of documents()) {
    it(file, () => {
      const broken: string[] = [];
      for (const target of links(readFileSync(join(ROOT, file), 'utf8'))) {
        const [path = '', anchor] = target.split('#');
        const resolved = path === '' ? file : normalize(join(dirname(file), decodeURI(path)));
        if (!existsSync(join(ROOT, resolved))) {
          broken.push(`${target}: no file ${resolved}`);
          continue;
        }
        if (anchor && resolved.endsWith('.md') && !anchors(readFileSync(join(ROOT, resolved), 'utf8')).has(anchor))
          broken.push(`${target}: no heading #${anchor} in ${resolved}`);
      }
      assert.deepEqual(broken, []);
    });
  }
});
