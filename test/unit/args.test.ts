import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkLeaseId, leaseIdSource, parseDuration, parseSeconds, splitWhitespace } from '../../src/args.js';
import { UsageError } from '../../src/exit.js';
import { formatDuration } from '../../src/output/duration.js';
import { stdinOf } from '../support/fakes.js';

async function collect(source: AsyncIterable<string>): Promise<string[]> {
  const items: string[] = [];
  for await (const item of source) items.push(item);
  return items;
}

describe('--seconds', () => {
  it('accepts whole seconds from 1 to 2147483647', () => {
    assert.equal(parseSeconds('1'), 1);
    assert.equal(parseSeconds('120'), 120);
    assert.equal(parseSeconds('2147483647'), 2147483647);
  });
  for (const bad of ['0', '-5', '2147483648', '1.5', '1e3', '', ' 5', 'abc', '0x10', '+5']) {
    it(`rejects ${JSON.stringify(bad)} as a usage error`, () => assert.throws(() => parseSeconds(bad), UsageError));
  }
});

describe('durations', () => {
  const cases: Array<[string, number]> = [
    ['250ms', 250],
    ['30s', 30_000],
    ['2m', 120_000],
    ['1h', 3_600_000],
    ['10', 10_000],
    ['1.5', 1500],
  ];
  for (const [text, ms] of cases) it(`${text} is ${ms} ms`, () => assert.equal(parseDuration(text, '--every'), ms));
  for (const bad of ['', '0', '0s', '-1s', '1d', 'soon', '1 h', '999999999h']) {
    it(`rejects ${JSON.stringify(bad)}`, () =>
      assert.throws(() => parseDuration(bad, '--every'), /--every takes a duration/));
  }
  it('formats for people', () => {
    assert.equal(formatDuration(118_250), '1m58s');
    assert.equal(formatDuration(5_000), '5s');
    assert.equal(formatDuration(250), '250ms');
    assert.equal(formatDuration(3_660_000), '1h01m');
  });
});

describe('lease ids', () => {
  for (const bad of ['', '   ', 'a\u0000b', 'line\nbreak', 'bell\u0007', 'x'.repeat(10_000)]) {
    it(`rejects ${JSON.stringify(bad.slice(0, 12))} (length ${bad.length})`, () =>
      assert.throws(() => checkLeaseId(bad), UsageError));
  }
  for (const odd of ['a/b', 'a?b#c', '%2F', '..x', 'has space', 'ünïcode']) {
    it(`accepts ${JSON.stringify(odd)}: it travels percent-encoded`, () => assert.equal(checkLeaseId(odd), odd));
  }

  it('one argument is single, several or - are a list', async () => {
    assert.equal(leaseIdSource(['a'], stdinOf(null)).single, true);
    assert.equal(leaseIdSource(['a', 'b'], stdinOf(null)).single, false);
    assert.equal(leaseIdSource(['-'], stdinOf('a')).single, false);
  });

  it('- reads ids separated by any whitespace, in order, between the arguments', async () => {
    const source = leaseIdSource(['first', '-', 'last'], stdinOf('  a\nb\t c\r\n\nd '));
    assert.deepEqual(await collect(source.ids), ['first', 'a', 'b', 'c', 'd', 'last']);
  });

  it('splits tokens across chunk boundaries, multibyte characters included', async () => {
    const bytes = Buffer.from('abc déf\nghi');
    const chunks = [bytes.subarray(0, 2), bytes.subarray(2, 6), bytes.subarray(6)];
    assert.deepEqual(
      await collect(
        splitWhitespace(
          (async function* () {
            yield* chunks;
          })(),
        ),
      ),
      ['abc', 'déf', 'ghi'],
    );
  });

  it('- with empty stdin is a usage error', async () => {
    await assert.rejects(collect(leaseIdSource(['-'], stdinOf(' \n ')).ids), /no lease ids on standard input/);
  });

  it('- when stdin is a terminal is a usage error before anything is read', () => {
    assert.throws(() => leaseIdSource(['-'], stdinOf('', true)), /standard input, but it is a terminal/);
  });

  it('a control character on stdin is a usage error naming its position', async () => {
    await assert.rejects(
      collect(leaseIdSource(['-'], stdinOf('good bad\u0001id')).ids),
      /lease id #2 on standard input/,
    );
  });

  it('rejects no ids, two -, and a bad argument before reading stdin', () => {
    assert.throws(() => leaseIdSource([], stdinOf(null)), /missing lease id/);
    assert.throws(() => leaseIdSource(['-', '-'], stdinOf('a')), /once/);
    assert.throws(() => leaseIdSource(['ok', ''], stdinOf(null)), /lease id #2 is empty/);
  });
});
