import assert from 'node:assert/strict';
import { it } from 'node:test';
import { parse } from 'yaml';
import { yamlStringify } from '../../src/output/yaml.js';

it('-o yaml reads back as the value it was given, whitespace-only lines included', async () => {
  const stringify = await yamlStringify();
  // The yaml library alone writes the first two as block scalars that parse as "\n" and "\n\n".
  const strings = [' \n', '  \n\n', '\t\n x', 'a\n \nb', '\n', 'a\nb\n', ' ', 'plain', ''];
  for (const value of strings) {
    const record = { reason: value, nested: [{ reason: value }] };
    assert.deepEqual(parse(stringify(record)), record, JSON.stringify(value));
  }
  // Multi-line text without such a line keeps the readable block form.
  assert.equal(stringify({ reason: 'a\nb\n' }), 'reason: |\n  a\n  b\n');
  // No folding: a long line stays one line, as lineWidth 0 gave before.
  const long = 'x '.repeat(100).trim();
  assert.equal(stringify({ long }), `long: ${long}\n`);
});
