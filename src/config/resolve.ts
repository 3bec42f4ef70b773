/**
 * Where to connect and with which token, by the Go queenctl's precedence (lowest to highest):
 * the file's current-context, $QUEEN_CONTEXT, --context, $QUEEN_SERVER / $QUEEN_TOKEN,
 * --server / --token. Overriding the server keeps the context's token unless a token is given.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../exit.js';
import { defaultConfigPath, readConfigFile, type ContextEntry } from './file.js';

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
  server: string;
  token: string | undefined;
  /** Where the token came from, for -v (never the token itself). */
  tokenSource: string;
  insecure: boolean;
  ca: string | undefined;
  contextName: string | undefined;
}

export async function resolveConnection(flags: ConnectionFlags, env: NodeJS.ProcessEnv): Promise<Connection> {
  const configPath = flags.config ?? env.QUEEN_CONFIG;
  const config = await readConfigFile(configPath ?? defaultConfigPath(env), configPath !== undefined);
  const contextName = flags.context ?? env.QUEEN_CONTEXT ?? config.currentContext;
  let context: ContextEntry | undefined;
  if (contextName !== undefined) {
    context = config.contexts.find((entry) => entry.name === contextName);
    // A current-context naming nothing is the file's problem only when asked for by name.
    if (!context && (flags.context !== undefined || env.QUEEN_CONTEXT !== undefined)) {
      const known = config.contexts.map((entry) => entry.name);
      throw new UsageError(
        `no context named ${JSON.stringify(contextName)} in ${config.path}`,
        known.length ? `known contexts: ${known.join(', ')}` : 'create one with: queenctl config set-context <name> --server <url>',
      );
    }
  }
  const server = checkServer(flags.server ?? env.QUEEN_SERVER ?? context?.server ?? DEFAULT_SERVER);
  const { token, source } = await resolveToken(flags, env, context);
  const cacertPath = flags.cacert ?? context?.cacert;
  return {
    server,
    token,
    tokenSource: source,
    insecure: flags.insecure ?? context?.insecure ?? false,
    ca: cacertPath ? await readSecretFile(cacertPath, '--cacert') : undefined,
    contextName: context?.name,
  };
}

function checkServer(server: string): string {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new UsageError(`${JSON.stringify(server)} is not a broker URL`, 'use a URL such as http://localhost:6632');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`the broker URL must start with http:// or https://, not ${url.protocol}`);
  }
  return server.replace(/\/+$/, '');
}

async function resolveToken(
  flags: ConnectionFlags,
  env: NodeJS.ProcessEnv,
  context: ContextEntry | undefined,
): Promise<{ token: string | undefined; source: string }> {
  if (flags.token !== undefined && flags.tokenFile !== undefined) {
    throw new UsageError('give --token or --token-file, not both');
  }
  if (flags.token !== undefined) return { token: nonEmpty(flags.token, '--token'), source: '--token' };
  if (flags.tokenFile !== undefined) {
    return { token: nonEmpty(await readSecretFile(flags.tokenFile, '--token-file'), '--token-file'), source: '--token-file' };
  }
  if (env.QUEEN_TOKEN) return { token: env.QUEEN_TOKEN.trim(), source: 'QUEEN_TOKEN' };
  const ref = context?.['token-ref'];
  if (!ref) return { token: undefined, source: 'none' };
  return { token: await readTokenRef(ref, context?.name ?? ''), source: `context ${context?.name} token-ref` };
}

async function readTokenRef(ref: string, contextName: string): Promise<string> {
  const where = `token-ref of context ${JSON.stringify(contextName)}`;
  if (ref === 'env') {
    throw new UsageError(`the ${where} is env, but QUEEN_TOKEN is not set`);
  }
  if (ref.startsWith('literal:')) return nonEmpty(ref.slice('literal:'.length), where);
  if (ref.startsWith('file://')) {
    return nonEmpty(await readSecretFile(fileURLToPath(ref), where), where);
  }
  if (ref.startsWith('keychain://')) {
    throw new UsageError(
      `the ${where} is ${ref}, and this queenctl cannot read keychains yet`,
      'use token-ref: file:///abs/path or env (QUEEN_TOKEN), or --token-file',
    );
  }
  throw new UsageError(`the ${where} is ${JSON.stringify(ref)}: use env, file:///abs/path, literal:<token> or keychain://<name>`);
}

async function readSecretFile(path: string, what: string): Promise<string> {
  try {
    // A trailing newline is not part of the token (contract).
    return (await readFile(path, 'utf8')).replace(/\r?\n$/, '');
  } catch (error) {
    throw new UsageError(`cannot read ${what} ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

function nonEmpty(token: string, what: string): string {
  if (token.trim() === '') throw new UsageError(`${what} is empty`);
  return token;
}
