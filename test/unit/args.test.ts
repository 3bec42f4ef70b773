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

async function* chunksOf(chunks: Buffer[]): AsyncGenerator<Buffer> {
  yield* chunks;
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
  for (const odd of ['a/b', 'a?b#c', '%2F', '..x', 'ünïcode', 'x\uFFFDy']) {
    it(`accepts ${JSON.stringify(odd)}: it travels percent-encoded`, () => assert.equal(checkLeaseId(odd), odd));
  }
  // Copied from a table or a terminal: the id is what is between the spaces (issue 31).
  for (const padded of [' abc', 'abc ', ' abc ', '\tabc\n', '\u00a0abc\u3000']) {
    it(`trims ${JSON.stringify(padded)} to the id it surrounds`, () => assert.equal(checkLeaseId(padded), 'abc'));
  }
  for (const inner of ['has space', 'a\u00a0b', 'a\u2028b', 'a\u3000b']) {
    it(`rejects ${JSON.stringify(inner)}: whitespace inside is two ids pasted as one, named escaped`, () =>
      assert.throws(
        () => checkLeaseId(inner, 'lease id #2'),
        (error: unknown) =>
          error instanceof UsageError &&
          /^lease id #2 ".+" holds whitespace/.test(error.message) &&
          !/[\u00a0\u2028\u3000]/.test(error.message),
      ));
  }

  it('arguments are trimmed before they are sent; one with inner whitespace stops the run before any', async () => {
    assert.deepEqual(await collect(leaseIdSource([' a ', '\tb'], stdinOf(null)).ids), ['a', 'b']);
    // Only a bare - reads standard input.
    assert.deepEqual(await collect(leaseIdSource([' - '], stdinOf('from-stdin')).ids), ['-']);
    assert.throws(() => leaseIdSource(['good', 'bad id'], stdinOf(null)), /lease id #2 "bad id" holds whitespace/);
  });

  it('stdin that is not UTF-8: the ids wholly before it, then a usage error naming the byte offset', async () => {
    for (const cuts of [[], [1], [4], [5], [6], [7]]) {
      const bytes = Buffer.from([...Buffer.from('aa bb c'), 0xff, ...Buffer.from('c dd')]);
      const chunks: Buffer[] = [];
      let from = 0;
      for (const cut of [...cuts, bytes.length]) {
        chunks.push(bytes.subarray(from, cut));
        from = cut;
      }
      const given: string[] = [];
      await assert.rejects(
        (async () => {
          for await (const token of splitWhitespace(chunksOf(chunks))) given.push(token);
        })(),
        (error: unknown) =>
          error instanceof UsageError &&
          error.message ===
            'lease id #3 on standard input is not valid UTF-8 text: byte 0xff at offset 7 of standard input',
      );
      assert.deepEqual(given, ['aa', 'bb'], `cut at ${cuts}`);
    }
  });

  it('stdin ending inside a character, or with an encoded surrogate or an overlong form, is refused', async () => {
    const cases: Array<[number[], RegExp]> = [
      [[0x61, 0x20, 0xe2, 0x82], /lease id #2 .*standard input ends inside a character begun by byte 0xe2 at offset 2/],
      [[0x61, 0xed, 0xa0, 0x80], /lease id #1 .*byte 0xed at offset 1 of standard input/],
      [[0x20, 0xc0, 0xaf], /byte 0xc0 at offset 1 of standard input/],
      [[0xf4, 0x90, 0x80, 0x80], /byte 0xf4 at offset 0 of standard input/],
    ];
    for (const [bytes, message] of cases) {
      await assert.rejects(collect(splitWhitespace(chunksOf([Buffer.from(bytes)]))), message);
    }
  });

  it('a U+FFFD that was in the input (EF BF BD) is text, and kept', async () => {
    const bytes = Buffer.from('a\uFFFDb c');
    assert.deepEqual(await collect(splitWhitespace(chunksOf([bytes.subarray(0, 2), bytes.subarray(2)]))), [
      'a\uFFFDb',
      'c',
    ]);
  });

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
