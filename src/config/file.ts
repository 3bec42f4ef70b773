/**
 * The Go queenctl's config file (~/.queen/config.yaml, kubectl-style; docs/cli-contract.md#config-file).
 * Read only when it exists, and the YAML parser only loaded then: a lease command without a
 * config file never pays for it. A missing file is an empty config, never an error; a malformed
 * one is a usage error that names the file and the line.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Alias, Document, LineCounter, Node as YamlNode, YAMLMap } from 'yaml';
import { UsageError } from '../exit.js';
import { escapeText } from '../output/sanitise.js';
import { exposure, exposureWarning, readTextFile } from './files.js';
import { configMemo, type ConfigMemo } from './memo.js';

export interface ContextEntry {
  name: string;
  /** One broker URL, or several replicas separated by commas. */
  server?: string;
  /** `env`, `file:///abs/path`, `literal:<token>` or `keychain://<name>`. */
  'token-ref'?: string;
  insecure?: boolean;
  /** A PEM file of the CA to trust for https. */
  cacert?: string;
}

export interface ConfigFile {
  path: string;
  /** False when there is no file at `path` (an empty config). */
  exists: boolean;
  currentContext: string | undefined;
  contexts: ContextEntry[];
  /**
   * Said on stderr once by the run that read it, -q or not: others may read the literal token
   * it holds, or change it (files.ts#exposure). Undefined when only this user may.
   */
  warning?: string | undefined;
}

/** The keys of a context this tool reads, and the type each must have. */
const CONTEXT_KEYS = {
  name: 'string',
  server: 'string',
  'token-ref': 'string',
  insecure: 'boolean',
  cacert: 'string',
} as const;

export function defaultConfigPath(env: NodeJS.ProcessEnv): string {
  return join(env.HOME || homeOfUser(), '.queen', 'config.yaml');
}

/**
 * The user's home from the password database; `/` when there is none (an empty environment in
 * a container or chroot without /etc/passwd), as login(1) does for a home that is missing.
 */
function homeOfUser(): string {
  try {
    return homedir();
  } catch {
    return '/';
  }
}

/** --config, else $QUEEN_CONFIG, else ~/.queen/config.yaml (contract, Global options). */
export function configPathFor(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return configSourceFor(flag, env).path;
}

export interface ConfigSource {
  path: string;
  /** What named the file; undefined for the default path, the only one that may be absent. */
  namedBy: '--config' | 'QUEEN_CONFIG' | undefined;
}

export function configSourceFor(flag: string | undefined, env: NodeJS.ProcessEnv): ConfigSource {
  if (flag) return { path: flag, namedBy: '--config' };
  if (env.QUEEN_CONFIG) return { path: env.QUEEN_CONFIG, namedBy: 'QUEEN_CONFIG' };
  return { path: defaultConfigPath(env), namedBy: undefined };
}

/**
 * A config file named by --config or QUEEN_CONFIG that is not there: a typo would otherwise
 * send the run to http://localhost:6632 with no token, as if nothing had been named. One line.
 */
export function missingConfig(source: ConfigSource): UsageError {
  const drop = source.namedBy === '--config' ? 'drop --config' : 'unset QUEEN_CONFIG';
  return new UsageError(
    `the config file ${source.path} (from ${source.namedBy}) does not exist: fix the path, ` +
      `create it with queenctl config set-context <name> --server <url> --config ${source.path}, ` +
      `or ${drop} to use ~/.queen/config.yaml`,
  );
}

/**
 * The file's text, or null when there is none (only the default path may be missing: one a
 * flag or QUEEN_CONFIG names is a usage error); `<(command)` and FIFOs are waited for (files.ts).
 */
export async function readConfigText(path: string | ConfigSource): Promise<string | null> {
  const source = typeof path === 'string' ? { path, namedBy: undefined } : path;
  const text = await readTextOrNull(source.path);
  if (text === null && source.namedBy !== undefined) throw missingConfig(source);
  return text;
}

async function readTextOrNull(path: string): Promise<string | null> {
  try {
    return await readTextFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ENOTDIR: a part of the path is a file (HOME is one), so there is no config file there either.
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    if (code === 'EISDIR')
      throw new UsageError(`the config file ${path} is a directory`, 'point --config or QUEEN_CONFIG at a file');
    throw new UsageError(
      `cannot read the config file ${path}: ${code ?? (error as Error).message}`,
      'check its permissions, or point --config elsewhere',
    );
  }
}

/**
 * This run's config file (--config, else $QUEEN_CONFIG, else the default), through its memo;
 * on Windows (`platform`) with neither a memo nor a warning of its mode, which need file owners.
 */
export function readConfigFor(
  flag: string | undefined,
  env: NodeJS.ProcessEnv,
  platform: NodeJS.Platform = process.platform,
): Promise<ConfigFile> {
  return readConfigFile(configSourceFor(flag, env), platform === 'win32' ? undefined : configMemo(env), platform);
}

/**
 * Reads the file; a missing file is an empty config when it is the default one. With a memo
 * (memo.ts), a file this build parsed before, unchanged, is not parsed again.
 */
export async function readConfigFile(
  from: string | ConfigSource,
  memo?: ConfigMemo,
  platform: NodeJS.Platform = process.platform,
): Promise<ConfigFile> {
  const path = typeof from === 'string' ? from : from.path;
  const text = await readConfigText(from);
  if (text === null) return { path, exists: false, currentContext: undefined, contexts: [] };
  const memoized = memo?.read(path, text);
  const config = memoized ?? (await parseConfigDocument(path, text)).config;
  if (!memoized) memo?.write(config, text);
  const warning = configWarning(path, text, config.contexts, platform);
  return warning === undefined ? config : { ...config, warning };
}

/**
 * `literal:` and a character a token may start with: not the Go example's own placeholder
 * (`# or: env | file:///abs/path | literal:<token>`), which no file should be warned for.
 */
const LITERAL_TOKEN = /literal:[\x21-\x3b\x3d-\x7e]/;

/**
 * The warning for a config file others may change (its mode, or its owner), or read when it
 * holds a literal token: in a context, or anywhere in its text (a commented-out one is as
 * readable). Shares the check of token files (files.ts#exposure).
 */
export function configWarning(
  path: string,
  text: string,
  contexts: readonly ContextEntry[],
  platform: NodeJS.Platform = process.platform,
): string | undefined {
  // Windows reports every file 0666 or 0444 and no owner: a warning would be about nothing.
  if (platform === 'win32') return undefined;
  const literal = LITERAL_TOKEN.test(text) || contexts.some((entry) => entry['token-ref']?.startsWith('literal:'));
  const found = exposure(path, literal);
  return found && exposureWarning('the config file', path, found, 'a literal token');
}

export async function parseConfig(path: string, text: string): Promise<ConfigFile> {
  return (await parseConfigDocument(path, text)).config;
}

export interface ParsedConfig {
  config: ConfigFile;
  /** The YAML document, for edits that keep comments and unknown keys (edit.ts). */
  document: Document.Parsed;
}

/** Parses and checks the file; every complaint names the file and, where it can, the line. */
export async function parseConfigDocument(path: string, text: string): Promise<ParsedConfig> {
  const yaml = await import('yaml');
  const lineCounter = new yaml.LineCounter();
  // Merge keys (`<<: *defaults`) as the Go tool's YAML library reads them.
  const document = yaml.parseDocument(text, { lineCounter, prettyErrors: false, merge: true });
  const problem = document.errors[0];
  if (problem) {
    const line = problem.linePos?.[0]?.line ?? lineCounter.linePos(problem.pos[0]).line;
    throw new UsageError(
      `the config file ${where(path, line)} is not valid YAML: ${problem.message.split('\n')[0]}`,
      'fix that line, or point --config or QUEEN_CONFIG at another file',
    );
  }
  const at = (node: unknown): string => where(path, lineOf(node, lineCounter));
  /** An alias (`*prod`) stands for the node it names; the line reported stays the alias's. */
  const deref = (node: unknown): unknown => (yaml.isAlias(node) ? node.resolve(document) : node);
  /** A mapping's keys and value nodes, merged ones (`<<`) under its own, as YAML 1.1 merges them. */
  const entriesOf = (map: YAMLMap, seen = new Set<YAMLMap>()): Map<string, unknown> => {
    const own = new Map<string, unknown>();
    const merged: YAMLMap[] = [];
    seen.add(map);
    for (const pair of map.items) {
      const key = yaml.isScalar(pair.key) ? pair.key.value : pair.key;
      if (typeof key === 'symbol' || key === '<<') {
        const source = deref(pair.value);
        for (const item of yaml.isSeq(source) ? source.items.map(deref) : [source]) {
          if (!yaml.isMap(item)) throw malformed(`${at(pair.value)}: << must merge a mapping (<<: *name)`);
          if (!seen.has(item)) merged.push(item);
        }
      } else if (typeof key === 'string' && !own.has(key)) own.set(key, pair.value);
    }
    for (const source of merged) {
      for (const [key, value] of entriesOf(source, seen)) if (!own.has(key)) own.set(key, value);
    }
    return own;
  };
  // An alias inside the node it names (`a: &a [*a]`) has no value a program can read.
  let cycle: Alias | undefined;
  yaml.visit(document, {
    Alias(_key, node, ancestors) {
      const target = node.resolve(document);
      if (!target || !ancestors.includes(target)) return undefined;
      cycle = node;
      return yaml.visit.BREAK;
    },
  });
  if (cycle) throw malformed(`${at(cycle)}: the alias *${cycle.source} is inside the node it names`);
  try {
    // What `config view` prints; it also refuses alias bombs (thousands of copies of one node).
    document.toJS();
  } catch (error) {
    throw malformed(`${path} cannot be read as data: ${(error as Error).message}`);
  }
  const isNull = (node: unknown): boolean => node === undefined || (yaml.isScalar(node) && node.value === null);

  const root = document.contents;
  if (root === null || (yaml.isScalar(root) && (root.value === null || root.value === ''))) {
    return { config: { path, exists: true, currentContext: undefined, contexts: [] }, document };
  }
  if (!yaml.isMap(root)) throw malformed(`${at(root)}: the file must be a mapping with current-context and contexts`);
  const top = entriesOf(root);

  const currentNode = top.get('current-context');
  let currentContext: string | undefined;
  if (!isNull(deref(currentNode))) {
    const node = deref(currentNode);
    if (!yaml.isScalar(node) || typeof node.value !== 'string') {
      throw malformed(`${at(currentNode)}: current-context must be the name of a context`);
    }
    currentContext = node.value || undefined;
  }

  const contextsNode = top.get('contexts');
  const contexts: ContextEntry[] = [];
  const list = deref(contextsNode);
  if (!isNull(list)) {
    if (!yaml.isSeq(list)) throw malformed(`${at(contextsNode)}: contexts must be a list of entries (- name: ...)`);
    const seen = new Map<string, string>();
    for (const item of list.items) {
      const map = deref(item);
      if (!yaml.isMap(map)) throw malformed(`${at(item)}: each context must be a mapping with a name`);
      const fields = entriesOf(map);
      const entry: Record<string, unknown> = {};
      for (const [key, type] of Object.entries(CONTEXT_KEYS)) {
        const node = fields.get(key);
        if (node === undefined) continue;
        const target = deref(node);
        const value = yaml.isScalar(target) ? target.value : undefined;
        // `server:` or `cacert: ""` say nothing; a context without a name is another matter.
        if (key !== 'name' && (value === null || value === '')) continue;
        if (typeof value !== type || value === '') {
          throw malformed(`${at(node)}: ${key} must be ${type === 'boolean' ? 'true or false' : 'a non-empty string'}`);
        }
        entry[key] = value;
      }
      if (entry.name === undefined) throw malformed(`${at(item)}: a context has no name`);
      const name = entry.name as string;
      const earlier = seen.get(name);
      if (earlier)
        throw malformed(`${at(item)}: the context ${JSON.stringify(name)} is defined twice (also at ${earlier})`);
      seen.set(name, at(item));
      contexts.push(entry as unknown as ContextEntry);
    }
  }
  return { config: { path, exists: true, currentContext, contexts }, document };
}

function malformed(message: string): UsageError {
  return new UsageError(
    `the config file ${message}`,
    'fix that line, or point --config or QUEEN_CONFIG at another file',
  );
}

function where(path: string, line: number | undefined): string {
  return line ? `${path}:${line}` : path;
}

function lineOf(node: unknown, lineCounter: LineCounter): number | undefined {
  const range = (node as YamlNode | undefined)?.range;
  return range ? lineCounter.linePos(range[0]).line : undefined;
}

/** Names of the contexts, for errors that must list the known ones. */
export function knownContexts(config: ConfigFile): string {
  return config.contexts.length > 0
    ? `known contexts in ${config.path}: ${config.contexts.map((entry) => escapeText(entry.name)).join(', ')}`
    : `${config.path} ${config.exists ? 'has no contexts' : 'does not exist'}; ` +
        'create one with: queenctl config set-context <name> --server <url>';
}

/** The context by name, or a usage error that lists the ones there are. */
export function findContext(config: ConfigFile, name: string, how: string, fix?: string): ContextEntry {
  const entry = config.contexts.find((candidate) => candidate.name === name);
  if (!entry)
    throw new UsageError(
      `no context named ${JSON.stringify(name)} (${how})`,
      fix ? `${knownContexts(config)}\n  ${fix}` : knownContexts(config),
    );
  return entry;
}
