/**
 * The Go queenctl's config file (~/.queen/config.yaml, kubectl-style; BROKER-FACTS.md).
 * Read only when it exists, and the YAML parser only loaded then.
 */
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { UsageError } from '../exit.js';

export interface ContextEntry {
  name: string;
  server?: string;
  'token-ref'?: string;
  insecure?: boolean;
  cacert?: string;
}

export interface ConfigFile {
  path: string;
  currentContext: string | undefined;
  contexts: ContextEntry[];
}

export function defaultConfigPath(env: NodeJS.ProcessEnv): string {
  return join(env.HOME || homedir(), '.queen', 'config.yaml');
}

/** Reads the file; a missing default file is an empty config, a missing named one an error. */
export async function readConfigFile(path: string, named: boolean): Promise<ConfigFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && !named) return { path, currentContext: undefined, contexts: [] };
    throw new UsageError(`cannot read the config file ${path}: ${code === 'ENOENT' ? 'no such file' : (error as Error).message}`);
  }
  return parseConfig(path, text);
}

export async function parseConfig(path: string, text: string): Promise<ConfigFile> {
  const { parseDocument } = await import('yaml');
  const document = parseDocument(text, { prettyErrors: true });
  const problem = document.errors[0];
  if (problem) {
    const line = problem.linePos?.[0]?.line;
    throw new UsageError(`the config file ${path} is not valid YAML${line ? ` (line ${line})` : ''}: ${problem.message.split('\n')[0]}`);
  }
  const data: unknown = document.toJS() ?? {};
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw new UsageError(`the config file ${path} is not a mapping of current-context and contexts`);
  }
  const record = data as Record<string, unknown>;
  const contexts = record.contexts ?? [];
  if (!Array.isArray(contexts) || contexts.some((c) => typeof c !== 'object' || c === null || typeof (c as ContextEntry).name !== 'string')) {
    throw new UsageError(`the config file ${path}: contexts must be a list of entries with a name`);
  }
  const current = record['current-context'];
  if (current !== undefined && current !== null && typeof current !== 'string') {
    throw new UsageError(`the config file ${path}: current-context must be a name`);
  }
  return { path, currentContext: current ?? undefined, contexts: contexts as ContextEntry[] };
}
