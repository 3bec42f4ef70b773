/**
 * The entry point of the standalone executable (scripts/build-exe.mjs, docs/standalone.md).
 *
 * The build runs this file once, inside the Node.js the executable carries, to make a V8 start-up
 * snapshot: everything below is then already loaded when the executable starts (the command
 * tree's modules, config, output, exit codes). Only `main` runs at each start, after the snapshot
 * is deserialised, with that run's argv, environment, streams and clock: nothing read from the
 * process at build time may be kept (process.env, isTTY, HOME, the cwd and the date are all read
 * inside `main`). What a snapshot cannot hold (undici and node:http, chalk, ora, yaml) is loaded
 * by `main` on the paths that need it, as in the npm package.
 */
import { setFlagsFromString, startupSnapshot } from 'node:v8';
import { type CliPorts, main, run } from './cli.js';
import { recordCodeCaches } from './standalone-chunks.js';

/** A random word of each build (scripts/build-exe.mjs): its own code cache run, and only it. */
declare const QUEENCTL_CODE_CACHE_TOKEN: string | undefined;

function start(): void {
  // As bin/queenctl.cjs does for the npm package: V8 compiles undici's WebAssembly HTTP parser
  // with its baseline compiler only, so process exit does not wait for an optimising compile.
  setFlagsFromString('--liftoff-only');
  const record = process.env.QUEENCTL_EXE_RECORD_CODE_CACHE;
  const token = typeof QUEENCTL_CODE_CACHE_TOKEN === 'string' ? `${QUEENCTL_CODE_CACHE_TOKEN}:` : undefined;
  if (token && record?.startsWith(token)) recordCodeCaches(record.slice(token.length));
  // Options for the Node.js on the host are not this Node's: it ignores them (the build's
  // execArgvExtension 'none'), and says so rather than act as if they applied.
  if (process.env.NODE_OPTIONS?.trim())
    process.stderr.write(
      'queenctl: NODE_OPTIONS is ignored: this queenctl carries its own Node.js and takes no Node.js options\n',
    );
  // argv[0] and argv[1] are both the executable in a single executable application.
  void main(process.argv.slice(2));
}

/**
 * At build time, before the snapshot is taken: the runs every start makes most (the command tree
 * built, flags parsed, help printed), on ports that touch nothing of the process, so that the
 * code they compile is in the snapshot instead of being compiled again at each start.
 */
async function warmUp(): Promise<void> {
  const sink = { write: () => true, isTTY: false };
  const ports: CliPorts = {
    env: {},
    stdout: sink,
    stderr: sink,
    get stdin(): CliPorts['stdin'] {
      throw new Error('the warm-up reads no standard input');
    },
    onSignal: () => {},
    setExitCode: () => {},
    exit: () => {},
    nodeVersion: process.version,
  };
  for (const argv of [['--version'], ['--help'], ['lease', 'extend', '--help'], ['lease', 'extend', '--bogus']])
    await run(argv, ports);
}

if (startupSnapshot.isBuildingSnapshot()) {
  void warmUp();
  startupSnapshot.setDeserializeMainFunction(start);
} else start();
