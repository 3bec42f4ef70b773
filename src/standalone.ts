/**
 * The entry point of the standalone executable (scripts/build-exe.mjs, docs/standalone.md): the
 * script node:sea runs at each start. It only loads the CLI, which is a chunk of its own
 * (src/standalone-cli.ts) compiled through the code cache the build recorded by running the
 * finished executable, so that what a run needs is not compiled again at every start.
 *
 * No start-up snapshot: measured side by side, deserialising a user snapshot (6.4 MB of Node's
 * own state before queenctl adds anything) costs more than loading the CLI from a code cache.
 */
import { loadChunk, recordCodeCaches } from './standalone-chunks.js';
import { GUARDIAN_ARG, GUARDIAN_ENV, guardCommandGroup } from './watch/guardian.js';

/** A random word of each build (scripts/build-exe.mjs): its own code cache runs, and only they. */
declare const QUEENCTL_CODE_CACHE_TOKEN: string | undefined;

const record = process.env.QUEENCTL_EXE_RECORD_CODE_CACHE;
const token = typeof QUEENCTL_CODE_CACHE_TOKEN === 'string' ? `${QUEENCTL_CODE_CACHE_TOKEN}:` : undefined;
if (token && record?.startsWith(token)) recordCodeCaches(record.slice(token.length));
// The guardian of a watched command (src/watch/guardian.ts), run by a watch as this executable
// again: only with both its argument and its variable, never by a mistyped command line; and
// without the CLI, so it starts quickly and stays small.
if (process.env[GUARDIAN_ENV] === '1' && process.argv.length === 3 && process.argv[2] === GUARDIAN_ARG)
  guardCommandGroup();
else loadChunk('cli');
