/**
 * The file-system calls of the config that must never hang a run (src/config/files.ts) and the
 * atomic write of the config file (src/config/edit.ts): directories made one level at a time,
 * stopping at the first error; a FIFO read in the thread pool; temporary files a killed run left
 * behind removed, never read.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  constants,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { EditableConfig } from '../../src/config/edit.js';
import { DirectoryError, makeDirectory, readTextFile } from '../../src/config/files.js';

const scratch = (): string => mkdtempSync(join(tmpdir(), 'queenctl-files-'));

/** What makeDirectory threw, as `code at level`. */
function failure(directory: string, base?: string): string {
  try {
    makeDirectory(directory, base);
  } catch (error) {
    assert.ok(error instanceof DirectoryError, String(error));
    return `${error.code} at ${error.level}`;
  }
  assert.fail(`${directory} was made`);
}

describe('makeDirectory', () => {
  it('makes each missing level below the base, 0700, and leaves existing ones as they are', () => {
    const root = scratch();
    const directory = join(root, 'a', 'b', 'c');
    makeDirectory(directory, root);
    for (const level of [join(root, 'a'), join(root, 'a', 'b'), directory])
      assert.equal(statSync(level).mode & 0o777, 0o700, level);
    // Again: nothing to do, no error.
    makeDirectory(directory, root);
  });

  it('never makes the base: a missing HOME is reported, not invented', () => {
    const root = scratch();
    const home = join(root, 'home');
    assert.equal(failure(join(home, '.queen'), home), `EBASE at ${home}`);
    assert.deepEqual(readdirSync(root), []);
  });

  it('stops at a level that is a file, above or at the directory', () => {
    const root = scratch();
    writeFileSync(join(root, 'file'), '');
    assert.equal(failure(join(root, 'file', '.queen'), join(root, 'file')), `ENOTDIR at ${join(root, 'file')}`);
    assert.equal(failure(join(root, 'file', 'x', 'y'), root), `ENOTDIR at ${join(root, 'file')}`);
    assert.equal(failure(join(root, 'file')), `ENOTDIR at ${join(root, 'file')}`);
  });

  it('under /proc (mkdir answers ENOENT below a parent that exists): one error at once, no loop', () => {
    assert.equal(failure('/proc/.queen', '/proc'), 'ENOENT at /proc/.queen');
    assert.equal(failure('/proc/.queen/deeper', '/'), 'ENOENT at /proc/.queen');
  });
});

describe('readTextFile', () => {
  it('reads a regular file, and fails as readFileSync would on what is none', async () => {
    const root = scratch();
    writeFileSync(join(root, 'config.yaml'), 'contexts: []\n');
    assert.equal(await readTextFile(join(root, 'config.yaml')), 'contexts: []\n');
    await assert.rejects(readTextFile(join(root, 'absent.yaml')), { code: 'ENOENT' });
    await assert.rejects(readTextFile(root), { code: 'EISDIR' });
  });

  it('waits for a FIFO in the thread pool: the JS thread stays free until a writer comes', async () => {
    const fifo = join(scratch(), 'config.yaml');
    execFileSync('mkfifo', [fifo]);
    const read = readTextFile(fifo);
    // Were the open synchronous, this line would not run before a writer came.
    let ticked = false;
    await new Promise<void>((resolve) =>
      setImmediate(() => {
        ticked = true;
        resolve();
      }),
    );
    assert.equal(ticked, true);
    // The writer: opening our end lets the reader's open() return; then the text and its end.
    const fd = openSync(fifo, constants.O_WRONLY);
    writeFileSync(fd, 'current-context: fifo\n');
    closeSync(fd);
    assert.equal(await read, 'current-context: fifo\n');
  });
});

describe('the atomic write of the config file', () => {
  it('removes temporary files a killed run left (a minute old), keeps a younger one, reads neither', async () => {
    const directory = scratch();
    const path = join(directory, 'config.yaml');
    writeFileSync(path, 'contexts: []\n');
    const leftOld = join(directory, '.config.yaml.0123456789ab.tmp');
    const inProgress = join(directory, '.config.yaml.ba9876543210.tmp');
    const notOurs = join(directory, '.other.yaml.0123456789ab.tmp');
    for (const file of [leftOld, inProgress, notOurs]) writeFileSync(file, 'contexts: [half');
    const anHourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(leftOld, anHourAgo, anHourAgo);
    utimesSync(notOurs, anHourAgo, anHourAgo);

    const config = await EditableConfig.load(path);
    assert.deepEqual(config.config.contexts, [], 'the temporary files are not read as config');
    config.setContext('a', { server: 'http://127.0.0.1:1' });
    await config.save();

    assert.deepEqual(readdirSync(directory).sort(), [
      '.config.yaml.ba9876543210.tmp',
      '.other.yaml.0123456789ab.tmp',
      'config.yaml',
    ]);
    assert.match(readFileSync(path, 'utf8'), /name: a\n\s+server: http:\/\/127\.0\.0\.1:1/);
  });

  it('a directory that cannot be made is one line naming it, why and where to go instead', async () => {
    const home = scratch();
    mkdirSync(join(home, 'x'));
    writeFileSync(join(home, '.queen'), 'a file where the directory should be');
    const config = await EditableConfig.load(join(home, '.queen', 'config.yaml'));
    config.setContext('a', { server: 'http://127.0.0.1:1' });
    await assert.rejects(config.save(), (error: Error & { hint?: string }) => {
      assert.equal(
        error.message,
        `cannot create the config directory ${join(home, '.queen')}: it exists and is not a directory (ENOTDIR); ` +
          'point --config or QUEEN_CONFIG at a file in a writable directory, or set HOME to one',
      );
      assert.equal(error.hint, undefined, 'no second line');
      return true;
    });
  });
});
