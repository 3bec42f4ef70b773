/**
 * Changes to the config file that keep everything else in it: other contexts, keys this tool
 * does not know (the Go queenctl may add some) and comments. The YAML document is edited in
 * place, never rebuilt from the parsed values, and written back atomically with mode 0600: it
 * may hold literal tokens.
 */
import { randomBytes } from 'node:crypto';
import { lstat, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Document, YAMLMap, YAMLSeq } from 'yaml';
import { UsageError } from '../exit.js';
import { configDirectoryFailure, configWriteFailure } from '../output/words.js';
import {
  configWarning,
  findContext,
  parseConfigDocument,
  readConfigText,
  type ConfigFile,
  type ConfigSource,
  type ContextEntry,
} from './file.js';
import { DirectoryError, makeDirectory } from './files.js';

/** Fields set-context may write; `null` removes the key from the context. */
export type ContextChanges = { [K in Exclude<keyof ContextEntry, 'name'>]?: ContextEntry[K] | null };

export class EditableConfig {
  private constructor(
    private readonly yaml: typeof import('yaml'),
    private readonly document: Document,
    private parsed: ConfigFile,
  ) {}

  /**
   * The file to edit. `create`: a missing file is an empty one, to be made by save() (set-context
   * makes the file it is given); otherwise only the default path may be missing (file.ts).
   */
  static async load(from: string | ConfigSource, create = true): Promise<EditableConfig> {
    const yaml = await import('yaml');
    const source = typeof from === 'string' ? { path: from, namedBy: undefined } : from;
    const { path } = source;
    const text = await readConfigText(create ? path : source);
    if (text === null) {
      return new EditableConfig(yaml, new yaml.Document(), {
        path,
        exists: false,
        currentContext: undefined,
        contexts: [],
      });
    }
    const { config, document } = await parseConfigDocument(path, text);
    const warning = configWarning(path, text, config.contexts);
    return new EditableConfig(yaml, document, warning === undefined ? config : { ...config, warning });
  }

  get config(): ConfigFile {
    return this.parsed;
  }

  /** Creates the context or changes the given fields of it; true when it was created. */
  setContext(name: string, changes: ContextChanges): boolean {
    const existing = this.contextNode(name);
    if (existing) {
      for (const [key, value] of Object.entries(changes)) {
        if (value === undefined) continue;
        if (value === null) existing.delete(key);
        else existing.set(key, value);
      }
      return false;
    }
    const entry: Record<string, unknown> = { name };
    for (const [key, value] of Object.entries(changes)) if (value !== undefined && value !== null) entry[key] = value;
    const contexts = this.contextsNode();
    if (contexts) {
      // `contexts: []` would stay a one-line flow list; a block list reads like the Go tool's.
      if (contexts.items.length === 0) contexts.flow = false;
      contexts.add(this.document.createNode(entry));
    } else {
      this.document.set('contexts', this.document.createNode([entry]));
    }
    return true;
  }

  /**
   * Removes the context; a usage error listing the others when there is none of that name. The
   * current one takes current-context with it (true then): a name left pointing at nothing
   * would only move the error to the next command.
   */
  deleteContext(name: string): boolean {
    findContext(this.parsed, name, `in ${this.parsed.path}`);
    const contexts = this.contextsNode();
    const index = contexts?.items.findIndex((item) => this.yaml.isMap(item) && item.get('name') === name) ?? -1;
    contexts?.delete(index);
    if (this.parsed.currentContext !== name) return false;
    this.document.delete('current-context');
    return true;
  }

  useContext(name: string): void {
    findContext(this.parsed, name, `in ${this.parsed.path}`);
    this.document.set('current-context', name);
  }

  /** The document as it will be written (also the check that the edit produced a valid file). */
  async save(): Promise<void> {
    const text = this.document.toString();
    // Parse what is about to be written: an edit must never leave a file the next run rejects.
    const { config } = await parseConfigDocument(this.parsed.path, text);
    await writeFileAtomic(this.parsed.path, text);
    this.parsed = config;
  }

  private contextsNode(): YAMLSeq | undefined {
    const node = this.document.get('contexts', true);
    return this.yaml.isSeq(node) ? node : undefined;
  }

  private contextNode(name: string): YAMLMap | undefined {
    const item = this.contextsNode()?.items.find(
      (candidate) => this.yaml.isMap(candidate) && candidate.get('name') === name,
    );
    return item as YAMLMap | undefined;
  }
}

/** How old a temporary file of another run must be to be taken for one a killed run left. */
const LEFT_BEHIND_MS = 60_000;

/**
 * Writes through a temporary file in the same directory, fsync and a rename, so a reader, a
 * crash or a signal sees the old file or the new one, never half of one. The temporary file is
 * `.<name>.<random>.tmp`: hidden, and never read as config (the config is only ever the path
 * given). One a killed run left is removed by the next write once a minute old (a write in
 * progress beside this one is younger). The directory (~/.queen) is made when missing, one
 * level at a time below its parent, which must exist (files.ts). Every failure is one line that
 * says where to go instead.
 *
 * No symbolic link is followed (docs/security.md#config-files-and-proxies): a config file that
 * is a link is replaced by the new file, its target left as it was (a link planted in ~/.queen
 * would otherwise have this user rewrite, mode 0600, any file the link names); and a directory
 * that is a link owned by another user (neither `uid` nor root) is refused, as that user could
 * point it anywhere between the check and the rename.
 */
export async function writeFileAtomic(
  path: string,
  text: string,
  uid: number | null = process.getuid?.() ?? null,
): Promise<void> {
  const directory = dirname(path);
  await refuseForeignLink(directory, uid);
  try {
    makeDirectory(directory, dirname(directory));
  } catch (error) {
    if (!(error instanceof DirectoryError)) throw error;
    throw new UsageError(configDirectoryFailure(error.directory, error.level, error.code));
  }
  const failed = (error: unknown): UsageError =>
    new UsageError(configWriteFailure(path, (error as NodeJS.ErrnoException).code ?? (error as Error).message));
  const name = basename(path);
  const temporary = join(directory, `.${name}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    // wx: O_EXCL, which never opens through a link, even one made since the name was chosen.
    const handle = await open(temporary, 'wx', 0o600);
    try {
      await handle.writeFile(text, 'utf8');
      // The umask may have taken bits away, never added them; make it exactly 0600.
      await handle.chmod(0o600);
      await handle.sync();
    } finally {
      await handle.close();
    }
    // rename(2) replaces the name itself: a link at `path` is replaced, never followed.
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw failed(error);
  }
  await syncDirectory(directory);
  await removeLeftBehind(directory, name);
}

/** The config's directory as a link another user owns (see writeFileAtomic): one line, exit 1. */
async function refuseForeignLink(directory: string, uid: number | null): Promise<void> {
  if (uid === null) return;
  const link = await lstat(directory).catch(() => undefined);
  if (!link?.isSymbolicLink() || link.uid === uid || link.uid === 0) return;
  throw new UsageError(
    `the config directory ${directory} is a symbolic link owned by another user (uid ${link.uid}), ` +
      `who could point it anywhere: not writing through it; remove it (rm ${directory}) ` +
      'or point --config or QUEEN_CONFIG at a file in a directory of your own',
  );
}

/** The rename itself on disk: without it a power cut may bring back the old file. Best effort. */
async function syncDirectory(directory: string): Promise<void> {
  try {
    const handle = await open(directory, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Some file systems refuse fsync on a directory (EINVAL); the file itself is on disk.
  }
}

/** Temporary files of this config a killed run left behind (see writeFileAtomic). */
async function removeLeftBehind(directory: string, name: string): Promise<void> {
  const prefix = `.${name}.`;
  const isOurs = (entry: string): boolean =>
    entry.startsWith(prefix) && /^[0-9a-f]{12}\.tmp$/.test(entry.slice(prefix.length));
  try {
    for (const entry of await readdir(directory)) {
      if (!isOurs(entry)) continue;
      const file = join(directory, entry);
      const { mtimeMs } = await stat(file);
      if (Date.now() - mtimeMs > LEFT_BEHIND_MS) await rm(file, { force: true });
    }
  } catch {
    // A file left behind costs disk space only.
  }
}
