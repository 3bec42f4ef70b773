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
 * A memo is named by the SHA-256 of the config's path and text, records it, and is used only when
 * it was written by this very build (version and build time: another build may read a file
 * otherwise) and records this path and the SHA-256 of this path and the text read now. It holds only what the parser
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
  /** The config file the memo is of, and the SHA-256 (hex) of its path and text (sha256 below). */
  path: string;
  sha256: string;
  currentContext: string | null;
  contexts: ConfigFile['contexts'];
}

export interface ConfigMemo {
  /** The parsed config for this text of the file at `path`, if this build memoized it. */
  read(path: string, text: string): ConfigFile | undefined;
  /** Keeps what parsing `text` gave, for the next run. */
  write(config: ConfigFile, text: string): void;
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
    read(path, text) {
      const untrusted = distrustOfDirs(dirs, euid);
      if (untrusted !== null) {
        if (untrusted !== 'absent') distrust(untrusted);
        return undefined;
      }
      const key = sha256(`${path}\0${text}`);
      const memo = readOwnFile(join(dir, `${key}.json`), euid) as Memo | undefined;
      if (memo?.build !== build || memo.path !== path || memo.sha256 !== key || !Array.isArray(memo.contexts))
        return undefined;
      return { path, exists: true, currentContext: memo.currentContext ?? undefined, contexts: memo.contexts };
    },
    write(config, text) {
      if (config.contexts.some((entry) => entry['token-ref']?.startsWith('literal:'))) return;
      const key = sha256(`${config.path}\0${text}`);
      const memo: Memo = {
        build,
        path: config.path,
        sha256: key,
        currentContext: config.currentContext ?? null,
        contexts: config.contexts,
      };
      const file = join(dir, `${key}.json`);
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

/** SHA-256's round constants (FIPS 180-4, 4.2.2). */
const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

/** x rotated right by n bits, as a 32-bit integer. */
const rotr = (x: number, n: number): number => (x >>> n) | (x << (32 - n));

/**
 * SHA-256 (FIPS 180-4) of `text` as UTF-8, in hex. Here, not node:crypto's: loading node:crypto
 * cost ~10 ms of CPU per run that reads a config file (measured side by side on Node 20,
 * docs/security.md), for a hash of a file of a few KB that this does in well under a millisecond.
 * Checked against node:crypto by test/unit/config-memo.test.ts.
 */
export function sha256(text: string): string {
  const data = new TextEncoder().encode(text);
  // The message, a 1 bit, zeros, and its length in bits as 64 bits, in blocks of 64 bytes.
  const bytes = new Uint8Array(Math.ceil((data.length + 9) / 64) * 64);
  bytes.set(data);
  bytes[data.length] = 0x80;
  const view = new DataView(bytes.buffer);
  view.setUint32(bytes.length - 8, Math.floor(data.length / 2 ** 29));
  view.setUint32(bytes.length - 4, (data.length * 8) >>> 0);
  const hash = new Int32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  const w = new Int32Array(64);
  for (let offset = 0; offset < bytes.length; offset += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getInt32(offset + i * 4);
    for (let i = 16; i < 64; i++) {
      const x = w[i - 15]!;
      const y = w[i - 2]!;
      const s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3);
      const s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10);
      w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) | 0;
    }
    // The working variables (FIPS 180-4, 6.2.2), as 32-bit integers.
    let [a, b, c, d, e, f, g, h] = [hash[0]!, hash[1]!, hash[2]!, hash[3]!, hash[4]!, hash[5]!, hash[6]!, hash[7]!];
    for (let i = 0; i < 64; i++) {
      const t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i]! + w[i]!) | 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    const results = [a, b, c, d, e, f, g, h];
    for (let i = 0; i < 8; i++) hash[i] = hash[i]! + results[i]!;
  }
  let hex = '';
  for (const word of hash) hex += (word >>> 0).toString(16).padStart(8, '0');
  return hex;
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
