/**
 * `lease ack <file>` that cannot read its file says why in words, with the path, and that nothing
 * was sent (issue 39): `no such file: missing.json; nothing was sent`, never a bare `ENOENT`.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { readBatchText } from '../../src/commands/lease/ack.js';
import { UsageError } from '../../src/exit.js';
import { readFailureWords } from '../../src/output/words.js';

const dir = mkdtempSync(join(tmpdir(), 'queenctl-ack-file-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const noStdin = () => {
  throw new Error('standard input is not read for a file');
};

/** The usage error reading `path` gives: its message and hint. */
async function refusal(path: string): Promise<UsageError> {
  try {
    await readBatchText(path, noStdin);
  } catch (error) {
    assert.ok(error instanceof UsageError, String(error));
    return error;
  }
  assert.fail(`${path} was read`);
}

describe('lease ack: a batch file that cannot be read, in words', () => {
  it('a file that does not exist: no such file, the path, nothing sent, and what to give instead', async () => {
    const path = join(dir, 'missing.json');
    const error = await refusal(path);
    assert.equal(error.message, `no such file: ${path}; nothing was sent`);
    assert.match(error.hint ?? '', /lease acquire -o json wrote: give its path, or - to read it from standard input/);
  });

  it('a path through a file: no such file, and why', async () => {
    writeFileSync(join(dir, 'plain'), '{}');
    const path = join(dir, 'plain', 'batch.json');
    assert.equal(
      (await refusal(path)).message,
      `no such file (a part of its path is a file, not a directory): ${path}; nothing was sent`,
    );
  });

  it('a directory', async () => {
    const path = join(dir, 'a-directory');
    mkdirSync(path);
    assert.equal((await refusal(path)).message, `it is a directory, not a file: ${path}; nothing was sent`);
  });

  it('a symbolic link that points at itself', async () => {
    const path = join(dir, 'loop');
    symlinkSync(path, path);
    assert.match((await refusal(path)).message, /^too many levels of symbolic links .*: .*loop; nothing was sent$/);
  });

  it('a file this user may not read', { skip: process.getuid?.() === 0 && 'root reads every file' }, async () => {
    const path = join(dir, 'secret.json');
    writeFileSync(path, '{}');
    chmodSync(path, 0o000);
    assert.equal((await refusal(path)).message, `permission denied: ${path}; nothing was sent`);
  });

  it('a rarer errno keeps its code', () => {
    assert.equal(readFailureWords(Object.assign(new Error('i/o'), { code: 'EIO' })), undefined);
    assert.equal(readFailureWords(Object.assign(new Error('x'), { code: 'ENOENT' })), 'no such file');
  });
});
