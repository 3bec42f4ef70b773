/**
 * Edges a new user meets first, run in-process: `help <group> <verb>`, examples in every --help,
 * `version`, a config file whose current context was deleted, and a config file that cannot be
 * read (bash completing `help`: test/process/completion.test.ts). Where a command
 * must stop before sending anything, it is pointed at a simulator that must stay silent.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { type InProcessResult, runInProcess } from '../support/in-process.js';

/** Never given a request that should reach it: its log is the evidence that nothing was sent. */
let silent: Simulator;
/** Answers the runs that should go through. */
let live: Simulator;

before(async () => {
  silent = await startSimulator();
  live = await startSimulator();
});
after(async () => {
  await silent.close();
  await live.close();
});

/** queenctl in-process; a minute before a run counts as hung. */
const cli = (args: string[], env: Record<string, string> = {}): Promise<InProcessResult> =>
  runInProcess(args, { env, timeoutMs: 60_000 });

const scratchHome = (): string => mkdtempSync(join(tmpdir(), 'queenctl-home-'));

/** A fresh HOME whose ~/.queen/config.yaml holds `text`; returns the HOME and the file. */
function homeWith(text: string): { home: string; path: string } {
  const home = scratchHome();
  mkdirSync(join(home, '.queen'));
  const path = join(home, '.queen', 'config.yaml');
  writeFileSync(path, text);
  return { home, path };
}

/** `text` as a regular expression that matches it exactly. */
const literal = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

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
      const viaFlag = await cli([...path, '--help']);
      assert.equal(viaFlag.code, 0, viaFlag.stderr);
      const viaHelp = await cli(['help', ...path]);
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
    const result = await cli(['help', 'lease', 'extend']);
    assert.equal(result.code, 0);
    assert.match(result.stdout, /^Usage: queenctl lease extend \[options\] <leaseId\.\.\.>/);
  });

  it('`queenctl lease` alone still prints the group help', async () => {
    const group = await cli(['lease', '--help']);
    const bare = await cli(['lease']);
    // A group without its verb is commander's usage error: the help goes to stderr.
    assert.equal(bare.code, 1);
    assert.equal(bare.stdout, '');
    assert.equal(bare.stderr, group.stdout);
  });

  it('an unknown command is a usage error that names it and lists the known ones', async () => {
    const top = await cli(['help', 'nosuch']);
    assert.equal(top.code, 1);
    assert.equal(top.stdout, '');
    assert.match(top.stderr, /^queenctl: unknown command "nosuch" for "queenctl"\n/);
    assert.match(top.stderr, /the commands of queenctl are: lease, config, ping, completion, version, options, help\n/);

    const verb = await cli(['help', 'lease', 'extnd']);
    assert.equal(verb.code, 1);
    assert.match(
      verb.stderr,
      /unknown command "extnd" for "queenctl lease"\n {2}.*: extend, inspect, list, watch, acquire, ack, run\n/,
    );
  });

  it("every command's --help carries examples", async () => {
    const paths: string[][] = [[]];
    for (let i = 0; i < paths.length; i++) {
      const path = paths[i]!;
      const { code, stdout } = await cli([...path, '--help']);
      assert.equal(code, 0);
      assert.match(stdout, /\nExamples:\n( {2}.*queenctl .*\n)+/, `queenctl ${path.join(' ')} --help has no examples`);
      for (const name of commandsOf(stdout)) paths.push([...path, name]);
    }
    assert.ok(paths.length > 10, `the tree was walked: ${paths.map((path) => path.join(' ')).join(', ')}`);
  });

  it("version --short prints queenctl's version, commit, build date and Node's, in a pipe too", async () => {
    const result = await cli(['version', '--short']);
    const node = process.version.replaceAll('.', '\\.');
    // The npm package names the platform it runs on.
    const platform = `npm package on ${process.platform}-${process.arch}`;
    assert.match(
      result.stdout,
      new RegExp(
        `^queenctl \\d+\\.\\d+\\.\\d+ \\(commit ([0-9a-f]+|-), built (\\S+Z|-), ${platform}, node ${node}\\)\\n$`,
      ),
    );
  });
});

describe('the current context deleted', { concurrency: true }, () => {
  it('warns, unsets current-context, and then current-context and lease commands stop with exit 1', async () => {
    const home = scratchHome();
    const path = join(home, '.queen', 'config.yaml');
    const config = (args: string[]) => cli(['config', ...args], { HOME: home });
    assert.equal((await config(['set-context', 'a', '--server', silent.url])).code, 0);
    assert.equal((await config(['set-context', 'b', '--server', silent.url])).code, 0);
    assert.equal((await config(['use-context', 'a'])).code, 0);

    const deleted = await config(['delete-context', 'a']);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(deleted.stdout, /^Deleted context "a" from /);
    assert.match(
      deleted.stderr,
      /^queenctl: warning: "a" was the current-context, and no context is current now: .*use-context <name> \(b\)/,
    );
    assert.doesNotMatch(readFileSync(path, 'utf8'), /current-context/);

    const current = await config(['current-context']);
    assert.equal(current.code, 1);
    assert.equal(current.stdout, '');
    assert.match(
      current.stderr,
      new RegExp(`^queenctl: no context is chosen: ${literal(path)} has no current-context, and neither --context`),
    );
    assert.match(current.stderr, /queenctl config use-context <name> \(known contexts in .*: b\)/);

    const listed = await config(['get-contexts', '-o', 'json']);
    assert.equal(listed.code, 0);
    assert.deepEqual(
      JSON.parse(listed.stdout).map((context: { name: string; current: boolean }) => [context.name, context.current]),
      [['b', false]],
    );
    assert.match(listed.stderr, /no context is current, so lease commands stop until one is chosen/);

    const leaseId = live.mint({ seconds: 600 });
    for (const verb of [['extend'], ['inspect'], ['watch', '--for', '30s']]) {
      const result = await cli(['lease', ...verb, leaseId], { HOME: home });
      assert.equal(result.code, 1, `lease ${verb[0]}: ${result.stderr}`);
      assert.equal(result.stdout, '');
      assert.match(
        result.stderr,
        new RegExp(
          `^queenctl: no context is chosen: ${literal(path)} has contexts but no current-context, ` +
            'and none of --context, QUEEN_CONTEXT, --server or QUEEN_SERVER is set\n',
        ),
      );
      assert.match(result.stderr, /or name the broker for this run: --context <name> or --server <url>/);
    }
    assert.equal(silent.log.length, 0, "nothing went to the remaining context's broker either");
    assert.equal(live.log.filter((entry) => entry.leaseId === leaseId).length, 0, 'nothing went to the lease broker');
  });

  it('--server, QUEEN_SERVER, --context or QUEEN_CONTEXT still chooses; without a file none is needed', async () => {
    const { home } = homeWith(`contexts:\n  - name: live\n    server: ${live.url}\n  - name: other\n`);
    for (const [args, env] of [
      [['--server', live.url], {}],
      [[], { QUEEN_SERVER: live.url }],
      [['--context', 'live'], {}],
      [[], { QUEEN_CONTEXT: 'live' }],
      [[], { HOME: scratchHome(), QUEEN_SERVER: live.url }],
    ] as const) {
      const leaseId = live.mint({ seconds: 600 });
      const result = await cli(['lease', 'extend', leaseId, '-o', 'json', ...args], { HOME: home, ...env });
      assert.equal(result.code, 0, `${args.join(' ')} ${JSON.stringify(env)}: ${result.stderr}`);
      assert.equal(JSON.parse(result.stdout).leaseId, leaseId);
    }
  });

  it('set-context with no flags on a new name says the context it created is empty', async () => {
    const home = scratchHome();
    const result = await cli(['config', 'set-context', 'blank'], { HOME: home });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^Created an empty context "blank" in .*: no server \(so http:\/\/localhost:6632\)/);
    assert.match(result.stdout, /queenctl config set-context blank --server <url>/);
    const named = await cli(['config', 'set-context', 'full', '--server', live.url], { HOME: home });
    assert.match(named.stdout, /^Context "full" created in /);
  });
});

describe('a config file that cannot be read', { concurrency: true }, () => {
  const BROKEN: Array<[string, string, number, RegExp]> = [
    ['bad YAML', 'contexts:\n  - name: [a\n', 4, /is not valid YAML/],
    ['contexts not a list', 'contexts:\n  a: {}\n', 3, /contexts must be a list/],
    ['a context without a name', 'contexts:\n  - server: http://x:1\n', 3, /a context has no name/],
    ['server not a string', 'contexts:\n  - name: a\n    server: 6632\n', 4, /server must be a non-empty string/],
    ['insecure not a boolean', 'contexts:\n  - name: a\n    insecure: "no"\n', 4, /insecure must be true or false/],
    ['token-ref not a string', 'contexts:\n  - name: a\n    token-ref: [env]\n', 4, /token-ref must be a non-empty/],
  ];

  for (const [what, text, line, problem] of BROKEN) {
    it(`${what}: lease extend stops with exit 1 at line ${line}, sending nothing even with --server`, async () => {
      const { home, path } = homeWith(`current-context: a\n${text}`);
      const leaseId = silent.mint({ seconds: 600 });
      const result = await cli(['lease', 'extend', leaseId, '--server', silent.url], { HOME: home });
      assert.equal(result.code, 1, result.stderr);
      assert.equal(result.stdout, '');
      assert.match(result.stderr, new RegExp(`^queenctl: the config file ${literal(path)}:${line}\\b`));
      assert.match(result.stderr, problem);
      assert.equal(silent.log.length, 0);
    });
  }

  it('stops every command that reads it, naming the file and line, and leaves the file as it was', async () => {
    const text = 'current-context: a\ncontexts:\n  - name: a\n    server: http://x:1\n    insecure: maybe\n';
    const { home, path } = homeWith(text);
    const leaseId = silent.mint({ seconds: 600 });
    const commands = [
      ['lease', 'extend', leaseId],
      ['lease', 'inspect', leaseId],
      ['lease', 'watch', leaseId, '--for', '30s'],
      ['config', 'view'],
      ['config', 'get-contexts'],
      ['config', 'current-context'],
      ['config', 'use-context', 'a'],
      ['config', 'set-context', 'a', '--server', 'http://y:1'],
      ['config', 'delete-context', 'a'],
    ];
    const results = await Promise.all(commands.map((args) => cli(args, { HOME: home, QUEEN_SERVER: silent.url })));
    for (const [index, result] of results.entries()) {
      const command = commands[index]!.join(' ');
      assert.equal(result.code, 1, `${command}: ${result.stderr}`);
      assert.equal(result.stdout, '', command);
      assert.match(
        result.stderr,
        new RegExp(`^queenctl: the config file ${literal(path)}:5: insecure must be true or false\n`),
        command,
      );
    }
    assert.equal(readFileSync(path, 'utf8'), text);
    assert.equal(silent.log.length, 0);
  });
});

/**
 * Every path below the scratch root, with each file's text: the proof that a failed config write
 * put nothing anywhere (HOME, the XDG directories and TMPDIR of the run all live under it).
 */
function snapshot(root: string): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
}

/**
 * Runs `work` with the effective user `nobody` when this process is root (as the suite is here),
 * so that a directory of root's, mode 0755, answers mkdir with a real EACCES; a user that is no
 * root gets that from the directory as it is. seteuid is undone whatever happens.
 */
async function asUnprivileged<T>(work: () => Promise<T>): Promise<T> {
  if (process.geteuid?.() !== 0) return work();
  process.seteuid?.(65534);
  try {
    return await work();
  } finally {
    process.seteuid?.(0);
  }
}

describe('a config directory that cannot be made', () => {
  const elsewhere = 'point --config or QUEEN_CONFIG at a file in a writable directory, or set HOME to one';
  /** A scratch root (0755, so `nobody` may look in) holding the run's XDG directories and TMPDIR. */
  const scratchRoot = (): { root: string; env: Record<string, string> } => {
    const root = mkdtempSync(join(tmpdir(), 'queenctl-nowhere-'));
    chmodSync(root, 0o755);
    for (const name of ['cache', 'config', 'tmp']) mkdirSync(join(root, name), { mode: 0o755 });
    const env = {
      XDG_CACHE_HOME: join(root, 'cache'),
      XDG_CONFIG_HOME: join(root, 'config'),
      TMPDIR: join(root, 'tmp'),
    };
    return { root, env };
  };
  const cases: {
    what: string;
    /** The HOME to run with, made under `root`; and the line stderr must be. */
    setUp(root: string): { home: string; line: string };
    privileged?: boolean;
  }[] = [
    {
      what: 'HOME is a file',
      setUp: (root) => {
        const home = join(root, 'home-file');
        writeFileSync(home, '');
        return {
          home,
          line: `cannot create the config directory ${home}/.queen: ${home} exists and is not a directory (ENOTDIR)`,
        };
      },
    },
    {
      what: 'HOME is missing',
      setUp: (root) => {
        const home = join(root, 'no-such-home');
        return { home, line: `cannot create the config directory ${home}/.queen: ${home} does not exist` };
      },
    },
    {
      what: 'the config directory is a file',
      setUp: (root) => {
        const home = join(root, 'home');
        mkdirSync(home, { mode: 0o755 });
        writeFileSync(join(home, '.queen'), 'not a directory');
        return {
          home,
          line: `cannot create the config directory ${home}/.queen: it exists and is not a directory (ENOTDIR)`,
        };
      },
    },
    {
      what: 'HOME cannot be written (EACCES: mkdir as the user nobody in a directory of root, mode 0755)',
      privileged: false,
      setUp: (root) => {
        const home = join(root, 'home');
        mkdirSync(home, { mode: 0o755 });
        return { home, line: `cannot create the config directory ${home}/.queen: permission denied (EACCES)` };
      },
    },
    {
      what: 'HOME=/proc (mkdir answers ENOENT below a directory that exists)',
      setUp: () => ({
        home: '/proc',
        line: 'cannot create the config directory /proc/.queen: the file system there takes no new entries (ENOENT)',
      }),
    },
    {
      what: 'HOME=/sys/kernel (sysfs: mkdir answers EPERM)',
      setUp: () => ({
        home: '/sys/kernel',
        line: 'cannot create the config directory /sys/kernel/.queen: not permitted there (EPERM)',
      }),
    },
  ];
  for (const { what, setUp, privileged } of cases) {
    for (const output of [[], ['-o', 'json']]) {
      const name = `${what}${output.length ? ', -o json' : ''}: set-context exits 1 with one line, writing nothing`;
      it(name, async () => {
        const { root, env } = scratchRoot();
        const { home, line } = setUp(root);
        const before = snapshot(root);
        const args = ['config', 'set-context', 'a', '--server', 'http://127.0.0.1:1', ...output];
        // A hang is what this guards against: ten seconds is a failure on any machine.
        const attempt = (): Promise<InProcessResult> =>
          runInProcess(args, { env: { ...env, HOME: home }, timeoutMs: 10_000 });
        const result = privileged === false ? await asUnprivileged(attempt) : await attempt();
        assert.equal(result.killed, false, 'ended by itself');
        assert.equal(result.code, 1, result.stderr);
        assert.equal(result.stdout, '');
        assert.equal(result.stderr, `queenctl: ${line}; ${elsewhere}\n`);
        assert.deepEqual(snapshot(root), before, 'nothing was written under the scratch root');
      });
    }
  }

  it('--config in a directory where no file can be made (/sys: EACCES for root too): one line, exit 1', async () => {
    const result = await cli([
      '--config',
      '/sys/kernel/queenctl.yaml',
      'config',
      'set-context',
      'a',
      '--server',
      'http://127.0.0.1:1',
    ]);
    assert.equal(result.code, 1, result.stderr);
    assert.equal(
      result.stderr,
      `queenctl: cannot write the config file /sys/kernel/queenctl.yaml: permission denied (EACCES); ${elsewhere}\n`,
    );
  });
});
