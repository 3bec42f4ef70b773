/**
 * The config memo (src/config/memo.ts): a file this build parsed, unchanged, is not parsed again;
 * anything else (another text, another build, a damaged or missing memo, a directory that cannot
 * be written) is parsed as if there were no memo, and a literal token is never copied out.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { readConfigFile } from '../../src/config/file.js';
import { configMemo, hash64, memoIn } from '../../src/config/memo.js';
import { GO_EXAMPLE } from '../support/go-config.js';

const scratch = (): string => mkdtempSync(join(tmpdir(), 'queenctl-memo-'));
const BUILD = '0.1.0 2026-12-03T00:00:00Z';

/** A config file in a scratch directory, and a cache home beside it. */
function setUp(text: string): { path: string; cacheHome: string } {
  const dir = scratch();
  const path = join(dir, 'config.yaml');
  writeFileSync(path, text);
  return { path, cacheHome: join(dir, 'cache') };
}

const memoFiles = (cacheHome: string): string[] => readdirSync(join(cacheHome, 'queenctl', 'config'));

describe('the config memo', () => {
  it('a second read of the same file comes from the memo, not the parser', async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    const memo = memoIn(cacheHome, BUILD);
    const parsed = await readConfigFile(path, memo);
    assert.deepEqual(memo.read(path, GO_EXAMPLE), parsed);
    // Proof that the parser is skipped: a memo that says otherwise for this very text wins.
    memo.write({ ...parsed, currentContext: 'from-the-memo' }, GO_EXAMPLE);
    assert.equal((await readConfigFile(path, memo)).currentContext, 'from-the-memo');
  });

  it('a changed file is parsed again, and its memo replaced', async () => {
    const { path, cacheHome } = setUp('current-context: a\ncontexts:\n  - name: a\n');
    const memo = memoIn(cacheHome, BUILD);
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
    await readConfigFile(path, memoIn(cacheHome, BUILD));
    assert.equal(memoIn(cacheHome, '0.1.1 2026-12-04T00:00:00Z').read(path, GO_EXAMPLE), undefined);
  });

  it('each config path has its own memo', async () => {
    const first = setUp('current-context: a\ncontexts:\n  - name: a\n');
    const second = join(scratch(), 'other.yaml');
    writeFileSync(second, 'current-context: b\ncontexts:\n  - name: b\n');
    const memo = memoIn(first.cacheHome, BUILD);
    await readConfigFile(first.path, memo);
    await readConfigFile(second, memo);
    assert.equal(memo.read(first.path, 'current-context: a\ncontexts:\n  - name: a\n')?.currentContext, 'a');
    assert.equal((await readConfigFile(second, memo)).path, second);
    assert.equal(memoFiles(first.cacheHome).length, 2);
  });

  it('a damaged memo is parsed past and replaced', async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    const memo = memoIn(cacheHome, BUILD);
    await readConfigFile(path, memo);
    const [file] = memoFiles(cacheHome);
    for (const damage of ['{"build":', 'null', '{}', `{"build":"${BUILD}","hash":"${hash64(GO_EXAMPLE)}"}`]) {
      writeFileSync(join(cacheHome, 'queenctl', 'config', file as string), damage);
      assert.equal(memo.read(path, GO_EXAMPLE), undefined, damage);
      assert.equal((await readConfigFile(path, memo)).currentContext, 'prod');
    }
  });

  it('memos untouched for a week go when another is written', async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    const memo = memoIn(cacheHome, BUILD);
    const dir = join(cacheHome, 'queenctl', 'config');
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

  it('is private to the user: directory 0700, file 0600', async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    await readConfigFile(path, memoIn(cacheHome, BUILD));
    assert.equal(statSync(join(cacheHome, 'queenctl', 'config')).mode & 0o777, 0o700);
    const [file] = memoFiles(cacheHome);
    assert.equal(statSync(join(cacheHome, 'queenctl', 'config', file as string)).mode & 0o777, 0o600);
  });

  it('a literal token is never copied into a memo', async () => {
    const text = 'current-context: a\ncontexts:\n  - name: a\n    token-ref: literal:s3cret\n';
    const { path, cacheHome } = setUp(text);
    const memo = memoIn(cacheHome, BUILD);
    assert.equal((await readConfigFile(path, memo)).contexts[0]?.['token-ref'], 'literal:s3cret');
    assert.equal(existsSync(join(cacheHome, 'queenctl')), false);
    assert.equal(memo.read(path, text), undefined);
  });

  it('a cache directory that cannot be written changes nothing but the parse', async () => {
    const { path, cacheHome } = setUp(GO_EXAMPLE);
    writeFileSync(cacheHome, 'a file where the directory should be');
    const memo = memoIn(cacheHome, BUILD);
    assert.equal((await readConfigFile(path, memo)).currentContext, 'prod');
    assert.equal(memo.read(path, GO_EXAMPLE), undefined);
  });

  it('unbundled builds (no build time), as these tests run, keep no memo', () => {
    assert.equal(configMemo({ HOME: scratch() }), undefined);
  });

  it('the hash is FNV-1a 64 of the text', () => {
    const reference = (text: string): string => {
      let hash = 0xcbf29ce484222325n;
      for (let index = 0; index < text.length; index++) {
        hash = ((hash ^ BigInt(text.charCodeAt(index))) * 0x100000001b3n) & 0xffffffffffffffffn;
      }
      return hash.toString(16).padStart(16, '0');
    };
    assert.equal(hash64('a'), 'af63dc4c8601ec8c');
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (text) => hash64(text) === reference(text)));
  });
});
