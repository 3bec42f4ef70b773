/**
 * The file-system calls of the config and its caches that must never hang a run (issue 25).
 *
 * - Directories are made one level at a time, stopping at the first error. Node's recursive
 *   mkdir retries a parent and its child for ever when mkdir answers ENOENT under a parent that
 *   exists (procfs, some FUSE and container mounts: `HOME=/proc`), at 100% CPU, in the thread
 *   pool where no signal reaches it.
 * - A file that is not a regular one (a FIFO, `<(command)`, a device) is read in the thread pool,
 *   never synchronously: opening a FIFO waits for a writer, and a wait on the JS thread would
 *   leave SIGINT and SIGTERM unheard (cli.ts ends a run on them within a second).
 */
import { mkdirSync, readFile, readFileSync, statSync } from 'node:fs';
import { dirname, parse } from 'node:path';

/** A directory that could not be made: which level failed, and the errno that said why. */
export class DirectoryError extends Error {
  constructor(
    /** The directory asked for. */
    readonly directory: string,
    /** The level that failed (the directory itself, one of its parents, or `base`). */
    readonly level: string,
    /** ENOENT, EACCES, EROFS, ENOTDIR, ...; `EBASE` when `base` is missing or no directory. */
    readonly code: string,
  ) {
    super(`cannot create ${directory}: ${code} at ${level}`);
    this.name = 'DirectoryError';
  }
}

/**
 * Makes `directory` (mode 0700 for each level it makes), one level at a time from `base` down,
 * and stops at the first error with a DirectoryError. `base` must already be a directory and is
 * never made (HOME: a missing home is the user's to fix, not a directory to invent). Levels that
 * exist are left as they are. Synchronous on purpose, and it cannot spin: each call is one stat
 * or one non-recursive mkdir.
 */
export function makeDirectory(directory: string, base = parse(directory).root): void {
  const missing: string[] = [];
  let level = directory;
  for (;;) {
    const kind = kindOf(level);
    if (kind === 'directory') break;
    if (level === base || level === dirname(level)) {
      throw new DirectoryError(directory, level, kind === 'missing' ? 'EBASE' : kind);
    }
    if (kind !== 'missing') throw new DirectoryError(directory, level, kind);
    missing.unshift(level);
    level = dirname(level);
  }
  for (const next of missing) {
    try {
      mkdirSync(next, { mode: 0o700 });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
      // Made by a run beside this one in the meantime: as good as made here.
      if (code === 'EEXIST' && kindOf(next) === 'directory') continue;
      throw new DirectoryError(directory, next, code);
    }
  }
}

/**
 * `directory`; `missing` (ENOENT, or ENOTDIR: a level above is no directory, which the walk up
 * then finds); `ENOTDIR` when something else is there; or the errno stat gave.
 */
function kindOf(path: string): 'directory' | 'missing' | string {
  try {
    return statSync(path).isDirectory() ? 'directory' : 'ENOTDIR';
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'missing' : code;
  }
}

/**
 * The text of the file at `path`. A regular file is read at once (one small file at start-up;
 * node:fs/promises would load readline with it); anything else in the thread pool, so a run
 * waiting on a FIFO that nobody writes still hears its signals. Errors are the errno's, as from
 * readFileSync (ENOENT, EISDIR, EACCES, ...).
 */
export function readTextFile(path: string): Promise<string> {
  let regular: boolean;
  try {
    const stat = statSync(path);
    if (stat.isDirectory()) return Promise.reject(Object.assign(new Error(`${path}: EISDIR`), { code: 'EISDIR' }));
    regular = stat.isFile();
  } catch (error) {
    return Promise.reject(error);
  }
  if (regular) {
    try {
      return Promise.resolve(readFileSync(path, 'utf8'));
    } catch (error) {
      return Promise.reject(error);
    }
  }
  return new Promise((resolve, reject) => {
    readFile(path, 'utf8', (error, text) => (error ? reject(error) : resolve(text)));
  });
}
