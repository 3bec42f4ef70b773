/**
 * The config file as this build last parsed it, so that a run whose file has not changed does
 * not load the YAML parser: ~5 ms of every command's start-up, lease commands included (issue 19).
 * One small JSON file per config path under $XDG_CACHE_HOME/queenctl/config/ (else
 * ~/.cache/...), beside the npm package's code caches (bin/queenctl.cjs), and trusted as they
 * are: the user's own directory, made 0700, files 0600.
 *
 * A memo is used only when it was written by this very build (version and build time: another
 * build may read a file otherwise) for a file of exactly this text (a 64-bit hash of it, so the
 * text itself, which may hold anything, is not copied). It holds only what the parser returned,
 * and is not written when that includes a `literal:` token: a secret is not copied out of the
 * file it was put in. Anything wrong with a memo (absent, damaged, stale, unwritable directory)
 * only costs the parse it would have saved; nothing here may fail a run. The standalone
 * executable writes no files (docs/standalone.md) and keeps none; nor do unbundled runs (tests
 * in process), which have no build time.
 */
import { closeSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { BUILD_INFO } from '../build-info.js';
import { VERSION } from '../version.js';
import type { ConfigFile } from './file.js';
import { makeDirectory } from './files.js';

interface Memo {
  build: string;
  hash: string;
  currentContext: string | null;
  contexts: ConfigFile['contexts'];
}

export interface ConfigMemo {
  /** The parsed config for this text of the file at `path`, if this build memoized it. */
  read(path: string, text: string): ConfigFile | undefined;
  /** Keeps what parsing `text` gave, for the next run. */
  write(config: ConfigFile, text: string): void;
}

/**
 * The memo for this run's environment, or undefined when there is none to keep: the standalone
 * executable, an unbundled build, no absolute cache directory.
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

/** A memo under `cacheHome` for the build named `build` (exported for tests). */
export function memoIn(cacheHome: string, build: string): ConfigMemo {
  const dir = join(cacheHome, 'queenctl', 'config');
  const fileFor = (path: string): string => join(dir, `${hash64(path)}.json`);
  return {
    read(path, text) {
      let memo: Memo;
      try {
        memo = JSON.parse(readFileSync(fileFor(path), 'utf8')) as Memo;
      } catch {
        return undefined;
      }
      if (memo?.build !== build || memo.hash !== hash64(text) || !Array.isArray(memo.contexts)) return undefined;
      return { path, exists: true, currentContext: memo.currentContext ?? undefined, contexts: memo.contexts };
    },
    write(config, text) {
      if (config.contexts.some((entry) => entry['token-ref']?.startsWith('literal:'))) return;
      const memo: Memo = {
        build,
        hash: hash64(text),
        currentContext: config.currentContext ?? null,
        contexts: config.contexts,
      };
      const file = fileFor(config.path);
      const temporary = `${file}.${process.pid}.tmp`;
      let fd: number | undefined;
      try {
        // One level at a time, never HOME itself (files.ts: a recursive mkdir can loop under /proc).
        makeDirectory(dir, dirname(cacheHome));
        // Aside, then renamed into place: runs side by side never read half a memo.
        fd = openSync(temporary, 'wx', 0o600);
        writeSync(fd, JSON.stringify(memo));
        closeSync(fd);
        fd = undefined;
        renameSync(temporary, file);
        removeStale(dir, file);
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
 * Memos untouched for a week go when another is written: configs at passing paths (a script's
 * temporary file) would otherwise pile up. One in use is written again on its next change.
 */
function removeStale(dir: string, kept: string): void {
  const weekAgo = Date.now() - 7 * 24 * 3600 * 1000;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (path !== kept && statSync(path).mtimeMs < weekAgo) rmSync(path, { force: true });
  }
}

/**
 * FNV-1a over UTF-16 code units, 64 bits as two 32-bit halves, in hex: enough to tell one text of
 * a small file from another (node:crypto would cost more to load than the parse it saves).
 */
export function hash64(text: string): string {
  let low = 0x84222325;
  let high = 0xcbf29ce4;
  for (let index = 0; index < text.length; index++) {
    low ^= text.charCodeAt(index);
    // × the FNV prime 0x100000001b3, in 16-bit pieces so no product loses bits.
    const lowLow = low & 0xffff;
    const lowHigh = low >>> 16;
    const productLow = lowLow * 0x1b3;
    const productMid = lowHigh * 0x1b3 + (productLow >>> 16);
    const carry = productMid >>> 16;
    const newHigh = (Math.imul(high, 0x1b3) + Math.imul(low, 0x100) + carry) >>> 0;
    low = (((productMid & 0xffff) << 16) | (productLow & 0xffff)) >>> 0;
    high = newHigh;
  }
  return high.toString(16).padStart(8, '0') + low.toString(16).padStart(8, '0');
}
