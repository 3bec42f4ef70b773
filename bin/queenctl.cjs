#!/usr/bin/env node
'use strict';
// Start-up is a feature: queenctl runs inside shell loops. This loader is CommonJS (an ES module
// entry would load Node's ESM loader, ~10 ms) and runs the bundled dist/queenctl.cjs through a
// V8 code cache, so most of it is not compiled again on every run.
//
// V8 accepts a code cache only from the same V8 version (and flags). The package ships caches
// made at build time (scripts/bundle.mjs), one per kind of run (below), which serve only the
// Node version that built it. For any other Node, the first run of a kind writes a cache made by
// that Node into the user's cache directory ($XDG_CACHE_HOME or ~/.cache, then queenctl/code/),
// named for the Node version, the build and the kind, and later runs of that kind use it. Node's
// own compile cache (module.enableCompileCache) was measured and not used: it keeps only the code
// compiled at load time, not what the run went on to compile, and does not exist on Node 20. A
// cache directory that cannot be written costs a failed system call or two per run and is
// otherwise ignored: nothing here may fail a run or slow it down.
const fs = require('node:fs');
const { createRequire } = require('node:module');
const { dirname, isAbsolute, join } = require('node:path');
const { Script } = require('node:vm');

// Two kinds of run, each with code caches of its own: `net`, the commands that send requests
// (lease, ping, version), which compile most of the bundle; and `local`, all the others
// (--version, help, config, completion, usage errors), which compile less and start from a
// smaller cache.
const NET_COMMANDS = new Set(['lease', 'ping', 'version']);
const kind = process.argv.slice(2).some((arg) => NET_COMMANDS.has(arg)) ? 'net' : 'local';

// undici parses HTTP with llhttp compiled to WebAssembly. On Node 20 (V8 11), V8's optimising
// tier compiles it again in the background and process exit waits for that: +80 ms for one
// request, pinned to one CPU (docs/architecture.md). The baseline compiler serves a CLI well, so
// on Node 20 --liftoff-only is set just before undici's file is loaded (Node 22 and 24 do not
// wait; the flag made them slower). Not before: node:v8, which sets it, loads node:stream and
// more (~2 ms), and once a V8 flag changes V8 refuses Node's own code cache for every Node module
// compiled after (node:http, for one, on the path of `lease extend <id>`). So the Node modules
// undici requires as it loads are loaded first, and a file of the bundle loaded after the flag
// has caches of its own (`+liftoff`), made only by runs that end under the flag.
const LIFTOFF_ONLY = Number.parseInt(process.versions.v8, 10) < 12;
const UNDICI_BUILTINS = ['node:stream', 'node:assert', 'node:diagnostics_channel', 'node:net', 'node:http'];
let flagged = false;
function liftoffOnly() {
  if (!LIFTOFF_ONLY || flagged) return;
  for (const builtin of UNDICI_BUILTINS) require(builtin);
  require('node:v8').setFlagsFromString('--liftoff-only');
  flagged = true;
}

// The bundle comes in several files: dist/queenctl.cjs, which every run loads, and files the
// bundle requires only on the paths that need them (scripts/bundle.mjs): undici, the HTTP client,
// when many requests are sent; yaml, when a config file is read or YAML printed; chalk and ora.
// Each has a code cache of its own, chosen and written by the same rules.
const CHUNK = /^\.\/queenctl-([a-z]+)\.cjs$/;

const debug = process.env.QUEENCTL_DEBUG ? (line) => process.stderr.write(`queenctl: ${line}\n`) : () => {};
const filename = join(__dirname, '..', 'dist', 'queenctl.cjs');
const source = fs.readFileSync(filename, 'utf8');
// The build's id (a hash of the bundle, on the first line of each of its files): V8 checks only a
// source's length, so a cache must never be used for another build of the same size.
const buildOf = (text) => /^\/\/ queenctl build ([0-9a-f]+)/.exec(text)?.[1];
const buildId = buildOf(source);
const writingShipped = process.env.QUEENCTL_WRITE_CODE_CACHE === '1';
const cacheHome = writingShipped || buildId === undefined ? undefined : userCacheHome(process.env);
const userDir = cacheHome === undefined ? undefined : join(cacheHome, 'queenctl', 'code');
const prefix = `${process.version}-${process.arch}-${buildId}`;
/** The caches' kind, and `+liftoff` for a file loaded under that flag. */
const cacheKind = () => `${kind}${flagged ? '+liftoff' : ''}`;
/** This kind's cache of the bundle (chunk undefined) or of a chunk, made on this machine. */
const userCache = (chunk) => userDir && join(userDir, `${prefix}.${cacheKind()}${chunk ? `-${chunk}` : ''}.cache`);

/** The scripts this run loaded, each with the cache it may write at the end. */
const loaded = [];

const bundleRequire = createRequire(filename);
const chunks = new Map();
const requireInBundle = (id) => {
  const name = CHUNK.exec(id)?.[1];
  if (name === undefined) return bundleRequire(id);
  if (!chunks.has(name)) {
    const file = join(dirname(filename), id);
    const text = fs.readFileSync(file, 'utf8');
    // A file of another build is never run with this one.
    if (buildOf(text) !== buildId) throw new Error(`${file} is not of this build of queenctl: install it again`);
    if (name === 'undici') liftoffOnly();
    chunks.set(name, load(file, text, userCache(name), `of queenctl-${name}.cjs `));
  }
  return chunks.get(name);
};
const main = load(filename, source, userCache(undefined), '');
main.main(process.argv.slice(2)).then(() => {
  for (const script of loaded) {
    // V8 stamps a cache with the flags in force when it is made: one loaded before the flag would
    // be refused at every start.
    if (script.flagged !== flagged) {
      debug(`code cache ${script.label}not written: V8 flags changed after it was loaded`);
      continue;
    }
    if (writingShipped) {
      fs.writeFileSync(script.shipped, script.script.createCachedData());
      continue;
    }
    if (script.accepted) continue;
    try {
      writeUserCache(script);
    } catch (error) {
      // The run is over and its exit code set: a cache is never worth changing it.
      debug(`code cache ${script.label}not written: ${error.message}`);
    }
  }
});

/** The cache of `file` shipped with the package for this kind of run (scripts/bundle.mjs). */
function shippedCache(file) {
  return `${file}.${cacheKind()}.cache`;
}

/**
 * Compiles and runs one file of the bundle from its code cache (this kind's made on this
 * machine, else the one shipped beside it), and returns its exports.
 */
function load(file, text, userFile, label) {
  const shipped = shippedCache(file);
  // The build's warm-up runs (scripts/bundle.mjs) each start from the cache the one before
  // wrote, so the shipped cache holds what all of them compiled.
  const candidates = userFile === undefined ? [shipped] : [userFile, shipped];
  let cacheFile;
  let cachedData;
  for (const candidate of candidates) {
    try {
      cachedData = fs.readFileSync(candidate);
      cacheFile = candidate;
      break;
    } catch {
      // Not there (yet): the next candidate.
    }
  }
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${text}\n})`, {
    filename: file,
    cachedData,
  });
  const accepted = cachedData !== undefined && !script.cachedDataRejected;
  if (cacheFile === undefined) debug(`code cache ${label}absent`);
  else {
    const made =
      cacheFile === shipped ? 'shipped with the package' : `made on this machine for node ${process.version}`;
    debug(`code cache ${label}${accepted ? 'accepted' : 'rejected'} (${made}): ${cacheFile}`);
  }
  loaded.push({ file, script, accepted, userFile, label, shipped, flagged });
  const module = { exports: {} };
  script.runInThisContext()(module.exports, requireInBundle, module, file, dirname(file));
  return module.exports;
}

/** $XDG_CACHE_HOME, else ~/.cache (the XDG default); none without an absolute HOME. */
function userCacheHome(env) {
  if (env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME)) return env.XDG_CACHE_HOME;
  return env.HOME && isAbsolute(env.HOME) ? join(env.HOME, '.cache') : undefined;
}

/**
 * One level at a time: mkdirSync's recursive mode loops for ever when mkdir fails with ENOENT
 * under a parent that exists (seen with HOME under /proc on Node 22).
 */
function makeUserDir() {
  for (const dir of [cacheHome, join(cacheHome, 'queenctl'), userDir]) {
    try {
      fs.mkdirSync(dir, { mode: 0o700 });
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
    }
  }
}

/** Written aside and renamed into place, so runs side by side never read half a file. */
function writeUserCache({ script, userFile: file, label }) {
  if (userDir === undefined) {
    debug(`code cache ${label}not written: ${buildId === undefined ? 'the bundle has no build id' : 'no HOME'}`);
    return;
  }
  const temporary = `${file}.${process.pid}.tmp`;
  let fd;
  let opened = false;
  try {
    // Opened before the cache is made: an unwritable directory costs nothing more than this.
    makeUserDir();
    fd = fs.openSync(temporary, 'wx', 0o600);
    opened = true;
    fs.writeFileSync(fd, script.createCachedData());
    fs.closeSync(fd);
    fd = undefined;
    fs.renameSync(temporary, file);
    debug(`code cache ${label}written for node ${process.version}: ${file}`);
  } catch (error) {
    try {
      if (fd !== undefined) fs.closeSync(fd);
      if (opened) fs.rmSync(temporary, { force: true });
    } catch {
      // Left for removeStale of a later build.
    }
    debug(
      `code cache ${label}not written to ${userDir} (${error.code ?? error.message}): every run compiles the bundle`,
    );
    return;
  }
  removeStale(file);
}

/**
 * Caches of other builds or Node versions go once a week old (one in use there is made again on
 * its next run).
 */
function removeStale(kept) {
  try {
    const weekAgo = Date.now() - 7 * 24 * 3600 * 1000;
    for (const name of fs.readdirSync(userDir)) {
      const path = join(userDir, name);
      if (path === kept) continue;
      if (!name.startsWith(`${prefix}.`) && fs.statSync(path).mtimeMs < weekAgo) fs.rmSync(path, { force: true });
    }
  } catch {
    // A cache left behind costs disk space only.
  }
}
