#!/usr/bin/env node
'use strict';
// Start-up is a feature: queenctl runs inside shell loops. This loader is CommonJS (an ES module
// entry would load Node's ESM loader, ~10 ms) and runs the bundled dist/queenctl.cjs through a
// V8 code cache, so most of it is not compiled again on every run. `--version` alone does not
// load the bundle at all: its version is on the bundle's first line (below).
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
//
// A code cache is code: V8 runs what it holds as it is (a cache made from another source of the
// same length runs that source). So a cache made on this machine is used only when it is the
// user's own (docs/security.md, "Code caches and config memos"): queenctl/ and queenctl/code/
// under the cache directory owned by the effective user and writable by nobody else, no symbolic
// link among them, and the file a regular file of the user's, mode 0600. Anything else is
// ignored (the shipped cache is used, or none), and -v (or QUEENCTL_DEBUG) says why, once. The
// caches shipped beside the bundle are trusted as the bundle itself is: whoever can write them
// can write the code.
const fs = require('node:fs');
const { createRequire } = require('node:module');
const { dirname, isAbsolute, join } = require('node:path');
const { Script } = require('node:vm');

const filename = join(__dirname, '..', 'dist', 'queenctl.cjs');

// `--version` alone prints the version the build wrote on the bundle's first line (scripts/
// bundle.mjs), read from the file's head: the bundle is not loaded (~10 ms of every such run;
// issue 41). The same bytes and status as the bundle's own `--version`: the line on stdout, exit
// 0, and 141 when the reader of stdout is gone (docs/cli-contract.md, "Closed pipe"). With any
// other argument beside it, the bundle runs as always.
const versionAlone =
  process.argv.length === 3 && process.argv[2] === '--version' ? versionOnFirstLine(filename) : undefined;

// Two kinds of run, each with code caches of its own: `net`, the commands that send requests
// (lease, ping, version), which compile most of the bundle; and `local`, all the others (help,
// config, completion, usage errors, --version beside other arguments), which compile less and
// start from a smaller cache.
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

const say = (line) => process.stderr.write(`queenctl: ${line}\n`);
const debug = process.env.QUEENCTL_DEBUG ? say : () => {};
// -v (src/commands/globals.ts) is read here, before the command line is parsed, only to say why a
// cache was not trusted: the arguments before `--`, alone or among the other flags that take no
// value (-q, -w).
const argsBeforeDashDash = process.argv.slice(2, process.argv.includes('--') ? process.argv.indexOf('--') : undefined);
const verbose =
  process.env.QUEENCTL_DEBUG || argsBeforeDashDash.some((arg) => arg === '--verbose' || /^-[qw]*v[qvw]*$/.test(arg));
/** Why a cache of this machine was not used: on stderr with -v, each reason once. */
const said = new Set();
const distrust = (line) => {
  if (!verbose || said.has(line)) return;
  said.add(line);
  say(line);
};
// Read as Latin-1, which takes each byte for a character as it is: the build writes every file of
// the bundle in ASCII (scripts/bundle.mjs checks), and Latin-1 skips the UTF-8 decoder (~1 ms of
// every run for the main file; issue 41).
const BUNDLE_ENCODING = 'latin1';
const source = versionAlone === undefined ? fs.readFileSync(filename, BUNDLE_ENCODING) : '';
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

const EUID = typeof process.geteuid === 'function' ? process.geteuid() : undefined;
/** The directories a cache made on this machine lives in, below the cache directory itself. */
const userDirs = () => [join(cacheHome, 'queenctl'), userDir];
/** undefined until checked; then null when the directories are the user's own, else why not. */
let dirsVerdict;

/** The scripts this run loaded, each with the cache it may write at the end. */
const loaded = [];

const bundleRequire = createRequire(filename);
const chunks = new Map();
const requireInBundle = (id) => {
  const name = CHUNK.exec(id)?.[1];
  if (name === undefined) return bundleRequire(id);
  if (!chunks.has(name)) {
    const file = join(dirname(filename), id);
    const text = fs.readFileSync(file, BUNDLE_ENCODING);
    // A file of another build is never run with this one.
    if (buildOf(text) !== buildId) throw new Error(`${file} is not of this build of queenctl: install it again`);
    if (name === 'undici') liftoffOnly();
    chunks.set(name, load(file, text, userCache(name), `of queenctl-${name}.cjs `));
  }
  return chunks.get(name);
};
if (versionAlone !== undefined) printVersion(versionAlone);
else load(filename, source, userCache(undefined), '').main(process.argv.slice(2)).then(writeCaches);

/** At the end of a run, the code caches it may write (above). */
function writeCaches() {
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
}

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
      cachedData = candidate === shipped ? fs.readFileSync(candidate) : readOwnCache(candidate, label);
    } catch {
      // Not there (yet): the next candidate.
    }
    if (cachedData !== undefined) {
      cacheFile = candidate;
      break;
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
 * Why `dirs` are not the user's own (each a directory, not a link, owned by the effective user
 * and not writable by group or others), `absent` when one is missing, or null when they are.
 */
function distrustOfDirs(dirs) {
  if (EUID === undefined) return 'this system has no file owners to check (Windows)';
  for (const dir of dirs) {
    let stats;
    try {
      stats = fs.lstatSync(dir);
    } catch (error) {
      return error.code === 'ENOENT' ? 'absent' : `${dir} cannot be checked (${error.code ?? error.message})`;
    }
    if (stats.isSymbolicLink()) return `${dir} is a symbolic link`;
    if (!stats.isDirectory()) return `${dir} is not a directory`;
    if (stats.uid !== EUID) return `${dir} is owned by uid ${stats.uid}, not by you (uid ${EUID})`;
    if ((stats.mode & 0o022) !== 0) return `${dir} is writable by ${stats.mode & 0o002 ? 'others' : 'its group'}`;
  }
  return null;
}

/**
 * A cache made on this machine, read only when it is the user's own (above); undefined when
 * there is none, or when it is not, which -v says. Opened without following a link and without
 * waiting on a FIFO, and checked on what was opened.
 */
function readOwnCache(file, label) {
  // Windows has no owners to check: only the shipped caches are used there (docs/security.md).
  if (EUID === undefined) return undefined;
  if (dirsVerdict === undefined) dirsVerdict = distrustOfDirs(userDirs());
  if (dirsVerdict === 'absent') return undefined;
  const ignored = (why) => `code cache ignored: ${why} (a cache made on this machine runs only if it is your own)`;
  if (dirsVerdict !== null) {
    distrust(ignored(dirsVerdict));
    return undefined;
  }
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  let fd;
  try {
    fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    if (error.code === 'ELOOP' || error.code === 'EMLINK') distrust(ignored(`${file} is a symbolic link`));
    else if (error.code !== 'ENOENT') debug(`code cache ${label}not read: ${file} (${error.code ?? error.message})`);
    return undefined;
  }
  try {
    const stats = fs.fstatSync(fd);
    const why = !stats.isFile()
      ? 'is not a regular file'
      : stats.uid !== EUID
        ? `is owned by uid ${stats.uid}, not by you (uid ${EUID})`
        : (stats.mode & 0o7777) !== 0o600
          ? `has mode ${(stats.mode & 0o7777).toString(8).padStart(4, '0')}, not 0600`
          : undefined;
    if (why !== undefined) {
      distrust(ignored(`${file} ${why}`));
      return undefined;
    }
    return fs.readFileSync(fd);
  } finally {
    fs.closeSync(fd);
  }
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

/**
 * Written aside and renamed into place, so runs side by side never read half a file; only into
 * directories that are the user's own (a cache written elsewhere would never be read), by a new
 * file (O_EXCL: never through a link), mode 0600 whatever the umask.
 */
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
    dirsVerdict = distrustOfDirs(userDirs());
    if (dirsVerdict !== null) {
      debug(`code cache ${label}not written: ${dirsVerdict}`);
      return;
    }
    fd = fs.openSync(temporary, 'wx', 0o600);
    opened = true;
    fs.fchmodSync(fd, 0o600);
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

/** The version on the first line of the bundle `file`; undefined when it has none. */
function versionOnFirstLine(file) {
  const head = Buffer.alloc(256);
  let length = 0;
  let fd;
  try {
    fd = fs.openSync(file, 'r');
    length = fs.readSync(fd, head, 0, head.length, 0);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
  const text = head.toString('latin1', 0, length);
  const end = text.indexOf('\n');
  if (end === -1) return undefined;
  // Only what a version is made of: a first line is printed, and never a control character.
  return /^\/\/ queenctl build [0-9a-f]+ node \S+ version ([0-9A-Za-z.+-]+)$/.exec(text.slice(0, end))?.[1];
}

/**
 * Writes `version` and a newline on stdout as src/cli.ts writes there: at once, on the
 * descriptor, the stream taking the rest only when it would block. A reader gone is status 141;
 * any other failure is said on stderr in src/cli.ts's words (outputFailure) and is status 74.
 */
function printVersion(version) {
  const failed = (error) => {
    if (error.code === 'EPIPE') process.exit(128 + 13);
    const system = error.errno === undefined ? undefined : require('node:util').getSystemErrorMap().get(error.errno);
    const reason = system?.[1] ?? error.message;
    const code = error.code === undefined ? '' : ` (${error.code})`;
    say(`could not write to stdout: ${reason}${code}; what this run did is not all in its output`);
    process.exit(74);
  };
  let rest = Buffer.from(`${version}\n`, 'latin1');
  try {
    while (rest.length > 0) rest = rest.subarray(fs.writeSync(1, rest));
  } catch (error) {
    if (error.code !== 'EAGAIN') failed(error);
    process.stdout.on('error', failed);
    process.stdout.write(rest);
  }
}
