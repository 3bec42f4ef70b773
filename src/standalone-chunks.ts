/**
 * The dependencies the start-up snapshot does not hold, in the standalone executable only
 * (scripts/build-exe.mjs, docs/standalone.md). undici (and with it node:http, whose parser a
 * snapshot cannot serialise), yaml, chalk, ora and cli-table3 are each bundled into a script of
 * their own, carried as an asset of the executable. A path that needs one compiles and runs it
 * here; a path that does not never reads it, and the snapshot stays small, which every run pays
 * for. No code cache: V8 takes none made outside the snapshot the process started from
 * (docs/standalone.md, "Code caches"), and the executable writes no files.
 */
import { createRequire } from 'node:module';
import { Script } from 'node:vm';

/** What a chunk's script exports: each module specifier it serves, to that module's exports. */
type ChunkExports = Record<string, unknown>;
const loaded = new Map<string, ChunkExports>();

export function loadChunk(name: string): ChunkExports {
  const known = loaded.get(name);
  if (known) return known;
  // A single executable's own require loads built-in modules only, which is all a chunk needs.
  const requireBuiltin = createRequire(process.execPath);
  const { getAsset } = requireBuiltin('node:sea') as typeof import('node:sea');
  const source = getAsset(`${name}.js`, 'utf8');
  const script = new Script(`(function (module, exports, require) {${source}\n})`, { filename: `queenctl:${name}.js` });
  const module = { exports: {} as ChunkExports };
  (script.runInThisContext() as (m: typeof module, e: ChunkExports, r: NodeRequire) => void)(
    module,
    module.exports,
    requireBuiltin,
  );
  loaded.set(name, module.exports);
  return module.exports;
}
