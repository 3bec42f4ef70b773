// The first step of `npm run build`: every TypeScript file of the project (tsconfig.json's
// include) into dist/ as JavaScript, file for file, by esbuild: ~0.5 CPU-s, where tsc's emit took
// ~13 CPU-s of a 60 CPU-s budget for `npm test` (issue 25). Types are checked by `tsc --noEmit`
// in `npm run lint`, which CI runs before the suite, and by the editor: a build no longer waits
// on the type checker. The output is what tsc wrote (ESM, ES2022, one file per source, the same
// paths under dist/), so the tests, the demo, the bench and scripts/docs.mjs run it unchanged.
// Plain JS, like the other build scripts.
import { build } from 'esbuild';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const DIRECTORIES = ['src', 'tools', 'test', 'scripts'];

/** Every .ts file under `dir`, as tsconfig.json's `include` has them (no .d.ts). */
function sources(dir) {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

const entryPoints = DIRECTORIES.flatMap(sources).map((path) => join(root, path));
await build({
  entryPoints,
  outdir: join(root, 'dist'),
  outbase: root,
  bundle: false,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // tsconfig.json's settings that change the output (class fields as ES2022 defines them).
  tsconfig: join(root, 'tsconfig.json'),
  logLevel: 'warning',
});
process.stderr.write(`transpile: ${entryPoints.length} files into ${relative(process.cwd(), join(root, 'dist'))}/\n`);
