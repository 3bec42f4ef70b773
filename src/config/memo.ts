/**
 * The config file as this build last parsed it, so that a run whose file has not changed does
 * not load the YAML parser: ~5 ms of every command's start-up, lease commands included (issue 19).
 * One small JSON file per config path and text under $XDG_CACHE_HOME/queenctl/config/ (else
 * ~/.cache/...), beside the npm package's code caches (bin/queenctl.cjs).
 *
 * A memo decides where the token goes, so it is used only when it is the user's own
 * (docs/security.md, "Code caches and config memos"): queenctl/ and queenctl/config/ owned by the
 * effective user and writable by nobody else, no symbolic link among them, and the memo a regular
 * file of the user's, mode 0600, opened without following a link. Anything else is ignored (the
 * file is parsed) and -v says why, once (memoNotes). Memos are written the same way: directories
 * 0700, files 0600, by a new file renamed into place.
 *
 * A memo is named by the SHA-256 of the config's path and text, and used only when it was written
 * by this very build (version and build time: another build may read a file otherwise) for this
 * path and a text of the same SHA-256 as the file read now. It holds only what the parser
 * returned, and is not written when that includes a `literal:` token: a secret is not copied out
 * of the file it was put in. Anything wrong with a memo (absent, damaged, stale, unwritable
 * directory) only costs the parse it would have saved; nothing here may fail a run. The
 * standalone executable writes no files (docs/standalone.md) and keeps none; nor do unbundled
 * runs (tests in process), which have no build time, nor Windows, which has no file owners to
 * check.
 */
import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { BUILD_INFO } from '../build-info.js';
import { VERSION } from '../version.js';
import type { ConfigFile } from './file.js';
import { makeDirectory } from './files.js';

interface Memo {
  build: string;
  /** The config file the memo is of, and the SHA-256 (hex) of its text when it was parsed. */
  path: string;
  sha256: string;
  currentContext: string | null;
  contexts: ConfigFile['contexts'];
}

export interface ConfigMemo {
  /** The parsed config for this text of the file at `path`, if this build memoized it. */
  read(path: string, text: string): Promise<ConfigFile | undefined>;
  /** Keeps what parsing `text` gave, for the next run. */
  write(config: ConfigFile, text: string): Promise<void>;
}

/** Why memos were not used, for -v (src/commands/globals.ts); each reason once. */
const notes = new Set<string>();
const noted = new Set<string>();

/** The reasons not said yet why a memo was ignored, and forgets them. */
export function memoNotes(): string[] {
  const fresh = [...notes];
  notes.clear();
  return fresh;
}

function distrust(why: string): void {
  const line = `config memo ignored, the config file parsed instead: ${why} (a memo is used only if it is your own)`;
  if (noted.has(line)) return;
  noted.add(line);
  notes.add(line);
}

/**
 * The memo for this run's environment, or undefined when there is none to keep: the standalone
 * executable, an unbundled build, no absolute cache directory, no file owners (Windows).
 */
export function configMemo(env: NodeJS.ProcessEnv): ConfigMemo | undefined {
  if (BUILD_INFO.standalone || BUILD_INFO.date === null) return undefined;
  const cacheHome =
    env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME)
      ? env.XDG_CACHE_HOME
      : env.HOME && isAbsolute(env.HOME)
        ? join(env.HOME, '.cache')
        : undefined;
  return cacheHome === undefined ? undefined : memoIn(cacheHome, `${VERSION} ${BUILD_INFO.date}`);
}

/**
 * A memo under `cacheHome` for the build named `build`, trusted only when it belongs to the user
 * `euid` (exported for tests); undefined without one (Windows).
 */
export function memoIn(cacheHome: string, build: string, euid = process.geteuid?.()): ConfigMemo | undefined {
  if (euid === undefined) return undefined;
  const dir = join(cacheHome, 'queenctl', 'config');
  const dirs = [dirname(dir), dir];
  return {
    async read(path, text) {
      const untrusted = distrustOfDirs(dirs, euid);
      if (untrusted !== null) {
        if (untrusted !== 'absent') distrust(untrusted);
        return undefined;
      }
      const memo = readOwnFile(await memoFile(dir, path, text), euid) as Memo | undefined;
      if (
        memo?.build !== build ||
        memo.path !== path ||
        memo.sha256 !== (await sha256(text)) ||
        !Array.isArray(memo.contexts)
      )
        return undefined;
      return { path, exists: true, currentContext: memo.currentContext ?? undefined, contexts: memo.contexts };
    },
    async write(config, text) {
      if (config.contexts.some((entry) => entry['token-ref']?.startsWith('literal:'))) return;
      const memo: Memo = {
        build,
        path: config.path,
        sha256: await sha256(text),
        currentContext: config.currentContext ?? null,
        contexts: config.contexts,
      };
      const file = await memoFile(dir, config.path, text);
      const temporary = `${file}.${process.pid}.tmp`;
      let fd: number | undefined;
      try {
        // One level at a time, never HOME itself (files.ts: a recursive mkdir can loop under /proc).
        makeDirectory(dir, dirname(cacheHome));
        // A memo written where others may replace it would never be read: not written at all.
        if (distrustOfDirs(dirs, euid) !== null) return;
        // A new file (O_EXCL: never through a link), aside, then renamed into place: runs side by
        // side never read half a memo. 0600 whatever the umask.
        fd = openSync(temporary, 'wx', 0o600);
        fchmodSync(fd, 0o600);
        writeSync(fd, JSON.stringify(memo));
        closeSync(fd);
        fd = undefined;
        renameSync(temporary, file);
        removeStale(dir, file, config.path, euid);
      } catch {
        try {
          if (fd !== undefined) closeSync(fd);
          rmSync(temporary, { force: true });
        } catch {
          // A file left behind costs disk space only.
        }
      }
    },
  };
}

/** The memo of this text of the config at `path`: named by the SHA-256 of both. */
async function memoFile(dir: string, path: string, text: string): Promise<string> {
  return join(dir, `${await sha256(`${path}\0${text}`)}.json`);
}

/**
 * Why `dirs` are not the user's own (each a directory, not a link, owned by `euid` and not
 * writable by group or others): `absent` when one is missing, null when they are.
 */
function distrustOfDirs(dirs: string[], euid: number): string | null {
  for (const dir of dirs) {
    let stats: ReturnType<typeof lstatSync>;
    try {
      stats = lstatSync(dir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      return code === 'ENOENT' ? 'absent' : `${dir} cannot be checked (${code ?? (error as Error).message})`;
    }
    if (stats.isSymbolicLink()) return `${dir} is a symbolic link`;
    if (!stats.isDirectory()) return `${dir} is not a directory`;
    if (stats.uid !== euid) return `${dir} is owned by uid ${stats.uid}, not by you (uid ${euid})`;
    if ((stats.mode & 0o022) !== 0) return `${dir} is writable by ${stats.mode & 0o002 ? 'others' : 'its group'}`;
  }
  return null;
}

/**
 * The JSON in `file` when it is a regular file of `euid`'s, mode 0600, reached without a link;
 * undefined otherwise (and -v says why) or when it is absent or damaged. The checks are of what
 * was opened, and opening a FIFO does not wait for a writer.
 */
function readOwnFile(file: string, euid: number, quiet = false): unknown {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (!quiet && (code === 'ELOOP' || code === 'EMLINK')) distrust(`${file} is a symbolic link`);
    return undefined;
  }
  try {
    const stats = fstatSync(fd);
    const why = !stats.isFile()
      ? 'is not a regular file'
      : stats.uid !== euid
        ? `is owned by uid ${stats.uid}, not by you (uid ${euid})`
        : (stats.mode & 0o7777) !== 0o600
          ? `has mode ${(stats.mode & 0o7777).toString(8).padStart(4, '0')}, not 0600`
          : undefined;
    if (why !== undefined) {
      if (!quiet) distrust(`${file} ${why}`);
      return undefined;
    }
    return JSON.parse(readFileSync(fd, 'utf8')) as unknown;
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * SHA-256 of `text` (UTF-8), in hex. node:crypto is loaded here, by runs that read a config file,
 * not by the others (`--version`, help): ~0.4 ms (docs/security.md).
 */
export async function sha256(text: string): Promise<string> {
  const { createHash } = await import('node:crypto');
  return createHash('sha256').update(text).digest('hex');
}

/**
 * When a memo is written, the memos of earlier texts of the same config go, and any memo
 * untouched for a week: configs at passing paths (a script's temporary file) would otherwise
 * pile up. One in use is written again on its next change.
 */
function removeStale(dir: string, kept: string, path: string, euid: number): void {
  const weekAgo = Date.now() - 7 * 24 * 3600 * 1000;
  for (const name of readdirSync(dir)) {
    const file = join(dir, name);
    if (file === kept) continue;
    if (statSync(file).mtimeMs < weekAgo || (readOwnFile(file, euid, true) as Memo | undefined)?.path === path)
      rmSync(file, { force: true });
  }
}
