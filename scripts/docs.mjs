// Writes what is generated from queenctl's command tree (src/docs/): `--man` the man pages into
// dist/man/ (run by scripts/bundle.mjs, so `npm run build` makes them and the package ships
// them), `--reference` the reference pages into docs/reference/ (`npm run docs`; the suite fails
// when the committed ones differ). Reads tsc's output (dist/src/), never the bundle: queenctl's
// own runs never load the generators.
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

const root = new URL('../', import.meta.url);
const load = (path) => import(new URL(`dist/src/docs/${path}`, root).href);

const modes = process.argv.slice(2);
if (modes.length === 0 || modes.some((mode) => mode !== '--man' && mode !== '--reference')) {
  process.stderr.write('usage: node scripts/docs.mjs [--man] [--reference] (after tsc has built dist/)\n');
  process.exit(1);
}

const { docsTree } = await load('tree.js');
const tree = docsTree();

if (modes.includes('--man')) {
  const { manPages } = await load('man.js');
  const { version } = JSON.parse(await readFile(new URL('package.json', root), 'utf8'));
  // SOURCE_DATE_EPOCH (reproducible builds) names the date; else the day of the build, in UTC.
  const epoch = Number(process.env.SOURCE_DATE_EPOCH);
  const date = (Number.isFinite(epoch) && process.env.SOURCE_DATE_EPOCH ? new Date(epoch * 1000) : new Date())
    .toISOString()
    .slice(0, 10);
  const dir = fileURLToPath(new URL('dist/man/', root));
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  for (const page of manPages(tree, { version, date })) await writeFile(`${dir}${page.file}`, page.text);
}

if (modes.includes('--reference')) {
  const { referencePages } = await load('reference.js');
  const dir = fileURLToPath(new URL('docs/reference/', root));
  await mkdir(dir, { recursive: true });
  const pages = referencePages(tree);
  // A page of a group that is gone goes too; other files of the folder stay.
  const generated = new Set(pages.map((page) => page.file));
  for (const name of await readdir(dir)) {
    if (name.endsWith('.md') && !generated.has(name)) {
      const text = await readFile(`${dir}${name}`, 'utf8');
      if (text.startsWith('<!-- Generated')) await rm(`${dir}${name}`);
    }
  }
  for (const page of pages) await writeFile(`${dir}${page.file}`, page.text);
}
