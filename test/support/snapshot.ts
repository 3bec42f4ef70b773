/**
 * Committed text snapshots (docs/development.md#terminal-snapshots): `test/snapshots/<name>.txt`
 * in the source tree. A run compares what it got with the file and fails with a unified diff of
 * the two; with UPDATE_SNAPSHOTS=1 (`npm run test:snapshots -- --update`) it writes the file
 * instead. A missing file fails too, unless updating: a new case is never passed by default.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The source tree's root: tests run from dist/test/support/. */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const SNAPSHOTS = join(ROOT, 'test', 'snapshots');

export const updating = process.env.UPDATE_SNAPSHOTS === '1';

/** Compares `actual` with test/snapshots/<name>.txt (or writes it when updating). */
export function matchSnapshot(name: string, actual: string): void {
  const path = join(SNAPSHOTS, `${name}.txt`);
  const shown = relative(ROOT, path);
  if (updating) {
    mkdirSync(dirname(path), { recursive: true });
    if (!existsSync(path) || readFileSync(path, 'utf8') !== actual) writeFileSync(path, actual);
    return;
  }
  if (!existsSync(path)) {
    assert.fail(`no snapshot ${shown}: write it with npm run test:snapshots -- --update\n--- actual\n${actual}`);
  }
  const expected = readFileSync(path, 'utf8');
  if (expected === actual) return;
  assert.fail(
    `the screen differs from ${shown} (npm run test:snapshots -- --update rewrites it)\n` +
      unifiedDiff(expected, actual, shown, 'actual'),
  );
}

/** A unified diff of two texts, line by line (three lines of context), as `diff -u` shows it. */
export function unifiedDiff(expected: string, actual: string, from = 'expected', to = 'actual'): string {
  const a = expected.split('\n');
  const b = actual.split('\n');
  // The longest common subsequence, by dynamic programming: screens are a few hundred lines.
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      const row = lcs[i] as number[];
      row[j] = a[i] === b[j] ? (lcs[i + 1]?.[j + 1] ?? 0) + 1 : Math.max(lcs[i + 1]?.[j] ?? 0, row[j + 1] ?? 0);
    }
  }
  type Op = { kind: ' ' | '-' | '+'; text: string; i: number; j: number };
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    // i and j: the op's 1-based line numbers in each text (where it would be, for the other).
    if (i < a.length && j < b.length && a[i] === b[j]) {
      ops.push({ kind: ' ', text: a[i] as string, i: i + 1, j: j + 1 });
      i++;
      j++;
    } else if (i < a.length && (j === b.length || (lcs[i + 1]?.[j] ?? 0) >= (lcs[i]?.[j + 1] ?? 0))) {
      // A line of the expected text only: removed (shown before what replaced it, as diff -u does).
      ops.push({ kind: '-', text: a[i] as string, i: i + 1, j: j + 1 });
      i++;
    } else {
      ops.push({ kind: '+', text: b[j] as string, i: i + 1, j: j + 1 });
      j++;
    }
  }
  const context = 3;
  const out = [`--- ${from}`, `+++ ${to}`];
  let k = 0;
  while (k < ops.length) {
    if ((ops[k] as Op).kind === ' ') {
      k++;
      continue;
    }
    // A hunk: from `context` lines before this change to `context` lines after the last change
    // that is no more than 2 * context lines from the one before it.
    const start = Math.max(0, k - context);
    let end = k;
    for (let m = k; m < ops.length; m++) {
      if ((ops[m] as Op).kind !== ' ') end = m;
      else if (m - end > 2 * context) break;
    }
    const stop = Math.min(ops.length, end + context + 1);
    const hunk = ops.slice(start, stop);
    const oldStart = hunk.find((op) => op.kind !== '+')?.i ?? 0;
    const newStart = hunk.find((op) => op.kind !== '-')?.j ?? 0;
    const oldCount = hunk.filter((op) => op.kind !== '+').length;
    const newCount = hunk.filter((op) => op.kind !== '-').length;
    out.push(`@@ -${oldStart},${oldCount} +${newStart},${newCount} @@`);
    for (const op of hunk) out.push(`${op.kind}${op.text}`);
    k = stop;
  }
  return `${out.join('\n')}\n`;
}
