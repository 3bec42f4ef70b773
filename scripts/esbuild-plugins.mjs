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

/**
 * undici requires node:http at load time (~5 ms of Node's own modules to compile, with no code
 * cache in the standalone executable: docs/standalone.md) for two things: Node's maximum header
 * size, read when a connection is made, and a class to compare with when a body is destroyed.
 * Here the first is `maxHeaderSize` (what node:http says for the Node.js being built for, which
 * the standalone executable runs without options) and the second is required when used.
 */
export function undiciWithoutNodeHttp(maxHeaderSize) {
  const edits = [
    {
      file: /undici[\\/]lib[\\/]dispatcher[\\/]client\.js$/,
      replace: [
        ["const http = require('node:http')\n", ''],
        [
          [
            'const getDefaultNodeMaxHeaderSize = http &&',
            '  http.maxHeaderSize &&',
            '  Number.isInteger(http.maxHeaderSize) &&',
            '  http.maxHeaderSize > 0',
            '  ? () => http.maxHeaderSize\n',
          ].join('\n'),
          `const getDefaultNodeMaxHeaderSize = ${Number(maxHeaderSize)} > 0\n  ? () => ${Number(maxHeaderSize)}\n`,
        ],
        [
          "const connectH2 = require('./client-h2.js')",
          "const connectH2 = (...args) => require('./client-h2.js')(...args)",
        ],
      ],
    },
    {
      file: /undici[\\/]lib[\\/]core[\\/]util\.js$/,
      replace: [
        ["const { IncomingMessage } = require('node:http')\n", ''],
        ['constructor === IncomingMessage)', "constructor === require('node:http').IncomingMessage)"],
      ],
    },
  ];
  return {
    name: 'undici-without-node-http',
    setup(builder) {
      for (const { file, replace } of edits) {
        builder.onLoad({ filter: file }, async (args) => {
          let source = await readFile(args.path, 'utf8');
          for (const [from, to] of replace) {
            if (!source.includes(from))
              throw new Error(
                `undici changed: ${JSON.stringify(from)} not found in ${args.path}; update scripts/esbuild-plugins.mjs`,
              );
            source = source.replace(from, to);
          }
          return { contents: source, loader: 'js' };
        });
      }
    },
  };
}
