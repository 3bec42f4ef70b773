/**
 * The scripts of the standalone executable that its entry (src/standalone.ts) loads
 * (scripts/build-exe.mjs, docs/standalone.md): the CLI itself (src/standalone-cli.ts), and the
 * dependencies only some paths use: undici (and the whole of it behind a proxy), yaml, chalk,
 * ora, string-width and wrap-ansi, cli-table3 and json-p3, each bundled into a script
 * of its own, carried as an asset of the executable. A path that needs one compiles and runs it
 * here; a path that does not never reads it.
 *
 * Code caches: each script is compiled through a code cache, made by the build by running the
 * finished executable (recordCodeCaches) after everything that run compiled, and appended to the
 * end of the file, after everything the system loads: an index, its length and a mark, read here
 * at the first chunk. V8 takes a cache only under the flags it was made with (docs/standalone.md,
 * "Code caches"). The executable writes no file; a missing or unreadable cache only costs compile
 * time.
 *
 * A code cache runs as it is, so the caches are read from the very file that is running
 * (/proc/self/exe where there is one: not a path someone may have put another file at since),
 * and only when that file is trusted as a program is (docs/security.md, "Code caches and config
 * memos"): a regular file owned by the effective user or by root, writable by nobody else.
 * Otherwise every chunk is compiled from source, and -v (or QUEENCTL_DEBUG) says why, once.
 */
import { closeSync, existsSync, fstatSync, openSync, readSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Script } from 'node:vm';

/** What a chunk's script exports: each module specifier it serves, to that module's exports. */
type ChunkExports = Record<string, unknown>;
/** Each chunk loaded, with the key of the code cache it was compiled with (cacheKey). */
const loaded = new Map<string, { exports: ChunkExports; script: Script; key: string }>();

/** How the CLI's chunk requires this module (scripts/build-exe.mjs): this very instance. */
export const CHUNKS_MODULE_ID = 'queenctl:chunks';
/**
 * undici compiles its HTTP parser (llhttp) to WebAssembly: with V8's baseline compiler only, as
 * bin/queenctl.cjs does for the npm package, so that process exit does not wait for an optimising
 * compile. Set when the first of these chunks loads, not at start: V8 then rejects the code cache
 * of every Node.js module compiled later, which starts would pay for (docs/standalone.md), and
 * loading node:v8 itself costs ~2 ms.
 */
const LIFTOFF_ONLY = new Set(['undici', 'undici-proxy']);
let liftoffOnly = false;
/**
 * The Node.js modules undici loads besides those node:v8 does: loaded before the flag is set, so
 * that they come from Node's own code cache, not compiled from source (measured on `lease extend`,
 * docs/standalone.md). One missing here only costs its compile.
 */
const BEFORE_LIFTOFF_ONLY = ['node:assert', 'node:net'];
/**
 * A code cache serves only a compile under the V8 flags it was made with: a chunk loaded after
 * --liftoff-only (yaml printing a response, say) has caches of its own, under another key.
 */
const cacheKey = (name: string): string => (liftoffOnly ? `${name}+liftoff-only` : name);

/** The last bytes of an executable that carries code caches (scripts/build-exe.mjs writes it). */
export const CODE_CACHE_MARK = 'QCTLCC01';
/** chunk name -> [offset, length] in the executable, read once; null when there are none. */
let cacheIndex: Record<string, [number, number]> | null | undefined;
let recording: string | undefined;

export function loadChunk(name: string): ChunkExports {
  const known = loaded.get(name);
  if (known) return known.exports;
  // A single executable's own require loads built-in modules only, which is all a chunk needs.
  const requireBuiltin = createRequire(process.execPath);
  if (LIFTOFF_ONLY.has(name) && !liftoffOnly) {
    for (const id of BEFORE_LIFTOFF_ONLY) requireBuiltin(id);
    (requireBuiltin('node:v8') as typeof import('node:v8')).setFlagsFromString('--liftoff-only');
    liftoffOnly = true;
  }
  const { getAsset } = requireBuiltin('node:sea') as typeof import('node:sea');
  // The build writes chunks in ASCII, bar comments: read as Latin-1, the fastest decoding.
  const source = Buffer.from(getAsset(`${name}.js`)).toString('latin1');
  const key = cacheKey(name);
  const cachedData = recording ? undefined : codeCache(key);
  // The build wrote the chunk as a function of its module, exports and require.
  const script = new Script(source, {
    filename: `queenctl:${name}.js`,
    cachedData,
  });
  // What a packager or a test needs to know of each chunk: did V8 take the cache made at build
  // time (a cache made on another CPU is refused: docs/standalone.md, "Platforms").
  if (process.env.QUEENCTL_DEBUG && !recording)
    process.stderr.write(
      cachedData === undefined
        ? `queenctl: no code cache of ${name} (${key}): compiled from source\n`
        : script.cachedDataRejected
          ? `queenctl: the code cache of ${name} (${key}) was rejected: compiled from source\n`
          : `queenctl: the code cache of ${name} (${key}) was accepted\n`,
    );
  const module = { exports: {} as ChunkExports };
  const requireInChunk = (id: string): unknown => (id === CHUNKS_MODULE_ID ? self : requireBuiltin(id));
  (script.runInThisContext() as (m: typeof module, e: ChunkExports, r: (id: string) => unknown) => void)(
    module,
    module.exports,
    requireInChunk,
  );
  loaded.set(name, { exports: module.exports, script, key });
  return module.exports;
}

function codeCache(key: string): Buffer | undefined {
  if (cacheIndex === null) return undefined;
  let fd: number | undefined;
  try {
    const self = existsSync('/proc/self/exe') ? '/proc/self/exe' : process.execPath;
    fd = openSync(self, 'r');
    if (cacheIndex === undefined) {
      cacheIndex = null;
      const stats = fstatSync(fd);
      const untrusted = distrustOfExecutable(stats);
      if (untrusted !== undefined) {
        sayOnce(`code caches of the executable ignored: ${process.execPath} ${untrusted}, so every part is compiled`);
        return undefined;
      }
      const { size } = stats;
      const tail = Buffer.alloc(12);
      readSync(fd, tail, 0, 12, size - 12);
      if (tail.toString('latin1', 4) !== CODE_CACHE_MARK) return undefined;
      const index = Buffer.alloc(tail.readUInt32LE(0));
      readSync(fd, index, 0, index.length, size - 12 - index.length);
      cacheIndex = JSON.parse(index.toString('utf8')) as Record<string, [number, number]>;
    }
    const entry = cacheIndex?.[key];
    if (!entry) return undefined;
    const data = Buffer.alloc(entry[1]);
    readSync(fd, data, 0, entry[1], entry[0]);
    return data;
  } catch {
    // No readable executable (a chroot without /proc, say): the chunk is compiled from source.
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Why the executable's own caches are not to be run (undefined when they are): it must be a
 * regular file owned by the effective user or root, and writable by nobody else, as any program
 * one runs should be. Where there are no file owners to check (Windows), nothing is said.
 */
function distrustOfExecutable(stats: { isFile(): boolean; uid: number; mode: number }): string | undefined {
  const euid = process.geteuid?.();
  if (euid === undefined) return undefined;
  if (!stats.isFile()) return 'is not a regular file';
  if (stats.uid !== euid && stats.uid !== 0) return `is owned by uid ${stats.uid}, neither you (uid ${euid}) nor root`;
  if ((stats.mode & 0o022) !== 0) return `is writable by ${stats.mode & 0o002 ? 'others' : 'its group'}`;
  return undefined;
}

/** A line on stderr with -v (read from the arguments before `--`) or QUEENCTL_DEBUG. */
function sayOnce(line: string): void {
  const args = process.argv.slice(2);
  const end = args.indexOf('--');
  const verbose = (end === -1 ? args : args.slice(0, end)).some(
    (arg) => arg === '--verbose' || /^-[qw]*v[qvw]*$/.test(arg),
  );
  if (verbose || process.env.QUEENCTL_DEBUG) process.stderr.write(`queenctl: ${line}\n`);
}

/**
 * For the build only: this run's chunks are compiled from source, and at exit the code cache of
 * each one loaded (everything the run compiled of it) is written to `file`, as JSON of base64, by
 * its key; but not of a chunk loaded under other flags than now: V8 would take that cache for
 * neither.
 */
export function recordCodeCaches(file: string): void {
  recording = file;
  process.on('exit', () => {
    const caches = Object.fromEntries(
      [...loaded]
        .filter(([name, { key }]) => key === cacheKey(name))
        .map(([, { script, key }]) => [key, script.createCachedData().toString('base64')]),
    );
    writeFileSync(file, JSON.stringify(caches));
  });
}

/** This module, as a chunk requires it (CHUNKS_MODULE_ID). */
const self = { loadChunk };
