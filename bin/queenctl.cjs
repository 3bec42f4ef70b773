#!/usr/bin/env node
'use strict';
// Start-up is a feature: queenctl runs inside shell loops. This loader is CommonJS (an ES module
// entry would load Node's ESM loader, ~10 ms) and runs the bundled dist/queenctl.cjs through a
// V8 code cache made at build time (scripts/bundle.mjs), so most of it is not compiled again on
// every run. A cache V8 rejects (another Node version) is simply not used.
const { readFileSync, writeFileSync } = require('node:fs');
const { createRequire } = require('node:module');
const { dirname, join } = require('node:path');
const { setFlagsFromString } = require('node:v8');
const { Script } = require('node:vm');

// undici parses HTTP with llhttp compiled to WebAssembly; V8's optimising tier compiles it again
// in the background and process exit waits for that (~100 ms measured). A CLI making a few
// requests is well served by the baseline compiler. Set before undici loads.
setFlagsFromString('--liftoff-only');

const filename = join(__dirname, '..', 'dist', 'queenctl.cjs');
const cacheFile = `${filename}.cache`;
let cachedData;
try {
  cachedData = readFileSync(cacheFile);
} catch {
  cachedData = undefined;
}
const script = new Script(
  `(function (exports, require, module, __filename, __dirname) {${readFileSync(filename, 'utf8')}\n})`,
  {
    filename,
    cachedData,
  },
);
const bundle = { exports: {} };
script.runInThisContext()(bundle.exports, createRequire(filename), bundle, filename, dirname(filename));

if (process.env.QUEENCTL_DEBUG) {
  const cache = cachedData === undefined ? 'absent' : script.cachedDataRejected ? 'rejected' : 'accepted';
  process.stderr.write(`queenctl: code cache ${cache}\n`);
}

bundle.exports.main(process.argv.slice(2)).then(() => {
  if (process.env.QUEENCTL_WRITE_CODE_CACHE === '1') writeFileSync(cacheFile, script.createCachedData());
});
