/**
 * Loaded first in every test process and in the runner (node --import, package.json's test
 * scripts), before any other process is started:
 *
 * - One temporary directory per test process, removed when the process ends: it points TMPDIR at
 *   a fresh directory, so every `mkdtemp(tmpdir())` of a test, and every file a queenctl it starts
 *   leaves in TMPDIR, lands inside it, and nothing is left in the system's temporary directory
 *   after `npm test`.
 * - No NODE_EXTRA_CA_CERTS from the machine: Node 20 reads the file it names at every start (a
 *   system bundle of ~150 certificates: ~45 ms of CPU each time), and `npm test` starts hundreds
 *   of Node processes (the test files, queenctl, the commands of lease run) that only reach
 *   brokers on loopback, over http or with a test CA given on purpose. Removed here, in the
 *   runner, no process of the suite pays it (~10 of its CPU-s on this project's machine). The
 *   tests that are about it set it themselves (test/process/exit-codes.test.ts: a CA trusted
 *   through it by the published bin).
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

delete process.env.NODE_EXTRA_CA_CERTS;
