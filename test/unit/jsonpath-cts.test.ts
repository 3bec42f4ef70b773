/**
 * RFC 9535's compliance test suite (test/fixtures/jsonpath-cts, commit 7be7c1f, BSD-2), every
 * case, through what `-o jsonpath=` runs: parseJsonPath, then the nodelist its template selects
 * (docs/cli-contract.md#the-jsonpath-implementation). A valid selector must select the expected
 * values, in order (any one of `results` where the RFC leaves the order open); an invalid one
 * must be refused as a usage error, before anything is sent.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { UsageError } from '../../src/exit.js';
import { parseJsonPath } from '../../src/output/jsonpath.js';

interface Case {
  name: string;
  selector: string;
  document?: unknown;
  result?: unknown[];
  results?: unknown[][];
  invalid_selector?: boolean;
}

const suite = JSON.parse(
  readFileSync(new URL('../../../test/fixtures/jsonpath-cts/cts.json', import.meta.url), 'utf8'),
) as { tests: Case[] };

/**
 * The cases -o jsonpath= answers otherwise, on purpose, each with why. Each is still run below,
 * for what queenctl does instead.
 */
const LEFT_OUT = new Map<string, { why: string; check: (selector: string) => Promise<void> }>([
  [
    'basic, no leading whitespace',
    {
      why:
        'blanks around an expression that does not start with `$` are layout, trimmed as inside `{ }`: ' +
        '` $` is the path `$`, as ` .a` is `.a` (docs/cli-contract.md#jsonpath-output)',
      check: async (selector) => {
        const template = await parseJsonPath(selector);
        assert.deepEqual(template.select?.({ a: 1 }), [{ a: 1 }]);
      },
    },
  ],
]);

describe('-o jsonpath= on the RFC 9535 compliance test suite', () => {
  it('holds every case of the suite, with unique names', () => {
    assert.equal(suite.tests.length, 703);
    assert.equal(new Set(suite.tests.map(({ name }) => name)).size, suite.tests.length);
    for (const name of LEFT_OUT.keys())
      assert.ok(
        suite.tests.some((test) => test.name === name),
        name,
      );
  });

  for (const test of suite.tests) {
    const leftOut = LEFT_OUT.get(test.name);
    if (leftOut) {
      it(`${test.name}: left out, ${leftOut.why}`, () => leftOut.check(test.selector));
      continue;
    }
    if (test.invalid_selector) {
      it(`${test.name}: ${JSON.stringify(test.selector)} is refused as a usage error`, async () => {
        await assert.rejects(parseJsonPath(test.selector), (error: unknown) => {
          assert.ok(error instanceof UsageError, `${String(error)}`);
          assert.equal(error.exitCode, 1);
          assert.match(error.message, /^-o jsonpath: the expression is (malformed|empty)/);
          return true;
        });
      });
      continue;
    }
    it(`${test.name}: ${JSON.stringify(test.selector)}`, async () => {
      const template = await parseJsonPath(test.selector);
      assert.ok(template.select, 'a path, not a template');
      const got = template.select(test.document);
      if (test.results) {
        assert.ok(
          test.results.some((result) => isDeepStrictEqual(result, got)),
          `${JSON.stringify(got)} is none of ${JSON.stringify(test.results)}`,
        );
      } else {
        assert.deepEqual(got, test.result);
      }
    });
  }
});
