/**
 * Edges a new user meets first, through the built binary: `help <group> <verb>`, a config file
 * whose current context was deleted, and a config file that cannot be read. Where a command
 * must stop before sending anything, it is pointed at a simulator that must stay silent.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { describe, it } from 'node:test';
import { BIN, cleanEnv, runCli } from '../support/cli.js';

const scratchHome = (): string => mkdtempSync(join(tmpdir(), 'queenctl-home-'));

/** The names under "Commands:" in a --help text, without commander's own `help`. */
function commandsOf(helpText: string): string[] {
  const section = /^Commands:\n((?: {2}.*\n|\s*\n)*)/m.exec(helpText)?.[1] ?? '';
  return section
    .split('\n')
    .filter((line) => /^ {2}\S/.test(line))
    .map((line) => line.trim().split(/\s+/)[0]!)
    .filter((name) => name !== 'help');
}

describe('queenctl help <group> <verb>', { concurrency: true }, () => {
  it('prints, for every command and verb, exactly what `<path> --help` prints, with exit 0', async () => {
    // The tree is read from --help itself, so a verb added later is covered without editing this.
    const paths: string[][] = [[]];
    const seen: string[] = [];
    for (let i = 0; i < paths.length; i++) {
      const path = paths[i]!;
      const viaFlag = await runCli([...path, '--help']);
      assert.equal(viaFlag.code, 0, viaFlag.stderr);
      const viaHelp = await runCli(['help', ...path]);
      assert.equal(viaHelp.code, 0, `queenctl help ${path.join(' ')}: ${viaHelp.stderr}`);
      assert.equal(viaHelp.stderr, '');
      assert.equal(viaHelp.stdout, viaFlag.stdout, `queenctl help ${path.join(' ')}`);
      seen.push(path.join(' '));
      for (const name of commandsOf(viaFlag.stdout)) paths.push([...path, name]);
    }
    for (const path of ['lease extend', 'lease inspect', 'lease watch', 'config set-context', 'completion'])
      assert.ok(seen.includes(path), `${path} was walked: ${seen.join(', ')}`);
  });

  it('`help lease extend` is the verb, not the group', async () => {
    const result = await runCli(['help', 'lease', 'extend']);
    assert.equal(result.code, 0);
    assert.match(result.stdout, /^Usage: queenctl lease extend \[options\] <leaseId\.\.\.>/);
  });

  it('`queenctl lease` alone still prints the group help', async () => {
    const group = await runCli(['lease', '--help']);
    const bare = await runCli(['lease']);
    // A group without its verb is commander's usage error: the help goes to stderr.
    assert.equal(bare.code, 1);
    assert.equal(bare.stdout, '');
    assert.equal(bare.stderr, group.stdout);
  });

  it('an unknown command is a usage error that names it and lists the known ones', async () => {
    const top = await runCli(['help', 'nosuch']);
    assert.equal(top.code, 1);
    assert.equal(top.stdout, '');
    assert.match(top.stderr, /^queenctl: unknown command "nosuch" for "queenctl"\n/);
    assert.match(top.stderr, /the commands of queenctl are: lease, config, completion, version, help\n/);

    const verb = await runCli(['help', 'lease', 'extnd']);
    assert.equal(verb.code, 1);
    assert.match(verb.stderr, /unknown command "extnd" for "queenctl lease"\n {2}.*: extend, inspect, watch\n/);
  });

  it('bash completes `help` with the same command names as the commands themselves', () => {
    const home = scratchHome();
    const bin = mkdtempSync(join(tmpdir(), 'queenctl-bin-'));
    writeFileSync(
      join(bin, 'queenctl'),
      `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} "$@"\n`,
    );
    chmodSync(join(bin, 'queenctl'), 0o755);
    const env = cleanEnv({ HOME: home, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` });
    const script = join(bin, 'queenctl.bash');
    writeFileSync(script, execFileSync('queenctl', ['completion', 'bash'], { env, encoding: 'utf8' }));
    const complete = (words: string[]): string[] =>
      execFileSync(
        'bash',
        [
          '-c',
          `source ${JSON.stringify(script)}
COMP_WORDS=(${words.map((word) => `'${word}'`).join(' ')}); COMP_CWORD=${words.length - 1}
_queenctl; printf '%s\\n' "\${COMPREPLY[@]}"`,
        ],
        { env, encoding: 'utf8' },
      )
        .split('\n')
        .filter(Boolean)
        .sort();
    assert.deepEqual(complete(['queenctl', 'help', '']), ['completion', 'config', 'lease', 'version']);
    assert.deepEqual(complete(['queenctl', 'help', 'lease', '']), ['extend', 'inspect', 'watch']);
    assert.deepEqual(complete(['queenctl', 'help', 'config', 'use']), ['use-context']);
    assert.deepEqual(complete(['queenctl', 'help', 'lease', 'extend', '']), []);
  });
});
