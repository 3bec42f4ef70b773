/**
 * The config memo (src/config/memo.ts): a file this build parsed, unchanged, is not parsed again;
 * anything else (another text, another build, a damaged or missing memo, a directory that cannot
 * be written) is parsed as if there were no memo, and a literal token is never copied out. A memo
 * is used only when it is the user's own (docs/security.md): each way it may not be, made with
 * the kernel's own owners and modes (chown to `nobody`, 65534, as the suite runs as root), is
 * ignored and said once for -v. The process tests (test/process/cache-trust.test.ts) show what
 * that keeps from happening: a token sent to a server a planted memo names.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { readConfigFile } from '../../src/config/file.js';
import { type ConfigMemo, configMemo, memoIn, memoNotes, sha256 } from '../../src/config/memo.js';
import { GO_EXAMPLE } from '../support/go-config.js';

const scratch = (): string => mkdtempSync(join(tmpdir(), 'queenctl-memo-'));
const BUILD = '0.1.0 2026-12-03T00:00:00Z';
const NOBODY = 65534;
const asRoot = process.geteuid?.() === 0 ? false : 'needs root, to give a file to another user (CI runs as root)';

/** A config file in a scratch directory, and a cache home beside it. */
function setUp(text: string): { path: string; cacheHome: string } {
  const dir = scratch();
  const path = join(dir, 'config.yaml');
  writeFileSync(path, text);
  return { path, cacheHome: join(dir, 'cache') };
}

const memoDir = (cacheHome: string): string => join(cacheHome, 'queenctl', 'config');
const memoFiles = (cacheHome: string): string[] => readdirSync(memoDir(cacheHome));
const memoAt = (cacheHome: string, build = BUILD): ConfigMemo => {
  const memo = memoIn(cacheHome, build);
  assert.ok(memo, 'a system with file owners has memos');
  return memo;
};

describe('the config memo', () => {
  it('a second read of the same file comes from the memo, not the parser', async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    const memo = memoAt(cacheHome);
    const parsed = await readConfigFile(path, memo);
    assert.deepEqual(memo.read(path, GO_EXAMPLE), parsed);
    // Proof that the parser is skipped: a memo that says otherwise for this very text wins.
    memo.write({ ...parsed, currentContext: 'from-the-memo' }, GO_EXAMPLE);
    assert.equal((await readConfigFile(path, memo)).currentContext, 'from-the-memo');
  });

  it('a changed file is parsed again, and its memo replaced', async () => {
    const { path, cacheHome } = setUp('current-context: a\ncontexts:\n  - name: a\n');
    const memo = memoAt(cacheHome);
    assert.equal((await readConfigFile(path, memo)).currentContext, 'a');
    const changed = 'current-context: b\ncontexts:\n  - name: a\n  - name: b\n';
    writeFileSync(path, changed);
    assert.equal(memo.read(path, changed), undefined);
    assert.equal((await readConfigFile(path, memo)).currentContext, 'b');
    assert.equal(memo.read(path, changed)?.currentContext, 'b');
    assert.equal(memoFiles(cacheHome).length, 1);
  });

  it("another build's memo is not used", async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    await readConfigFile(path, memoAt(cacheHome));
    assert.equal(memoAt(cacheHome, '0.1.1 2026-12-04T00:00:00Z').read(path, GO_EXAMPLE), undefined);
  });

  it('each config path has its own memo', async () => {
    const first = setUp('current-context: a\ncontexts:\n  - name: a\n');
    const second = join(scratch(), 'other.yaml');
    writeFileSync(second, 'current-context: b\ncontexts:\n  - name: b\n');
    const memo = memoAt(first.cacheHome);
    await readConfigFile(first.path, memo);
    await readConfigFile(second, memo);
    assert.equal(memo.read(first.path, 'current-context: a\ncontexts:\n  - name: a\n')?.currentContext, 'a');
    assert.equal((await readConfigFile(second, memo)).path, second);
    assert.equal(memoFiles(first.cacheHome).length, 2);
  });

  it('is named by the SHA-256 of the path and text, and used only for a text of the SHA-256 it records', async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    const memo = memoAt(cacheHome);
    await readConfigFile(path, memo);
    const name = createHash('sha256').update(`${path}\0${GO_EXAMPLE}`).digest('hex');
    assert.deepEqual(memoFiles(cacheHome), [`${name}.json`]);
    const recorded = JSON.parse(readFileSync(join(memoDir(cacheHome), `${name}.json`), 'utf8'));
    assert.equal(recorded.sha256, name);
    assert.equal(recorded.path, path);
    // Under the name of another text of the file, the memo of this one is not used for it.
    const other = GO_EXAMPLE.replace('https://queen.prod.internal:6632', 'https://elsewhere.example:6632');
    const otherName = createHash('sha256').update(`${path}\0${other}`).digest('hex');
    copyFileSync(join(memoDir(cacheHome), `${name}.json`), join(memoDir(cacheHome), `${otherName}.json`));
    assert.equal(memo.read(path, other), undefined);
    // Nor for another path.
    const elsewhere = join(scratch(), 'config.yaml');
    const elsewhereName = createHash('sha256').update(`${elsewhere}\0${GO_EXAMPLE}`).digest('hex');
    copyFileSync(join(memoDir(cacheHome), `${name}.json`), join(memoDir(cacheHome), `${elsewhereName}.json`));
    assert.equal(memo.read(elsewhere, GO_EXAMPLE), undefined);
  });

  it('its SHA-256 is node:crypto’s, for any text (UTF-8), across block boundaries', () => {
    assert.equal(sha256('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    const reference = (text: string): string => createHash('sha256').update(text).digest('hex');
    for (let length = 0; length <= 130; length++)
      assert.equal(sha256('a'.repeat(length)), reference('a'.repeat(length)));
    assert.equal(sha256('é€😀\0'.repeat(2000)), reference('é€😀\0'.repeat(2000)));
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (text) => sha256(text) === reference(text)));
  });

  it('a damaged memo is parsed past and replaced', async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    const memo = memoAt(cacheHome);
    await readConfigFile(path, memo);
    const [file] = memoFiles(cacheHome);
    const sha = sha256(`${path}\0${GO_EXAMPLE}`);
    for (const damage of ['{"build":', 'null', '{}', `{"build":"${BUILD}","path":"${path}","sha256":"${sha}"}`]) {
      writeFileSync(join(memoDir(cacheHome), file as string), damage);
      assert.equal(memo.read(path, GO_EXAMPLE), undefined, damage);
      assert.equal((await readConfigFile(path, memo)).currentContext, 'prod');
    }
  });

  it('memos untouched for a week go when another is written', async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    const memo = memoAt(cacheHome);
    const dir = memoDir(cacheHome);
    await readConfigFile(path, memo);
    const old = join(dir, 'old.json');
    const fresh = join(dir, 'fresh.json');
    writeFileSync(old, '{}');
    writeFileSync(fresh, '{}');
    const eightDaysAgo = new Date(Date.now() - 8 * 24 * 3600 * 1000);
    utimesSync(old, eightDaysAgo, eightDaysAgo);
    const other = join(scratch(), 'other.yaml');
    writeFileSync(other, 'contexts: []\n');
    await readConfigFile(other, memo);
    assert.equal(existsSync(old), false);
    assert.equal(existsSync(fresh), true);
    assert.equal(memoFiles(cacheHome).length, 3);
  });

  it('is private to the user: directories 0700, file 0600', async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    await readConfigFile(path, memoAt(cacheHome));
    assert.equal(statSync(join(cacheHome, 'queenctl')).mode & 0o777, 0o700);
    assert.equal(statSync(memoDir(cacheHome)).mode & 0o777, 0o700);
    const [file] = memoFiles(cacheHome);
    assert.equal(statSync(join(memoDir(cacheHome), file as string)).mode & 0o777, 0o600);
  });

  it('a literal token is never copied into a memo', async () => {
    const text = 'current-context: a\ncontexts:\n  - name: a\n    token-ref: literal:s3cret\n';
    const { path, cacheHome } = setUp(text);
    const memo = memoAt(cacheHome);
    assert.equal((await readConfigFile(path, memo)).contexts[0]?.['token-ref'], 'literal:s3cret');
    assert.equal(existsSync(join(cacheHome, 'queenctl')), false);
    assert.equal(memo.read(path, text), undefined);
  });

  it('a cache directory that cannot be written changes nothing but the parse', async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    writeFileSync(cacheHome, 'a file where the directory should be');
    const memo = memoAt(cacheHome);
    assert.equal((await readConfigFile(path, memo)).currentContext, 'prod');
    assert.equal(memo.read(path, GO_EXAMPLE), undefined);
  });

  it('unbundled builds (no build time), as these tests run, keep no memo', () => {
    assert.equal(configMemo({ HOME: scratch() }), undefined);
  });
});

/**
 * A memo written by this build for the example, then made untrustworthy by `plant` (given the
 * memo's file), with what the memo says changed so that using it would show: the memo's
 * current context is `planted`, the file's `prod`.
 */
async function planted(plant: (file: string, cacheHome: string) => void): Promise<{ read: string; notes: string[] }> {
  const { path, cacheHome } = setUp(GO_EXAMPLE);
  const memo = memoAt(cacheHome);
  await readConfigFile(path, memo);
  const [name] = memoFiles(cacheHome);
  const file = join(memoDir(cacheHome), name as string);
  writeFileSync(file, readFileSync(file, 'utf8').replace('"currentContext":"prod"', '"currentContext":"planted"'));
  // Proof that the memo as it is now would be used, were it trusted.
  assert.equal(memo.read(path, GO_EXAMPLE)?.currentContext, 'planted');
  memoNotes();
  plant(file, cacheHome);
  const first = (await readConfigFile(path, memo)).currentContext as string;
  // Said once, however often it is read.
  memo.read(path, GO_EXAMPLE);
  return { read: first, notes: memoNotes() };
}

describe('a memo that is not the user’s own is ignored, and -v says why once', () => {
  const cases: Array<{
    what: string;
    skip?: string | false;
    plant(file: string, cacheHome: string): void;
    why: RegExp;
  }> = [
    {
      what: 'a memo owned by another user',
      skip: asRoot,
      plant: (file) => chownSync(file, NOBODY, NOBODY),
      why: /\.json is owned by uid 65534, not by you \(uid 0\)/,
    },
    {
      what: 'its directory owned by another user',
      skip: asRoot,
      plant: (_file, cacheHome) => chownSync(memoDir(cacheHome), NOBODY, NOBODY),
      why: /queenctl\/config is owned by uid 65534/,
    },
    {
      what: 'queenctl/ owned by another user',
      skip: asRoot,
      plant: (_file, cacheHome) => chownSync(join(cacheHome, 'queenctl'), NOBODY, NOBODY),
      why: /cache\/queenctl is owned by uid 65534/,
    },
    {
      what: 'a group-writable directory',
      plant: (_file, cacheHome) => chmodSync(memoDir(cacheHome), 0o770),
      why: /queenctl\/config is writable by its group/,
    },
    {
      what: 'a world-writable directory above',
      plant: (_file, cacheHome) => chmodSync(join(cacheHome, 'queenctl'), 0o777),
      why: /cache\/queenctl is writable by others/,
    },
    {
      what: 'a symbolic link instead of the memo',
      plant: (file) => {
        renameSync(file, `${file}.elsewhere`);
        symlinkSync(`${file}.elsewhere`, file);
      },
      why: /\.json is a symbolic link/,
    },
    {
      what: 'a symbolic link instead of its directory',
      plant: (_file, cacheHome) => {
        renameSync(memoDir(cacheHome), `${memoDir(cacheHome)}.elsewhere`);
        symlinkSync(`${memoDir(cacheHome)}.elsewhere`, memoDir(cacheHome));
      },
      why: /queenctl\/config is a symbolic link/,
    },
    {
      what: 'a memo of mode 0644',
      plant: (file) => chmodSync(file, 0o644),
      why: /\.json has mode 0644, not 0600/,
    },
    {
      what: 'a FIFO instead of the memo (opened without waiting for a writer)',
      plant: (file) => {
        rmSync(file);
        assert.equal(spawnSync('mkfifo', ['-m', '600', file]).status, 0);
      },
      why: /\.json is not a regular file/,
    },
  ];
  for (const { what, skip, plant, why } of cases) {
    it(what, { skip: skip ?? false }, async () => {
      const { read, notes } = await planted(plant);
      assert.equal(read, 'prod', 'the file, parsed, not the memo');
      assert.equal(notes.length, 1, notes.join('\n'));
      assert.match(notes[0] as string, /^config memo ignored, the config file parsed instead: /);
      assert.match(notes[0] as string, why);
    });
  }
});
