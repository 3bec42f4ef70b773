// Builds the file queenctl runs: src/ bundled into dist/queenctl.cjs (one file to load instead
// of ~100 modules to resolve), then a V8 code cache for it from a representative run. Plain JS
// because it runs before anything is compiled. See issue 6 and bin/queenctl.cjs.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = new URL('../', import.meta.url);
const outfile = fileURLToPath(new URL('dist/queenctl.cjs', root));

/**
 * undici's Client requires its HTTP/2 module at load time, and with it node:http2 (~20 ms).
 * queenctl never offers h2 (allowH2 is off), so the module is only loaded if it is ever called.
 */
const lazyHttp2 = {
  name: 'lazy-undici-h2',
  setup(builder) {
    builder.onLoad({ filter: /undici[\\/]lib[\\/]dispatcher[\\/]client\.js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const eager = "const connectH2 = require('./client-h2.js')";
      if (!source.includes(eager))
        throw new Error(`undici changed: ${eager} not found in ${args.path}; update scripts/bundle.mjs`);
      return {
        contents: source.replace(eager, "const connectH2 = (...args) => require('./client-h2.js')(...args)"),
        loader: 'js',
      };
    });
  },
};

/**
 * commander requires node:child_process at load time (and with it dgram and more) for external
 * executable subcommands, which queenctl has none of: load it only if spawn is ever called.
 */
const lazyCommanderChildProcess = {
  name: 'lazy-commander-child-process',
  setup(builder) {
    builder.onLoad({ filter: /commander[\\/]lib[\\/]command\.js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const eager = "const childProcess = require('node:child_process');";
      if (!source.includes(eager))
        throw new Error(`commander changed: ${eager} not found in ${args.path}; update scripts/bundle.mjs`);
      const lazy = "const childProcess = { spawn: (...args) => require('node:child_process').spawn(...args) };";
      return { contents: source.replace(eager, lazy), loader: 'js' };
    });
  },
};

/**
 * undici is most of what a bundle with it holds (~600 KB of ~950 KB), and only a run that sends
 * a request runs it: reading and deserializing it cost every `--version`, help and usage error
 * ~10 ms (issue 19). The module queenctl uses (the Agent) goes to a file
 * of their own, dist/queenctl-undici.cjs, required when the transport is loaded
 * (broker/undici-transport.ts); bin/queenctl.cjs loads it with a code cache of its own.
 */
const UNDICI_CHUNK = 'queenctl-undici.cjs';
const UNDICI_MODULES = ['undici/lib/dispatcher/agent.js'];
const undiciChunk = {
  name: 'undici-chunk',
  setup(builder) {
    builder.onResolve({ filter: /^undici\/lib\// }, (args) => {
      if (!UNDICI_MODULES.includes(args.path))
        throw new Error(`${args.path}: add it to UNDICI_MODULES in scripts/bundle.mjs, or it is bundled twice`);
      return { path: args.path, namespace: 'undici-chunk' };
    });
    builder.onLoad({ filter: /.*/, namespace: 'undici-chunk' }, (args) => ({
      contents: `module.exports = require('./${UNDICI_CHUNK}')[${JSON.stringify(args.path)}];`,
      loader: 'js',
    }));
    builder.onResolve({ filter: /^\.\/queenctl-undici\.cjs$/ }, (args) => ({ path: args.path, external: true }));
  },
};

/** `undici` itself (not its deep modules, which are bundled) stays a runtime import. */
const undiciIndexExternal = {
  name: 'undici-index-external',
  setup(builder) {
    builder.onResolve({ filter: /^undici$/ }, () => ({ path: 'undici', external: true }));
  },
};

const { outputFiles } = await build({
  entryPoints: [fileURLToPath(new URL('src/cli.ts', root))],
  outfile,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  // Loaded only by the paths that need them (tables, yaml; undici's whole index only behind a
  // proxy): left out of the file every run reads, and required when used. chalk and ora are
  // ES modules only, which Node 20 cannot require: they are bundled, and run only when used.
  external: ['yaml', 'cli-table3'],
  // import() becomes a require() inside a promise: code run from a V8 code cache by vm.Script
  // has no module loader for import() on Node 20 (bin/queenctl.cjs).
  supported: { 'dynamic-import': false },
  plugins: [lazyCommanderChildProcess, undiciChunk, undiciIndexExternal],
  legalComments: 'none',
  logLevel: 'warning',
  write: false,
});

const undiciOutfile = fileURLToPath(new URL(`dist/${UNDICI_CHUNK}`, root));
const undiciExports = UNDICI_MODULES.map((path) => `${JSON.stringify(path)}: require('${path}')`);
const { outputFiles: undiciFiles } = await build({
  stdin: {
    contents: `module.exports = {${undiciExports.join(', ')}};`,
    resolveDir: fileURLToPath(root),
    loader: 'js',
  },
  outfile: undiciOutfile,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  plugins: [lazyHttp2],
  legalComments: 'none',
  logLevel: 'warning',
  write: false,
});

// The first line names the build (a hash of the bundle) and the Node that made the shipped code
// cache: bin/queenctl.cjs keys the caches it makes for other Node versions by the build, and
// test/e2e/package.test.ts knows from the Node which cache to expect.
const [bundled] = outputFiles;
const [undiciBundled] = undiciFiles;
// Both files: a cache must never serve another build of either.
const buildId = createHash('sha256').update(bundled.contents).update(undiciBundled.contents).digest('hex').slice(0, 16);
await mkdir(dirname(outfile), { recursive: true });
await writeFile(outfile, `// queenctl build ${buildId} node ${process.version}\n${bundled.text}`);
await writeFile(undiciOutfile, `// queenctl build ${buildId} node ${process.version}\n${undiciBundled.text}`);

// A code cache made by a run that takes the common path (parse flags, renew, fail, report), so
// later runs skip compiling what it compiled. The shipped cache is written only here; the loader
// writes its own, elsewhere, only for other Node versions.
await rm(`${outfile}.cache`, { force: true });
await rm(`${undiciOutfile}.cache`, { force: true });
try {
  execFileSync(
    process.execPath,
    [
      fileURLToPath(new URL('bin/queenctl.cjs', root)),
      'lease',
      'extend',
      'warm-up',
      '-o',
      'json',
      '--server',
      'http://127.0.0.1:9',
      '--retries',
      '0',
      '--timeout',
      '2s',
    ],
    {
      env: { ...process.env, QUEENCTL_WRITE_CODE_CACHE: '1', QUEEN_CONFIG: '/nonexistent/queenctl-build' },
      stdio: 'ignore',
    },
  );
} catch {
  // Exit 2 (nothing listens on port 9) is the expected end of the warm-up run.
}
