/**
 * The bin's fast paths (bin/queenctl.cjs, issue 41): `--version` alone is answered from the
 * bundle's first line without loading the bundle. What it prints and how it ends must be what the
 * bundle's own `--version` prints and how it ends, a closed stdout included.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { VERSION } from '../../src/version.js';
import { cliCommandLine, describeRun, needsNode, runCli, runShell, startCli } from '../support/cli.js';
import { runInProcess } from '../support/in-process.js';

const skip = needsNode('the npm package’s bin');

describe('queenctl --version, alone', { skip }, () => {
  it('prints what the bundle’s --version prints, exit 0, without loading the bundle', async () => {
    // QUEENCTL_DEBUG makes the bin name every code cache it loads: none, so no file of the bundle.
    const fast = await runCli(['--version'], { exit: 0, env: { QUEENCTL_DEBUG: '1' } });
    const bundle = await runInProcess(['--version']);
    assert.equal(bundle.code, 0);
    assert.equal(fast.stdout, bundle.stdout);
    assert.equal(fast.stdout, `${VERSION}\n`);
    assert.equal(fast.stderr, '', describeRun(fast));
    // With anything beside it, the bundle answers (its code cache named on stderr).
    const loaded = await runCli(['--version', '-q'], { exit: 0, env: { QUEENCTL_DEBUG: '1' } });
    assert.equal(loaded.stdout, fast.stdout);
    assert.match(loaded.stderr, /code cache .*queenctl\.cjs/);
  });

  it('a closed stdout: exit 141 and nothing on stderr, as the bundle', async () => {
    const closed = async (args: string[]) => {
      const run = startCli(args, { exit: 141 });
      // Closed before node has even started: the write meets a pipe without a reader.
      run.process.stdout.destroy();
      return run.exited;
    };
    const [fast, bundle] = await Promise.all([closed(['--version']), closed(['--version', '-q'])]);
    assert.equal(fast.code, 141);
    assert.equal(fast.stderr, '');
    assert.deepEqual([fast.code, fast.stderr], [bundle.code, bundle.stderr]);
  });

  it('a stdout that cannot be written (a full disk): exit 74 and the same line on stderr, as the bundle', async () => {
    const [fast, bundle] = await Promise.all(
      [['--version'], ['--version', '-q']].map((args) =>
        runShell(`${cliCommandLine()} ${args.join(' ')} >/dev/full`, { exit: 74 }),
      ),
    );
    assert.equal(fast?.code, 74, fast && describeRun(fast));
    assert.match(fast?.stderr ?? '', /^queenctl: could not write to stdout: no space left on device \(ENOSPC\);/);
    assert.deepEqual([fast?.code, fast?.stderr], [bundle?.code, bundle?.stderr]);
  });
});
