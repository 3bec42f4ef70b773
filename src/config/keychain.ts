/**
 * `token-ref: keychain://<name>`: the token kept in the platform's own secret store, read
 * through the store's command-line tool so queenctl needs no native module.
 *
 * `keychain://prod` is the item of service `queenctl` and account `prod`;
 * `keychain://<service>/<account>` names both. On Linux that is the Secret Service item with
 * attributes `service` and `username` (what go-keyring, the usual Go library, stores), read
 * with `secret-tool lookup`; on macOS the generic password of that service and account, read
 * with `security find-generic-password -w`.
 */
import { execFile } from 'node:child_process';
import { UsageError } from '../exit.js';

export const KEYCHAIN_SERVICE = 'queenctl';
/** A locked keyring may ask its owner to unlock it; give them time, but not forever. */
const LOOKUP_TIMEOUT_MS = 60_000;

export interface SecretToolResult {
  /** null: the tool is not installed. */
  code: number | null;
  stdout: string;
  stderr: string;
}

export type SecretToolRunner = (file: string, args: string[]) => Promise<SecretToolResult>;

export interface KeychainItem {
  service: string;
  account: string;
}

export function parseKeychainRef(ref: string): KeychainItem {
  const rest = ref.slice('keychain://'.length);
  const [first, ...more] = rest.split('/');
  const item =
    more.length > 0
      ? { service: first ?? '', account: more.join('/') }
      : { service: KEYCHAIN_SERVICE, account: first ?? '' };
  if (!item.service || !item.account) {
    throw new UsageError(
      `token-ref ${JSON.stringify(ref)} names no keychain item`,
      'use keychain://<name> or keychain://<service>/<account>',
    );
  }
  return item;
}

interface Platform {
  tool: string;
  args(item: KeychainItem): string[];
  install: string;
  store(item: KeychainItem): string;
}

const PLATFORMS: Partial<Record<NodeJS.Platform, Platform>> = {
  linux: {
    tool: 'secret-tool',
    args: (item) => ['lookup', 'service', item.service, 'username', item.account],
    install:
      'install libsecret-tools (Debian, Ubuntu) or libsecret (Fedora, Arch), ' +
      'with a Secret Service such as GNOME Keyring or KeePassXC running',
    store: (item) =>
      `secret-tool store --label='queenctl ${item.account}' service ${item.service} username ${item.account}`,
  },
  darwin: {
    tool: 'security',
    args: (item) => ['find-generic-password', '-s', item.service, '-a', item.account, '-w'],
    install: 'security ships with macOS; check that /usr/bin is on PATH',
    store: (item) => `security add-generic-password -s ${item.service} -a ${item.account} -w`,
  },
};

const ALTERNATIVES =
  'or use token-ref: file:///abs/path/to/token (mode 0600), token-ref: env with QUEEN_TOKEN, or --token-file <path>';

/** The token in the keychain item; a UsageError that says what to do when it cannot be had. */
export async function readKeychainToken(
  ref: string,
  where: string,
  platform: NodeJS.Platform,
  run: SecretToolRunner = runSecretTool,
): Promise<string> {
  const item = parseKeychainRef(ref);
  const support = PLATFORMS[platform];
  if (!support) {
    throw new UsageError(`the ${where} is ${ref}, and queenctl cannot read a keychain on ${platform}`, ALTERNATIVES);
  }
  const result = await run(support.tool, support.args(item));
  if (result.code === null) {
    throw new UsageError(
      `the ${where} is ${ref}, which needs \`${support.tool}\`, and it is not installed or not on PATH`,
      `${support.install}; ${ALTERNATIVES}`,
    );
  }
  // secret-tool prints nothing and exits 1 for a missing item; security exits 44.
  const token = result.stdout.replace(/\r?\n$/, '');
  if (result.code !== 0 || token === '') {
    const said = result.stderr.trim().split('\n')[0];
    throw new UsageError(
      `the ${where} is ${ref}, and ${support.tool} found no such item ` +
        `(service ${item.service}, account ${item.account})${said ? `: ${said}` : ''}`,
      `store it with: ${support.store(item)}; ${ALTERNATIVES}`,
    );
  }
  return token;
}

/**
 * Runs the platform's tool in `env` (default: this process's); its stdout is the secret, so it
 * is neither logged nor echoed.
 */
export function runSecretTool(file: string, args: string[], env?: NodeJS.ProcessEnv): Promise<SecretToolResult> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { timeout: LOOKUP_TIMEOUT_MS, encoding: 'utf8', maxBuffer: 64 * 1024, env },
      (error, stdout, stderr) => {
        const code = (error as NodeJS.ErrnoException | null)?.code;
        if (code === 'ENOENT') return resolve({ code: null, stdout: '', stderr: '' });
        const status = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({
          code: status,
          stdout,
          stderr: error?.killed ? `no answer within ${LOOKUP_TIMEOUT_MS / 1000}s` : stderr,
        });
      },
    );
  });
}
