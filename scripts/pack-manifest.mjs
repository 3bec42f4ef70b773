// The package.json that `npm pack` and `npm publish` put in the package: without `scripts`.
// They are the developers' (build, test, and `prepare`, which builds on `npm ci`); in the package
// a user installs they would only make `npm install -g queenctl-*.tgz` warn of install scripts
// (issue 33). package.json's prepack runs `strip` (the working tree's file is kept aside, then
// written without `scripts`), postpack runs `restore`. A strip left over by a pack that failed is
// restored first. npm reads `prepare` after prepack, so a pack no longer builds: it packs the
// last `npm run build` (`npm ci` still builds, through `prepare`). Plain JS, like the other
// build scripts.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const manifest = join(root, 'package.json');
const kept = join(root, '.package.json.packing');

const mode = process.argv[2];
if (mode === 'strip') {
  if (existsSync(kept)) renameSync(kept, manifest);
  // `prepare` no longer builds a pack (it is stripped before npm reads it): what is packed is the
  // last build, so there must be one.
  if (!existsSync(join(root, 'dist', 'queenctl.cjs'))) {
    process.stderr.write('pack-manifest: no build in dist/ to pack: run npm run build first\n');
    process.exit(1);
  }
  const text = readFileSync(manifest, 'utf8');
  const { scripts: _scripts, ...packed } = JSON.parse(text);
  writeFileSync(kept, text);
  writeFileSync(manifest, `${JSON.stringify(packed, null, 2)}\n`);
} else if (mode === 'restore') {
  if (existsSync(kept)) renameSync(kept, manifest);
} else {
  process.stderr.write('usage: node scripts/pack-manifest.mjs strip|restore\n');
  process.exit(1);
}
