import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UsageError } from '../../src/exit.js';
import { resolveFormat } from '../../src/output/format.js';
import { isTemplate, parseJsonPath } from '../../src/output/jsonpath.js';
import { recordSink } from '../../src/output/records.js';
import { Collector } from '../support/fakes.js';

const dead = {
  leaseId: 'L2',
  success: true,
  renewed: 0,
  newExpiresAt: null,
  expiresAt: null,
  lease_expires_at: null,
};
const live = { ...dead, leaseId: 'L1', renewed: 2, newExpiresAt: '2026-12-03T10:00:00.000Z' };
const listing = { rows: [{ partition: 'p1' }, { partition: 'p2' }] };

const render = async (expression: string, value: unknown): Promise<string> =>
  (await parseJsonPath(expression)).render(value);

describe('-o jsonpath=, the Go form', () => {
  it('prints a scalar bare on a line, 0 included', async () => {
    assert.equal(await render('.newExpiresAt', live), '2026-12-03T10:00:00.000Z\n');
    assert.equal(await render('.renewed', dead), '0\n');
    assert.equal(await render('.rows[0].partition', listing), 'p1\n');
    assert.equal(await render('renewed', live), '2\n', 'the leading dot may be left out');
    assert.equal(await render('$.renewed', live), '2\n');
  });

  it('prints an object or an array as JSON, null as null, and nothing for a missing key', async () => {
    assert.equal(await render('.rows[1]', listing), '{"partition":"p2"}\n');
    assert.equal(await render('.rows', listing), '[{"partition":"p1"},{"partition":"p2"}]\n');
    assert.equal(await render('.expiresAt', dead), 'null\n');
    assert.equal(await render('.nope', dead), '', 'a path that selects nothing prints nothing, not an empty line');
    assert.equal(await render('.error', { error: '' }), '\n', 'an empty string is something: an empty line');
  });

  it('a stream prints no line for an event a path selects nothing of', async () => {
    const template = await parseJsonPath('.detail');
    assert.equal(template.renderLine({ event: 'renewed' }), '');
    assert.equal(template.renderLine({ event: 'lost', detail: 'gone' }), 'gone\n');
  });

  it('reads a member name with a dash, as kubectl does', async () => {
    assert.equal(await render('[0].token-ref', [{ 'token-ref': 'env' }]), 'env\n');
  });
});

describe("-o jsonpath=, kubectl's template", () => {
  it('prints the template as written, the values of one action space-separated', async () => {
    assert.equal(await render('{.renewed}', live), '2');
    assert.equal(await render('{[*].leaseId}', [live, dead]), 'L1 L2');
    assert.equal(await render('lease {.leaseId}: {.renewed}{"\\n"}', live), 'lease L1: 2\n');
  });

  it('loops with {range}…{end}, paths inside relative to the element, $ to the whole', async () => {
    const template = '{range [*]}{.leaseId}{"\\t"}{.renewed}{"\\n"}{end}';
    assert.equal(await render(template, [live, dead]), 'L1\t2\nL2\t0\n');
    assert.equal(await render('{range .rows}{.partition},{end}', listing), 'p1,p2,');
    assert.equal(await render('{range .rows[*]}{$.rows[0].partition}{@.partition} {end}', listing), 'p1p1 p1p2 ');
  });

  it('evaluates RFC 9535 filters through the library', async () => {
    assert.equal(await render('{[?@.renewed == 0].leaseId}', [live, dead]), 'L2');
    assert.equal(await render('{[?(@.renewed > 0)].leaseId}', [live, dead]), 'L1');
  });

  it('gives one line per event of a stream', async () => {
    const template = await parseJsonPath('{.event} {.leaseId}');
    assert.equal(template.renderLine({ event: 'renewed', leaseId: 'L1' }), 'renewed L1\n');
    const go = await parseJsonPath('.event');
    assert.equal(go.renderLine({ event: 'lost' }), 'lost\n');
  });
});

describe('-o jsonpath=, a path or a template (issue 39)', () => {
  it('takes an expression that starts with $ for an RFC 9535 query, never a template', async () => {
    assert.equal(isTemplate("$[?match(@, '\\\\p{Lu}')]"), false);
    assert.equal(isTemplate(['$', '{.a}'].join('')), false, 'a template that prints a $ first writes {"$"}');
    assert.equal(await render("$[?match(@, '\\\\p{Lu}')]", ['A', 'b', 'É']), 'A É\n');
    assert.equal(
      await render("$[?match(@.q, 'a{2}')].id", [
        { q: 'aa', id: 1 },
        { q: 'a', id: 2 },
      ]),
      '1\n',
    );
    assert.equal(await render('{"$"}{.a}', { a: 5 }), '$5');
  });

  it('takes a { inside a quoted string of [ ] for part of a path, any other { for a template', async () => {
    assert.equal(isTemplate(".rows[?match(@.q, 'p{2}')]"), false);
    assert.equal(isTemplate('.rows[?@.q == "}{"].id'), false);
    assert.equal(isTemplate('{.a}'), true);
    assert.equal(isTemplate('lease {.leaseId}'), true);
    assert.equal(isTemplate("it's {.a}"), true, 'a quote outside [ ] is text');
    assert.equal(isTemplate('[{.a}]'), true);
    assert.equal(isTemplate('.a'), false);
    assert.equal(
      await render(".rows[?match(@.q, 'p{2}')].id", {
        rows: [
          { q: 'pp', id: 7 },
          { q: 'p', id: 8 },
        ],
      }),
      '7\n',
    );
  });

  it('selects as RFC 9535 says where the earlier library did not', async () => {
    const leases = [
      { leaseId: 'L1', partitions: ['p1', 'p2'] },
      { leaseId: 'L2', partitions: ['p2'] },
    ];
    assert.equal(await render('$[?@.partitions[0]=="p1"].leaseId', leases), 'L1\n');
    assert.equal(await render('{[?@.partitions[0]=="p1"].leaseId}', leases), 'L1');
    const objects = [
      { a: 1, b: 1, id: 'ab' },
      { a: 1, b: 1, c: 1, id: 'abc' },
      { c: 1, id: 'c' },
    ];
    assert.equal(await render('$[?@.a && @.b && @.c].id', objects), 'abc\n');
    assert.equal(await render('$[?@.a && @.c || @.c && @.b || @.id == "c"].id', objects), 'abc c\n');
  });

  it('takes a query from $ as written: no kubectl dashes, no blanks trimmed', async () => {
    await assert.rejects(parseJsonPath('$ '), UsageError);
    assert.equal(await render('.token-ref', { 'token-ref': 'env' }), 'env\n', 'without $, a dash as kubectl reads it');
    assert.equal(await render('$["token-ref"]', { 'token-ref': 'env' }), 'env\n');
  });

  it('gives the nodelist of a path, and none for a template', async () => {
    assert.deepEqual((await parseJsonPath('.rows[*].partition')).select?.(listing), ['p1', 'p2']);
    assert.deepEqual((await parseJsonPath('$.nope')).select?.(listing), []);
    assert.equal((await parseJsonPath('{.rows}')).select, null);
  });

  it('refuses a function call the RFC refuses, as a usage error that says where', async () => {
    await assert.rejects(parseJsonPath('$[?length(@.*) > 1]'), (error: UsageError) => {
      assert.match(error.message, /malformed at character 11: length\(\) argument 0 must be of ValueType/);
      return true;
    });
  });
});

describe('-o jsonpath=, malformed expressions', () => {
  const cases: Array<[string, RegExp]> = [
    ['', /jsonpath: the expression is empty/],
    ['   ', /jsonpath: the expression is empty/],
    ['.rows[', /jsonpath: the expression is malformed at character 7: the path ends too early/],
    ['.rows[0', /jsonpath: the expression is malformed at character 8/],
    ['{.renewed', /jsonpath: the expression is malformed at character 1: a "\{" without its "\}"/],
    ['{}', /jsonpath: the expression is malformed at character 1: an empty \{\}/],
    ['{range [*]}{.leaseId}', /jsonpath: the expression is malformed at character 2: \{range\} without its \{end\}/],
    ['{.a}{end}', /jsonpath: the expression is malformed at character 6: \{end\} without a \{range\}/],
    ['{.a}{[?@.x==]}', /jsonpath: the expression is malformed at character 13: unexpected "\]"/],
    ['{"\\q"}', /jsonpath: the expression is malformed at character 2: a string literal/],
  ];
  for (const [expression, message] of cases) {
    it(`refuses ${JSON.stringify(expression)} as a usage error that says where`, async () => {
      await assert.rejects(parseJsonPath(expression), (error: unknown) => {
        assert.ok(error instanceof UsageError, String(error));
        assert.equal(error.exitCode, 1);
        assert.match(error.message, message);
        return true;
      });
    });
  }

  it('points a caret at the place in the expression the user typed', async () => {
    await assert.rejects(parseJsonPath('{.a-b[?@.x==]}'), (error: UsageError) => {
      const [expression, caret] = (error.hint ?? '').split('\n');
      assert.equal(expression, '{.a-b[?@.x==]}');
      assert.equal(caret?.indexOf('^'), 2 + '{.a-b[?@.x=='.length);
      return true;
    });
  });

  it('is refused by -o itself, and `-o jsonpath` without = says to add one', async () => {
    await assert.rejects(resolveFormat('jsonpath=.a[', false), /jsonpath/);
    await assert.rejects(resolveFormat('jsonpath', false), (error: UsageError) => /=/.test(error.hint ?? ''));
  });
});

describe('-o jsonpath= on records', () => {
  it('applies to the one object, or to the whole array once complete, as -o json prints them', async () => {
    const format = await resolveFormat('jsonpath={[*].renewed}', false);
    const stream = new Collector();
    const sink = await recordSink<object>(stream, format as Exclude<typeof format, string>, false);
    await sink.add(live);
    assert.equal(stream.text, '', 'nothing before the array is complete');
    await sink.add(dead);
    await sink.end();
    assert.equal(stream.text, '2 0');

    const single = new Collector();
    const one = await recordSink<object>(single, (await resolveFormat('jsonpath=.renewed', false)) as never, true);
    await one.add(dead);
    assert.equal(single.text, '0\n');
  });
});
