/**
 * Changes to the config file that keep everything else in it: other contexts, keys this tool
 * does not know (the Go queenctl may add some) and comments. The YAML document is edited in
 * place, never rebuilt from the parsed values, and written back atomically with mode 0600: it
 * may hold literal tokens.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, realpath, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Document, YAMLMap, YAMLSeq } from 'yaml';
import { UsageError } from '../exit.js';
import { findContext, parseConfigDocument, readConfigText, type ConfigFile, type ContextEntry } from './file.js';

/** Fields set-context may write; `null` removes the key from the context. */
export type ContextChanges = { [K in Exclude<keyof ContextEntry, 'name'>]?: ContextEntry[K] | null };

export class EditableConfig {
  private constructor(
    private readonly yaml: typeof import('yaml'),
    private readonly document: Document,
    private parsed: ConfigFile,
  ) {}

  static async load(path: string): Promise<EditableConfig> {
    const yaml = await import('yaml');
    const text = await readConfigText(path);
    if (text === null) {
      return new EditableConfig(yaml, new yaml.Document(), {
        path,
        exists: false,
        currentContext: undefined,
        contexts: [],
      });
    }
    const { config, document } = await parseConfigDocument(path, text);
    return new EditableConfig(yaml, document, config);
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

/**
 * Writes through a temporary file in the same directory and a rename, so a reader (or a crash)
 * sees the old file or the new one, never half of one. The directory (~/.queen) is created
 * when missing; a symlinked config file stays a symlink and its target is replaced.
 */
export async function writeFileAtomic(path: string, text: string): Promise<void> {
  const target = await realpath(path).catch(() => path);
  const directory = dirname(target);
  const failed = (error: unknown): UsageError =>
    new UsageError(
      `cannot write the config file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      'check the permissions of the file and its directory, or point --config or QUEEN_CONFIG elsewhere',
    );
  try {
    await mkdir(directory, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw failed(error);
  }
  const temporary = join(directory, `.${basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const handle = await open(temporary, 'wx', 0o600);
    try {
      await handle.writeFile(text, 'utf8');
      // The umask may have taken bits away, never added them; make it exactly 0600.
      await handle.chmod(0o600);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, target);
  } catch (error) {
    await rm(temporary, { force: true });
    throw failed(error);
  }
}
