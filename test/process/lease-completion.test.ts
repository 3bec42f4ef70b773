/**
 * TAB on `queenctl lease extend|inspect|watch` through the real binary in bash, zsh and fish:
 * the lease ids held now, from the broker of the context in force (or of --context on the line),
 * and nothing at all, not an error, when the broker cannot be reached.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { cliCommandLine, runProcess } from '../support/cli.js';

let simulator: Simulator | undefined;
const sim = (): Simulator => {
  assert.ok(simulator, 'the simulator starts in before()');
  return simulator;
};
let env: { HOME: string; PATH: string; QUEENCTL_COMPLETION_TIMEOUT: string };

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
});

/** bash as it completes `line` (ending in the word being completed): what it offers, and its stderr. */
async function bash(line: string): Promise<{ offered: string[]; stderr: string }> {
  const words = line.split(' ');
  const program = `source <(queenctl completion bash)
COMP_LINE=${JSON.stringify(line)}
COMP_WORDS=(${words.map((word) => `'${word}'`).join(' ')}); COMP_CWORD=${words.length - 1}
_queenctl; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const result = await runProcess('bash', ['-c', program], { env, exit: 0 });
  assert.equal(result.code, 0, result.stderr);
  return { offered: result.stdout.split('\n').filter(Boolean).sort(), stderr: result.stderr };
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
    const held = [sim().mint({ group: 'billing' }), sim().mint({ queue: 'invoices' })].sort();
    sim().expire(sim().mint({ queue: 'stale' }));
    for (const verb of ['extend', 'inspect', 'watch']) {
      const { offered, stderr } = await bash(`queenctl lease ${verb} `);
      assert.deepEqual(offered, held, verb);
      assert.equal(stderr, '');
    }
    const prefix = (held[0] as string).slice(0, 30);
    assert.deepEqual((await bash(`queenctl lease extend ${prefix}`)).offered, [held[0]]);
    assert.deepEqual((await bash('queenctl lease list ')).offered, [], 'list takes no lease id');
  });

  it('bash: an unreachable broker (--context on the line) offers nothing, and says nothing', async () => {
    sim().mint();
    const { offered, stderr } = await bash('queenctl --context down lease extend ');
    assert.deepEqual(offered, []);
    assert.equal(stderr, '');
    // The flag on the line decides: the same line without it asks prod, which answers.
    assert.equal((await bash('queenctl lease extend ')).offered.length > 0, true);
  });

  it('zsh offers the same ids', { skip: installed('zsh') ? false : 'zsh is not installed here' }, async () => {
    const leaseId = sim().mint();
    const program = `autoload -U compinit && compinit -u
source <(queenctl completion zsh)
compadd() { [[ $1 == -a ]] && print -l -- \${(P)2} }
words=(queenctl lease inspect ''); CURRENT=4; _queenctl`;
    const result = await runProcess('zsh', ['-c', program], { env, exit: 0 });
    assert.equal(result.code, 0, result.stderr);
    const offered = result.stdout.split('\n').filter(Boolean).sort();
    assert.ok(offered.includes(leaseId), result.stdout);
    assert.deepEqual(offered, (await bash('queenctl lease inspect ')).offered);
  });

  it('fish offers the same ids', { skip: installed('fish') ? false : 'fish is not installed here' }, async () => {
    const leaseId = sim().mint();
    const result = await runProcess(
      'fish',
      ['-c', 'queenctl completion fish | source; complete -C "queenctl lease watch "'],
      { env, exit: 0 },
    );
    assert.equal(result.code, 0, result.stderr);
    const offered = result.stdout.split('\n').filter(Boolean).sort();
    assert.ok(offered.includes(leaseId), result.stdout);
    assert.deepEqual(offered, (await bash('queenctl lease watch ')).offered);
  });
});
