// Builds the file queenctl runs: src/ bundled into dist/queenctl.cjs (one file to load instead
// of ~100 modules to resolve), then a V8 code cache for it from a representative run. Plain JS
// because it runs before anything is compiled. See issue 6 and bin/queenctl.cjs.
import { build } from 'esbuild';
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { realpathSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lazyCommanderChildProcess, lazyHttp2 } from './esbuild-plugins.mjs';
import { bundledPackages, licensesText, SBOM_FILE, sbomText } from './licenses.mjs';

const root = new URL('../', import.meta.url);
const outfile = fileURLToPath(new URL('dist/queenctl.cjs', root));

/**
 * Files of their own for what only some runs load, so every `--version`, help and usage error
 * does not read and deserialize them (issue 19). undici (the HTTP client, ~600 KB of the ~950 KB
 * a bundle with it holds) is loaded by runs that send a request (broker/undici-transport.ts);
 * yaml by runs that read a config file or print YAML. Until now yaml was required from
 * node_modules, some 60 modules compiled without a code cache (~20 ms). The bundle requires each
 * file by its name, and bin/queenctl.cjs loads it with a code cache of its own. A module of one
 * of them imported by src but not listed here would be bundled twice: the build refuses it.
 * The bundle takes a chunk for a CommonJS module, so a default import of a package that is an
 * ES module only (ora) gets the package's namespace, whose `default` is the export: see
 * src/output/watch.ts, and test/process/tty.test.ts, which runs it through the bundle.
 */
const CHUNKS = [
  { name: 'undici', modules: ['undici/lib/dispatcher/agent.js'], prefix: /^undici\/lib\// },
  { name: 'yaml', modules: ['yaml'], prefix: /^yaml(\/|$)/ },
  // chalk, for colour (src/output/style.ts): a file of its own, since a coloured run need not
  // measure anything, and string-width costs ~34 ms as it loads (its \p{RGI_Emoji} expression with
  // the v flag and an Intl.Segmenter; docs/performance.md#tables-in-a-pipe).
  { name: 'colour', modules: ['chalk'], prefix: /^chalk(\/|$)/ },
  // string-width and wrap-ansi measure and wrap text for a terminal (src/output/width.ts); ora
  // draws the spinner (it carries a chalk of its own).
  {
    name: 'terminal',
    modules: ['ora', 'string-width', 'wrap-ansi'],
    prefix: /^(ora|string-width|wrap-ansi)(\/|$)/,
  },
  // json-p3 (RFC 9535 JSONPath, ~150 KB: more than every run reads), for -o jsonpath only
  // (src/output/jsonpath.ts).
  { name: 'jsonpath', modules: ['json-p3'], prefix: /^json-p3(\/|$)/ },
  // prom-client, for --metrics-address only (src/metrics/registry.ts).
  { name: 'metrics', modules: ['prom-client'], prefix: /^prom-client(\/|$)/ },
  // log-update and cli-truncate, for the live views on a terminal only (src/output/live.ts);
  // string-width, which they use too, comes from the terminal chunk.
  {
    name: 'live',
    modules: ['log-update', 'cli-truncate'],
    prefix: /^(log-update|cli-truncate)(\/|$)/,
  },
];
const chunkFile = (chunk) => `queenctl-${chunk.name}.cjs`;
const chunked = {
  name: 'chunks',
  setup(builder) {
    for (const chunk of CHUNKS) {
      builder.onResolve({ filter: chunk.prefix }, (args) => {
        if (!chunk.modules.includes(args.path))
          throw new Error(`${args.path}: add it to the ${chunk.name} chunk in scripts/bundle.mjs`);
        return { path: args.path, namespace: 'chunk' };
      });
    }
    builder.onLoad({ filter: /.*/, namespace: 'chunk' }, (args) => {
      const chunk = CHUNKS.find(({ modules }) => modules.includes(args.path));
      return {
        contents: `module.exports = require('./${chunkFile(chunk)}')[${JSON.stringify(args.path)}];`,
        loader: 'js',
      };
    });
    builder.onResolve({ filter: /^\.\/queenctl-[a-z]+\.cjs$/ }, (args) => ({ path: args.path, external: true }));
  },
};

/**
 * The broker the build's warm-up runs renew their leases on: every extend renewed for a minute,
 * as the documented answer says it; its port on the first line of its output.
 */
const WARM_UP_BROKER = `const server = require('node:http').createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    const id = /^\\/api\\/v1\\/lease\\/([^/]+)\\/extend$/.exec(request.url ?? '')?.[1];
    if (request.method !== 'POST' || id === undefined) return response.writeHead(404).end();
    const at = new Date(Date.now() + 60000).toISOString();
    const answer = { leaseId: decodeURIComponent(id), success: true, renewed: 1, newExpiresAt: at, expiresAt: at,
      lease_expires_at: at };
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));`;

/**
 * `text`, refused unless it is ASCII: bin/queenctl.cjs reads each file of the bundle as Latin-1,
 * which skips decoding UTF-8 (esbuild escapes every other character: its `charset` is ascii).
 */
function ascii(file, text) {
  const at = text.search(/[^\x00-\x7f]/);
  if (at !== -1)
    throw new Error(`${file}: a character that is not ASCII at ${at}; bin/queenctl.cjs reads it as Latin-1`);
  return text;
}

/** `undici` itself (not its deep modules, which are bundled) stays a runtime import. */
const undiciIndexExternal = {
  name: 'undici-index-external',
  setup(builder) {
    builder.onResolve({ filter: /^undici$/ }, () => ({ path: 'undici', external: true }));
  },
};

/**
 * What `queenctl version` says of this build (src/build-info.ts): the commit when this is a git
 * checkout of queenctl itself (null from a tarball, even one unpacked inside another repository),
 * the time of the build, and that this is the npm package.
 */
function buildInfo() {
  const dir = fileURLToPath(root);
  let commit = null;
  try {
    const [top, hash] = execFileSync('git', ['rev-parse', '--show-toplevel', '--short', 'HEAD'], {
      cwd: dir,
      stdio: 'pipe',
    })
      .toString()
      .trim()
      .split('\n');
    if (top && realpathSync(top) === realpathSync(dir)) commit = hash || null;
  } catch {
    // Not a git checkout, or no git: the build does not know its commit.
  }
  const date = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  return { commit, date, standalone: false };
}

const { outputFiles, metafile } = await build({
  entryPoints: [fileURLToPath(new URL('src/cli.ts', root))],
  outfile,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  // chalk and ora are ES modules only, which Node 20 cannot require: they are bundled (the
  // colour and terminal chunks above), and run only when used. undici's whole index, for a
  // proxy, is required from node_modules (undiciIndexExternal).
  // import() becomes a require() inside a promise: code run from a V8 code cache by vm.Script
  // has no module loader for import() on Node 20 (bin/queenctl.cjs).
  supported: { 'dynamic-import': false },
  define: { QUEENCTL_BUILD_INFO: JSON.stringify(buildInfo()) },
  plugins: [lazyCommanderChildProcess, chunked, undiciIndexExternal],
  legalComments: 'none',
  logLevel: 'warning',
  write: false,
  metafile: true,
});

const chunkBuilds = await Promise.all(
  CHUNKS.map(async (chunk) => {
    const chunkOutfile = fileURLToPath(new URL(`dist/${chunkFile(chunk)}`, root));
    const exported = chunk.modules.map((path) => `${JSON.stringify(path)}: require('${path}')`);
    const { outputFiles: files, metafile: chunkMetafile } = await build({
      stdin: { contents: `module.exports = {${exported.join(', ')}};`, resolveDir: fileURLToPath(root), loader: 'js' },
      outfile: chunkOutfile,
      bundle: true,
      platform: 'node',
      target: 'node20',
      format: 'cjs',
      plugins: [lazyHttp2],
      legalComments: 'none',
      logLevel: 'warning',
      write: false,
      metafile: true,
    });
    return { outfile: chunkOutfile, bundled: files[0], inputs: Object.keys(chunkMetafile.inputs) };
  }),
);

// The first line names the build (a hash of the bundle), the Node that made the shipped code
// cache and queenctl's version: bin/queenctl.cjs keys the caches it makes for other Node versions
// by the build, and prints the version for `--version` alone without loading the bundle (issue
// 41); test/process/package.test.ts knows from the Node which cache to expect. The version is the
// one the bundle prints (src/version.ts, as tsc wrote it just before).
const [bundled] = outputFiles;
// Every file: a cache must never serve another build of any of them.
const hash = createHash('sha256').update(bundled.contents);
for (const chunk of chunkBuilds) hash.update(chunk.bundled.contents);
const buildId = hash.digest('hex').slice(0, 16);
await mkdir(dirname(outfile), { recursive: true });
const { VERSION } = await import(new URL('dist/src/version.js', root).href);
// The bin prints this one for `--version` alone: it must be the one the bundle prints.
if (!bundled.text.includes(JSON.stringify(VERSION)))
  throw new Error(`the bundle does not carry version ${VERSION} (dist/src/version.js): run npm run build`);
const firstLine = `// queenctl build ${buildId} node ${process.version} version ${VERSION}\n`;
await writeFile(outfile, ascii(outfile, `${firstLine}${bundled.text}`));
for (const chunk of chunkBuilds)
  await writeFile(chunk.outfile, ascii(chunk.outfile, `${firstLine}${chunk.bundled.text}`));
// The npm packages bundled are not installed with queenctl (package.json lists them under
// devDependencies: only undici's index is required at run time), so their licences go with the
// files that carry them.
const inputs = [...Object.keys(metafile.inputs), ...chunkBuilds.flatMap((chunk) => chunk.inputs)];
const packages = bundledPackages(inputs, fileURLToPath(root));
await writeFile(fileURLToPath(new URL('dist/THIRD-PARTY-LICENSES', root)), licensesText(packages));
// And what they are, by name and version, for whoever must know what runs (docs/security.md).
const manifest = JSON.parse(await readFile(fileURLToPath(new URL('package.json', root)), 'utf8'));
await writeFile(
  fileURLToPath(new URL(`dist/${SBOM_FILE}`, root)),
  sbomText({
    subject: manifest,
    packages,
    properties: [
      {
        name: 'queenctl:code-caches',
        value:
          `dist/queenctl*.cache: V8 code caches (compiled code, run as it is) of the files above, made by node ` +
          `${process.version} at build time; bin/queenctl.cjs runs them (docs/security.md)`,
      },
      {
        name: 'queenctl:npm-dependencies',
        value: `${Object.entries(manifest.dependencies)
          .map(([name, range]) => `${name} ${range}`)
          .join(', ')}: installed by npm beside the package, not bundled`,
      },
    ],
    root: fileURLToPath(root),
  }),
);

// The caches of an earlier build go first: V8 checks only a source's length, and nothing may run
// this build's files with them.
for (const name of await readdir(dirname(outfile))) {
  if (/^queenctl.*\.cache$/.test(name)) await rm(join(dirname(outfile), name), { force: true });
}

// The completion scripts, made by the bundle just written, into a file of their own that the bundle
// requires when they are asked for (src/commands/completion.ts): `completion bash` no longer runs
// the generator. Made with no such file (an earlier build's) beside it: generated, not copied.
const completionFile = fileURLToPath(new URL('dist/queenctl-completion.cjs', root));
await rm(completionFile, { force: true });
const bin = fileURLToPath(new URL('bin/queenctl.cjs', root));
// The runs of the bundle below keep their cache directories in here, not in the builder's.
const scratch = await mkdtemp(join(tmpdir(), 'queenctl-build-'));
try {
  const scripts = {};
  for (const shell of ['bash', 'zsh', 'fish']) {
    const env = { ...process.env, XDG_CACHE_HOME: join(scratch, 'completion-cache') };
    scripts[shell] = execFileSync(process.execPath, [bin, 'completion', shell], { encoding: 'utf8', env });
  }
  // Non-ASCII characters escaped, as esbuild writes the other files: the bin reads them as Latin-1.
  const json = JSON.stringify({ scripts }).replace(
    /[\u007f-\uffff]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  await writeFile(completionFile, ascii(completionFile, `${firstLine}module.exports = ${json};\n`));

  // Code caches made by runs that take the common paths, so later runs skip compiling what they
  // compiled: one set for each kind of run (bin/queenctl.cjs), `net` by lease runs (parse flags,
  // renew, fail, report) and `local` by help, completion, a usage error and config verbs, and a set
  // for the files loaded after undici's flag. The shipped caches are written only here; the loader
  // writes its own, elsewhere, only for other Node versions. The runs read a config file, as most
  // users' runs do, so yaml's caches are made too. Each run starts from the cache the one before
  // wrote, so a cache holds what all of its kind's runs compiled.
  const config = join(scratch, 'config.yaml');
  await writeFile(config, 'current-context: warm-up\ncontexts:\n  - name: warm-up\n    server: http://127.0.0.1:9\n');
  let runs = 0;
  const warmUp = (args, input = '', env = {}) => {
    try {
      execFileSync(process.execPath, [bin, ...args], {
        // A cache directory of its own for each run: none keeps a config memo (src/config/memo.ts)
        // for the next, so each reads the config file with yaml, and none writes in the builder's.
        env: {
          ...process.env,
          QUEENCTL_WRITE_CODE_CACHE: '1',
          QUEEN_CONFIG: config,
          XDG_CACHE_HOME: join(scratch, `cache-${runs++}`),
          ...env,
        },
        input,
        stdio: ['pipe', 'ignore', 'ignore'],
      });
    } catch {
      // Exit 2 (nothing listens on port 9) is the expected end of that lease warm-up run.
    }
  };
  // The lease runs are answered, so the caches hold the path of a renewal (reading the answer,
  // checking it, printing it: issue 41), by a broker of a few lines in a process of its own (the
  // runs below are synchronous); and one run meets nothing on port 9, for the path of a failure.
  const broker = spawn(process.execPath, ['-e', WARM_UP_BROKER], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const [line] = await once(broker.stdout, 'data');
    const url = `http://127.0.0.1:${Number.parseInt(line.toString(), 10)}`;
    const options = ['--retries', '0', '--timeout', '2s'];
    const extend = (ids, at = url) => ['lease', 'extend', ids, '--server', at, ...options];
    // `lease extend -` (ids from standard input) sends over undici, under --liftoff-only on Node
    // 20: its run makes the caches of the files loaded after that flag (undici's, chalk's for a
    // table in colour). `lease extend <id>` goes over node:net: a table in colour, then JSON, the
    // common path of scripts, make the net kind's caches of the bundle, yaml's and chalk's.
    warmUp(['lease', 'extend', '--help']);
    warmUp([...extend('-'), '-o', 'table', '--color'], 'warm-up\n');
    warmUp([...extend('warm-up'), '-o', 'table', '--color']);
    warmUp([...extend('warm-up'), '-o', 'json']);
    warmUp([...extend('warm-up', 'http://127.0.0.1:9'), '-o', 'json']);
    // A failure said to a terminal's width (COLUMNS stands for one) is wrapped by wrap-ansi: the
    // caches of the terminal file (string-width, wrap-ansi), over node:net and after undici's flag.
    const narrow = { COLUMNS: '60' };
    warmUp([...extend('warm-up', 'http://127.0.0.1:9'), '-o', 'json'], '', narrow);
    warmUp([...extend('-', 'http://127.0.0.1:9'), '-o', 'json'], 'warm-up\n', narrow);
    // -o jsonpath parses its template before anything is sent: the cache of jsonpath's file.
    warmUp([...extend('warm-up'), '-o', 'jsonpath={.renewed}']);
  } finally {
    broker.kill();
  }
  // The local kind.
  warmUp(['help']);
  warmUp(['completion', 'bash']);
  warmUp(['--no-such-flag']);
  warmUp(['config', 'get-contexts', '-o', 'table', '--color']);
  warmUp(['config', 'get-contexts']);
} finally {
  await rm(scratch, { recursive: true, force: true });
}

// The man pages (issue 26), generated from the same command tree by tsc's output of src/docs/
// (scripts/docs.mjs): the package ships dist/man/, and package.json's `man` lists every page, so
// `npm install -g` puts them where `man queenctl-lease-extend` finds them.
execFileSync(process.execPath, [fileURLToPath(new URL('scripts/docs.mjs', root)), '--man'], { stdio: 'inherit' });
