/**
 * The config file: reading the Go queenctl's file as it is, refusing a malformed one by file and
 * line, and writes that keep everything they were not asked to change.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { EditableConfig } from '../../src/config/edit.js';
import { configPathFor, parseConfig, readConfigFile } from '../../src/config/file.js';
import { redactData, redactTokenRef } from '../../src/config/redact.js';
import { UsageError } from '../../src/exit.js';
import { GO_EXAMPLE } from '../support/go-config.js';
import { usageError } from '../support/shared.js';

const scratch = (): string => mkdtempSync(join(tmpdir(), 'queenctl-config-'));

describe('reading the config file', () => {
  it("reads the Go queenctl's example as it is", async () => {
    const config = await parseConfig('/x/config.yaml', GO_EXAMPLE);
    assert.equal(config.currentContext, 'prod');
    assert.deepEqual(config.contexts, [
      { name: 'prod', server: 'https://queen.prod.internal:6632', 'token-ref': 'keychain://prod', insecure: false },
      { name: 'local', server: 'http://localhost:6632' },
    ]);
  });

  it('a missing file is an empty config, not an error', async () => {
    const config = await readConfigFile(join(scratch(), 'nope.yaml'));
    assert.equal(config.exists, false);
    assert.deepEqual(config.contexts, []);
    assert.equal(config.currentContext, undefined);
  });

  it('an empty file, or one of comments only, is an empty config', async () => {
    for (const text of ['', '# nothing yet\n', 'contexts:\n']) {
      const config = await parseConfig('/x/c.yaml', text);
      assert.deepEqual(config.contexts, [], JSON.stringify(text));
    }
  });

  it('malformed YAML is a usage error naming the file and the line', async () => {
    const error = await usageError(
      parseConfig('/home/op/.queen/config.yaml', 'current-context: prod\ncontexts:\n  - name: [prod\n    server: x\n'),
    );
    assert.match(error.message, /^the config file \/home\/op\/\.queen\/config\.yaml:\d+ is not valid YAML/);
    assert.equal(error.exitCode, 1);
  });

  it('a wrongly typed key is refused at its line', async () => {
    const error = await usageError(parseConfig('/c.yaml', 'contexts:\n  - name: prod\n    insecure: "no"\n'));
    assert.match(error.message, /\/c\.yaml:3: insecure must be true or false/);
    const unnamed = await usageError(parseConfig('/c.yaml', 'contexts:\n  - name: a\n  - server: http://x\n'));
    assert.match(unnamed.message, /\/c\.yaml:3: a context has no name/);
    const notList = await usageError(parseConfig('/c.yaml', 'contexts:\n  prod: {}\n'));
    assert.match(notList.message, /\/c\.yaml:2: contexts must be a list/);
    const twice = await usageError(parseConfig('/c.yaml', 'contexts:\n  - name: a\n  - name: a\n'));
    assert.match(twice.message, /\/c\.yaml:3: the context "a" is defined twice \(also at \/c\.yaml:2\)/);
  });

  it('every key of the wrong type is refused at its own line, whatever command reads the file', async () => {
    const cases: Array<[string, number, RegExp]> = [
      ['contexts: prod\n', 1, /contexts must be a list/],
      ['contexts:\n  - prod\n', 2, /each context must be a mapping with a name/],
      ['contexts:\n  - name:\n', 2, /name must be a non-empty string/],
      ['contexts:\n  - name: 42\n', 2, /name must be a non-empty string/],
      ['contexts:\n  - name: a\n    server: 6632\n', 3, /server must be a non-empty string/],
      ['contexts:\n  - name: a\n    server: [http://a, http://b]\n', 3, /server must be a non-empty string/],
      ['contexts:\n  - name: a\n    insecure: yes\n', 3, /insecure must be true or false/],
      ['contexts:\n  - name: a\n    token-ref: {env: true}\n', 3, /token-ref must be a non-empty string/],
      ['contexts:\n  - name: a\n    cacert: 1\n', 3, /cacert must be a non-empty string/],
      ['contexts: []\ncurrent-context: [a]\n', 2, /current-context must be the name of a context/],
      ['- a\n- b\n', 1, /the file must be a mapping/],
      ['current-context: a\ncurrent-context: b\n', 2, /is not valid YAML: Map keys must be unique/],
      ['contexts:\n\t- name: a\n', 2, /is not valid YAML: Tabs are not allowed/],
      ['a: 1\n---\nb: 2\n', 2, /is not valid YAML/],
    ];
    for (const [text, line, problem] of cases) {
      const error = await usageError(parseConfig('/etc/q.yaml', text));
      assert.match(error.message, new RegExp(`^the config file /etc/q\\.yaml:${line}\\b`), JSON.stringify(text));
      assert.match(error.message, problem, JSON.stringify(text));
      assert.match(error.hint ?? '', /fix that line/);
    }
  });

  it("reads anchors, aliases and << merge keys as the Go tool's YAML library does", async () => {
    const config = await parseConfig(
      '/c.yaml',
      `defaults: &defaults
  server: https://queen:6632
  token-ref: env
contexts:
  - <<: *defaults
    name: prod
  - &local
    name: local
    server: http://localhost:6632
  - <<: [*local, *defaults]
    name: mixed
    insecure: true
current-context: prod
`,
    );
    assert.equal(config.currentContext, 'prod');
    assert.deepEqual(config.contexts, [
      { name: 'prod', server: 'https://queen:6632', 'token-ref': 'env' },
      { name: 'local', server: 'http://localhost:6632' },
      { name: 'mixed', server: 'http://localhost:6632', 'token-ref': 'env', insecure: true },
    ]);
    const wrong = await usageError(
      parseConfig('/c.yaml', 'port: &port 6632\ncontexts:\n  - name: a\n    server: *port\n'),
    );
    assert.match(wrong.message, /^the config file \/c\.yaml:4: server must be a non-empty string/);
  });

  it('an alias inside the node it names, or an alias bomb, is refused instead of crashing or hanging', async () => {
    for (const [text, line] of [
      ['a: &a [*a]\ncontexts: []\n', 1],
      ['a: &a\n  <<: *a\n', 2],
      ['contexts: &l\n  - name: a\n  - *l\n', 3],
    ] as const) {
      const error = await usageError(parseConfig('/c.yaml', text));
      assert.match(
        error.message,
        new RegExp(`^the config file /c\\.yaml:${line}: the alias \\*\\w+ is inside the node`),
      );
    }
    const rows = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (const name of ['b', 'c', 'd', 'e']) {
      const previous = rows[rows.length - 1]![0];
      rows.push(`${name}: &${name} [${Array(10).fill(`*${previous}`).join(', ')}]`);
    }
    const bomb = await usageError(parseConfig('/c.yaml', `${rows.join('\n')}\n`));
    assert.match(bomb.message, /^the config file \/c\.yaml cannot be read as data: Excessive alias count/);
  });

  it('--config beats QUEEN_CONFIG beats ~/.queen/config.yaml', () => {
    assert.equal(configPathFor('/flag.yaml', { QUEEN_CONFIG: '/env.yaml', HOME: '/home/op' }), '/flag.yaml');
    assert.equal(configPathFor(undefined, { QUEEN_CONFIG: '/env.yaml', HOME: '/home/op' }), '/env.yaml');
    assert.equal(configPathFor(undefined, { HOME: '/home/op' }), '/home/op/.queen/config.yaml');
  });
});

describe('writing the config file', () => {
  const COMMENTED = `# Written by hand; keep these notes.
owner: platform-team   # who to ask
${GO_EXAMPLE}  - name: staging
    server: https://queen.staging:6632
    x-go-only: kept   # a key queenctl does not know
`;

  it('set-context changes only the fields given; other contexts, unknown keys and comments stay', async () => {
    const path = join(scratch(), 'config.yaml');
    writeFileSync(path, COMMENTED);
    const config = await EditableConfig.load(path);
    assert.equal(config.setContext('local', { server: 'http://127.0.0.1:7000' }), false);
    assert.equal(config.setContext('new', { server: 'https://new:6632', 'token-ref': 'env' }), true);
    await config.save();
    const text = readFileSync(path, 'utf8');
    for (const kept of [
      '# Written by hand; keep these notes.',
      'owner: platform-team # who to ask',
      '# or: env | file:///abs/path | literal:<token>',
      'x-go-only: kept # a key queenctl does not know',
      'token-ref: keychain://prod',
      'current-context: prod',
    ]) {
      assert.ok(text.includes(kept), `kept ${JSON.stringify(kept)} in:\n${text}`);
    }
    const reread = await readConfigFile(path);
    assert.deepEqual(
      reread.contexts.map((entry) => entry.name),
      ['prod', 'local', 'staging', 'new'],
    );
    assert.equal(reread.contexts[1]?.server, 'http://127.0.0.1:7000');
    assert.deepEqual(reread.contexts[3], { name: 'new', server: 'https://new:6632', 'token-ref': 'env' });
  });

  it('null removes a field; use-context and delete-context touch nothing else', async () => {
    const path = join(scratch(), 'config.yaml');
    writeFileSync(path, COMMENTED);
    const config = await EditableConfig.load(path);
    config.setContext('prod', { insecure: null });
    config.useContext('staging');
    config.deleteContext('local');
    await config.save();
    const text = readFileSync(path, 'utf8');
    assert.ok(!text.includes('insecure'));
    assert.ok(text.includes('# Written by hand; keep these notes.'));
    const reread = await readConfigFile(path);
    assert.equal(reread.currentContext, 'staging');
    assert.deepEqual(
      reread.contexts.map((entry) => entry.name),
      ['prod', 'staging'],
    );
  });

  it('deleting the current context unsets current-context; deleting another leaves it', async () => {
    const path = join(scratch(), 'config.yaml');
    writeFileSync(path, COMMENTED);
    const config = await EditableConfig.load(path);
    assert.equal(config.deleteContext('local'), false);
    assert.equal(config.config.currentContext, 'prod');
    assert.equal(config.deleteContext('prod'), true);
    await config.save();
    const text = readFileSync(path, 'utf8');
    assert.ok(!text.includes('current-context'), text);
    assert.ok(text.includes('# Written by hand; keep these notes.'));
    const reread = await readConfigFile(path);
    assert.equal(reread.currentContext, undefined);
    assert.deepEqual(
      reread.contexts.map((entry) => entry.name),
      ['staging'],
    );
  });

  it('an unknown context name is refused with the known ones listed, and nothing is written', async () => {
    const path = join(scratch(), 'config.yaml');
    writeFileSync(path, GO_EXAMPLE);
    const config = await EditableConfig.load(path);
    for (const change of [() => config.useContext('prdo'), () => config.deleteContext('prdo')]) {
      assert.throws(
        change,
        (error: unknown) =>
          error instanceof UsageError &&
          /no context named "prdo"/.test(error.message) &&
          /prod, local/.test(error.hint ?? ''),
      );
    }
    assert.equal(readFileSync(path, 'utf8'), GO_EXAMPLE);
  });

  it('writes mode 0600 (even over a 0644 file), creates ~/.queen, and leaves no temporary file', async () => {
    const home = scratch();
    const path = join(home, '.queen', 'config.yaml');
    const created = await EditableConfig.load(path);
    created.setContext('local', { server: 'http://localhost:6632' });
    await created.save();
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.equal(statSync(join(home, '.queen')).mode & 0o777, 0o700);

    writeFileSync(path, GO_EXAMPLE, { mode: 0o644 });
    const loose = await EditableConfig.load(path);
    loose.useContext('local');
    await loose.save();
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.deepEqual(readdirSync(join(home, '.queen')), ['config.yaml']);
  });

  it('never follows a link: a symlinked config file is replaced by the new file, its target untouched', async () => {
    // A link planted in ~/.queen would otherwise have this user rewrite whatever file it names.
    const directory = scratch();
    const target = join(directory, 'elsewhere.yaml');
    const link = join(directory, 'config.yaml');
    writeFileSync(target, GO_EXAMPLE, { mode: 0o644 });
    symlinkSync(target, link);
    const config = await EditableConfig.load(link);
    config.useContext('local');
    await config.save();
    assert.ok(lstatSync(link).isFile(), 'the link is still a link');
    assert.equal(lstatSync(link).mode & 0o777, 0o600);
    assert.match(readFileSync(link, 'utf8'), /current-context: local/);
    assert.equal(readFileSync(target, 'utf8'), GO_EXAMPLE);
    assert.equal(statSync(target).mode & 0o777, 0o644);
    // A dangling link (to a file not there yet) is replaced the same way: nothing is created there.
    const dangling = join(directory, 'dangling.yaml');
    const nowhere = join(directory, 'not-yet', 'made.yaml');
    symlinkSync(nowhere, dangling);
    const fresh = await EditableConfig.load(dangling);
    fresh.setContext('x', { server: 'http://localhost:6632' });
    await fresh.save();
    assert.ok(lstatSync(dangling).isFile());
    assert.equal(existsSync(join(directory, 'not-yet')), false);
  });

  it("~/.queen a link of this user's (a dotfiles repository) is written through; another user's is refused", {
    skip: process.getuid?.() !== 0 && 'giving the link to another user needs root',
  }, async () => {
    const home = scratch();
    const real = join(home, 'dotfiles-queen');
    mkdirSync(real);
    const queen = join(home, '.queen');
    symlinkSync(real, queen);
    const own = await EditableConfig.load(join(queen, 'config.yaml'));
    own.setContext('a', { server: 'http://localhost:6632' });
    await own.save();
    assert.match(readFileSync(join(real, 'config.yaml'), 'utf8'), /name: a/);

    // Tests run as root; the link is given to nobody (uid 65534).
    lchownSync(queen, 65534, 65534);
    const foreign = await EditableConfig.load(join(queen, 'config.yaml'));
    foreign.setContext('b', { server: 'http://localhost:6632' });
    await assert.rejects(
      foreign.save(),
      (error: unknown) =>
        error instanceof UsageError &&
        error.message.includes(`the config directory ${queen} is a symbolic link owned by another user (uid 65534)`) &&
        error.hint === undefined,
    );
    assert.doesNotMatch(readFileSync(join(real, 'config.yaml'), 'utf8'), /name: b/);
    assert.deepEqual(readdirSync(real), ['config.yaml']);
  });

  it('refuses to edit a malformed file rather than rewrite it', async () => {
    const path = join(scratch(), 'config.yaml');
    writeFileSync(path, 'contexts: [\n');
    await usageError(EditableConfig.load(path));
    assert.equal(readFileSync(path, 'utf8'), 'contexts: [\n');
  });
});

describe('redaction', () => {
  it('hides literal tokens and secret-looking keys, and shows references', () => {
    assert.equal(redactTokenRef('literal:eyJhbGciOi.abc.def'), 'literal:[redacted]');
    for (const ref of ['env', 'file:///etc/queen/token', 'keychain://prod']) assert.equal(redactTokenRef(ref), ref);
    assert.deepEqual(
      redactData({
        contexts: [
          { name: 'a', 'token-ref': 'literal:s3cret', token: 's3cret', 'api-key': 'k', server: 'https://u:pw@h:1' },
        ],
      }),
      {
        contexts: [
          {
            name: 'a',
            'token-ref': 'literal:[redacted]',
            token: '[redacted]',
            'api-key': '[redacted]',
            server: 'https://u:[redacted]@h:1',
          },
        ],
      },
    );
  });
});
