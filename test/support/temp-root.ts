/**
 * One temporary directory per test process, removed when the process ends: loaded first (node
 * --import, package.json's test scripts), it points TMPDIR at a fresh directory, so every
 * `mkdtemp(tmpdir())` of a test, and every file a queenctl it starts leaves in TMPDIR, lands
 * inside it, and nothing is left in the system's temporary directory after `npm test`.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

if (process.env.QUEENCTL_TEST_TMPDIR !== process.env.TMPDIR || process.env.TMPDIR === undefined) {
  const root = mkdtempSync(join(tmpdir(), `queenctl-test-${process.pid}-`));
  // As /tmp is to the tests: a test that runs queenctl as another user (nobody) must reach the
  // directories it makes here; each of those is mkdtemp's 0700 as before.
  chmodSync(root, 0o755);
  process.env.TMPDIR = root;
  process.env.QUEENCTL_TEST_TMPDIR = root;
  process.once('exit', () => {
    // A test that made a directory unreadable or unwritable still has it removed (rmSync needs
    // the parent writable and searchable; chmod is not needed for that, but force is).
    rmSync(root, { recursive: true, force: true, maxRetries: 2 });
  });
}
