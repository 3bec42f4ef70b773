/**
 * The CLI of the standalone executable, a chunk of its own (src/standalone-chunks.ts), loaded by
 * src/standalone.ts at each start. It runs `main` with that run's argv, environment, streams and
 * clock, as bin/queenctl.cjs does for the npm package.
 */
import { main } from './cli.js';

// Options for the Node.js on the host are not this Node's: it ignores them (the build's
// execArgvExtension 'none'), and says so rather than act as if they applied.
if (process.env.NODE_OPTIONS?.trim())
  process.stderr.write(
    'queenctl: NODE_OPTIONS is ignored: this queenctl carries its own Node.js and takes no Node.js options\n',
  );
// argv[0] and argv[1] are both the executable in a single executable application.
void main(process.argv.slice(2));
