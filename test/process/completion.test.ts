/**
 * Completion scripts run by their shells, with `queenctl` on PATH as installed (QUEENCTL_EXE when
 * set): they load cleanly and offer exactly what the command tree has (read back from --help,
 * the other view of that tree, in-process), and context names from the config file.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { before, describe, it } from 'node:test';
import { cliCommandLine, runProcess, shellInstalled } from '../support/cli.js';
import { runInProcess } from '../support/in-process.js';

/** A HOME with a config file and `queenctl` on PATH, set on top of the clean environment. */
let env: { HOME: string; PATH: string };
let bashScript: string;
/**
 * What the installed `queenctl completion <shell>` printed, once for the file (before()), and
 * where it was written: the tests that are about what a script offers source the file; those
 * about loading it run the line docs/install.md gives (`source <(queenctl completion bash)`).
 */
const printed = new Map<'bash' | 'zsh' | 'fish', { text: string; file: string }>();

/** The Commands and Options sections of a command's --help. */
interface HelpView {
  commands: string[];
  flags: string[];
  text: string;
}

const helpViews = new Map<string, Promise<HelpView>>();

/** Each command's --help is read once per run. */
function help(path: string[]): Promise<HelpView> {
  const key = path.join(' ');
  if (!helpViews.has(key)) helpViews.set(key, readHelp(path));
  return helpViews.get(key)!;
}

async function readHelp(path: string[]): Promise<HelpView> {
  const result = await runInProcess([...path, '--help'], { env: { HOME: env.HOME } });
  assert.equal(result.code, 0, result.stderr);
  const section = (title: string): string[] => {
    const match = new RegExp(`^${title}:\\n((?:  .*\\n|\\s*\\n)*?)(?:\\S|$)`, 'm').exec(result.stdout);
    return (match?.[1] ?? '').split('\n').filter((line) => /^ {2}\S/.test(line));
  };
  // A verb's help keeps to its own flags; the global ones are queenctl's own (queenctl options).
  const global = path.length > 0 ? (await help([])).flags : [];
  const own = section('Options').flatMap((line) =>
    line
      .trim()
      .split(/\s{2,}/)[0]!
      .split(/,\s*/)
      .map((flag) => flag.split(' ')[0]!),
  );
  const flags = [...new Set([...own, ...global])];
  const commands = section('Commands').map((line) => line.trim().split(/\s+/)[0]!);
  return { commands, flags, text: result.stdout };
}

/** Every command path of the tree, walked through --help. */
async function commandPaths(): Promise<string[][]> {
  const paths: string[][] = [[]];
  for (let i = 0; i < paths.length; i++) {
    const { commands } = await help(paths[i]!);
    for (const name of commands) if (name !== 'help') paths.push([...paths[i]!, name]);
  }
  return paths;
}

/** Ends what bash offered for one line, in the output of bashCompleteAll. */
const END_OF_LINE = '--- end of line ---';

/**
 * What bash offers for each of `lines`, from one bash that sources the script once: one process
 * for a whole walk of the command tree instead of two per command.
 */
async function bashCompleteAll(lines: string[][]): Promise<string[][]> {
  const calls = lines.map(
    (words) =>
      `COMP_WORDS=(${words.map((word) => `'${word}'`).join(' ')}); COMP_CWORD=${words.length - 1}; COMPREPLY=()\n` +
      `_queenctl; printf '%s\\n' "\${COMPREPLY[@]}"; echo '${END_OF_LINE}'`,
  );
  const program = `source ${JSON.stringify(bashScript)}\n${calls.join('\n')}`;
  const result = await runProcess('bash', ['-c', program], { env, exit: 0 });
  const offered = result.stdout.split(`${END_OF_LINE}\n`);
  assert.equal(offered.pop(), '', 'every line ended');
  assert.equal(offered.length, lines.length, result.stdout);
  return offered.map((text) => text.split('\n').filter(Boolean).sort());
}

before(async () => {
  const home = mkdtempSync(join(tmpdir(), 'queenctl-home-'));
  mkdirSync(join(home, '.queen'));
  writeFileSync(
    join(home, '.queen', 'config.yaml'),
    'current-context: prod\ncontexts:\n  - name: prod\n  - name: staging\n',
  );
  // `queenctl` on PATH, as an installed one would be: the scripts call it for context names.
  const bin = mkdtempSync(join(tmpdir(), 'queenctl-bin-'));
  writeFileSync(join(bin, 'queenctl'), `#!/bin/sh\nexec ${cliCommandLine()} "$@"\n`);
  chmodSync(join(bin, 'queenctl'), 0o755);
  env = { HOME: home, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` };
  for (const shell of ['bash', 'zsh', 'fish'] as const) {
    const script = await runProcess('queenctl', ['completion', shell], { env, exit: 0 });
    assert.equal(script.code, 0, script.stderr);
    const file = join(bin, `queenctl.${shell}`);
    writeFileSync(file, script.stdout);
    printed.set(shell, { text: script.stdout, file });
  }
  bashScript = printed.get('bash')!.file;
});

describe('completion', () => {
  for (const shell of ['bash', 'zsh', 'fish'] as const) {
    it(`${shell}: the installed script is what the generator gives from this command tree`, async () => {
      // The npm package's scripts are made when it is built (scripts/bundle.mjs); in-process, the
      // generator runs on the tree as the source has it now. Each was printed once, for every
      // test here (before()).
      const { text } = printed.get(shell)!;
      const generated = await runInProcess(['completion', shell], { env: { HOME: env.HOME } });
      assert.equal(generated.code, 0, generated.stderr);
      assert.match(text, /_queenctl|complete -c queenctl/, 'a script, not an empty output');
      assert.equal(text, generated.stdout);
    });
  }

  it('bash: `source <(queenctl completion bash)` loads cleanly and registers queenctl', async () => {
    const { code, stdout, stderr } = await runProcess(
      'bash',
      ['-c', 'source <(queenctl completion bash) && complete -p queenctl'],
      { env, exit: 0 },
    );
    assert.equal(code, 0, stderr);
    assert.equal(stderr, '');
    assert.match(stdout, /complete -F _queenctl queenctl/);
  });

  it('bash offers, at every command, exactly the subcommands and flags its --help lists', async () => {
    const expected: Array<{ words: string[]; offered: string[]; what: string }> = [];
    for (const path of await commandPaths()) {
      const view = await help(path);
      // A command without subcommands offers its argument's values instead (tested below).
      if (view.commands.length > 0)
        expected.push({
          words: ['queenctl', ...path, ''],
          offered: [...view.commands].sort(),
          what: `subcommands of "${path.join(' ')}"`,
        });
      expected.push({
        words: ['queenctl', ...path, '-'],
        offered: [...new Set(view.flags)].sort(),
        what: `flags of "${path.join(' ')}"`,
      });
    }
    assert.ok(expected.length > 10, 'the walk found the command tree');
    const offered = await bashCompleteAll(expected.map((line) => line.words));
    expected.forEach((line, i) => {
      assert.deepEqual(offered[i], line.offered, line.what);
    });
  });

  it('bash completes values: output formats, shells, and context names from the config file', async () => {
    const [formats, shells, useContext, context, afterValue] = await bashCompleteAll([
      ['queenctl', 'lease', 'extend', '-o', ''],
      ['queenctl', 'completion', ''],
      ['queenctl', 'config', 'use-context', ''],
      ['queenctl', '--context', 's'],
      // A flag's value is not mistaken for a command: `--server lease` does not enter `lease`.
      ['queenctl', '--server', 'http://x', 'config', 'v'],
    ]);
    assert.deepEqual(formats, ['json', 'jsonpath=', 'name', 'ndjson', 'table', 'wide', 'yaml']);
    assert.deepEqual(shells, ['bash', 'fish', 'zsh']);
    assert.deepEqual(useContext, ['prod', 'staging']);
    assert.deepEqual(context, ['staging']);
    assert.deepEqual(afterValue, ['view']);
  });

  // zsh's: after compinit, in test/process/lease-completion.test.ts, whose zsh makes the dump of
  // compinit that its other tests read (a compinit without one costs ~0.5 CPU-s).
  it('fish: the script loads without an error', {
    skip: shellInstalled('fish') ? false : 'fish is not installed here',
  }, async () => {
    const load = 'queenctl completion fish | source; and complete -C "queenctl config use-context "';
    const { code, stdout, stderr } = await runProcess('fish', ['-c', load], { env, exit: 0, timeoutMs: 90_000 });
    assert.equal(code, 0, stderr);
    assert.equal(stderr, '');
    assert.deepEqual(stdout.split('\n').filter(Boolean).sort(), ['prod', 'staging']);
  });

  it('bash offers -o jsonpath= and leaves it open: no space, the expression follows', async () => {
    // compopt works only inside a completion bash started; here it says what it was asked, on
    // fd 3 (the script sends compopt's own stderr away).
    const lines = [
      ['queenctl', 'lease', 'extend', '-o', 'jsonp'],
      ['queenctl', 'ping', '--output', '=', 'jsonp'],
      ['queenctl', 'lease', 'list', '-o', 'ya'],
      ['queenctl', 'lease', 'list', '-o', 'js'],
    ];
    const calls = lines.map(
      (words) =>
        `COMP_WORDS=(${words.map((word) => `'${word}'`).join(' ')}); COMP_CWORD=${words.length - 1}; COMPREPLY=()\n` +
        `_queenctl; printf '%s\\n' "\${COMPREPLY[@]}"; echo '${END_OF_LINE}' >&3; echo '${END_OF_LINE}'`,
    );
    const program = `exec 3>&2; compopt() { printf '%s\\n' "compopt $*" >&3; }
source ${JSON.stringify(bashScript)}\n${calls.join('\n')}`;
    const result = await runProcess('bash', ['-c', program], { env, exit: 0 });
    const offered = result.stdout.split(`${END_OF_LINE}\n`).map((text) => text.split('\n').filter(Boolean));
    const asked = result.stderr.split(`${END_OF_LINE}\n`).map((text) => text.split('\n').filter(Boolean));
    assert.deepEqual(offered.slice(0, 4), [['jsonpath='], ['jsonpath='], ['yaml'], ['json', 'jsonpath=']]);
    // With json and jsonpath= both offered bash adds no space anyway: nospace is for jsonpath= alone.
    assert.deepEqual(asked.slice(0, 4), [['compopt -o nospace'], ['compopt -o nospace'], [], []]);
  });

  it('zsh offers -o jsonpath= with no suffix, the other formats with one', {
    skip: shellInstalled('zsh') ? false : 'zsh is not installed here',
  }, async () => {
    // compadd prints what it is given, so the completion system itself is not needed: compdef,
    // which the script calls once loaded, does nothing here.
    const program = `compdef() { : }
source ${JSON.stringify(printed.get('zsh')!.file)}
compadd() { print -r -- "$*: \${(P)\${@[-1]}}" }
words=(queenctl lease extend -o ''); CURRENT=5; _queenctl`;
    const { stdout } = await runProcess('zsh', ['-c', program], { env, exit: 0 });
    assert.deepEqual(stdout.split('\n').filter(Boolean), [
      '-a names: table wide json ndjson yaml name',
      '-S  -a open: jsonpath=',
    ]);
  });

  it('fish offers -o jsonpath= with the formats', {
    skip: shellInstalled('fish') ? false : 'fish is not installed here',
  }, async () => {
    const { stdout } = await runProcess(
      'fish',
      ['-c', `source ${JSON.stringify(printed.get('fish')!.file)}; complete -C "queenctl lease extend -o js"`],
      { env, exit: 0 },
    );
    const offered = stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('\t')[0]);
    assert.deepEqual([...new Set(offered)].sort(), ['json', 'jsonpath=']);
  });

  it('bash completes `help` with the same command names as the commands themselves', async () => {
    const [top, lease, config, extend] = await bashCompleteAll([
      ['queenctl', 'help', ''],
      ['queenctl', 'help', 'lease', ''],
      ['queenctl', 'help', 'config', 'use'],
      ['queenctl', 'help', 'lease', 'extend', ''],
    ]);
    assert.deepEqual(top, ['completion', 'config', 'lease', 'options', 'ping', 'version']);
    assert.deepEqual(lease, ['ack', 'acquire', 'extend', 'inspect', 'list', 'run', 'watch']);
    assert.deepEqual(config, ['use-context']);
    assert.deepEqual(extend, []);
  });
});
