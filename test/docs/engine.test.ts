/**
 * The doc test engine itself, on small Markdown fixtures: a doc with a renamed flag, a wrong exit
 * code or output of the wrong shape fails; one that is right passes; the markup's rules hold.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkBlock, normaliseLine, outputMismatch, parseMarkdown } from '../support/doctest.js';
import { withSimulator } from '../support/shared.js';

const fence = '```';

/** The problems the engine finds in the one block of `markdown`. */
async function problemsOf(markdown: string): Promise<string[]> {
  const [block, ...others] = parseMarkdown(markdown, 'fixture.md');
  assert.ok(block, 'the fixture has a block');
  assert.equal(others.length, 0);
  let problems: string[] = [];
  await withSimulator(async (sim) => {
    problems = await checkBlock(block, sim);
  });
  return problems;
}

describe('doc tests: what fails', { concurrency: 4 }, () => {
  it('passes a right console block: output shape, a stated exit code, echo $?', async () => {
    const problems = await problemsOf(`${fence}console
$ queenctl lease extend "$LEASE" --seconds 120 -o table
LEASE ID RENEWED newExpiresAt expiresAt lease_expires_at LEFT
01a23659-504c-70d1-8273-e2218518d03e 2 2026-12-02T10:44:32.926000Z 2026-12-02T10:44:32Z 2026-12-02T10:44:32Z 1m59s
$ queenctl lease extend "$DEAD" -q
? 4
$ queenctl lease extend "$DEAD" -q
$ echo $?
4
${fence}
`);
    assert.deepEqual(problems, []);
  });

  it('fails a renamed flag', async () => {
    const problems = await problemsOf(`${fence}sh
queenctl lease extend "$LEASE" --secs 120
${fence}
`);
    assert.equal(problems.length, 1);
    assert.match(
      problems[0] ?? '',
      /fixture\.md:2: `queenctl lease extend "\$LEASE" --secs 120` exited 1, the doc says 0/,
    );
    assert.match(problems[0] ?? '', /--secs/);
  });

  it('fails a wrong exit code, stated or shown by echo $?', async () => {
    const stated = await problemsOf(`${fence}sh
queenctl lease extend "$LEASE" -q   # exit 4
${fence}
`);
    assert.equal(stated.length, 1);
    assert.match(stated[0] ?? '', /exited 0, the doc says 4/);
    const shown = await problemsOf(`${fence}console
$ queenctl lease extend "$DEAD" -q
$ echo $?
0
${fence}
`);
    assert.equal(shown.length, 1);
    assert.match(shown[0] ?? '', /`echo \$\?`: expected output:\n0\n--- got:\n4/);
  });

  it('fails output of the wrong shape', async () => {
    const problems = await problemsOf(`${fence}console
$ queenctl lease inspect "$LEASE" -o table
LEASE ID                               LIVE   HELD   EXPIRES AT                    REMAINING
01a23659-504c-70d1-8273-e2218518d03e   yes    3      2026-12-02T10:44:32.926000Z   1m59s
${fence}
`);
    assert.equal(problems.length, 1);
    assert.match(problems[0] ?? '', /expected output:[\s\S]*yes {4}3[\s\S]*--- got:[\s\S]*yes {4}2/);
  });

  it('fails a variable the scene does not set, and says the rest of the block did not run', async () => {
    const problems = await problemsOf(`${fence}sh
queenctl lease extend "$NO_SUCH_LEASE"
queenctl lease extend "$LEASE"
${fence}
`);
    assert.equal(problems.length, 2);
    assert.match(problems[0] ?? '', /NO_SUCH_LEASE: unbound variable/);
    assert.match(problems[1] ?? '', /fixture\.md:3: `queenctl lease extend "\$LEASE"` did not finish/);
  });

  it('fails a skip without its reason', async () => {
    const problems = await problemsOf(`<!-- doctest: skip -->
${fence}sh
queenctl lease extend "$LEASE"
${fence}
`);
    assert.deepEqual(problems, ['fixture.md:1: a doctest skip needs its reason: <!-- doctest: skip (why) -->']);
  });
});

describe('doc tests: the markup', () => {
  it('joins sh continuations and compound commands, reads # exit N, ignores comments', () => {
    const [block] = parseMarkdown(
      `${fence}sh
# a comment
queenctl lease extend "$LEASE" -q   # exit 0
case $? in
  0) echo "job done, renewed" ;;
  *) echo other ;;
esac
queenctl lease list -o name |
  queenctl lease extend - \\
  --seconds 60   # exit 4
${fence}
`,
      'x.md',
    );
    assert.deepEqual(
      block?.commands.map((command) => [command.line, command.expectedCode, command.text.split('\n').length]),
      [
        [3, 0, 1],
        [4, undefined, 4],
        [8, 4, 3],
      ],
    );
    assert.equal(block?.runsQueenctl, true);
  });

  it('takes a skip with its reason, and leaves blocks that do not run queenctl alone', () => {
    const blocks = parseMarkdown(
      `<!-- doctest: skip (an install step) -->
${fence}sh
npm install -g queenctl
${fence}

${fence}sh
npm ci && npm run demo
${fence}
  ${fence}console
  $ queenctl ping
  ${fence}
`,
      'x.md',
    );
    assert.deepEqual(
      blocks.map((block) => [block.line, block.skip, block.runsQueenctl]),
      [
        [2, 'an install step', true],
        [6, undefined, false],
        [9, undefined, true],
      ],
    );
  });

  it('compares shapes: ids, times, durations and columns vary; [..], … and ... are wildcards', () => {
    assert.equal(
      normaliseLine('01a2-x  2026-12-02T10:44:32.926000Z   1m59s "remainingMs":89250'),
      '01a2-x [TIME] [DUR] "remainingMs":[N]',
    );
    assert.equal(outputMismatch(['a [..] c', '...', 'z'], 'a b c\nx\ny\nz\n'), undefined);
    assert.equal(outputMismatch(['{"leaseId":"…","live":true}'], '{"leaseId":"abc","live":true}'), undefined);
    assert.equal(outputMismatch(['…'], ''), undefined);
    assert.ok(outputMismatch(['a', 'b'], 'a\n'));
    assert.ok(outputMismatch(['a'], 'a\nb\n'));
    assert.ok(outputMismatch(['live: true'], 'live: false'));
  });
});
