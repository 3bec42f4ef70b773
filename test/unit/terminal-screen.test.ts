/**
 * The live views' test screen (test/support/screen.ts) counts a line's columns itself when every
 * character is one column for certain, and asks string-width otherwise: the two must agree, or a
 * line that wraps on a terminal would pass for one that fits.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import stringWidth from 'string-width';
import { NARROW, screenOf, widthOf } from '../support/screen.js';

describe('the test screen: columns of a line', () => {
  it('each character it counts as one column is one column for string-width', () => {
    const counted: string[] = [];
    for (let code = 0; code <= 0xffff; code++) {
      const char = String.fromCharCode(code);
      if (NARROW.test(char)) counted.push(char);
    }
    assert.ok(counted.includes('█') && counted.includes('·') && counted.includes('a'));
    for (const char of counted) assert.equal(stringWidth(char), 1, `U+${char.codePointAt(0)?.toString(16)}`);
  });

  it('a line of wide, combining or emoji characters is measured by string-width', () => {
    for (const line of ['lease 日本語', 'e\u0301t\u00e9', 'ok ✅ done', '👩‍👩‍👧 3', 'tab\there', 'a·b…c █░']) {
      assert.equal(widthOf(line), stringWidth(line), line);
    }
  });

  it('a line of 41 double-width characters overflows 80 columns; 80 narrow ones do not', () => {
    assert.deepEqual(screenOf('█'.repeat(80), 80).overflows, []);
    assert.equal(screenOf('日'.repeat(41), 80).overflows.length, 1);
  });
});
