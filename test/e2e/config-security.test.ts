/**
 * The config file against another local user (docs/security.md#config-files-and-proxies):
 * `config view` never prints a literal token, however the YAML spells it; a config others may
 * read (holding a literal token) or change gets one warning; writes never follow a link; a
 * config file named by --config or QUEEN_CONFIG that is not there stops the run before anything
 * is sent.
 */
import assert from 'node:assert/strict';
import {
  chmodSync,
  chownSync,
  lchownSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { GO_EXAMPLE } from '../support/go-config.js';
import { runInProcess } from '../support/in-process.js';

const TOKEN = 'eyJhbGciOiJIUzI1NiJ9.Y29uZmlnLXNlY3VyaXR5.c2lnbmF0dXJl';
const AS_ROOT = process.getuid?.() === 0;
let sim: Simulator;
let scratch: string;

before(async () => {
  sim = await startSimulator({ tokens: { [TOKEN]: { role: 'read-write' } } });
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-config-security-'));
});
after(() => sim.close());

let files = 0;
function configFile(text: string, mode = 0o600): string {
  const path = join(scratch, `config-${files++}.yaml`);
  writeFileSync(path, text);
  chmodSync(path, mode);
  return path;
}

/** A small seeded generator: the same cases on every run, and a failing seed can be replayed. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

describe('config view never prints a literal token', () => {
  it('an anchor under any key, and the alias of it as token-ref (issue 31)', async () => {
    const path = configFile(
      [
        'shared: &tok literal:SECRET-ANCHOR',
        'current-context: a',
        'contexts:',
        '  - name: a',
        `    server: ${sim.url}`,
        '    token-ref: *tok',
        '',
      ].join('\n'),
    );
    for (const format of ['table', 'yaml', 'json', 'ndjson', 'jsonpath={.shared}']) {
      const result = await runInProcess(['--config', path, 'config', 'view', '-o', format]);
      assert.equal(result.code, 0, result.stderr);
      assert.doesNotMatch(result.stdout + result.stderr, /SECRET/, format);
      assert.match(result.stdout, /literal:\[redacted\]/, format);
    }
  });

  it('random keys, nesting, anchors, flow and block scalars, quotes, keys and comments (property)', async () => {
    const quoting = [
      (v: string) => v,
      (v: string) => JSON.stringify(v),
      (v: string) => `'${v}'`,
      (v: string) => `|\n__INDENT__${v}`,
      (v: string) => `>-\n__INDENT__${v}`,
      (v: string) => `!!str ${v}`,
    ];
    for (let seed = 1; seed <= 40; seed++) {
      const random = generator(seed);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
      const secrets: string[] = [];
      const secret = (): string => {
        const value = `S${seed}x${secrets.length}${Math.floor(random() * 1e9).toString(36)}`;
        secrets.push(value);
        return value;
      };
      const keyName = (): string =>
        pick(['a', 'note', 'server', 'x-y', 'deep', 'token-ref', 'ref', 'k']) + secrets.length;
      const anchors: string[] = [];
      const lines: string[] = [];
      const block = (indent: string, depth: number): void => {
        const count = 1 + Math.floor(random() * 3);
        for (let index = 0; index < count; index++) {
          const key = keyName();
          const kind = random();
          if (depth < 3 && kind < 0.2) {
            lines.push(`${indent}${key}:`);
            block(`${indent}  `, depth + 1);
          } else if (depth < 3 && kind < 0.3) {
            lines.push(`${indent}${key}:`);
            lines.push(`${indent}  - literal:${secret()}`);
            lines.push(`${indent}  - plain`);
          } else if (kind < 0.4) {
            lines.push(`${indent}${key}: { f: "literal:${secret()}", g: [ 'literal:${secret()}', 1 ] }`);
          } else if (kind < 0.5 && anchors.length > 0) {
            lines.push(`${indent}${key}: *${pick(anchors)}`);
          } else if (kind < 0.6) {
            lines.push(`${indent}literal:${secret()}: ${pick(['1', 'x', `literal:${secret()}`])}`);
          } else if (kind < 0.7) {
            lines.push(`${indent}${key}: plain # literal:${secret()}`);
          } else {
            const anchor = random() < 0.5 ? `&n${anchors.length} ` : '';
            if (anchor) anchors.push(`n${anchors.length}`);
            const value = pick(quoting)(`literal:${secret()}`).replaceAll('__INDENT__', `${indent}  `);
            lines.push(`${indent}${key}: ${anchor}${value}`);
          }
        }
      };
      lines.push(`# literal:${secret()}`);
      block('', 0);
      lines.push('contexts: []');
      const text = `${lines.join('\n')}\n`;
      const path = configFile(text);
      const original = parseYaml(text, { merge: true }) as unknown;
      for (const format of ['table', 'yaml', 'json']) {
        const result = await runInProcess(['--config', path, 'config', 'view', '-o', format]);
        assert.equal(result.code, 0, `seed ${seed} ${format}: ${result.stderr}\n${text}`);
        for (const value of secrets) {
          assert.ok(
            !result.stdout.includes(value),
            `seed ${seed} ${format}: ${value} printed\n${text}\n${result.stdout}`,
          );
        }
        // Still YAML (or JSON) of the same shape: the same keys and nesting, each value a string where one was.
        const shown = format === 'json' ? JSON.parse(result.stdout) : parseYaml(result.stdout, { merge: true });
        const reference =
          format === 'table' ? original : { 'current-context': null, ...(original as Record<string, unknown>) };
        assert.deepEqual(shapeOf(shown), shapeOf(reference), `seed ${seed} ${format}\n${text}\n${result.stdout}`);
      }
    }
  });
});

/** The structure of a value without its strings: what redaction must keep. */
function shapeOf(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(shapeOf);
  if (typeof value === 'object' && value !== null) {
    return Object.keys(value)
      .map((key) => (/^literal:/.test(key) ? 'literal-key' : key))
      .sort()
      .concat(
        Object.entries(value)
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([, item]) => JSON.stringify(shapeOf(item))),
      );
  }
  return typeof value;
}

describe('a config file others may read or change', () => {
  const LITERAL = (server: string) =>
    `current-context: a\ncontexts:\n  - name: a\n    server: ${server}\n    token-ref: literal:${TOKEN}\n`;
  const REFERENCE = (server: string) => `current-context: a\ncontexts:\n  - name: a\n    server: ${server}\n`;
  const warningsOf = (stderr: string): string[] => stderr.split('\n').filter((line) => / the config file /.test(line));

  it('holding a literal token at 0644 or 0666: one warning naming it and chmod 600, even with -q', async () => {
    for (const mode of [0o644, 0o640, 0o666]) {
      const path = configFile(LITERAL(sim.url), mode);
      for (const args of [
        ['lease', 'extend', sim.mint(), '-q', '-o', 'json'],
        ['ping', '-q'],
        ['config', 'view', '-q'],
        ['config', 'get-contexts', '-q'],
        ['config', 'current-context', '-q'],
        ['config', 'use-context', 'a', '-q'],
      ]) {
        chmodSync(path, mode);
        const result = await runInProcess(['--config', path, ...args]);
        assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`);
        const warnings = warningsOf(result.stderr);
        assert.equal(warnings.length, 1, `${mode.toString(8)} ${args.join(' ')}: ${result.stderr}`);
        assert.match(
          warnings[0] ?? '',
          new RegExp(`^queenctl: warning: the config file ${path} holds a literal token`),
        );
        assert.match(warnings[0] ?? '', new RegExp(`chmod 600 ${path}$`));
        assert.doesNotMatch(result.stderr, new RegExp(TOKEN));
      }
    }
  });

  it('no warning at 0600, nor at 0644 without a literal token; any group- or other-writable file warns', async () => {
    const quiet = [
      [configFile(LITERAL(sim.url), 0o600), 'a literal token at 0600'],
      [configFile(REFERENCE(sim.url), 0o644), 'no literal token at 0644'],
    ] as const;
    for (const [path, what] of quiet) {
      for (const args of [
        ['lease', 'extend', sim.mint(), '--token', TOKEN, '-o', 'json'],
        ['config', 'view'],
      ]) {
        const result = await runInProcess(['--config', path, ...args]);
        assert.equal(result.code, 0, result.stderr);
        assert.deepEqual(warningsOf(result.stderr), [], `${what}: ${args.join(' ')}`);
      }
    }
    // The Go queenctl's example names `literal:<token>` in a comment: a placeholder, not a token.
    const example = await runInProcess(['--config', configFile(GO_EXAMPLE, 0o644), 'config', 'view']);
    assert.equal(example.code, 0, example.stderr);
    assert.deepEqual(warningsOf(example.stderr), [], 'the Go example at 0644');
    for (const mode of [0o664, 0o646, 0o666]) {
      const path = configFile(REFERENCE(sim.url), mode);
      const result = await runInProcess(['--config', path, 'lease', 'extend', sim.mint(), '--token', TOKEN, '-q']);
      assert.equal(result.code, 0, result.stderr);
      const warnings = warningsOf(result.stderr);
      assert.equal(warnings.length, 1, result.stderr);
      assert.match(
        warnings[0] ?? '',
        new RegExp(`the config file ${path} can be changed by other users \\(mode 0${mode.toString(8)}\\): chmod 600`),
      );
    }
  });

  it('owned by another user: a warning, whatever its mode', { skip: !AS_ROOT && 'chown needs root' }, async () => {
    const path = configFile(REFERENCE(sim.url), 0o600);
    chownSync(path, 65534, 65534);
    const result = await runInProcess(['--config', path, 'config', 'get-contexts', '-q']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(warningsOf(result.stderr), [
      `queenctl: warning: the config file ${path} belongs to another user (uid 65534), who can change it: ` +
        `chown "$(id -u)" ${path} && chmod 600 ${path}`,
    ]);
  });
});

describe('writes never follow a link', () => {
  it('a link planted as ~/.queen/config.yaml is replaced by the file, its target untouched', async () => {
    const home = mkdtempSync(join(scratch, 'home-'));
    mkdirSync(join(home, '.queen'), { mode: 0o700 });
    const victim = join(scratch, `victim-${files++}`);
    // Anything YAML reads as a mapping: a file of this user's the link's owner wants rewritten.
    writeFileSync(victim, 'precious: true\n', { mode: 0o644 });
    symlinkSync(victim, join(home, '.queen', 'config.yaml'));
    const result = await runInProcess(['config', 'set-context', 'a', '--server', sim.url], { env: { HOME: home } });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(readFileSync(victim, 'utf8'), 'precious: true\n');
    assert.match(readFileSync(join(home, '.queen', 'config.yaml'), 'utf8'), /name: a/);
  });

  it('a ~/.queen that is a link owned by another user: exit 1, naming it, nothing written', {
    skip: !AS_ROOT && 'lchown needs root',
  }, async () => {
    const home = mkdtempSync(join(scratch, 'home-'));
    const planted = mkdtempSync(join(scratch, 'planted-'));
    symlinkSync(planted, join(home, '.queen'));
    lchownSync(join(home, '.queen'), 65534, 65534);
    for (const args of [
      ['config', 'set-context', 'a', '--server', sim.url],
      ['config', 'set-context', 'a', '--server', sim.url, '-o', 'json'],
    ]) {
      const result = await runInProcess(args, { env: { HOME: home } });
      assert.equal(result.code, 1, result.stderr);
      assert.equal(result.stdout, '');
      const lines = result.stderr.trimEnd().split('\n');
      assert.equal(lines.length, 1, result.stderr);
      assert.match(
        lines[0] ?? '',
        new RegExp(
          `^queenctl: the config directory ${home}/.queen is a symbolic link owned by another user \\(uid 65534\\)`,
        ),
      );
    }
    assert.deepEqual(readdirSync(planted), []);
  });
});

describe('a config file named by --config or QUEEN_CONFIG that is not there', () => {
  it('is exit 1 with one line naming it and what to do, and nothing is sent', async () => {
    const missing = join(scratch, 'typo.yaml');
    const runs: Array<[string[], Record<string, string>, string]> = [
      [['--config', missing, 'lease', 'extend', sim.mint(), '--server', sim.url, '--token', TOKEN], {}, '--config'],
      [['lease', 'extend', sim.mint(), '--token', TOKEN, '-o', 'json'], { QUEEN_CONFIG: missing }, 'QUEEN_CONFIG'],
      [['ping'], { QUEEN_CONFIG: missing }, 'QUEEN_CONFIG'],
      [['--config', missing, 'config', 'view'], {}, '--config'],
      [['config', 'get-contexts'], { QUEEN_CONFIG: missing }, 'QUEEN_CONFIG'],
      [['config', 'current-context'], { QUEEN_CONFIG: missing }, 'QUEEN_CONFIG'],
      [['--config', missing, 'config', 'use-context', 'a'], {}, '--config'],
      [['--config', missing, 'config', 'delete-context', 'a'], {}, '--config'],
    ];
    const before = sim.log.length;
    for (const [args, env, by] of runs) {
      const result = await runInProcess(args, { env });
      assert.equal(result.code, 1, `${args.join(' ')}: ${result.stderr}`);
      assert.equal(result.stdout, '', args.join(' '));
      assert.deepEqual(result.stderr.trimEnd().split('\n'), [
        `queenctl: the config file ${missing} (from ${by}) does not exist: fix the path, ` +
          `create it with queenctl config set-context <name> --server <url> --config ${missing}, ` +
          `or ${by === '--config' ? 'drop --config' : 'unset QUEEN_CONFIG'} to use ~/.queen/config.yaml`,
      ]);
    }
    assert.equal(sim.log.length, before, 'a request was sent');
  });

  it('the default ~/.queen/config.yaml may be missing; set-context makes the file it is given', async () => {
    const home = mkdtempSync(join(scratch, 'home-'));
    const absent = await runInProcess(['lease', 'extend', sim.mint(), '--server', sim.url, '--token', TOKEN], {
      env: { HOME: home },
    });
    assert.equal(absent.code, 0, absent.stderr);
    const made = join(scratch, `made-${files++}.yaml`);
    const created = await runInProcess(['--config', made, 'config', 'set-context', 'a', '--server', sim.url]);
    assert.equal(created.code, 0, created.stderr);
    assert.match(readFileSync(made, 'utf8'), /name: a/);
  });
});
