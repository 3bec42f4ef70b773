/**
 * The entry point of the standalone executable (scripts/build-exe.mjs, docs/standalone.md),
 * compiled with the rest of queenctl into one program by Bun's compiler. Started as the guardian
 * of a watched command (src/watch/guardian.ts), it runs only the guardian: the CLI's modules are
 * never evaluated. Otherwise it runs the CLI (src/standalone-cli.ts).
 */
import { GUARDIAN_ARG, GUARDIAN_ENV, guardCommandGroup } from './watch/guardian.js';

/**
 * The SHA-256 of the bundle this executable was compiled from (scripts/build-exe.mjs writes it
 * here, and into build.json): the release's tests find it in each executable, which they cannot
 * all run. QUEENCTL_DEBUG prints it.
 */
declare const QUEENCTL_BUNDLE_SHA256: string;

if (process.env.QUEENCTL_DEBUG) process.stderr.write(`queenctl: bundle sha256:${QUEENCTL_BUNDLE_SHA256}\n`);
// The guardian, run by a watch as this executable again (src/watch/process-group.ts): only with
// both its argument and its variable, never by a mistyped command line. Bun's argv is
// [runtime, script, ...arguments], as Node.js's.
if (process.env[GUARDIAN_ENV] === '1' && process.argv.length === 3 && process.argv[2] === GUARDIAN_ARG)
  guardCommandGroup();
// The bundle turns this import into a function that evaluates the CLI's modules when called.
else void import('./standalone-cli.js');
