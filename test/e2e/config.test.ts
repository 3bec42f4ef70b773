/**
 * Contexts end to end: queenctl in-process, two simulators standing for two brokers, and config
 * files in a scratch HOME. Which simulator got a request, with which bearer, is the evidence.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  constants,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  watch,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { SIGNAL_GRACE_MS } from '../../src/cli.js';
import { FakeClock } from '../support/fakes.js';
import { type InProcessOptions, type RunningInProcess, runInProcess, startInProcess } from '../support/in-process.js';
import { GO_EXAMPLE } from '../support/go-config.js';

const TOKENS = ['token-a', 'token-b', 'token-env', 'token-flag', 'token-file', 'token-keychain'];
let simA: Simulator;
let simB: Simulator;
let home: string;
let tokenFile: string;

/** A fresh HOME with ~/.queen/config.yaml holding `text`. */
function homeWith(text: string): string {
  const directory = mkdtempSync(join(tmpdir(), 'queenctl-home-'));
  mkdirSync(join(directory, '.queen'));
  writeFileSync(join(directory, '.queen', 'config.yaml'), text);
  return directory;
}

const cli = (args: string[], env: InProcessOptions['env'] = {}) => runInProcess(args, { env: { HOME: home, ...env } });

/** A lease both brokers hold, so which one renews it is up to queenctl alone. */
function mintOnBoth(): string {
  const leaseId = simA.mint({ seconds: 3600 });
  simB.mint({ leaseId, seconds: 3600 });
  return leaseId;
}

/** Requests for this lease, at either broker. */
function requestsFor(leaseId: string) {
  return [
    ...simA.log.map((entry) => ({ sim: 'A' as const, entry })),
    ...simB.log.map((entry) => ({ sim: 'B' as const, entry })),
  ].filter(({ entry }) => entry.leaseId === leaseId);
}

/** Which broker got the one request for this lease, and with which bearer. */
function receiver(leaseId: string): { sim: 'A' | 'B'; authorization: string | null } {
  const entries = requestsFor(leaseId);
  assert.equal(entries.length, 1, `exactly one request, got ${entries.length}`);
  return { sim: entries[0]!.sim, authorization: entries[0]!.entry.authorization };
}

before(async () => {
  const tokens = Object.fromEntries(TOKENS.map((token) => [token, { role: 'read-write' }]));
  simA = await startSimulator({ tokens });
  simB = await startSimulator({ tokens });
  const scratch = mkdtempSync(join(tmpdir(), 'queenctl-tokens-'));
  tokenFile = join(scratch, 'flag.token');
  writeFileSync(tokenFile, 'token-file\n', { mode: 0o600 });
  const bToken = join(scratch, 'b.token');
  writeFileSync(bToken, 'token-b\n', { mode: 0o600 });
  home = homeWith(`current-context: a
contexts:
  - name: a
    server: ${simA.url}
    token-ref: literal:token-a
  - name: b
    server: ${simB.url}
    token-ref: file://${bToken}
`);
});
after(async () => {
  await simA.close();
  await simB.close();
});

// Each test has its own lease id, so they run side by side and read the brokers' logs apart.
describe('precedence, observed at the brokers', { concurrency: true }, () => {
  const matrix: Array<{ name: string; flags: string[]; env: Record<string, string>; sim: 'A' | 'B'; token: string }> = [
    { name: "the file's current-context", flags: [], env: {}, sim: 'A', token: 'token-a' },
    { name: 'QUEEN_CONTEXT over the file', flags: [], env: { QUEEN_CONTEXT: 'b' }, sim: 'B', token: 'token-b' },
    {
      name: '--context over QUEEN_CONTEXT',
      flags: ['--context', 'a'],
      env: { QUEEN_CONTEXT: 'b' },
      sim: 'A',
      token: 'token-a',
    },
    {
      name: "QUEEN_SERVER over the context keeps the context's token",
      flags: ['--context', 'b'],
      env: { QUEEN_SERVER: '<A>' },
      sim: 'A',
      token: 'token-b',
    },
    {
      name: "QUEEN_TOKEN over the context's token",
      flags: [],
      env: { QUEEN_CONTEXT: 'b', QUEEN_TOKEN: 'token-env' },
      sim: 'B',
      token: 'token-env',
    },
    {
      name: "--server over QUEEN_SERVER, still the context's token",
      flags: ['--server', '<B>'],
      env: { QUEEN_SERVER: '<A>' },
      sim: 'B',
      token: 'token-a',
    },
    {
      name: '--token over QUEEN_TOKEN',
      flags: ['--token', 'token-flag'],
      env: { QUEEN_TOKEN: 'token-env' },
      sim: 'A',
      token: 'token-flag',
    },
    {
      name: '--token-file over QUEEN_TOKEN',
      flags: ['--token-file', '<FILE>'],
      env: { QUEEN_TOKEN: 'token-env' },
      sim: 'A',
      token: 'token-file',
    },
    {
      name: 'flags over everything',
      flags: ['--context', 'a', '--server', '<B>', '--token', 'token-flag'],
      env: { QUEEN_CONTEXT: 'b', QUEEN_SERVER: '<A>', QUEEN_TOKEN: 'token-env' },
      sim: 'B',
      token: 'token-flag',
    },
  ];
  const fill = (text: string): string =>
    text.replace('<A>', simA.url).replace('<B>', simB.url).replace('<FILE>', tokenFile);
  for (const row of matrix) {
    it(row.name, async () => {
      const env = Object.fromEntries(Object.entries(row.env).map(([key, value]) => [key, fill(value)]));
      const leaseId = mintOnBoth();
      const result = await cli(['lease', 'extend', leaseId, ...row.flags.map(fill)], env);
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(receiver(leaseId), { sim: row.sim, authorization: `Bearer ${row.token}` });
    });
  }

  it('an unknown --context stops before anything is sent, listing the known ones', async () => {
    const leaseId = mintOnBoth();
    const result = await cli(['lease', 'extend', leaseId, '--context', 'c']);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /no context named "c" \(from --context\)/);
    assert.match(result.stderr, /known contexts in .*: a, b/);
    assert.equal(requestsFor(leaseId).length, 0);
  });
});

describe("the Go queenctl's config file, unchanged", { concurrency: true }, () => {
  it("is read as it is: contexts, the current one, and prod's keychain token through secret-tool", async () => {
    const goHome = homeWith(GO_EXAMPLE);
    const leaseId = mintOnBoth();
    const contexts = await runInProcess(['config', 'get-contexts', '-o', 'json'], { env: { HOME: goHome } });
    assert.equal(contexts.code, 0, contexts.stderr);
    assert.deepEqual(JSON.parse(contexts.stdout), [
      {
        current: true,
        name: 'prod',
        server: 'https://queen.prod.internal:6632',
        'token-ref': 'keychain://prod',
        insecure: false,
        cacert: null,
      },
      {
        current: false,
        name: 'local',
        server: 'http://localhost:6632',
        'token-ref': null,
        insecure: false,
        cacert: null,
      },
    ]);
    // A stand-in for the Secret Service's tool that knows one item: service queenctl, account prod.
    const bin = mkdtempSync(join(tmpdir(), 'queenctl-bin-'));
    writeFileSync(
      join(bin, 'secret-tool'),
      '#!/bin/sh\n[ "$*" = "lookup service queenctl username prod" ] && printf token-keychain && exit 0\nexit 1\n',
    );
    chmodSync(join(bin, 'secret-tool'), 0o755);
    const path = `${bin}${delimiter}${process.env.PATH ?? ''}`;
    // Overriding the server keeps prod's token: the keychain's, read through secret-tool.
    const result = await runInProcess(['lease', 'extend', leaseId, '--server', simA.url], {
      env: { HOME: goHome, PATH: path },
    });
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(receiver(leaseId), { sim: 'A', authorization: 'Bearer token-keychain' });
    // And use-context writes it back with its comment and every key in place.
    assert.equal((await runInProcess(['config', 'use-context', 'local'], { env: { HOME: goHome } })).code, 0);
    const written = readFileSync(join(goHome, '.queen', 'config.yaml'), 'utf8');
    assert.equal(
      written,
      GO_EXAMPLE.replace('current-context: prod', 'current-context: local').replace(
        'keychain://prod     #',
        'keychain://prod #',
      ),
    );
  });

  it('without secret-tool, keychain:// fails with exit 1 and the alternatives', async () => {
    const goHome = homeWith(GO_EXAMPLE);
    const leaseId = mintOnBoth();
    const bin = mkdtempSync(join(tmpdir(), 'queenctl-bin-'));
    const result = await runInProcess(['lease', 'extend', leaseId, '--server', simA.url], {
      env: { HOME: goHome, PATH: bin },
    });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /keychain:\/\/prod, which needs `secret-tool`, and it is not installed/);
    assert.match(result.stderr, /file:\/\/\/abs\/path/);
    assert.equal(requestsFor(leaseId).length, 0);
  });
});

describe('config verbs', { concurrency: true }, () => {
  it('set-context, use-context, current-context, get-contexts and delete-context, end to end', async () => {
    const scratchHome = mkdtempSync(join(tmpdir(), 'queenctl-home-'));
    const run = (args: string[], env: Record<string, string> = {}) =>
      runInProcess(['config', ...args], { env: { HOME: scratchHome, ...env } });
    const path = join(scratchHome, '.queen', 'config.yaml');

    const created = await run(['set-context', 'a', '--server', simA.url, '--token-ref', 'literal:token-a']);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /Context "a" created/);
    assert.match(created.stderr, /warning: the token is now kept in clear text/);
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.equal((await run(['set-context', 'b', '--server', simB.url])).code, 0);

    const none = await run(['current-context']);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no context is chosen/);

    assert.equal((await run(['use-context', 'b'])).code, 0);
    assert.equal((await run(['current-context'])).stdout, 'b\n');
    assert.deepEqual(JSON.parse((await run(['current-context', '-o', 'json'], { QUEEN_CONTEXT: 'a' })).stdout), {
      name: 'a',
      from: 'env',
    });

    const table = await run(['get-contexts', '-o', 'table']);
    assert.match(
      table.stdout,
      /^CURRENT\s+NAME\s+SERVER\s+TOKEN\n\s+a\s+http:\S+\s+literal:\[redacted\]\n\*\s+b\s+http:\S+\s+-\n$/,
    );
    assert.ok(!table.stdout.includes('token-a'));

    const unknown = await run(['use-context', 'c']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no context named "c"[\s\S]*known contexts in .*: a, b/);

    const deleted = await run(['delete-context', 'b']);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(deleted.stderr, /"b" was the current-context/);
    const dangling = await runInProcess(['lease', 'extend', mintOnBoth()], { env: { HOME: scratchHome } });
    assert.equal(dangling.code, 1, 'a deleted current context stops commands rather than choose another broker');
    assert.deepEqual(
      JSON.parse((await run(['get-contexts'])).stdout).map((context: { name: string }) => context.name),
      ['a'],
    );
  });

  it('set-context changes one field and keeps the other contexts, unknown keys and comments', async () => {
    const original = `# Team config: ask #queen-ops before editing.
current-context: a
contexts:
  - name: a
    server: http://a.example:6632   # primary
    token-ref: env
    x-note: kept
  - name: b
    server: http://b.example:6632
extra: {keep: true}
`;
    const editHome = homeWith(original);
    chmodSync(join(editHome, '.queen', 'config.yaml'), 0o644);
    const result = await runInProcess(
      ['config', 'set-context', 'b', '--server', 'https://b1.example:6632,https://b2.example:6632', '--insecure'],
      { env: { HOME: editHome } },
    );
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /warning: context "b" skips TLS verification/);
    const written = readFileSync(join(editHome, '.queen', 'config.yaml'), 'utf8');
    assert.equal(
      written,
      original
        .replace('http://a.example:6632   # primary', 'http://a.example:6632 # primary')
        .replace(
          'server: http://b.example:6632',
          'server: https://b1.example:6632,https://b2.example:6632\n    insecure: true',
        )
        .replace('extra: {keep: true}', 'extra: { keep: true }'),
    );
    assert.equal(statSync(join(editHome, '.queen', 'config.yaml')).mode & 0o777, 0o600);
  });

  it('view redacts literal tokens, keeps comments for people, and prints JSON for programs', async () => {
    const viewHome = homeWith(
      '# ops notes\ncurrent-context: a\ncontexts:\n  - name: a\n' +
        '    token-ref: literal:s3cr3t-value # do not share\n    server: http://x:1\n',
    );
    const people = await runInProcess(['config', 'view', '-o', 'table'], { env: { HOME: viewHome } });
    assert.equal(people.code, 0, people.stderr);
    assert.equal(
      people.stdout,
      '# ops notes\ncurrent-context: a\ncontexts:\n  - name: a\n' +
        '    token-ref: literal:[redacted] # do not share\n    server: http://x:1\n',
    );
    const programs = await runInProcess(['config', 'view'], { env: { HOME: viewHome } });
    assert.deepEqual(JSON.parse(programs.stdout), {
      'current-context': 'a',
      contexts: [{ name: 'a', 'token-ref': 'literal:[redacted]', server: 'http://x:1' }],
    });
    assert.ok(!(people.stdout + programs.stdout + people.stderr + programs.stderr).includes('s3cr3t'));
  });

  it('a missing file is an empty config; a malformed one is exit 1 naming the file and line', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'queenctl-home-'));
    const view = await runInProcess(['config', 'view'], { env: { HOME: empty } });
    assert.equal(view.code, 0, view.stderr);
    assert.deepEqual(JSON.parse(view.stdout), { 'current-context': null, contexts: [] });
    const broken = homeWith('current-context: a\ncontexts:\n  - name: a\n    insecure: maybe\n');
    const leaseId = mintOnBoth();
    for (const args of [
      ['config', 'view'],
      ['lease', 'extend', leaseId],
    ]) {
      const result = await runInProcess(args, { env: { HOME: broken } });
      assert.equal(result.code, 1, args.join(' '));
      assert.match(
        result.stderr,
        new RegExp(
          `the config file ${join(broken, '.queen', 'config.yaml').replaceAll('.', '\\.')}:4: ` +
            'insecure must be true or false',
        ),
      );
    }
    assert.equal(requestsFor(leaseId).length, 0);
  });

  it('replaces the file whole, never in place: a signal or a crash leaves the old file or the new', async () => {
    // Deterministic, where killing runs at random moments is not: inotify reports every write to
    // the directory's entries, and a write in place (open, truncate, write: the window in which a
    // signal leaves half a file) is a "change" of config.yaml itself. The atomic write is a
    // "change" of a temporary file, then a rename onto config.yaml (src/config/edit.ts).
    const scratchHome = mkdtempSync(join(tmpdir(), 'queenctl-atomic-'));
    const directory = join(scratchHome, '.queen');
    const setContext = (name: string) =>
      runInProcess(['config', 'set-context', name, '--server', 'http://127.0.0.1:1'], { env: { HOME: scratchHome } });
    assert.equal((await setContext('c0')).code, 0);
    const events: string[] = [];
    let renamedOnto = 0;
    let allRenamed: () => void = () => {};
    const renamed = new Promise<void>((resolve) => (allRenamed = resolve));
    const watcher = watch(directory, (event, file) => {
      events.push(`${event} ${file}`);
      if (event === 'rename' && file === 'config.yaml' && ++renamedOnto === 3) allRenamed();
    });
    try {
      for (const name of ['c1', 'c2', 'c3']) {
        const written = await setContext(name);
        assert.equal(written.code, 0, written.stderr);
      }
      // The watcher hears of the last rename on a later turn of the event loop.
      const timeLimit = new AbortController();
      await Promise.race([
        renamed.finally(() => timeLimit.abort()),
        delay(20_000, undefined, { signal: timeLimit.signal }).then(() =>
          assert.fail(`three renames onto config.yaml:\n${events.join('\n')}`),
        ),
      ]);
    } finally {
      watcher.close();
    }
    assert.deepEqual(
      events.filter((event) => event === 'change config.yaml'),
      [],
      `config.yaml was written in place:\n${events.join('\n')}`,
    );
    const temporary = /^change \.config\.yaml\.[0-9a-f]{12}\.tmp$/;
    assert.ok(
      events.some((event) => temporary.test(event)),
      `written through a temporary file:\n${events.join('\n')}`,
    );
    assert.deepEqual(readdirSync(directory), ['config.yaml'], 'no temporary file left');
    const read = await runInProcess(['config', 'get-contexts', '-o', 'json'], { env: { HOME: scratchHome } });
    assert.deepEqual(
      (JSON.parse(read.stdout) as { name: string }[]).map((context) => context.name),
      ['c0', 'c1', 'c2', 'c3'],
    );
  });
});

/**
 * A FIFO as the config file: reading it waits in the thread pool for a writer that never comes
 * (files.ts), the way a hung network mount would. `unblock` lets the waiting open() return.
 */
function fifoConfig(): { path: string; unblock(): void } {
  const path = join(mkdtempSync(join(tmpdir(), 'queenctl-fifo-')), 'config.yaml');
  execFileSync('mkfifo', [path]);
  return {
    path,
    unblock: () => {
      try {
        // Non-blocking: with a reader waiting this opens at once; with none, ENXIO and nothing to do.
        closeSync(openSync(path, constants.O_WRONLY | constants.O_NONBLOCK));
      } catch {
        // No reader left.
      }
    },
  };
}

/** Waits until a thread of this process waits in open() of a FIFO (Linux: its wchan says so). */
async function untilWaitingOnFifo(): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const waiting = readdirSync('/proc/self/task').some((task) => {
      try {
        return readFileSync(`/proc/self/task/${task}/wchan`, 'utf8') === 'wait_for_partner';
      } catch {
        return false;
      }
    });
    if (waiting) return;
    if (Date.now() > deadline) throw new Error('no thread of this process came to wait on the FIFO');
    await delay(10);
  }
}

/** Whether the run has ended, looked at after everything already due has run. */
async function endedYet(run: RunningInProcess): Promise<boolean> {
  let ended = false;
  void run.exited.then(() => (ended = true));
  await new Promise((resolve) => setImmediate(resolve));
  return ended;
}

describe('a signal while a config command waits on the file system', () => {
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const) {
    it(`${signal}: the run has ${SIGNAL_GRACE_MS} ms of the clock to finish, then ends with ${code}`, async () => {
      const fifo = fifoConfig();
      const clock = new FakeClock();
      const run = startInProcess(['--config', fifo.path, 'config', 'view'], { clock, env: { HOME: home } });
      try {
        await untilWaitingOnFifo();
        run.kill(signal);
        assert.equal(await endedYet(run), false, 'the grace has only begun');
        clock.advance(SIGNAL_GRACE_MS - 1);
        assert.equal(await endedYet(run), false, 'the grace is not over');
        clock.advance(1);
        const result = await run.exited;
        assert.equal(result.code, code, result.stderr);
        assert.equal(result.stdout, '');
      } finally {
        fifo.unblock();
      }
    });
  }

  it('a second signal ends it at once, with the status of that signal, the clock standing still', async () => {
    const fifo = fifoConfig();
    const clock = new FakeClock();
    const run = startInProcess(['--config', fifo.path, 'config', 'view'], { clock, env: { HOME: home } });
    try {
      await untilWaitingOnFifo();
      run.kill('SIGINT');
      assert.equal(await endedYet(run), false);
      run.kill('SIGTERM');
      assert.equal((await run.exited).code, 143);
    } finally {
      fifo.unblock();
    }
  });

  it('a run that finishes within the grace ends by itself, with the signal status and its output', async () => {
    const fifo = fifoConfig();
    const clock = new FakeClock();
    const run = startInProcess(['--config', fifo.path, 'config', 'current-context'], { clock, env: { HOME: home } });
    await untilWaitingOnFifo();
    run.kill('SIGTERM');
    // The writer comes within the grace: the command reads its file and answers.
    const fd = openSync(fifo.path, constants.O_WRONLY);
    writeFileSync(fd, 'current-context: a\ncontexts:\n  - name: a\n    server: http://127.0.0.1:1\n');
    closeSync(fd);
    const result = await run.exited;
    assert.equal(result.code, 143, result.stderr);
    assert.equal(result.stdout, 'a\n');
    assert.deepEqual(clock.sleeps, [SIGNAL_GRACE_MS], 'the grace was on the run clock');
  });
});
