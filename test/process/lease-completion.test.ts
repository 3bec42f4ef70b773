/**
 * TAB on `queenctl lease extend|inspect|watch` through the real binary in bash, zsh and fish:
 * the lease ids held now, from the broker of the context in force (or of --context on the line),
 * and nothing at all, not an error, when the broker cannot be reached; the same for the broker's
 * consumer groups, queues and partitions (--group, --queue, --partition, a verb's <queue>); and
 * after `--`, the command line watch (or run) starts: a command's name, then its own completion.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { cliCommandLine, EXE, runProcess, shellInstalled } from '../support/cli.js';
import { queenctlFunction } from '../support/doctest.js';
import { runInProcess } from '../support/in-process.js';

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
/**
 * `env` with another `queenctl` first on PATH: a bash script that runs `queenctl __complete ...`
 * in this process (the doc tests' function, test/support/doctest.ts), for zsh and fish as bash()
 * does with `inProcess`: the tests about what a shell does with the names it is given, once each
 * kind of name was asked of the binary in that shell or in bash (the tests of lease ids and the
 * hostile names in bash). A node start less per TAB (~0.05 CPU-s). Under QUEENCTL_EXE, `env`
 * itself: every TAB runs the executable under test.
 */
let inProcessEnv: Record<string, string>;
/**
 * `queenctl completion bash|zsh|fish`, made once (test/process/completion.test.ts sources them as
 * `<(...)`, as docs/install.md says): each shell below sources the file, and no run pays for
 * making it again. Made in this process (the binary under QUEENCTL_EXE): that the binary prints
 * the same text is test/process/completion.test.ts's first tests; the binary's zsh script is
 * also loaded once here, after compinit.
 */
let bashScript: string;
let zshScript: string;
/**
 * The dump of zsh's completion functions, made once in before() and read by every compinit
 * below: compinit without one reads every function zsh has (~0.5 CPU-s each time, in a HOME of
 * its own or with -D).
 */
let zcompdump: string;
/**
 * The zsh that made the dump, which then loaded `source <(queenctl completion zsh)` as
 * docs/install.md says: what it said and how it ended, for the test of that load below (a
 * compinit without a dump costs ~0.5 CPU-s, once for the suite).
 */
let zshLoad: { code: number | null; stderr: string } | undefined;
let fishScript: string;

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
  // A command on PATH that no other program's name starts like, for the words after --.
  writeFileSync(join(bin, CHILD), '#!/bin/sh\n');
  chmodSync(join(bin, CHILD), 0o755);
  // The ids must come, however busy the machine: the 500 ms budget is the unit tests' to prove
  // (test/unit/completion-leases.test.ts), on a clock of their own.
  env = { HOME: home, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}`, QUEENCTL_COMPLETION_TIMEOUT: '20s' };
  if (EXE) inProcessEnv = env;
  else {
    const viaFunction = await queenctlFunction();
    const inProcessBin = mkdtempSync(join(tmpdir(), 'queenctl-bin-'));
    // Only what the scripts call: anything else would be a test asking this process by mistake.
    writeFileSync(
      join(inProcessBin, 'queenctl'),
      `#!/usr/bin/env bash\n${viaFunction.text}\n` +
        '[[ $1 == __complete ]] || { echo "$0: __complete only" >&2; exit 125; }\nqueenctl "$@"\n',
    );
    chmodSync(join(inProcessBin, 'queenctl'), 0o755);
    inProcessEnv = { ...env, ...viaFunction.env, PATH: `${inProcessBin}${delimiter}${env.PATH}` };
  }
  zcompdump = join(bin, 'zcompdump');
  if (shellInstalled('zsh'))
    zshLoad = await runProcess(
      'zsh',
      ['-f', '-c', `autoload -U compinit && compinit -u -d ${zcompdump} && source <(queenctl completion zsh)`],
      // compinit reads every completion function zsh has: on a loaded machine, longer than 20 s.
      { env, exit: 0, timeoutMs: 90_000 },
    );
  bashScript = join(bin, 'queenctl.bash');
  zshScript = join(bin, 'queenctl.zsh');
  fishScript = join(bin, 'queenctl.fish');
  for (const [shell, file] of [
    ['bash', bashScript],
    ['zsh', zshScript],
    ['fish', fishScript],
  ] as const) {
    const script = EXE
      ? await runProcess('queenctl', ['completion', shell], { env, exit: 0 })
      : await runInProcess(['completion', shell], { env: { HOME: env.HOME } });
    assert.equal(script.code, 0, script.stderr);
    writeFileSync(file, script.stdout);
  }
});

/** Ends what bash offered for one line. */
const END_OF_LINE = '--- end of line ---';

/** The command on PATH the words after `--` complete to. */
const CHILD = 'queenctl-child-xyz';

/**
 * bash as it completes each of `lines` (each ending in the word being completed), in one bash:
 * what it offers for each, and everything said on stderr. Each completion of a lease id runs
 * `queenctl` on PATH, as a TAB does; with `inProcess`, the doc tests' bash function `queenctl`
 * (test/support/doctest.ts) instead, which runs the same command in this process: for the tests
 * about which names the script asks for and what it does with them, once each kind of name was
 * asked of the binary (the tests of lease ids and the hostile names below). A node start less per
 * TAB (~0.1 CPU-s).
 */
async function bash(
  lines: string[],
  preamble = '',
  inProcess = false,
): Promise<{ offered: string[][]; stderr: string }> {
  const calls = lines.map((line) => {
    const words = line.split(' ');
    return `COMP_LINE=${JSON.stringify(line)}
COMP_WORDS=(${words.map((word) => `'${word}'`).join(' ')}); COMP_CWORD=${words.length - 1}; COMPREPLY=()
_queenctl; printf '%s\\n' "\${COMPREPLY[@]}"; echo '${END_OF_LINE}'`;
  });
  const viaFunction = inProcess ? await queenctlFunction() : undefined;
  const program = `${viaFunction?.text ?? ''}\n${preamble}\nsource ${JSON.stringify(bashScript)}\n${calls.join('\n')}`;
  const result = await runProcess('bash', ['-c', program], { env: { ...env, ...viaFunction?.env }, exit: 0 });
  const offered = result.stdout.split(`${END_OF_LINE}\n`);
  assert.equal(offered.pop(), '', 'every line ended');
  assert.equal(offered.length, lines.length, result.stdout);
  return { offered: offered.map((text) => text.split('\n').filter(Boolean).sort()), stderr: result.stderr };
}

/**
 * The lease ids the broker of the context in force holds now, as queenctl lists them for a TAB
 * (`queenctl __complete leases`), run in this process: what bash offers (the test above, through
 * the binary) is what zsh and fish must offer too.
 */
async function heldIds(): Promise<string[]> {
  const result = await runInProcess(['__complete', 'leases'], {
    env: { HOME: env.HOME, QUEENCTL_COMPLETION_TIMEOUT: env.QUEENCTL_COMPLETION_TIMEOUT },
  });
  assert.equal(result.code, 0, result.stderr);
  return result.stdout.split('\n').filter(Boolean).sort();
}

describe('zsh: the script loads', () => {
  it('after compinit, `source <(queenctl completion zsh)` loads without an error', {
    skip: shellInstalled('zsh') ? false : 'zsh is not installed here',
  }, () => {
    assert.ok(zshLoad, 'the zsh of before() ran');
    assert.equal(zshLoad.code, 0, zshLoad.stderr);
    assert.equal(zshLoad.stderr, '');
  });
});

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
    const { offered, stderr } = await bash(['queenctl --context down lease extend '], '', true);
    assert.deepEqual(offered, [[]]);
    assert.equal(stderr, '');
  });

  it('zsh offers the same ids', { skip: shellInstalled('zsh') ? false : 'zsh is not installed here' }, async () => {
    const leaseId = sim().mint({ seconds: HOUR });
    const program = `autoload -U compinit && compinit -u -d ${zcompdump}
source ${JSON.stringify(zshScript)}
compadd() { [[ $1 == -a ]] && print -l -- \${(P)2} }
words=(queenctl lease inspect ''); CURRENT=4; _queenctl`;
    const result = await runProcess('zsh', ['-c', program], { env, exit: 0 });
    assert.equal(result.code, 0, result.stderr);
    const offered = result.stdout.split('\n').filter(Boolean).sort();
    assert.ok(offered.includes(leaseId), result.stdout);
    assert.deepEqual(offered, await heldIds());
  });

  it('fish offers the same ids', { skip: shellInstalled('fish') ? false : 'fish is not installed here' }, async () => {
    const leaseId = sim().mint({ seconds: HOUR });
    const result = await runProcess(
      'fish',
      ['-c', `source ${JSON.stringify(fishScript)}; complete -C "queenctl lease watch "`],
      { env, exit: 0 },
    );
    assert.equal(result.code, 0, result.stderr);
    const offered = result.stdout.split('\n').filter(Boolean).sort();
    assert.ok(offered.includes(leaseId), result.stdout);
    assert.deepEqual(offered, await heldIds());
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
  /** hostileEnv with the names asked in this process (inProcessEnv): for zsh and fish. */
  let hostileInProcessEnv: Record<string, string>;
  /** Where a candidate that ran would leave its file. */
  let marks: string;
  const ids = (): string[] => [`$(touch\${IFS}${marks}/lease-dollar)`, `\`touch\${IFS}${marks}/lease-tick\``];
  const contexts = (): string[] => [`$(touch\${IFS}${marks}/context-dollar)`, `\`touch\${IFS}${marks}/context-tick\``];
  const nothingRan = (): void => assert.deepEqual(readdirSync(marks), [], 'a candidate was run by the shell');
  /**
   * The broker's names. A group goes into a URL path, so one with `/` is no candidate at all
   * (isNameCandidate); the group offered runs `touch` in the current directory, which the shells
   * below are started in. A queue or partition may hold `/`, and is offered.
   */
  const names = () => ({
    groupDollar: `$(touch\${IFS}${marks}/group-dollar)`,
    groupTick: `\`touch\${IFS}group-tick\``,
    queue: `$(touch\${IFS}${marks}/queue-dollar)`,
    partition: `\`touch\${IFS}${marks}/partition-tick\``,
  });

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
    hostileInProcessEnv = { ...inProcessEnv, HOME: home };
    // Born expired: the broker knows the group, queue and partition, and no lease id is added.
    const { groupDollar, groupTick, queue, partition } = names();
    hostile.mint({ group: groupTick, queue, seconds: -1, partitions: [{ partition }] });
    hostile.mint({ group: groupDollar, queue: 'orders', seconds: -1 });
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
    skip: shellInstalled('zsh') ? false : 'zsh is not installed here',
  }, async () => {
    const program = `autoload -U compinit && compinit -u -d ${zcompdump}
source ${JSON.stringify(zshScript)}
compadd() { [[ $1 == -a ]] && print -l -- \${(P)2} }
words=(queenctl lease inspect ''); CURRENT=4; _queenctl
words=(queenctl --context ''); CURRENT=3; _queenctl`;
    const result = await runProcess('zsh', ['-c', program], { env: hostileInProcessEnv, exit: 0 });
    nothingRan();
    assert.deepEqual(result.stdout.split('\n').filter(Boolean).sort(), [...ids(), ...contexts()].sort(), result.stderr);
  });

  it('fish offers them as they are and runs nothing', {
    skip: shellInstalled('fish') ? false : 'fish is not installed here',
  }, async () => {
    const result = await runProcess(
      'fish',
      [
        '-c',
        `source ${JSON.stringify(fishScript)}; complete -C "queenctl lease watch "; complete -C "queenctl --context "`,
      ],
      { env: hostileInProcessEnv, exit: 0 },
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

  it("bash offers the broker's groups, queues and partitions quoted, and runs nothing", async () => {
    const { groupTick, queue, partition } = names();
    const lines = [
      'queenctl lease list --group ',
      'queenctl lease list --queue ',
      'queenctl lease list --partition ',
      'queenctl lease acquire ',
    ];
    const calls = lines.map((line) => {
      const words = line.split(' ');
      return `COMP_LINE=${JSON.stringify(line)}
COMP_WORDS=(${words.map((word) => `'${word}'`).join(' ')}); COMP_CWORD=${words.length - 1}; COMPREPLY=()
_queenctl
for word in "\${COMPREPLY[@]}"; do eval "set -- $word"; printf '%s\\n' "$#:$1"; done; echo '${END_OF_LINE}'`;
    });
    const program = `source ${JSON.stringify(bashScript)}\n${calls.join('\n')}`;
    const result = await runProcess('bash', ['-c', program], { env: hostileEnv, exit: 0, cwd: marks });
    nothingRan();
    const [groups, queues, partitions, acquire] = result.stdout
      .split(`${END_OF_LINE}\n`)
      .map((text) => text.split('\n').filter(Boolean).sort());
    // The group with a / is left out; each other candidate reads back as one literal word.
    assert.deepEqual(groups, ['1:billing', `1:${groupTick}`].sort(), result.stderr);
    assert.ok(queues?.includes(`1:${queue}`), result.stdout);
    assert.deepEqual(acquire, queues);
    assert.ok(partitions?.includes(`1:${partition}`), result.stdout);
    for (const word of [...(queues ?? []), ...(partitions ?? [])]) assert.match(word, /^1:/);
  });

  it("zsh adds the broker's names as they are and runs nothing", {
    skip: shellInstalled('zsh') ? false : 'zsh is not installed here',
  }, async () => {
    const { groupTick, queue, partition } = names();
    // compadd prints what it is given, so the completion system itself is not needed: compdef,
    // which the script calls once loaded, does nothing here.
    const program = `compdef() { : }
source ${JSON.stringify(zshScript)}
compadd() { [[ $1 == -a ]] && print -l -- \${(P)2} }
words=(queenctl lease list --group ''); CURRENT=5; _queenctl
words=(queenctl lease list --queue ''); CURRENT=5; _queenctl
words=(queenctl lease acquire --partition ''); CURRENT=5; _queenctl`;
    const result = await runProcess('zsh', ['-c', program], { env: hostileInProcessEnv, exit: 0, cwd: marks });
    nothingRan();
    const offered = result.stdout.split('\n').filter(Boolean);
    for (const name of [groupTick, queue, partition]) assert.ok(offered.includes(name), result.stdout);
    assert.ok(!offered.includes(names().groupDollar), 'a group with / is no candidate');
  });

  it("fish offers the broker's names as they are and runs nothing", {
    skip: shellInstalled('fish') ? false : 'fish is not installed here',
  }, async () => {
    const { groupTick, queue, partition } = names();
    const result = await runProcess(
      'fish',
      [
        '-c',
        `source ${JSON.stringify(fishScript)}; complete -C "queenctl lease list --group "; ` +
          'complete -C "queenctl lease list --queue "; complete -C "queenctl lease acquire --partition "',
      ],
      { env: hostileInProcessEnv, exit: 0, cwd: marks },
    );
    nothingRan();
    const offered = result.stdout.split('\n').map((line) => line.split('\t')[0]);
    for (const name of [groupTick, queue, partition]) assert.ok(offered.includes(name), result.stdout);
  });
});

/**
 * What zsh offers when TAB is pressed at the end of each of `lines`, in one interactive zsh on a
 * pseudo terminal (zsh/zpty): the script's functions run inside a real completion widget, as they
 * do for an operator, so _normal and _command_names work as they do there. compadd is wrapped to
 * record each match it would add; the widget writes END once a completion is over, and the line
 * is then killed (^U) for the next. The wait for END reads the file and sleeps in zsh itself
 * ($(<file), zselect): no process per look.
 */
async function zshTab(lines: string[], runEnv: Record<string, string> = env): Promise<string[][]> {
  const out = join(mkdtempSync(join(tmpdir(), 'queenctl-zsh-')), 'offered');
  const program = `zmodload zsh/zpty zsh/zselect
zpty z zsh -f -i
zpty -w z "PS1=''; autoload -U compinit; compinit -u -d \${(q)ZCOMPDUMP}; source \${(q)COMPLETION_SCRIPT}"
zpty -w z 'compadd() { local -a __hits; builtin compadd -O __hits "$@"; print -rl -- $__hits >> "$OFFERED" }'
zpty -w z '_tab() { zle complete-word; print -r -- END >> "$OFFERED" }; zle -N _tab; bindkey "^I" _tab'
integer n=0 i
local -a ends
for line in "$@"; do
  (( n++ ))
  zpty -w -n z "$line"$'\\t'
  # However busy the machine: a completion may run queenctl, which starts node.
  for ((i = 0; i < 2400; i++)); do
    [[ -f $OFFERED ]] && ends=(\${(M)\${(f)"$(<$OFFERED)"}:#END}) && (( $#ends >= n )) && break
    zselect -t 5 # 50 ms
  done
  (( i < 2400 )) || { print -u2 "the completion of $line did not end"; exit 1 }
  zpty -w -n z $'\\x15' # ^U, kill-whole-line
done
zpty -d z`;
  await runProcess('zsh', ['-f', '-c', program, 'zsh', ...lines], {
    env: { ...runEnv, OFFERED: out, COMPLETION_SCRIPT: zshScript, ZCOMPDUMP: zcompdump },
    exit: 0,
    timeoutMs: 110_000,
  });
  const offered = readFileSync(out, 'utf8').split('END\n');
  assert.equal(offered.pop(), '', 'every line ended');
  assert.equal(offered.length, lines.length);
  return offered.map((text) => [...new Set(text.split('\n').filter(Boolean))].sort());
}

/** What fish offers for each line, its candidates without their descriptions. */
async function fishTab(lines: string[], runEnv: Record<string, string> = env): Promise<string[][]> {
  const calls = lines.map((line) => `complete -C ${JSON.stringify(line)}; echo '${END_OF_LINE}'`);
  const result = await runProcess('fish', ['-c', `source ${JSON.stringify(fishScript)}; ${calls.join('; ')}`], {
    env: runEnv,
    exit: 0,
  });
  const offered = result.stdout.split(`${END_OF_LINE}\n`);
  assert.equal(offered.pop(), '', 'every line ended');
  assert.equal(offered.length, lines.length, result.stdout);
  return offered.map((text) =>
    [
      ...new Set(
        text
          .split('\n')
          .filter(Boolean)
          .map((candidate) => candidate.split('\t')[0] as string),
      ),
    ].sort(),
  );
}

describe("completion of the broker's consumer groups, queues and partitions", () => {
  const lines = [
    'queenctl lease list --group cg-',
    'queenctl lease list --queue q-',
    'queenctl lease list --partition pt-',
    'queenctl lease acquire q-',
    'queenctl lease acquire --group cg-a',
  ];
  const expected = [
    ['cg-alpha', 'cg-beta'],
    ['q-invoices', 'q-orders'],
    ['pt-eu-1', 'pt-eu-2', 'pt-us-1'],
    ['q-invoices', 'q-orders'],
    ['cg-alpha'],
  ];
  before(() => {
    sim().mint({
      group: 'cg-alpha',
      queue: 'q-orders',
      seconds: HOUR,
      partitions: [{ partition: 'pt-eu-1' }, { partition: 'pt-eu-2' }],
    });
    // A group, queue and partition are known to the broker whether or not a lease holds them now.
    sim().mint({ group: 'cg-beta', queue: 'q-invoices', seconds: -1, partitions: [{ partition: 'pt-us-1' }] });
  });

  it('bash offers them for --group, --queue, --partition and acquire <queue>', async () => {
    const { offered, stderr } = await bash(lines, '', true);
    assert.deepEqual(offered, expected);
    assert.equal(stderr, '');
  });

  it('bash: --context on the line names the broker asked; an unreachable one offers nothing', async () => {
    const { offered, stderr } = await bash(
      ['queenctl --context down lease list --group cg-', 'queenctl --context prod lease list --group cg-'],
      '',
      true,
    );
    assert.deepEqual(offered, [[], ['cg-alpha', 'cg-beta']]);
    assert.equal(stderr, '');
  });

  it('zsh offers the same', { skip: shellInstalled('zsh') ? false : 'zsh is not installed here' }, async () => {
    assert.deepEqual(await zshTab(lines, inProcessEnv), expected);
  });

  it('fish offers the same', { skip: shellInstalled('fish') ? false : 'fish is not installed here' }, async () => {
    assert.deepEqual(await fishTab(lines, inProcessEnv), expected);
  });
});

/**
 * `lease watch <id> -- <command>` (and `lease run <queue> -- <command>`, or any verb's `--`): the
 * words after `--` are a command line of their own.
 */
describe('completion after --: the command and its own arguments', () => {
  const prefix = CHILD.slice(0, 13);
  it('bash offers command names, then files; through _command_offset where bash-completion is loaded', async () => {
    // compopt works only inside a completion bash started; here it says what it was asked, on
    // stderr (fd 3: the scripts send compopt's own stderr away).
    const recordCompopt = 'exec 3>&2; compopt() { printf "compopt %s\\n" "$*" >&3; }';
    const plain = await bash(
      [
        `queenctl lease watch x -- ${prefix}`,
        `queenctl lease run orders -- ${prefix}`,
        `queenctl lease watch x -- ${CHILD} `,
        // A path is a file, not a command on PATH.
        'queenctl lease watch x -- ./nightly',
      ],
      recordCompopt,
    );
    assert.deepEqual(plain.offered, [[CHILD], [CHILD], [], []]);
    assert.equal(plain.stderr, 'compopt -o default\n'.repeat(2), 'files after the command, and for a path');
    // bash-completion's _command_offset completes the rest as if it were a line of its own.
    const delegating = await bash(
      [`queenctl lease watch x -- ${CHILD} `, `queenctl -v lease run orders -- git st`],
      `${recordCompopt}\n_command_offset() { COMPREPLY=("offset $1: \${COMP_WORDS[*]:$1}"); }`,
    );
    assert.deepEqual(delegating.offered, [[`offset 5: ${CHILD} `], ['offset 6: git st']]);
  });

  it("zsh offers command names, then that command's own completion", {
    skip: shellInstalled('zsh') ? false : 'zsh is not installed here',
  }, async () => {
    // Then queenctl's own completion, delegated to: its commands starting with con.
    const offered = await zshTab([`queenctl lease watch x -- ${prefix}`, 'queenctl lease watch x -- queenctl con']);
    assert.deepEqual(offered, [[CHILD], ['config']]);
  });

  it("fish offers command names, then that command's own completion", {
    skip: shellInstalled('fish') ? false : 'fish is not installed here',
  }, async () => {
    const offered = await fishTab([
      `queenctl lease watch x -- ${prefix}`,
      `queenctl lease run orders -- ${prefix}`,
      'queenctl lease watch x -- queenctl con',
    ]);
    assert.deepEqual(offered, [[CHILD], [CHILD], ['config']]);
  });
});
