/**
 * Where to connect and with which token, by the Go queenctl's precedence (lowest to highest):
 * the file's current-context, $QUEEN_CONTEXT, --context, $QUEEN_SERVER / $QUEEN_TOKEN,
 * --server / --token. Overriding the server keeps the context's token unless a token is given.
 *
 * Nothing here ever puts the token into a message: errors and -v notes name where it came from.
 */
// Small files read at start-up through files.ts: at once when regular, a FIFO in the thread pool.
import { dirname, resolve as resolvePath } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../exit.js';
import { findContext, knownContexts, readConfigFor, type ConfigFile, type ContextEntry } from './file.js';
import { exposure, exposureWarning, readTextFile } from './files.js';
import type { SecretToolRunner } from './keychain.js';

export const DEFAULT_SERVER = 'http://localhost:6632';

export interface ConnectionFlags {
  server?: string | undefined;
  token?: string | undefined;
  tokenFile?: string | undefined;
  context?: string | undefined;
  config?: string | undefined;
  insecure?: boolean | undefined;
  cacert?: string | undefined;
}

export interface Connection {
  /** The broker's replicas, in the order to try them; comma-joined for BrokerClient. */
  server: string;
  servers: string[];
  token: string | undefined;
  /** Where the token came from, for -v (never the token itself). */
  tokenSource: string;
  insecure: boolean;
  ca: string | undefined;
  contextName: string | undefined;
  /** Where `server` came from: --server and QUEEN_SERVER override the context's. */
  serverFrom: ServerSource;
  /** The context's own server, when it names one (overridden or not). */
  contextServer: string | undefined;
  /** To say on stderr before anything is sent: the token or the broker at risk. */
  warnings: string[];
  /** -v: where each setting came from. */
  notes: string[];
}

/** Which setting named the broker, highest precedence first. */
export type ServerSource = '--server' | 'QUEEN_SERVER' | 'context' | 'default';

export interface ResolveOptions {
  platform?: NodeJS.Platform;
  runSecretTool?: SecretToolRunner;
}

/** An environment variable that is set to something; `QUEEN_TOKEN=` is not a token. */
function fromEnv(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value;
}

export interface ChosenContext {
  name: string;
  /** Which of the three named it, in words: `--context`, `QUEEN_CONTEXT`, `the current-context of <file>`. */
  how: string;
  from: 'flag' | 'env' | 'file';
}

/** The context in force: --context, else $QUEEN_CONTEXT, else the file's current-context. */
export function chooseContext(
  flags: Pick<ConnectionFlags, 'context'>,
  env: NodeJS.ProcessEnv,
  config: ConfigFile,
): ChosenContext | undefined {
  if (flags.context !== undefined) return { name: flags.context, how: '--context', from: 'flag' };
  const fromVariable = fromEnv(env, 'QUEEN_CONTEXT');
  if (fromVariable !== undefined) return { name: fromVariable.trim(), how: 'QUEEN_CONTEXT', from: 'env' };
  if (config.currentContext !== undefined)
    return { name: config.currentContext, how: `the current-context of ${config.path}`, from: 'file' };
  return undefined;
}

/**
 * Nothing names a context, in a file that has some: current-context was never set, or its
 * context was deleted. `forBroker`: a command that needs a broker, for which --server and
 * QUEEN_SERVER would also do.
 */
export function noContextChosen(config: ConfigFile, forBroker: boolean): UsageError {
  const choosers = forBroker
    ? 'none of --context, QUEEN_CONTEXT, --server or QUEEN_SERVER'
    : 'neither --context nor QUEEN_CONTEXT';
  const file = config.exists
    ? `${config.path} has ${forBroker ? 'contexts but ' : ''}no current-context`
    : `there is no config file at ${config.path}`;
  const message = `no context is chosen: ${file}, and ${choosers} is set`;
  if (config.contexts.length === 0) return new UsageError(message, knownContexts(config));
  return new UsageError(
    message,
    `choose one with: queenctl config use-context <name> (${knownContexts(config)})` +
      (forBroker ? '\n  or name the broker for this run: --context <name> or --server <url>' : ''),
  );
}

export async function resolveConnection(
  flags: ConnectionFlags,
  env: NodeJS.ProcessEnv,
  options: ResolveOptions = {},
): Promise<Connection> {
  const platform = options.platform ?? process.platform;
  const config = await readConfigFor(flags.config, env, platform);
  const notes: string[] = [config.exists ? `config file ${config.path}` : `no config file at ${config.path}`];

  const chosen = chooseContext(flags, env, config);
  const flagServer = flags.server;
  const envServer = fromEnv(env, 'QUEEN_SERVER');
  // The default broker is for a machine without contexts. With contexts and none chosen, which
  // broker was meant is a guess; sending a lease to the wrong one is worse than stopping.
  if (!chosen && config.contexts.length > 0 && flagServer === undefined && envServer === undefined) {
    throw noContextChosen(config, true);
  }
  // A context named by any of the three must exist: talking to another broker than the one
  // the operator chose is worse than stopping (kubectl does the same).
  const fix =
    chosen?.from === 'file' && config.contexts.length > 0
      ? 'choose one with: queenctl config use-context <name>'
      : undefined;
  const context = chosen ? findContext(config, chosen.name, `from ${chosen.how}`, fix) : undefined;
  if (chosen) notes.push(`context ${JSON.stringify(chosen.name)} from ${chosen.how}`);

  const [serverSpec, serverHow, serverFrom]: [string, string, ServerSource] =
    flagServer !== undefined
      ? [flagServer, '--server', '--server']
      : envServer !== undefined
        ? [envServer, 'QUEEN_SERVER', 'QUEEN_SERVER']
        : context?.server !== undefined
          ? [context.server, `context ${JSON.stringify(context.name)}`, 'context']
          : [DEFAULT_SERVER, 'the default', 'default'];
  const servers = parseServers(serverSpec, serverHow);
  notes.push(`server ${servers.join(', ')} from ${serverHow}`);

  const { token, source } = await resolveToken(flags, env, context, platform, options.runSecretTool);
  notes.push(token === undefined ? 'no token' : `token from ${source} (${token.length} characters; never shown)`);

  const insecure = flags.insecure ?? context?.insecure ?? false;
  const cacertPath =
    flags.cacert ?? (context?.cacert !== undefined ? resolvePath(dirname(config.path), context.cacert) : undefined);
  const ca =
    cacertPath !== undefined
      ? await readCaFile(
          cacertPath,
          flags.cacert !== undefined ? '--cacert' : `the cacert of context ${JSON.stringify(context?.name)}`,
        )
      : undefined;
  if (cacertPath !== undefined) notes.push(`trusting only the CA in ${cacertPath} for https`);

  // The file's own first: others could have changed where this run goes, or read its token.
  const warnings: string[] = config.warning ? [config.warning] : [];
  const https = servers.filter((server) => server.startsWith('https:'));
  if (insecure && https.length > 0) {
    warnings.push(
      `${flags.insecure ? '--insecure' : `context ${JSON.stringify(context?.name)} has insecure: true`}: ` +
        `the TLS certificate of ${listHosts(https)} is not verified, ` +
        'so anyone on the network path can pose as the broker' +
        (token !== undefined ? ' and take the token' : '') +
        '. Trust its CA with --cacert <file> instead',
    );
  }
  if (token !== undefined) {
    const exposed = servers.filter((server) => server.startsWith('http:') && !isLoopbackHost(new URL(server).hostname));
    if (exposed.length > 0) {
      warnings.push(
        `the bearer token goes over plain http to ${listHosts(exposed)}: ` +
          'anyone on the network path can read and reuse it. Use https://',
      );
    }
  }
  if (token !== undefined && platform !== 'win32') {
    const file = source.startsWith('--token-file ') ? source.slice('--token-file '.length) : tokenFileOf(context);
    // Its owner is not asked: another owner could only swap the token queenctl sends.
    const found = file !== undefined ? exposure(file, true, null) : undefined;
    if (file !== undefined && found !== undefined) warnings.push(exposureWarning('the token file', file, found));
  }

  return {
    server: servers.join(','),
    servers,
    token,
    tokenSource: source,
    insecure,
    ca,
    contextName: context?.name,
    serverFrom,
    contextServer: context?.server,
    warnings,
    notes,
  };
}

function listHosts(servers: string[]): string {
  return servers.map((server) => new URL(server).host).join(', ');
}

/** 127.0.0.0/8, ::1 and localhost: traffic that never leaves the machine. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
  return (
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    host === '::1' ||
    /^127(\.\d{1,3}){3}$/.test(host) ||
    host === '::ffff:127.0.0.1'
  );
}

/**
 * One broker URL, or replicas of one broker separated by commas (they share a database, so any
 * can renew a lease). Credentials in a URL are refused: they would end up in messages and
 * logs, and the broker takes a bearer token anyway.
 */
export function parseServers(spec: string, how: string): string[] {
  const entries = spec.split(',').map((entry) => entry.trim());
  if (entries.every((entry) => entry === ''))
    throw new UsageError(`${how} gives no broker URL`, 'use a URL such as http://localhost:6632');
  const servers: string[] = [];
  for (const entry of entries) {
    if (entry === '')
      throw new UsageError(
        `${how} has an empty entry in its list of brokers`,
        'separate replicas with single commas: https://a:6632,https://b:6632',
      );
    let url: URL;
    try {
      url = new URL(entry);
    } catch {
      throw new UsageError(
        `${JSON.stringify(entry)} (from ${how}) is not a broker URL`,
        'use a URL such as http://localhost:6632 or https://queen.internal:6632',
      );
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new UsageError(`the broker URL from ${how} must start with http:// or https://, not ${url.protocol}`);
    }
    if (url.username || url.password) {
      throw new UsageError(
        `the broker URL from ${how} carries a user name or password`,
        "remove it: queenctl sends a bearer token (--token-file, QUEEN_TOKEN or the context's token-ref)",
      );
    }
    const server = `${url.origin}${url.pathname}`.replace(/\/+$/, '');
    if (!servers.includes(server)) servers.push(server);
  }
  return servers;
}

async function resolveToken(
  flags: ConnectionFlags,
  env: NodeJS.ProcessEnv,
  context: ContextEntry | undefined,
  platform: NodeJS.Platform,
  run: SecretToolRunner | undefined,
): Promise<{ token: string | undefined; source: string }> {
  if (flags.token !== undefined && flags.tokenFile !== undefined) {
    throw new UsageError('give --token or --token-file, not both');
  }
  if (flags.token !== undefined) return { token: checkToken(flags.token, '--token'), source: '--token' };
  if (flags.tokenFile !== undefined) {
    return {
      token: checkToken(await readTokenFile(flags.tokenFile, '--token-file'), `the token file ${flags.tokenFile}`),
      source: `--token-file ${flags.tokenFile}`,
    };
  }
  const envToken = fromEnv(env, 'QUEEN_TOKEN');
  if (envToken !== undefined) return { token: checkToken(envToken.trim(), 'QUEEN_TOKEN'), source: 'QUEEN_TOKEN' };
  const ref = context?.['token-ref'];
  if (ref === undefined || context === undefined) return { token: undefined, source: 'none' };
  const where = `token-ref of context ${JSON.stringify(context.name)}`;
  const shown = ref.startsWith('literal:') ? 'literal:[redacted]' : ref;
  return {
    token: checkToken(await readTokenRef(ref, where, platform, run, env), `the ${where}`),
    source: `the ${where} (${shown})`,
  };
}

async function readTokenRef(
  ref: string,
  where: string,
  platform: NodeJS.Platform,
  run: SecretToolRunner | undefined,
  env: NodeJS.ProcessEnv,
): Promise<string> {
  if (ref === 'env') {
    throw new UsageError(
      `the ${where} is env, but QUEEN_TOKEN is not set`,
      'export QUEEN_TOKEN, or give --token-file <path>',
    );
  }
  if (ref.startsWith('literal:')) return ref.slice('literal:'.length);
  if (ref.startsWith('file://')) {
    let path: string;
    try {
      path = fileURLToPath(ref);
    } catch {
      throw new UsageError(
        `the ${where} is not a file URL of an absolute path`,
        'write it as file:///abs/path/to/token',
      );
    }
    return readTokenFile(path, `the ${where}`);
  }
  if (ref.startsWith('keychain://')) {
    // Loaded only for a keychain ref: it brings in child_process.
    const { readKeychainToken, runSecretTool } = await import('./keychain.js');
    // The run's environment (its PATH finds the tool), not necessarily this process's.
    return readKeychainToken(ref, where, platform, run ?? ((file, args) => runSecretTool(file, args, env)));
  }
  throw new UsageError(
    `the ${where} is neither env, file://, literal: nor keychain://`,
    'use env, file:///abs/path, literal:<token> or keychain://<name>',
  );
}

/** The context's token file, when its token-ref is one. */
function tokenFileOf(context: ContextEntry | undefined): string | undefined {
  const ref = context?.['token-ref'];
  if (!ref?.startsWith('file://')) return undefined;
  try {
    return fileURLToPath(ref);
  } catch {
    return undefined;
  }
}

async function readTokenFile(path: string, what: string): Promise<string> {
  try {
    // A trailing newline is not part of the token (contract).
    return (await readTextFile(path)).replace(/\r?\n$/, '');
  } catch (error) {
    throw unreadable(what, path, error);
  }
}

async function readCaFile(path: string, what: string): Promise<string> {
  let pem: string;
  try {
    pem = await readTextFile(path);
  } catch (error) {
    throw unreadable(what, path, error);
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new UsageError(
      `${what} ${path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`,
      "give the CA certificate that signed the broker's certificate, in PEM",
    );
  }
  return pem;
}

/**
 * A bearer token is one run of visible characters. Anything else (a space, a second line) would
 * be refused by the HTTP layer with a message that could quote it, so it is refused here
 * without showing it.
 */
function checkToken(token: string, what: string): string {
  if (token === '') throw new UsageError(`${what} is empty`);
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw new UsageError(
      `${what} holds spaces, line breaks or other characters a bearer token cannot have (it is not shown)`,
      'the token is the JWT alone, on one line',
    );
  }
  return token;
}

const UNREADABLE_REASONS: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EISDIR: 'it is a directory',
};

/** A file that cannot be read, said in words with the way out. */
function unreadable(what: string, path: string, error: unknown): UsageError {
  const code = (error as NodeJS.ErrnoException).code;
  const words = code ? UNREADABLE_REASONS[code] : undefined;
  const reason = words ? `${words} (${code})` : (code ?? (error as Error).message);
  return new UsageError(
    `cannot read ${what} ${path}: ${reason}`,
    'check the path, and that this user may read the file',
  );
}
