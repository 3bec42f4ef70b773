// Builds the file queenctl runs: src/ bundled into dist/queenctl.cjs (one file to load instead
// of ~100 modules to resolve), then a V8 code cache for it from a representative run. Plain JS
// because it runs before anything is compiled. See issue 6 and bin/queenctl.cjs.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lazyCommanderChildProcess, lazyHttp2 } from './esbuild-plugins.mjs';

const root = new URL('../', import.meta.url);
const outfile = fileURLToPath(new URL('dist/queenctl.cjs', root));

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
  define: { QUEENCTL_BUILD_INFO: JSON.stringify(buildInfo()) },
  plugins: [lazyHttp2, lazyCommanderChildProcess, undiciIndexExternal],
  legalComments: 'none',
  logLevel: 'warning',
  write: false,
});

// The first line names the build (a hash of the bundle) and the Node that made the shipped code
// cache: bin/queenctl.cjs keys the caches it makes for other Node versions by the build, and
// test/e2e/package.test.ts knows from the Node which cache to expect.
const [bundled] = outputFiles;
const buildId = createHash('sha256').update(bundled.contents).digest('hex').slice(0, 16);
await mkdir(dirname(outfile), { recursive: true });
await writeFile(outfile, `// queenctl build ${buildId} node ${process.version}\n${bundled.text}`);

// A code cache made by a run that takes the common path (parse flags, renew, fail, report), so
// later runs skip compiling what it compiled. The shipped cache is written only here; the loader
// writes its own, elsewhere, only for other Node versions.
await rm(`${outfile}.cache`, { force: true });
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
