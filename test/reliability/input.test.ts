/**
 * Bad input, for `lease extend` and `lease inspect`: every rejection is exit 1 with a clear
 * message, and the simulator's log proves that nothing was sent. Odd but legal ids travel
 * percent-encoded as one path segment and can never reach another route.
 *
 * Rows test/e2e/extend.test.ts already has for extend run here for inspect only. Each runs the
 * command line in this process; `-` on a real terminal is test/process/tty.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAX_LEASE_ID_LENGTH } from '../../src/args.js';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { assertNoStackTrace, assertOneLineReason, describeResult, records, runQueenctl, runVerb } from './harness.js';

type Verb = 'extend' | 'inspect';
const BOTH: Verb[] = ['extend', 'inspect'];
const INSPECT: Verb[] = ['inspect'];
const EXTEND: Verb[] = ['extend'];

const dir = mkdtempSync(join(tmpdir(), 'queenctl-input-'));
const emptyTokenFile = join(dir, 'empty-token');
writeFileSync(emptyTokenFile, '\n');

interface Row {
  name: string;
  args: string[];
  stdin?: string;
  message: RegExp;
  verbs: Verb[];
}

const ROWS: Row[] = [
  // --- lease ids --------------------------------------------------------------------------
  { name: 'an empty id', args: [''], message: /^queenctl: lease id #1 is empty$/m, verbs: INSPECT },
  { name: 'a whitespace-only id', args: ['   '], message: /^queenctl: lease id #1 is empty$/m, verbs: INSPECT },
  { name: 'a tabs-only id', args: ['\t\t'], message: /^queenctl: lease id #1 is empty$/m, verbs: BOTH },
  {
    name: 'an id with a bell',
    args: ['a\u0007b'],
    message: /lease id #1 "a\\u0007b" holds control characters/,
    verbs: INSPECT,
  },
  {
    name: 'an id with a line break',
    args: ['line\nbreak'],
    message: /lease id #1 "line\\nbreak" holds control characters/,
    verbs: BOTH,
  },
  {
    name: 'an id with a terminal escape sequence',
    args: ['\u001b[31mred'],
    message: /lease id #1 "\\u001b\[31mred" holds control characters/,
    verbs: BOTH,
  },
  { name: 'an id with a C1 control (CSI)', args: ['a\u009bb'], message: /holds control characters/, verbs: BOTH },
  {
    name: 'a bare .. (the route above, however encoded)',
    args: ['..'],
    message:
      /^queenctl: lease id #1 "\.\." cannot be sent: in a URL path it means the route above, even percent-encoded$/m,
    verbs: BOTH,
  },
  {
    name: 'a bare . (this route, however encoded)',
    args: ['.'],
    message: /lease id #1 "\." cannot be sent/,
    verbs: BOTH,
  },
  {
    name: 'a 10,000-character id',
    args: ['x'.repeat(10_000)],
    message: /^queenctl: lease id #1 is 10000 characters long; no broker mints ids over 2048$/m,
    verbs: INSPECT,
  },
  {
    name: 'a good id, then an empty one: not even the good one is sent',
    args: ['good-lease-id', ''],
    message: /lease id #2 is empty/,
    verbs: BOTH,
  },
  // --- --seconds and durations ------------------------------------------------------------
  {
    name: '--seconds -1',
    args: ['x', '--seconds', '-1'],
    message: /--seconds takes whole seconds from 1 to 2147483647, not "-1"/,
    verbs: EXTEND,
  },
  { name: '--seconds 1e3', args: ['x', '--seconds', '1e3'], message: /--seconds takes whole seconds/, verbs: EXTEND },
  {
    name: '--seconds with a space',
    args: ['x', '--seconds', ' 5'],
    message: /--seconds takes whole seconds/,
    verbs: EXTEND,
  },
  {
    name: '--seconds on inspect, which always asks for 1',
    args: ['x', '--seconds', '5'],
    message: /unknown option '--seconds'/,
    verbs: INSPECT,
  },
  {
    name: '--timeout 0ms',
    args: ['x', '--timeout', '0ms'],
    message: /--timeout takes a duration such as 250ms, 30s, 2m, 1h or a number of seconds, not "0ms"/,
    verbs: BOTH,
  },
  { name: '--timeout -1s', args: ['x', '--timeout=-1s'], message: /--timeout takes a duration/, verbs: BOTH },
  {
    name: '--timeout 1d (no such unit)',
    args: ['x', '--timeout', '1d'],
    message: /--timeout takes a duration/,
    verbs: INSPECT,
  },
  {
    name: '--timeout past the 24.8-day timer limit',
    args: ['x', '--timeout', '2147483648ms'],
    message: /--timeout takes a duration/,
    verbs: BOTH,
  },
  {
    name: '--timeout with a space',
    args: ['x', '--timeout', ' 30s'],
    message: /--timeout takes a duration/,
    verbs: BOTH,
  },
  {
    name: '--retries 11',
    args: ['x', '--retries', '11'],
    message: /--retries takes a whole number from 0 to 10/,
    verbs: BOTH,
  },
  {
    name: '--concurrency 0',
    args: ['x', '--concurrency', '0'],
    message: /--concurrency takes a whole number from 1 to 256/,
    verbs: BOTH,
  },
  // --- flags ------------------------------------------------------------------------------
  { name: 'an unknown flag', args: ['x', '--frobnicate'], message: /unknown option '--frobnicate'/, verbs: INSPECT },
  { name: 'an unknown short flag', args: ['x', '-Z'], message: /unknown option '-Z'/, verbs: BOTH },
  { name: 'a misspelt flag', args: ['x', '--second', '5'], message: /unknown option '--second'/, verbs: EXTEND },
  {
    name: 'an unknown output format',
    args: ['x', '-o', 'csv'],
    message: /-o\/--output takes table, wide, json, ndjson, yaml, name or jsonpath=<expr>, not "csv"/,
    verbs: INSPECT,
  },
  {
    name: 'an empty jsonpath',
    args: ['x', '-o', 'jsonpath='],
    message: /-o jsonpath: the expression is empty/,
    verbs: BOTH,
  },
  {
    name: 'a jsonpath that breaks',
    args: ['x', '-o', 'jsonpath={range [*]}{.leaseId}'],
    message: /-o jsonpath: the expression is malformed at character 2: \{range\} without its \{end\}/,
    verbs: BOTH,
  },
  // --- tokens -----------------------------------------------------------------------------
  {
    name: 'a --token-file that does not exist',
    args: ['x', '--token-file', join(dir, 'missing')],
    message: /cannot read --token-file .*missing: no such file \(ENOENT\)/,
    verbs: INSPECT,
  },
  {
    name: 'a --token-file that is a directory',
    args: ['x', '--token-file', dir],
    message: /cannot read --token-file .*: it is a directory \(EISDIR\)/,
    verbs: BOTH,
  },
  {
    name: 'an empty --token-file',
    args: ['x', '--token-file', emptyTokenFile],
    message: /(--token-file|token file \S+) is empty/,
    verbs: BOTH,
  },
  // --- standard input ---------------------------------------------------------------------
  {
    name: '- with empty standard input',
    args: ['-'],
    stdin: '',
    message: /no lease ids on standard input/,
    verbs: INSPECT,
  },
  {
    name: '- with only whitespace on standard input',
    args: ['-'],
    stdin: ' \n\t\r\n ',
    message: /no lease ids on standard input/,
    verbs: BOTH,
  },
  {
    name: '- given twice',
    args: ['-', '-'],
    stdin: 'a b',
    message: /- \(standard input\) may be given once/,
    verbs: BOTH,
  },
  {
    name: 'a control character in the first id on standard input',
    args: ['-'],
    stdin: 'bad\u0001id good',
    message: /^queenctl: lease id #1 on standard input "bad\\u0001id" holds control characters; nothing was sent$/m,
    verbs: BOTH,
  },
  {
    name: 'a 10,000-character id on standard input',
    args: ['-'],
    stdin: `${'y'.repeat(10_000)}\n`,
    message: /lease id #1 on standard input is 10000 characters long/,
    verbs: BOTH,
  },
];

describe('bad input: exit 1, a clear message, nothing sent', { concurrency: 4 }, () => {
  for (const row of ROWS) {
    for (const verb of row.verbs) {
      it(`lease ${verb}, ${row.name}`, async () => {
        const sim = await startSimulator();
        try {
          const result = await runQueenctl(['lease', verb, ...row.args, '--server', sim.url], {
            stdin: row.stdin ?? '',
          });
          assert.equal(result.code, 1, describeResult(result));
          assert.match(result.stderr, row.message);
          assertNoStackTrace(result.stderr);
          assert.equal(result.stdout, '', 'nothing on stdout, not even []');
          assert.equal(sim.log.length, 0, 'nothing was sent');
        } finally {
          await sim.close();
        }
      });
    }
  }
});

describe('a bad id in the middle of standard input', () => {
  it('stops there: the ids before it were renewed, none after it is sent, and it says so: exit 1', async () => {
    const sim = await startSimulator();
    try {
      const before = sim.mint();
      const afterIt = sim.mint();
      const result = await runVerb('extend', ['-'], sim.url, {
        stdin: `${before}\nbad\u0007id\n${afterIt}\n`,
        concurrency: 1,
      });
      assert.equal(result.code, 1, describeResult(result));
      assert.match(
        result.stderr,
        new RegExp(
          '^queenctl: lease id #2 on standard input "bad\\\\u0007id" holds control characters; ' +
            'no lease id after it was sent$',
          'm',
        ),
      );
      assert.deepEqual(
        sim.log.map((entry) => entry.leaseId),
        [before],
      );
      assert.deepEqual(
        records(result.stdout).map((record) => record.renewed),
        [1],
      );
    } finally {
      await sim.close();
    }
  });
});

describe('standard input that cannot be read', () => {
  for (const verb of BOTH) {
    it(`lease ${verb} -: a read error (EIO) is a usage error naming it, not an internal error`, async () => {
      const sim = await startSimulator();
      try {
        const stdin = Object.assign(
          // biome-ignore lint/correctness/useYield: a stream whose first read fails
          (async function* (): AsyncGenerator<Buffer> {
            throw Object.assign(new Error('i/o error'), { code: 'EIO' });
          })(),
          { isTTY: false },
        );
        const result = await runVerb(verb, ['-'], sim.url, { stdin });
        assert.equal(result.code, 1, describeResult(result));
        assertOneLineReason(
          result.stderr,
          /^queenctl: cannot read lease ids from standard input: EIO; nothing was sent$/,
        );
        assert.equal(result.stdout, '');
        assert.equal(sim.log.length, 0);
      } finally {
        await sim.close();
      }
    });
  }
});

/** Ids that look like paths, queries, fragments, escapes or traversal: all legal, all one segment. */
const ODD_IDS = [
  'a/b',
  '/',
  '//',
  'q?seconds=999',
  '?',
  'frag#ment',
  '#',
  '100%',
  '%',
  '%%',
  '%zz',
  '%2F',
  '%2e%2e',
  '%252F',
  '...',
  '.x',
  '..x',
  '../..',
  '../../health',
  '../../../_sim/faults',
  'a/../../health',
  '..\\..\\health',
  '\\',
  '+plus+',
  'semi;colon=1',
  'amp&x=1',
  '~user',
  '*',
  "'quote'",
  '"dq"',
  'ünïcödé',
  '☃',
  '🦀',
  'ﬁ',
  'e\u0301',
  'nb\u00adsp',
];

describe('odd ids travel percent-encoded, as one segment of the extend route', () => {
  for (const verb of BOTH) {
    it(`lease ${verb}: ${ODD_IDS.length} ids arrive intact, on the extend route only, in order`, async () => {
      const sim = await startSimulator();
      try {
        const result = await runQueenctl(['lease', verb, ...ODD_IDS, '--server', sim.url, '-o', 'json']);
        assert.equal(result.code, 4, describeResult(result));
        // Sent concurrently: they arrive in any order (stdout below is in input order).
        const sorted = (list: Array<string | null>) => [...list].sort();
        assert.deepEqual(
          sorted(sim.log.map((entry) => entry.leaseId)),
          sorted(ODD_IDS),
          'decoded by the broker to exactly the ids given',
        );
        for (const entry of sim.log) {
          assert.equal(entry.method, 'POST');
          assert.match(entry.rawPath, /^\/api\/v1\/lease\/[A-Za-z0-9\-_.!~*'()%]+\/extend$/, entry.rawPath);
          assert.notEqual(entry.status, 404, `${entry.rawPath} reached no other route`);
          assert.deepEqual(JSON.parse(entry.body), { seconds: verb === 'extend' ? 60 : 1 });
        }
        // Nothing a normalising proxy would resolve to another route (dot segments, %2E included).
        for (const entry of sim.log) assert.equal(new URL(entry.rawPath, sim.url).pathname, entry.rawPath);
        assert.deepEqual(
          records(result.stdout).map((record) => record.leaseId),
          ODD_IDS,
          'printed back as given',
        );
      } finally {
        await sim.close();
      }
    });
  }
});

describe('long ids', () => {
  let sim: Simulator;
  before(async () => {
    sim = await startSimulator();
  });
  after(() => sim.close());

  it(`an id of exactly ${MAX_LEASE_ID_LENGTH} characters is sent intact`, async () => {
    const leaseId = sim.mint({ leaseId: 'L'.repeat(MAX_LEASE_ID_LENGTH) });
    const result = await runQueenctl(['lease', 'inspect', leaseId, '--server', sim.url, '-o', 'json']);
    assert.equal(result.code, 0, describeResult(result));
    assert.equal(records(result.stdout)[0]?.live, true);
    assert.equal(sim.log[0]?.leaseId, leaseId);
  });
});
