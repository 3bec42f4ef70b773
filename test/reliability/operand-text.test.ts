/**
 * What an operator types that could mislead (issue 31, docs/security.md): a lease id with the
 * spaces of the table it was copied from, bytes that are not UTF-8 on the command line or on
 * standard input, and group, queue and partition names that are not names. Each is either made
 * what was meant (a trimmed id) or refused with exit 1 and one line naming it, escaped, with the
 * simulator's log proving that nothing was sent. Run in-process: argv is given as the bytes the
 * process would get (the real process reads them from /proc/self/cmdline: test/process/exit-codes).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { StdinLike } from '../../src/args.js';
import { quoteText } from '../../src/names.js';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { runInProcess } from '../support/in-process.js';
import { assertNoStackTrace, describeResult, records, runVerb } from './harness.js';

let sim: Simulator;
before(async () => {
  sim = await startSimulator();
});
after(() => sim.close());

const bytes = (...parts: Array<string | number[]>): Buffer =>
  Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part) : Buffer.from(part))));

/** Runs queenctl against the shared simulator; `sent` is what reached it (the tests run one at a time). */
async function queenctl(args: Array<string | Uint8Array>, stdin: string | Uint8Array = '') {
  const from = sim.log.length;
  const result = await runInProcess([...args, '--server', sim.url], { stdin, timeoutMs: 30_000 });
  return { ...result, sent: sim.log.slice(from) };
}

/** One line of reason on stderr, no stack, nothing on stdout, nothing sent. */
function assertRefused(result: Awaited<ReturnType<typeof queenctl>>, reason: RegExp): void {
  assert.equal(result.code, 1, describeResult(result));
  assert.match(result.stderr, reason);
  assert.match(result.stderr, /^queenctl: [^\n]*\n( {2}[^\n]*\n)?$/, 'one line of reason, then at most a hint');
  assertNoStackTrace(result.stderr);
  assert.equal(result.stdout, '');
  assert.deepEqual(
    result.sent.map((entry) => entry.rawPath),
    [],
    'nothing was sent',
  );
}

describe('lease ids copied with the whitespace around them', () => {
  for (const verb of ['extend', 'inspect'] as const) {
    it(`lease ${verb} " $ID ": the id between the spaces is sent, and it is held (exit 0)`, async () => {
      const leaseId = sim.mint();
      const result = await queenctl(['lease', verb, ` ${leaseId} `, '-o', 'json']);
      assert.equal(result.code, 0, describeResult(result));
      assert.deepEqual(
        result.sent.map((entry) => entry.rawPath),
        [`/api/v1/lease/${leaseId}/extend`],
      );
      assert.equal(JSON.parse(result.stdout).leaseId, leaseId);
    });
  }

  it('tabs, a no-break space and an ideographic space around an id are trimmed too', async () => {
    const leaseId = sim.mint();
    const result = await queenctl(['lease', 'extend', `\t\u00a0${leaseId}\u3000\n`, '-o', 'json']);
    assert.equal(result.code, 0, describeResult(result));
    assert.equal(result.sent[0]?.leaseId, leaseId);
  });

  it('whitespace inside an id: exit 1, one line naming it escaped, not even the id before it sent', async () => {
    const result = await queenctl(['lease', 'extend', sim.mint(), 'ab\u00a0cd']);
    assertRefused(result, /^queenctl: lease id #2 "ab\\u00a0cd" holds whitespace, which no lease id has$/m);
  });

  it('lease watch: the same, before the first renewal', async () => {
    const result = await queenctl(['lease', 'watch', 'ab cd', '--for', '1s']);
    assertRefused(result, /lease id #1 "ab cd" holds whitespace/);
  });
});

describe('bytes on the command line that are not UTF-8', () => {
  it('an id: exit 1 naming the argument and the byte offset, nothing sent', async () => {
    const result = await queenctl(['lease', 'extend', bytes('ab', [0xff], 'cd')]);
    assertRefused(
      result,
      /^queenctl: argument 3 "ab\\xffcd" is not valid UTF-8: byte 0xff at offset 2 of the argument; nothing was sent$/m,
    );
  });

  it('an encoded surrogate (CESU-8), an overlong slash and a cut character are refused alike', async () => {
    const cases: Array<[Buffer, RegExp]> = [
      [bytes('a', [0xed, 0xa0, 0x80]), /byte 0xed at offset 1 of the argument/],
      [bytes('..', [0xc0, 0xaf], 'x'), /byte 0xc0 at offset 2 of the argument/],
      [bytes('abc', [0xe2, 0x82]), /the argument ends inside a character begun by byte 0xe2 at offset 3/],
    ];
    for (const [id, reason] of cases) assertRefused(await queenctl(['lease', 'inspect', 'ok', id]), reason);
  });

  it('a flag value, and the command after -- of a watch (Node.js could pass it on only mangled)', async () => {
    assertRefused(await queenctl(['lease', 'list', '--group', bytes('bill', [0xe9])]), /argument 4 "bill\\xe9"/);
    assertRefused(
      await queenctl(['lease', 'watch', sim.mint(), '--', 'cat', bytes('caf', [0xe9])]),
      /argument 6 "caf\\xe9" is not valid UTF-8/,
    );
  });

  it('a U+FFFD that was really typed (EF BF BD) is text: sent as it is', async () => {
    const result = await queenctl(['lease', 'extend', bytes('ab', [0xef, 0xbf, 0xbd], 'cd'), '-o', 'json']);
    assert.equal(result.code, 4, describeResult(result));
    assert.equal(result.sent[0]?.leaseId, 'ab\uFFFDcd');
  });
});

/** Standard input of these bytes, in these chunks. */
function stdinOfBytes(...chunks: Buffer[]): StdinLike {
  return Object.assign(
    (async function* () {
      yield* chunks;
    })(),
    { isTTY: false },
  );
}

describe('bytes on standard input that are not UTF-8', () => {
  it('the ids wholly before them are renewed, none after is sent: exit 1 naming the byte offset', async () => {
    const local = await startSimulator();
    try {
      const [first, second, third] = [local.mint(), local.mint(), local.mint()];
      const input = bytes(`${first}\n${second}\nab`, [0xff], `cd\n${third}\n`);
      const offset = first.length + second.length + 4;
      // Cut inside the bad token and before it: the verdict does not depend on the chunks.
      const result = await runVerb('extend', ['-'], local.url, {
        stdin: stdinOfBytes(input.subarray(0, offset - 1), input.subarray(offset - 1)),
        concurrency: 1,
      });
      assert.equal(result.code, 1, describeResult(result));
      assert.match(
        result.stderr,
        new RegExp(
          `^queenctl: lease id #3 on standard input is not valid UTF-8 text: byte 0xff at offset ${offset} of ` +
            'standard input; no lease id after it was sent$',
          'm',
        ),
      );
      assert.deepEqual(
        local.log.map((entry) => entry.leaseId),
        [first, second],
      );
      assert.deepEqual(
        records(result.stdout).map((record) => record.renewed),
        [1, 1],
      );
    } finally {
      await local.close();
    }
  });

  it('lease watch - reads every id before the first renewal: nothing is sent', async () => {
    const result = await queenctl(['lease', 'watch', '-', '--for', '1s'], bytes(`${sim.mint()}\n`, [0x80], '\n'));
    assertRefused(result, /lease id #2 on standard input is not valid UTF-8 text: byte 0x80 at offset 37 of/);
  });
});

describe('group, queue and partition names that are not names', () => {
  const refused: Array<[string[], RegExp]> = [
    // GET /api/v1/consumer-groups/.. is the list of every group, or another route behind a proxy.
    [['--group', '..'], /^queenctl: --group "\.\." cannot be a group name: in a URL path it means the route above/m],
    [['--group', '.'], /--group "\." cannot be a group name/],
    [['--group', '../admin'], /--group "\.\.\/admin" holds \/, which a group name sent in a URL path may not/],
    [['--group', 'a\\b'], /--group "a\\\\b" holds \\/],
    [['--group', 'bill\u001b[2Jing'], /^queenctl: --group "bill\\u001b\[2Jing" holds control characters$/m],
    [['--group', 'a\u009bb'], /--group "a\\u009bb" holds control characters/],
    [
      ['--group', ' billing'],
      /--group " billing" begins or ends with whitespace[^\n]*\n {2}did you mean --group "billing"\?/,
    ],
    [['--group', ''], /--group takes a group name, and it is empty/],
    [['--queue', '..'], /--queue "\.\." cannot be a queue name/],
    [['--queue', 'orders\r'], /--queue "orders\\r" begins or ends with whitespace/],
    [['--queue', 'or\u0000ders'], /--queue "or\\u0000ders" holds control characters/],
    [['--partition', '.'], /--partition "\." cannot be a partition name/],
    [['--partition', 'p\u007f7'], /--partition "p\\u007f7" holds control characters/],
    [['--partition', 'p7\u2028'], /--partition "p7\\u2028" begins or ends with whitespace/],
  ];
  for (const [flags, reason] of refused) {
    it(`lease list ${quoteText(flags.join(' '))}: exit 1, nothing sent`, async () => {
      assertRefused(await queenctl(['lease', 'list', ...flags]), reason);
    });
  }

  it('a name refused among good ones stops the run before anything is sent, with --watch too', async () => {
    assertRefused(
      await queenctl(['lease', 'list', '--group', 'billing', '--group', '..', '--watch']),
      /--group "\.\."/,
    );
  });

  it('real names are read: spaces inside, Unicode, / in a queue or partition (matched here only)', async () => {
    const result = await queenctl([
      'lease',
      'list',
      '--group',
      'night shift',
      '--group',
      'заказы',
      '--queue',
      'a/b',
      '--partition',
      '..p',
      '-o',
      'json',
    ]);
    assert.equal(result.code, 0, describeResult(result));
    assert.deepEqual(
      result.sent.map((entry) => entry.rawPath).sort(),
      ['/api/v1/consumer-groups/night%20shift', `/api/v1/consumer-groups/${encodeURIComponent('заказы')}`].sort(),
    );
  });
});
