/**
 * TAB on `queenctl lease extend|inspect|watch` through the real binary in bash, zsh and fish:
 * the lease ids held now, from the broker of the context in force (or of --context on the line),
 * and nothing at all, not an error, when the broker cannot be reached.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { cliCommandLine, runProcess } from '../support/cli.js';

/**
 * Leases outlive the file: the shells' listings are compared with bash's, taken seconds later on a
 * busy machine, and a lease that expired in between would make them differ.
 */
const HOUR = 3600;

let simulator: Simulator | undefined;
const sim = (): Simulator => {
  assert.ok(simulator, 'the simulator starts in before()');
  return simulator;
};
let env: { HOME: string; PATH: string; QUEENCTL_COMPLETION_TIMEOUT: string };
/** `queenctl completion bash`, made once (test/process/completion.test.ts sources it as `<(...)`). */
let bashScript: string;

after(() => simulator?.close());
before(async () => {
  simulator = await startSimulator();
  const home = mkdtempSync(join(tmpdir(), 'queenctl-home-'));
  mkdirSync(join(home, '.queen'));
  // prod is the simulator; down is a port nothing listens on.
  writeFileSync(
    join(home, '.queen', 'config.yaml'),
    `current-context: prod\ncontexts:\n  - name: prod\n    server: ${sim().url}\n` +
      '  - name: down\n    server: http://127.0.0.1:9\n',
  );
  const bin = mkdtempSync(join(tmpdir(), 'queenctl-bin-'));
  writeFileSync(join(bin, 'queenctl'), `#!/bin/sh\nexec ${cliCommandLine()} "$@"\n`);
  chmodSync(join(bin, 'queenctl'), 0o755);
  // The ids must come, however busy the machine: the 500 ms budget is the unit tests' to prove
  // (test/unit/completion-leases.test.ts), on a clock of their own.
  env = { HOME: home, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}`, QUEENCTL_COMPLETION_TIMEOUT: '20s' };
  bashScript = join(bin, 'queenctl.bash');
  const script = await runProcess('queenctl', ['completion', 'bash'], { env, exit: 0 });
  writeFileSync(bashScript, script.stdout);
});

/** Ends what bash offered for one line. */
const END_OF_LINE = '--- end of line ---';

/**
 * bash as it completes each of `lines` (each ending in the word being completed), in one bash:
 * what it offers for each, and everything said on stderr. Each completion of a lease id runs
 * `queenctl` on PATH, as a TAB does.
 */
async function bash(lines: string[]): Promise<{ offered: string[][]; stderr: string }> {
  const calls = lines.map((line) => {
    const words = line.split(' ');
    return `COMP_LINE=${JSON.stringify(line)}
COMP_WORDS=(${words.map((word) => `'${word}'`).join(' ')}); COMP_CWORD=${words.length - 1}; COMPREPLY=()
_queenctl; printf '%s\\n' "\${COMPREPLY[@]}"; echo '${END_OF_LINE}'`;
  });
  const program = `source ${JSON.stringify(bashScript)}\n${calls.join('\n')}`;
  const result = await runProcess('bash', ['-c', program], { env, exit: 0 });
  const offered = result.stdout.split(`${END_OF_LINE}\n`);
  assert.equal(offered.pop(), '', 'every line ended');
  assert.equal(offered.length, lines.length, result.stdout);
  return { offered: offered.map((text) => text.split('\n').filter(Boolean).sort()), stderr: result.stderr };
}

const installed = (shell: string): boolean => {
  try {
    execFileSync(shell, ['-c', 'exit 0'], { stdio: 'ignore', timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
};

describe('completion of lease ids', () => {
  it('bash offers the lease ids held now, for extend, inspect and watch; not an expired one', async () => {
    const held = [
      sim().mint({ group: 'billing', seconds: HOUR }),
      sim().mint({ queue: 'invoices', seconds: HOUR }),
    ].sort();
    sim().expire(sim().mint({ queue: 'stale' }));
    const prefix = (held[0] as string).slice(0, 30);
    // Each verb asks the broker (a queenctl run per line); extend with the start of an id.
    const { offered, stderr } = await bash([
      'queenctl lease inspect ',
      'queenctl lease watch ',
      `queenctl lease extend ${prefix}`,
      'queenctl lease list ',
    ]);
    assert.deepEqual(offered[0], held, 'inspect');
    assert.deepEqual(offered[1], held, 'watch');
    assert.deepEqual(offered[2], [held[0]], 'extend, the ids that start so');
    assert.deepEqual(offered[3], [], 'list takes no lease id');
    assert.equal(stderr, '');
  });

  it('bash: an unreachable broker (--context on the line) offers nothing, and says nothing', async () => {
    // prod holds a lease: the line without the flag offers it (the test above), so offering
    // nothing here is the flag deciding which broker is asked.
    sim().mint({ seconds: HOUR });
    const { offered, stderr } = await bash(['queenctl --context down lease extend ']);
    assert.deepEqual(offered, [[]]);
    assert.equal(stderr, '');
  });

  it('zsh offers the same ids', { skip: installed('zsh') ? false : 'zsh is not installed here' }, async () => {
    const leaseId = sim().mint({ seconds: HOUR });
    const program = `autoload -U compinit && compinit -u
source <(queenctl completion zsh)
compadd() { [[ $1 == -a ]] && print -l -- \${(P)2} }
words=(queenctl lease inspect ''); CURRENT=4; _queenctl`;
    const result = await runProcess('zsh', ['-c', program], { env, exit: 0 });
    assert.equal(result.code, 0, result.stderr);
    const offered = result.stdout.split('\n').filter(Boolean).sort();
    assert.ok(offered.includes(leaseId), result.stdout);
    assert.deepEqual([offered], (await bash(['queenctl lease inspect '])).offered);
  });

  it('fish offers the same ids', { skip: installed('fish') ? false : 'fish is not installed here' }, async () => {
    const leaseId = sim().mint({ seconds: HOUR });
    const result = await runProcess(
      'fish',
      ['-c', 'queenctl completion fish | source; complete -C "queenctl lease watch "'],
      { env, exit: 0 },
    );
    assert.equal(result.code, 0, result.stderr);
    const offered = result.stdout.split('\n').filter(Boolean).sort();
    assert.ok(offered.includes(leaseId), result.stdout);
    assert.deepEqual([offered], (await bash(['queenctl lease watch '])).offered);
  });
});

/**
 * Candidates are data (docs/security.md#outside-text-is-data): a lease id the broker lists and a
 * context name a shared config holds may say `$(touch …)` or `` `touch …` ``; TAB must run
 * neither, in any shell, and bash must insert them quoted so that Enter runs nothing either.
 */
describe('completion candidates are never expanded', () => {
  let hostile: Simulator | undefined;
  let hostileEnv: typeof env;
  /** Where a candidate that ran would leave its file. */
  let marks: string;
  const ids = (): string[] => [`$(touch\${IFS}${marks}/lease-dollar)`, `\`touch\${IFS}${marks}/lease-tick\``];
  const contexts = (): string[] => [`$(touch\${IFS}${marks}/context-dollar)`, `\`touch\${IFS}${marks}/context-tick\``];
  const nothingRan = (): void => assert.deepEqual(readdirSync(marks), [], 'a candidate was run by the shell');

  before(async () => {
    hostile = await startSimulator();
    marks = mkdtempSync(join(tmpdir(), 'queenctl-marks-'));
    for (const leaseId of ids()) hostile.mint({ leaseId, group: 'billing' });
    const home = mkdtempSync(join(tmpdir(), 'queenctl-home-'));
    mkdirSync(join(home, '.queen'));
    // The server is the first context's: the one in force.
    const named = contexts().map((name) => `  - name: ${JSON.stringify(name)}\n    server: ${hostile?.url}\n`);
    writeFileSync(
      join(home, '.queen', 'config.yaml'),
      `current-context: ${JSON.stringify(contexts()[0])}\ncontexts:\n${named.join('')}`,
    );
    hostileEnv = { ...env, HOME: home };
  });
  after(() => hostile?.close());
  // Each shell is judged on its own: what an earlier one left is removed.
  beforeEach(() => {
    for (const name of readdirSync(marks)) rmSync(join(marks, name));
  });

  it('bash offers them quoted (printf %q), runs nothing, and the inserted word is the id itself', async () => {
    const lines = ['queenctl lease extend ', 'queenctl --context ', 'queenctl config use-context '];
    const calls = lines.map((line) => {
      const words = line.split(' ');
      return `COMP_LINE=${JSON.stringify(line)}
COMP_WORDS=(${words.map((word) => `'${word}'`).join(' ')}); COMP_CWORD=${words.length - 1}; COMPREPLY=()
_queenctl
# What Enter would run after the candidate was inserted: each must read back as one literal word.
for word in "\${COMPREPLY[@]}"; do eval "set -- $word"; printf '%s\\n' "$#:$1"; done; echo '${END_OF_LINE}'`;
    });
    const program = `source ${JSON.stringify(bashScript)}\n${calls.join('\n')}`;
    const result = await runProcess('bash', ['-c', program], { env: hostileEnv, exit: 0 });
    nothingRan();
    const [leases, context, useContext] = result.stdout
      .split(`${END_OF_LINE}\n`)
      .map((text) => text.split('\n').filter(Boolean).sort());
    assert.deepEqual(
      leases,
      ids()
        .map((id) => `1:${id}`)
        .sort(),
      result.stderr,
    );
    assert.deepEqual(
      context,
      contexts()
        .map((name) => `1:${name}`)
        .sort(),
    );
    assert.deepEqual(
      useContext,
      contexts()
        .map((name) => `1:${name}`)
        .sort(),
    );
  });

  it('zsh adds them as they are and runs nothing', {
    skip: installed('zsh') ? false : 'zsh is not installed here',
  }, async () => {
    const program = `autoload -U compinit && compinit -u
source <(queenctl completion zsh)
compadd() { [[ $1 == -a ]] && print -l -- \${(P)2} }
words=(queenctl lease inspect ''); CURRENT=4; _queenctl
words=(queenctl --context ''); CURRENT=3; _queenctl`;
    const result = await runProcess('zsh', ['-c', program], { env: hostileEnv, exit: 0 });
    nothingRan();
    assert.deepEqual(result.stdout.split('\n').filter(Boolean).sort(), [...ids(), ...contexts()].sort(), result.stderr);
  });

  it('fish offers them as they are and runs nothing', {
    skip: installed('fish') ? false : 'fish is not installed here',
  }, async () => {
    const result = await runProcess(
      'fish',
      [
        '-c',
        'queenctl completion fish | source; complete -C "queenctl lease watch "; complete -C "queenctl --context "',
      ],
      { env: hostileEnv, exit: 0 },
    );
    nothingRan();
    // fish prints a flag's description after a tab.
    assert.deepEqual(
      result.stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => line.split('\t')[0])
        .sort(),
      [...ids(), ...contexts()].sort(),
      result.stderr,
    );
  });
});
