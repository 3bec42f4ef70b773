/**
 * What the reference docs and man pages say beyond the command tree: the variables queenctl reads,
 * the files it keeps, and the exit codes of every command (docs/cli-contract.md#exit-codes).
 * Plain text; each renderer escapes it for its format.
 */
import type { ExitCodeDoc } from './model.js';

export interface Entry {
  name: string;
  text: string;
}

/** What queenctl reads from its environment (src/config/, src/commands/globals.ts, src/cli.ts). */
export const ENVIRONMENT: readonly Entry[] = [
  { name: 'QUEEN_SERVER', text: 'the broker URL (replicas separated by commas) when --server is not given.' },
  {
    name: 'QUEEN_TOKEN',
    text: 'the bearer token when neither --token nor --token-file is given; also what a token-ref of env reads.',
  },
  { name: 'QUEEN_CONTEXT', text: "the context to use, over the config file's current-context; --context wins." },
  {
    name: 'QUEEN_CONFIG',
    text: 'the config file, when --config is not given (default ~/.queen/config.yaml); it must exist.',
  },
  { name: 'QUEENCTL_DEBUG', text: 'when set, an internal error prints its stack trace.' },
  {
    name: 'QUEENCTL_COMPLETION_TIMEOUT',
    text:
      'how long shell completion waits for the broker to list the lease ids held now, or its groups, queues ' +
      'and partitions (a duration; default 500ms).',
  },
  { name: 'NO_COLOR', text: 'when set and not empty, no colour (as --no-color).' },
  { name: 'FORCE_COLOR', text: 'colour even when not on a terminal (as --color); 0 or false: no colour.' },
  { name: 'TERM', text: 'dumb: no colour, and lease watch prints a line per event instead of a spinner.' },
  {
    name: 'HTTPS_PROXY, HTTP_PROXY, NO_PROXY',
    text:
      'a proxy (http://, https:// or socks5://; host:port is http://) for https and http brokers, and the ' +
      "hosts reached directly, read as Go's ProxyFromEnvironment reads them: the upper-case names first; " +
      'localhost and loopback addresses are never proxied; under CGI (REQUEST_METHOD set) HTTP_PROXY is ' +
      'ignored. A value that is not such a URL is a usage error.',
  },
  { name: 'NODE_EXTRA_CA_CERTS', text: 'a PEM file of CA certificates trusted beside the system ones for https.' },
  {
    name: 'XDG_CACHE_HOME',
    text: 'where the caches go (below), when it is an absolute path; else ~/.cache.',
  },
  {
    name: 'QUEEN_LEASE_ID, QUEEN_LEASE_IDS, QUEEN_LEASE_EXPIRES_AT',
    text:
      'set for the command lease watch runs: the first lease id, all of them separated by spaces, and the ' +
      "earliest expiry of them all as the broker wrote it; QUEEN_TOKEN is removed from that command's environment.",
  },
];

/** The files queenctl reads and keeps (src/config/file.ts, src/config/memo.ts, bin/queenctl.cjs). */
export const FILES: readonly Entry[] = [
  {
    name: '~/.queen/config.yaml',
    text:
      'the contexts: brokers, where their tokens are, TLS settings (or --config, or QUEEN_CONFIG); the same ' +
      'file the Go queenctl reads. config set-context and use-context write it atomically, mode 0600, ' +
      'never through a symbolic link.',
  },
  {
    name: '$XDG_CACHE_HOME/queenctl/config/',
    text:
      'what this build parsed of an unchanged config file, so most runs skip parsing it; used only when ' +
      'yours (directories writable by you alone, files mode 0600: -v says why not); safe to delete.',
  },
  {
    name: '$XDG_CACHE_HOME/queenctl/code/',
    text:
      'code caches the npm package makes on a Node.js version other than the one it was built with; ' +
      'used only when yours, as above; safe to delete.',
  },
];

/** Every command's exit codes (docs/cli-contract.md#exit-codes), for queenctl(1). */
/** Every command's (docs/cli-contract.md, "Output that cannot be written"). */
const OUTPUT_FAILED: ExitCodeDoc = {
  code: '74',
  meaning: 'the output could not be written to standard output (a full disk, an I/O error)',
};

export const EXIT_CODES: readonly ExitCodeDoc[] = [
  { code: '0', meaning: 'success' },
  { code: '1', meaning: 'usage or configuration error; nothing was sent to the broker' },
  { code: '2', meaning: 'broker error: unreachable, timed out, 5xx, or an answer outside the contract' },
  { code: '3', meaning: 'authentication or authorization refused (401 or 403)' },
  { code: '4', meaning: 'lease not held: the broker answered and renewed nothing (renewed: 0), even at HTTP 200' },
  OUTPUT_FAILED,
  { code: '129/130/143', meaning: 'stopped by SIGHUP/SIGINT/SIGTERM (a verb that talks to the broker)' },
  { code: '141', meaning: 'the reader of standard output went away' },
];

/** The exit codes of a command whose help has no `Exit codes:` block (config, completion, help). */
export const LOCAL_EXIT_CODES: readonly ExitCodeDoc[] = [
  { code: '0', meaning: 'success' },
  {
    code: '1',
    meaning: 'usage or configuration error: a bad flag or argument, or a config file that cannot be read or written',
  },
  OUTPUT_FAILED,
];
