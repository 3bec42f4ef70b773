/**
 * A mistyped `-o` names the closest format, as git and kubectl name the closest command
 * (issue 39): `-o tabel` is still a usage error, with `did you mean -o table?` under it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UsageError } from '../../src/exit.js';
import { closestWord, editDistance } from '../../src/output/closest.js';
import { OUTPUT_FORMATS, resolveFormat } from '../../src/output/format.js';

/** The hint of the usage error `-o <flag>` is. */
async function hintOf(flag: string): Promise<string | undefined> {
  try {
    await resolveFormat(flag, false);
  } catch (error) {
    assert.ok(error instanceof UsageError, String(error));
    assert.match(error.message, /^-o\/--output takes table, wide, json, ndjson, yaml, name or jsonpath=<expr>, not /);
    return error.hint;
  }
  assert.fail(`-o ${flag} was accepted`);
}

describe('-o: a mistyped format names the closest one', () => {
  for (const [typed, meant] of [
    ['tabel', 'table'],
    ['tabl', 'table'],
    ['TABLE', 'table'],
    ['jsno', 'json'],
    ['JSON', 'json'],
    ['yml', 'yaml'],
    ['ndjsn', 'ndjson'],
    ['wdie', 'wide'],
    ['nmae', 'name'],
  ] as const) {
    it(`-o ${typed}: did you mean -o ${meant}?`, async () => {
      assert.equal(await hintOf(typed), `did you mean -o ${meant}?`);
    });
  }

  it('a mistyped jsonpath= keeps its expression in the suggestion', async () => {
    assert.equal(await hintOf('jsonpth={.leaseId}'), 'did you mean -o jsonpath={.leaseId}?');
  });

  it('nothing close, no format suggested: -o text, -o xml, -o csv say where the formats are told', async () => {
    for (const far of ['text', 'xml', 'csv', 'go-template={{.x}}', '']) {
      assert.equal(await hintOf(far), 'queenctl --help says what each format prints', far);
    }
  });

  it('-o jsonpath without = still says to give the expression after an =', async () => {
    assert.match((await hintOf('jsonpath')) ?? '', /after an =/);
  });
});

describe('closestWord', () => {
  it('counts two neighbours swapped as one edit', () => {
    assert.equal(editDistance('tabel', 'table'), 1);
    assert.equal(editDistance('table', 'table'), 0);
    assert.equal(editDistance('', 'yaml'), 4);
    assert.equal(editDistance('kitten', 'sitting'), 3);
  });

  it('takes the nearest, the first of equals, and nothing beyond two edits', () => {
    assert.equal(closestWord('jsom', OUTPUT_FORMATS), 'json');
    assert.equal(closestWord('nam', ['name', 'yaml']), 'name');
    assert.equal(closestWord('tbl', OUTPUT_FORMATS), 'table');
    assert.equal(closestWord('xml', OUTPUT_FORMATS), undefined, 'two edits of four letters is another word');
    assert.equal(closestWord('ab', ['yaml']), undefined);
  });
});
