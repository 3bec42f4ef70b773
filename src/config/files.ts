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
 * - Who else may read or change a file of credentials (`exposure`): the one check behind the
 *   warnings for token files and config files (docs/security.md#config-files-and-proxies).
 */
import { mkdirSync, readFile, readFileSync, statSync, type Stats } from 'node:fs';
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

/** Who besides this user may read or change a file; undefined when nobody may. */
export interface Exposure {
  /** The permission bits, as chmod takes them: `0644`. */
  mode: string;
  /** Group or others may read it. */
  readable: boolean;
  /** Group or others may write it. */
  writable: boolean;
  /** The uid of the owner when that is neither this user nor root (root may change any file anyway). */
  foreignOwner: number | undefined;
}

/**
 * Who else may read (`secret`: it holds a token) or change the file at `path`: its group or
 * other permission bits, and its owner when that is another user than `uid` and not root (`uid`
 * null: the owner is not asked).
 * undefined when nobody else may, or when it cannot be told (no such file, no uid on Windows).
 * `stats`: the file's, when the caller has them already.
 */
export function exposure(
  path: string,
  secret: boolean,
  uid: number | null = process.getuid?.() ?? null,
  stats?: Stats,
): Exposure | undefined {
  let stat: Stats;
  try {
    stat = stats ?? statSync(path);
  } catch {
    return undefined;
  }
  const bits = stat.mode & 0o777;
  const readable = secret && (bits & 0o044) !== 0;
  const writable = (bits & 0o022) !== 0;
  const foreignOwner = uid !== null && stat.uid !== uid && stat.uid !== 0 ? stat.uid : undefined;
  if (!readable && !writable && foreignOwner === undefined) return undefined;
  return { mode: bits.toString(8).padStart(4, '0'), readable, writable, foreignOwner };
}

/**
 * The warning for a file of credentials others may read or change, naming it and the fix; one
 * line. `what`: `the token file`, `the config file`; `secret`: what it holds that makes reading
 * it matter, when its name does not say so.
 */
export function exposureWarning(what: string, path: string, found: Exposure, secret?: string): string {
  const by =
    found.readable && found.writable
      ? 'read and changed'
      : found.readable
        ? 'read'
        : found.writable
          ? 'changed'
          : undefined;
  const holds = found.readable && secret ? ` holds ${secret} and` : '';
  const problems = [
    ...(by ? [`can be ${by} by other users (mode ${found.mode})`] : []),
    ...(found.foreignOwner !== undefined
      ? [`belongs to another user (uid ${found.foreignOwner}), who can change it`]
      : []),
  ];
  const chown = found.foreignOwner !== undefined ? `chown "$(id -u)" ${path} && ` : '';
  return `${what} ${path}${holds} ${problems.join(' and ')}: ${chown}chmod 600 ${path}`;
}
