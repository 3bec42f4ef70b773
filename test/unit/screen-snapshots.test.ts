/**
 * The parts of the terminal snapshots that are plain functions (test/support/pty.ts and
 * snapshot.ts; docs/development.md#terminal-snapshots): the diff a failure shows, the masks, and
 * the split back into the rows tmux wrapped.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { maskedRows, masks, type Screen, widestLine } from '../support/pty.js';
import { unifiedDiff } from '../support/snapshot.js';

const FIXED = '0190f3a2-5c1e-7b44-9a10-3d2e8f6b7c01';
const DRAWN = 'f47ac10b-58cc-4372-a567-0e02b2c3d479';
const OTHER = '9b2e7c1a-0d3f-4e5a-8b6c-7d8e9f0a1b2c';

/** A screen of `cols` columns showing `lines`, wrapped as tmux wraps single-width text. */
function screenOf(lines: string[], cols: number): Screen {
  const rows: string[] = [];
  const wraps: number[][] = [];
  for (const line of lines) {
    const lengths: number[] = [];
    for (let at = 0; at === 0 || at < line.length; at += cols) {
      rows.push(line.slice(at, at + cols).trimEnd());
      lengths.push(Math.min(cols, line.length - at));
    }
    wraps.push(lengths);
  }
  return { rows, lines, wraps };
}

describe('unifiedDiff', () => {
  it('shows a changed row as diff -u does: the snapshot’s removed, then the screen’s, in context', () => {
    const expected = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight'].join('\n');
    const actual = expected.replace('five', 'FIVE');
    assert.equal(
      unifiedDiff(expected, actual, 'snap.txt', 'actual'),
      [
        '--- snap.txt',
        '+++ actual',
        '@@ -2,7 +2,7 @@',
        ' two',
        ' three',
        ' four',
        '-five',
        '+FIVE',
        ' six',
        ' seven',
        ' eight',
        '',
      ].join('\n'),
    );
  });

  it('shows a row added at the end and one removed at the start', () => {
    const diff = unifiedDiff('a\nb\nc', 'b\nc\nd');
    assert.match(diff, /^-a$/m);
    assert.match(diff, /^\+d$/m);
    assert.doesNotMatch(diff, /^[-+][bc]$/m);
  });
});

describe('masks', () => {
  it('keep a fixed id, number drawn ids by first appearance, and keep every length', () => {
    const rest = 'http://127.0.0.1:40123 at 16:14:13.536 ⠙ 2026-01-15T09:30:00.000Z';
    const line = `${DRAWN} ${FIXED} ${OTHER} ${DRAWN} ${rest}`;
    const [masked] = maskedRows(screenOf([line], 500), masks([FIXED]));
    assert.equal(
      masked,
      'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxx1 0190f3a2-5c1e-7b44-9a10-3d2e8f6b7c01 ' +
        'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxx2 xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxx1 ' +
        'http://127.0.0.1:PPPPP at hh:mm:ss.sss ⣿ 2026-01-15T09:30:00.000Z',
    );
    assert.equal(masked?.length, line.length);
  });

  it('mask an id that tmux wrapped across two rows, and split it back where tmux did', () => {
    const line = `lease ${DRAWN}: held`;
    const screen = screenOf([line, 'next'], 20);
    assert.deepEqual(screen.rows, ['lease f47ac10b-58cc-', '4372-a567-0e02b2c3d4', '79: held', 'next']);
    assert.deepEqual(maskedRows(screen, masks([])), [
      'lease xxxxxxxx-xxxx-',
      'xxxx-xxxx-xxxxxxxxxx',
      'x1: held',
      'next',
    ]);
  });
});

describe('widestLine', () => {
  it('measures the lines queenctl wrote, not the rows they wrapped into', () => {
    const screen = screenOf(['short', 'x'.repeat(144)], 80);
    assert.deepEqual(widestLine(screen), { width: 144, line: 'x'.repeat(144) });
  });
});
