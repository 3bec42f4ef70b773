/**
 * The dependencies the start-up snapshot does not hold, in the standalone executable only
 * (scripts/build-exe.mjs, docs/standalone.md). undici (which needs node:tls for https, which a
 * snapshot cannot hold, and the whole of it behind a proxy), yaml, chalk, ora and cli-table3 are
 * bundled into scripts of their own, carried as assets of the executable. A path that needs one compiles and runs it
 * here; a path that does not never reads it, and the snapshot stays small, which every run pays
 * for.
 *
 * Code caches: V8 takes a code cache only from a process started from the very snapshot that
 * this one started from (docs/standalone.md, "Code caches"), so the build makes them by running
 * the finished executable once (recordCodeCaches), and appends them to the end of the file,
 * after everything the system loads: an index, its length and a mark, read here at the first
 * chunk. The executable writes no file; a missing or unreadable cache only costs compile time.
 */
import { closeSync, fstatSync, openSync, readSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Script } from 'node:vm';

/** What a chunk's script exports: each module specifier it serves, to that module's exports. */
type ChunkExports = Record<string, unknown>;
const loaded = new Map<string, { exports: ChunkExports; script: Script }>();

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
  const { getAsset } = requireBuiltin('node:sea') as typeof import('node:sea');
  // The build writes chunks in ASCII, bar comments: read as Latin-1, the fastest decoding.
  const source = Buffer.from(getAsset(`${name}.js`)).toString('latin1');
  const cachedData = recording ? undefined : codeCache(name);
  const script = new Script(`(function (module, exports, require) {${source}\n})`, {
    filename: `queenctl:${name}.js`,
    cachedData,
  });
  if (cachedData && script.cachedDataRejected && process.env.QUEENCTL_DEBUG)
    process.stderr.write(`queenctl: the code cache of ${name} was rejected: compiled from source\n`);
  const module = { exports: {} as ChunkExports };
  (script.runInThisContext() as (m: typeof module, e: ChunkExports, r: NodeRequire) => void)(
    module,
    module.exports,
    requireBuiltin,
  );
  loaded.set(name, { exports: module.exports, script });
  return module.exports;
}

function codeCache(name: string): Buffer | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(process.execPath, 'r');
    if (cacheIndex === undefined) {
      cacheIndex = null;
      const { size } = fstatSync(fd);
      const tail = Buffer.alloc(12);
      readSync(fd, tail, 0, 12, size - 12);
      if (tail.toString('latin1', 4) !== CODE_CACHE_MARK) return undefined;
      const index = Buffer.alloc(tail.readUInt32LE(0));
      readSync(fd, index, 0, index.length, size - 12 - index.length);
      cacheIndex = JSON.parse(index.toString('utf8')) as Record<string, [number, number]>;
    }
    const entry = cacheIndex?.[name];
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
 * For the build only: this run's chunks are compiled from source, and at exit the code cache of
 * each one loaded (everything the run compiled of it) is written to `file`, as JSON of base64.
 */
export function recordCodeCaches(file: string): void {
  recording = file;
  process.on('exit', () => {
    const caches = Object.fromEntries(
      [...loaded].map(([name, { script }]) => [name, script.createCachedData().toString('base64')]),
    );
    writeFileSync(file, JSON.stringify(caches));
  });
}
