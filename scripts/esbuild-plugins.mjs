// esbuild plugins shared by the two builds of queenctl: the npm package (scripts/bundle.mjs) and
// the standalone executable (scripts/build-exe.mjs). Each makes a module that a dependency loads
// eagerly load only when it is used. Plain JS: it runs before anything is compiled.
import { readFile } from 'node:fs/promises';

/**
 * undici's Client requires its HTTP/2 module at load time, and with it node:http2 (~20 ms).
 * queenctl never offers h2 (allowH2 is off), so the module is only loaded if it is ever called.
 */
export const lazyHttp2 = {
  name: 'lazy-undici-h2',
  setup(builder) {
    builder.onLoad({ filter: /undici[\\/]lib[\\/]dispatcher[\\/]client\.js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const eager = "const connectH2 = require('./client-h2.js')";
      if (!source.includes(eager))
        throw new Error(`undici changed: ${eager} not found in ${args.path}; update scripts/esbuild-plugins.mjs`);
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
export const lazyCommanderChildProcess = {
  name: 'lazy-commander-child-process',
  setup(builder) {
    builder.onLoad({ filter: /commander[\\/]lib[\\/]command\.js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const eager = "const childProcess = require('node:child_process');";
      if (!source.includes(eager))
        throw new Error(`commander changed: ${eager} not found in ${args.path}; update scripts/esbuild-plugins.mjs`);
      const lazy = "const childProcess = { spawn: (...args) => require('node:child_process').spawn(...args) };";
      return { contents: source.replace(eager, lazy), loader: 'js' };
    });
  },
};
