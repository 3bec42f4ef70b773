/**
 * The CLI of the standalone executable, evaluated by its entry (src/standalone.ts). It runs
 * `main` with that run's argv, environment, streams and clock, as bin/queenctl.cjs does for the
 * npm package.
 */
import { main } from './cli.js';

// Options for a Node.js on the host are not the executable's: Bun never reads them. BUN_OPTIONS
// it does read, even in a compiled executable, before queenctl runs (docs/standalone.md,
// "Environment"): said, so that a stray one is not mistaken for queenctl's behaviour.
if (process.env.NODE_OPTIONS?.trim())
  process.stderr.write(
    'queenctl: NODE_OPTIONS is ignored: this queenctl carries its own runtime (Bun) and takes no Node.js options\n',
  );
if (process.env.BUN_OPTIONS?.trim())
  process.stderr.write(
    'queenctl: BUN_OPTIONS is set, and the Bun runtime this queenctl carries applied it before queenctl started\n',
  );
// argv[0] is the runtime and argv[1] the script, as with node.
void main(process.argv.slice(2));
