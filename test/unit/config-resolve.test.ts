/**
 * Where a run connects and with which token: the Go queenctl's precedence, every token source,
 * the keychain through the platform's tool, and the warnings an operator must see.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { SecretToolRunner } from '../../src/config/keychain.js';
import { isLoopbackHost, parseServers, resolveConnection, type ConnectionFlags } from '../../src/config/resolve.js';
import { UsageError } from '../../src/exit.js';
import { usageError } from '../support/shared.js';

const directory = mkdtempSync(join(tmpdir(), 'queenctl-resolve-'));
const tokenFile = join(directory, 'b.token');
writeFileSync(tokenFile, 'token-b\n', { mode: 0o600 });
const configPath = join(directory, 'config.yaml');
writeFileSync(
  configPath,
  `current-context: a
contexts:
  - name: a
    server: http://a.local:6632
    token-ref: literal:token-a
  - name: b
    server: https://b.internal:6632
    token-ref: file://${tokenFile}
  - name: env
    server: http://localhost:1
    token-ref: env
  - name: vault
    token-ref: keychain://ops/queen-prod
`,
  // It holds a literal token: at 0644 every run would warn that others can read it.
  { mode: 0o600 },
);

const resolve = (
  flags: ConnectionFlags,
  env: NodeJS.ProcessEnv = {},
  runSecretTool?: SecretToolRunner,
  platform: NodeJS.Platform = 'linux',
) =>
  resolveConnection(
    { config: configPath, ...flags },
    { HOME: directory, ...env },
    { platform, ...(runSecretTool ? { runSecretTool } : {}) },
  );

describe("which setting named the server, and the context's own (version says both: issue 39)", () => {
  it('the context, QUEEN_SERVER over it, --server over both', async () => {
    const fromContext = await resolve({});
    assert.deepEqual([fromContext.serverFrom, fromContext.contextServer], ['context', 'http://a.local:6632']);
    const fromEnv = await resolve({}, { QUEEN_SERVER: 'http://localhost:9' });
    assert.deepEqual(
      [fromEnv.server, fromEnv.serverFrom, fromEnv.contextServer],
      ['http://localhost:9', 'QUEEN_SERVER', 'http://a.local:6632'],
    );
    const fromFlag = await resolve({ server: 'http://localhost:8' }, { QUEEN_SERVER: 'http://localhost:9' });
    assert.deepEqual([fromFlag.server, fromFlag.serverFrom], ['http://localhost:8', '--server']);
    const noServer = await resolve({ context: 'vault' }, {}, async () => ({ code: 0, stdout: 'token-v', stderr: '' }));
    assert.deepEqual([noServer.serverFrom, noServer.contextServer], ['default', undefined]);
  });
});

describe('precedence: file, QUEEN_CONTEXT, --context, env, flags', () => {
  const cases: Array<[string, ConnectionFlags, NodeJS.ProcessEnv, string, string | undefined]> = [
    ["the file's current-context", {}, {}, 'http://a.local:6632', 'token-a'],
    ['QUEEN_CONTEXT over the file', {}, { QUEEN_CONTEXT: 'b' }, 'https://b.internal:6632', 'token-b'],
    ['--context over QUEEN_CONTEXT', { context: 'a' }, { QUEEN_CONTEXT: 'b' }, 'http://a.local:6632', 'token-a'],
    [
      'QUEEN_SERVER over the context, keeping its token',
      { context: 'b' },
      { QUEEN_SERVER: 'http://localhost:9' },
      'http://localhost:9',
      'token-b',
    ],
    ["QUEEN_TOKEN over the context's token", {}, { QUEEN_TOKEN: 'token-env' }, 'http://a.local:6632', 'token-env'],
    [
      "--server over QUEEN_SERVER, keeping the context's token",
      { server: 'http://localhost:8' },
      { QUEEN_SERVER: 'http://localhost:9' },
      'http://localhost:8',
      'token-a',
    ],
    [
      '--token over QUEEN_TOKEN',
      { token: 'token-flag' },
      { QUEEN_TOKEN: 'token-env' },
      'http://a.local:6632',
      'token-flag',
    ],
    ['--token-file over QUEEN_TOKEN', { tokenFile }, { QUEEN_TOKEN: 'token-env' }, 'http://a.local:6632', 'token-b'],
    [
      'empty variables count as unset',
      {},
      { QUEEN_CONTEXT: '', QUEEN_SERVER: ' ', QUEEN_TOKEN: '' },
      'http://a.local:6632',
      'token-a',
    ],
  ];
  for (const [name, flags, env, server, token] of cases) {
    it(name, async () => {
      const connection = await resolve(flags, env);
      assert.equal(connection.server, server);
      assert.equal(connection.token, token);
    });
  }

  it('without a config file: QUEEN_SERVER, else http://localhost:6632, and no token', async () => {
    // The default path (HOME has no .queen): the only config that may be missing.
    const bare = { config: undefined };
    assert.equal((await resolve(bare)).server, 'http://localhost:6632');
    assert.equal((await resolve(bare)).token, undefined);
    assert.equal((await resolve(bare, { QUEEN_SERVER: 'https://q:1' })).server, 'https://q:1');
  });

  it('a context named by any source must exist, and the error lists the known ones', async () => {
    for (const [flags, env, how] of [
      [{ context: 'prdo' }, {}, '--context'],
      [{}, { QUEEN_CONTEXT: 'prdo' }, 'QUEEN_CONTEXT'],
    ] as const) {
      const error = await usageError(resolve(flags, env));
      assert.match(error.message, new RegExp(`no context named "prdo" \\(from ${how}\\)`));
      assert.match(error.hint ?? '', /a, b, env, vault/);
    }
    const dangling = join(directory, 'dangling.yaml');
    writeFileSync(dangling, 'current-context: gone\ncontexts:\n  - name: a\n');
    const error = await usageError(resolve({ config: dangling }));
    assert.match(error.message, /no context named "gone" \(from the current-context of /);
    assert.match(error.hint ?? '', /queenctl config use-context <name>/);
  });
});

describe('contexts but none chosen', () => {
  const unchosen = join(directory, 'unchosen.yaml');
  writeFileSync(unchosen, 'contexts:\n  - name: a\n    server: http://a.local:6632\n  - name: b\n');
  const empty = join(directory, 'empty-contexts.yaml');
  writeFileSync(empty, 'contexts: []\n');

  it('stops a command that needs a broker, saying how to choose one, rather than use the default', async () => {
    const error = await usageError(resolve({ config: unchosen }));
    assert.equal(
      error.message,
      `no context is chosen: ${unchosen} has contexts but no current-context, ` +
        'and none of --context, QUEEN_CONTEXT, --server or QUEEN_SERVER is set',
    );
    assert.match(error.hint ?? '', /queenctl config use-context <name> \(known contexts in .*: a, b\)/);
    assert.match(error.hint ?? '', /--context <name> or --server <url>/);
  });

  it('any of --context, QUEEN_CONTEXT, --server or QUEEN_SERVER chooses, as before', async () => {
    assert.equal((await resolve({ config: unchosen, context: 'a' })).server, 'http://a.local:6632');
    assert.equal((await resolve({ config: unchosen }, { QUEEN_CONTEXT: 'a' })).server, 'http://a.local:6632');
    assert.equal((await resolve({ config: unchosen, server: 'http://localhost:8' })).server, 'http://localhost:8');
    assert.equal(
      (await resolve({ config: unchosen }, { QUEEN_SERVER: 'http://localhost:9' })).server,
      'http://localhost:9',
    );
    // A token alone names no broker.
    await usageError(resolve({ config: unchosen, token: 'token-flag' }));
  });

  it('a file without contexts, or no file, still means the default broker', async () => {
    assert.equal((await resolve({ config: empty })).server, 'http://localhost:6632');
    assert.equal((await resolve({ config: undefined })).server, 'http://localhost:6632');
  });
});

describe('tokens', () => {
  it('token-ref env reads QUEEN_TOKEN, and says so when it is unset', async () => {
    assert.equal((await resolve({ context: 'env' }, { QUEEN_TOKEN: 'from-env' })).token, 'from-env');
    const error = await usageError(resolve({ context: 'env' }));
    assert.match(error.message, /token-ref of context "env" is env, but QUEEN_TOKEN is not set/);
  });

  it('a token file loses its trailing newline, and nothing else', async () => {
    const crlf = join(directory, 'crlf.token');
    writeFileSync(crlf, 'abc.def\r\n', { mode: 0o600 });
    assert.equal((await resolve({ tokenFile: crlf })).token, 'abc.def');
  });

  it('a token with a space or a second line is refused without being shown', async () => {
    const twoLines = join(directory, 'two.token');
    writeFileSync(twoLines, 'first-secret-line\nsecond-secret-line\n', { mode: 0o600 });
    const error = await usageError(resolve({ tokenFile: twoLines }));
    assert.match(error.message, /holds spaces, line breaks or other characters/);
    assert.ok(!`${error.message}${error.hint}`.includes('secret-line'));
    const spaced = await usageError(resolve({ token: 'Bearer abc' }));
    assert.ok(!spaced.message.includes('abc'));
    await usageError(resolve({ token: 't', tokenFile }));
  });

  it("keychain:// asks the platform's tool for service and account (go-keyring's attributes)", async () => {
    const calls: Array<[string, string[]]> = [];
    const runner: SecretToolRunner = async (file, args) => {
      calls.push([file, args]);
      return { code: 0, stdout: 'from-keychain\n', stderr: '' };
    };
    assert.equal((await resolve({ context: 'vault' }, {}, runner, 'linux')).token, 'from-keychain');
    assert.equal((await resolve({ context: 'vault' }, {}, runner, 'darwin')).token, 'from-keychain');
    assert.deepEqual(calls, [
      ['secret-tool', ['lookup', 'service', 'ops', 'username', 'queen-prod']],
      ['security', ['find-generic-password', '-s', 'ops', '-a', 'queen-prod', '-w']],
    ]);
  });

  it('keychain:// without the tool, without the item, or on another platform: what to do instead', async () => {
    const missing = await usageError(
      resolve({ context: 'vault' }, {}, async () => ({ code: null, stdout: '', stderr: '' })),
    );
    assert.match(missing.message, /needs `secret-tool`, and it is not installed/);
    assert.match(missing.hint ?? '', /libsecret-tools.*file:\/\/\/abs\/path.*env.*--token-file/);
    const absent = await usageError(
      resolve({ context: 'vault' }, {}, async () => ({ code: 1, stdout: '', stderr: '' })),
    );
    assert.match(absent.message, /found no such item \(service ops, account queen-prod\)/);
    assert.match(absent.hint ?? '', /secret-tool store/);
    const windows = await usageError(resolve({ context: 'vault' }, {}, undefined, 'win32'));
    assert.match(windows.message, /cannot read a keychain on win32/);
    assert.match(windows.hint ?? '', /--token-file/);
  });
});

describe('servers and warnings', () => {
  it('several replicas, comma-separated, in order; no credentials in URLs', () => {
    assert.deepEqual(parseServers('https://a:1/, https://b:2,https://a:1', '--server'), ['https://a:1', 'https://b:2']);
    assert.throws(() => parseServers('https://a:1,,https://b:2', '--server'), /empty entry/);
    assert.throws(() => parseServers('ftp://a', '--server'), /http:\/\/ or https:\/\//);
    assert.throws(
      () => parseServers('https://user:hunter2@a:1', '--server'),
      (error: unknown) => error instanceof UsageError && !error.message.includes('hunter2'),
    );
  });

  it('warns when a token goes over plain http to a host that is not loopback', async () => {
    const remote = await resolve({ context: 'a' });
    assert.equal(remote.warnings.length, 1);
    assert.match(remote.warnings[0] ?? '', /bearer token goes over plain http to a\.local:6632/);
    assert.deepEqual((await resolve({ context: 'a', server: 'http://127.0.0.1:6632' })).warnings, []);
    assert.deepEqual(
      (await resolve({ server: 'http://a.local:6632', config: undefined })).warnings,
      [],
      'no token, nothing to leak',
    );
    for (const host of ['localhost', '127.0.0.1', '127.8.9.10', '[::1]', 'queen.localhost'])
      assert.ok(isLoopbackHost(host), host);
    for (const host of ['10.0.0.1', 'localhost.example.com', '128.0.0.1', 'queen'])
      assert.ok(!isLoopbackHost(host), host);
  });

  it("--insecure (or a context's insecure: true) warns, for https only", async () => {
    assert.match(
      (await resolve({ context: 'b', insecure: true })).warnings.join('\n'),
      /--insecure: the TLS certificate of b\.internal:6632 is not verified/,
    );
    assert.deepEqual((await resolve({ context: 'b' })).warnings, []);
  });

  it('the -v notes say where each setting came from, never the token', async () => {
    const { notes } = await resolve({}, { QUEEN_CONTEXT: 'b' });
    const text = notes.join('\n');
    assert.match(text, /context "b" from QUEEN_CONTEXT/);
    assert.match(text, /server https:\/\/b\.internal:6632 from context "b"/);
    assert.match(text, /token from the token-ref of context "b"/);
    assert.ok(!text.includes('token-b'));
    assert.ok(
      !(await resolve({ context: 'a' })).notes.join('\n').includes('token-a'),
      'a literal ref is not shown either',
    );
  });
});
