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

/**
 * Runs `check` on every case, and fails once naming each case that failed and why. The cases are
 * checked in three tests, not 703: each test of node:test costs ~1 ms of CPU in the runner and its
 * report, more than a case itself, and a failure still names every case it holds.
 */
async function checkEach(cases: Case[], check: (test: Case) => Promise<void> | void): Promise<void> {
  assert.ok(cases.length > 0, 'cases to check');
  const failed: string[] = [];
  for (const test of cases) {
    try {
      await check(test);
    } catch (error) {
      failed.push(`${test.name}: ${JSON.stringify(test.selector)}: ${error instanceof Error ? error.message : error}`);
    }
  }
  assert.deepEqual(failed, [], `${failed.length} of ${cases.length} cases failed:\n${failed.join('\n')}`);
}

const leftOut = suite.tests.filter((test) => LEFT_OUT.has(test.name));
const invalid = suite.tests.filter((test) => !LEFT_OUT.has(test.name) && test.invalid_selector);
const valid = suite.tests.filter((test) => !LEFT_OUT.has(test.name) && !test.invalid_selector);

describe('-o jsonpath= on the RFC 9535 compliance test suite', () => {
  it('holds every case of the suite, with unique names', () => {
    assert.equal(suite.tests.length, 703);
    assert.equal(new Set(suite.tests.map(({ name }) => name)).size, suite.tests.length);
    for (const name of LEFT_OUT.keys())
      assert.ok(
        suite.tests.some((test) => test.name === name),
        name,
      );
    assert.equal(leftOut.length + invalid.length + valid.length, suite.tests.length);
  });

  it('each case left out does what queenctl does instead, for the reason LEFT_OUT gives', () =>
    checkEach(leftOut, (test) => LEFT_OUT.get(test.name)?.check(test.selector)));

  it('every invalid selector of the suite is refused as a usage error', () =>
    checkEach(invalid, (test) =>
      assert.rejects(parseJsonPath(test.selector), (error: unknown) => {
        assert.ok(error instanceof UsageError, `${String(error)}`);
        assert.equal(error.exitCode, 1);
        assert.match(error.message, /^-o jsonpath: the expression is (malformed|empty)/);
        return true;
      }),
    ));

  it('every valid selector of the suite selects the expected values, in order', () =>
    checkEach(valid, async (test) => {
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
    }));
});
