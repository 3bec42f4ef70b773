/**
 * Doc tests: the `sh` and `console` blocks of README.md and docs/ that run queenctl, executed
 * against a simulator, as Rust's trycmd and Go's testscript run the command lines a document
 * shows. The convention, for writers (docs/doctests.md says the same):
 *
 * - A fenced block tagged `sh` or `console` in which a command runs `queenctl` is executed.
 *   `<!-- doctest: skip (reason) -->` on the line before the fence excludes it; the reason is
 *   required.
 * - `console`: a line starting `$ ` is a command (a line ending in `\` goes on to the next), the
 *   lines after it are its expected output, stdout and stderr as a terminal interleaves them.
 *   No lines after it: its output is not compared. `? N` right after the command line states its
 *   exit code, as trycmd's `? 4` does.
 * - `sh`: every line is a command; a line ending in `\`, `|`, `||` or `&&`, and the lines of an
 *   open `case`, `if`, `do ... done` or `{ ... }`, go on to the next. Output is not compared.
 *   `# exit N` at the end of a command states its exit code.
 * - Otherwise a command must exit 0, except one whose exit status the next command reads (`$?`):
 *   there the next command's shown output (`echo $?`) or its own status says what happened.
 * - Output shape: lines compared after normalising what varies on both sides: lease ids and
 *   other UUIDs, ISO timestamps and clock times, durations (`1m59s`, `3ms`), numbers of keys
 *   ending in `Ms`, runs of spaces (table columns). `[..]` or `…` in a line matches any text;
 *   a line holding only `...` or `…` matches any number of lines.
 *
 * Each block runs in a bash job of its own (`set -uo pipefail`, every command's status checked;
 * one bash per test process runs them, see "one bash for the blocks" below) with a
 * fresh HOME whose config has the context `sim`, a simulator of its own holding the scene below,
 * and `queenctl`: a function that runs the command in this process (see "queenctl in this
 * process" below), else the built bin or QUEENCTL_EXE on PATH; each call limited to 10 s.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mintTourScene, type Simulator } from '../../tools/simulator/index.js';
import { cleanEnv, cliCommandLine, EXE } from './cli.js';
import { type RunningInProcess, startInProcess } from './in-process.js';

/** The repository (this file runs from dist/test/support/). */
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** README.md and every Markdown file under docs/, as paths relative to the repository. */
export function documents(): string[] {
  const found = ['README.md'];
  const walk = (dir: string): void => {
    const entries = readdirSync(join(ROOT, dir), { withFileTypes: true });
    for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.md')) found.push(path);
    }
  };
  walk('docs');
  return found;
}

/** How long one queenctl call in a doc may run before timeout(1) ends it (exit 124). */
export const COMMAND_LIMIT_S = 10;

export interface DocCommand {
  /** 1-based line in the file of the command's first line. */
  line: number;
  /** The command as bash reads it (continuation lines kept). */
  text: string;
  /** The exit code the block states; undefined: 0, or unchecked when the next command reads `$?`. */
  expectedCode: number | undefined;
  /** console blocks: the output lines shown after the command; undefined: not compared. */
  expectedOutput: string[] | undefined;
}

export interface DocBlock {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  /** The reason given by `<!-- doctest: skip (reason) -->`. */
  skip: string | undefined;
  /** A mistake in the block's markup (a skip without a reason); the block fails with it. */
  error: string | undefined;
  commands: DocCommand[];
  /** A command of the block runs queenctl. */
  runsQueenctl: boolean;
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)/;
const SKIP = /^\s*<!--\s*doctest:\s*skip\b\s*(.*?)\s*-->\s*$/;
const RUNS_QUEENCTL = /(^|[\s;|&(`$])queenctl(\s|$)/m;

/** The fenced blocks of a Markdown text tagged `sh` or `console`, with their commands. */
export function parseMarkdown(text: string, file: string): DocBlock[] {
  const lines = text.split('\n');
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i] ?? '');
    if (!open) continue;
    const [, indent = '', fence = '```', lang = ''] = open;
    const body: Array<{ text: string; line: number }> = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const current = lines[j] ?? '';
      if (current.trim().startsWith(fence) && current.trim().replace(/[`~]/g, '') === '') break;
      body.push({ text: current.startsWith(indent) ? current.slice(indent.length) : current.trimStart(), line: j + 1 });
    }
    if (lang === 'sh' || lang === 'console') {
      const skipLine = SKIP.exec(lines[i - 1] ?? '');
      let skip: string | undefined;
      let error: string | undefined;
      if (skipLine) {
        const reason = /^\((.+)\)$/.exec(skipLine[1] ?? '');
        if (reason?.[1]?.trim()) skip = reason[1].trim();
        else error = `${file}:${i}: a doctest skip needs its reason: <!-- doctest: skip (why) -->`;
      }
      const commands = lang === 'console' ? consoleCommands(body) : shCommands(body);
      blocks.push({
        file,
        line: i + 1,
        lang,
        skip,
        error,
        commands,
        runsQueenctl: commands.some((command) => RUNS_QUEENCTL.test(withoutComments(command.text))),
      });
    }
    i = j;
  }
  return blocks;
}

function consoleCommands(body: Array<{ text: string; line: number }>): DocCommand[] {
  const commands: DocCommand[] = [];
  let current: DocCommand | undefined;
  for (let k = 0; k < body.length; k++) {
    const { text, line } = body[k] as { text: string; line: number };
    if (text.startsWith('$ ')) {
      let command = text.slice(2);
      while (command.endsWith('\\') && k + 1 < body.length) command += `\n${body[++k]?.text ?? ''}`;
      current = { line, text: command, expectedCode: undefined, expectedOutput: undefined };
      commands.push(current);
      const status = /^\?\s+(\d+)\s*$/.exec(body[k + 1]?.text ?? '');
      if (status) {
        current.expectedCode = Number(status[1]);
        k++;
      }
    } else if (current) {
      current.expectedOutput = [...(current.expectedOutput ?? []), text];
    }
  }
  for (const command of commands) {
    while (command.expectedOutput && command.expectedOutput.at(-1)?.trim() === '') command.expectedOutput.pop();
  }
  return commands;
}

/** Shell words that open and close a compound command, for telling where one command ends. */
const OPENERS = new Set(['case', 'if', 'do', '{']);
const CLOSERS = new Set(['esac', 'fi', 'done', '}']);

function shCommands(body: Array<{ text: string; line: number }>): DocCommand[] {
  const commands: DocCommand[] = [];
  let pending: { line: number; lines: string[] } | undefined;
  let depth = 0;
  for (const { text, line } of body) {
    if (!pending && (text.trim() === '' || text.trim().startsWith('#'))) continue;
    pending ??= { line, lines: [] };
    pending.lines.push(text);
    const code = withoutQuotesAndComment(text);
    for (const word of code.split(/[\s;()]+/)) {
      if (OPENERS.has(word)) depth++;
      else if (CLOSERS.has(word)) depth--;
    }
    const continues = /(\\|\||&&)\s*$/.test(code);
    if (depth > 0 || continues) continue;
    const joined = pending.lines.join('\n');
    const status = /#\s*exit\s+(\d+)\b[^\n]*$/.exec(pending.lines.at(-1) ?? '');
    commands.push({
      line: pending.line,
      text: joined,
      expectedCode: status ? Number(status[1]) : undefined,
      expectedOutput: undefined,
    });
    pending = undefined;
    depth = 0;
  }
  if (pending)
    commands.push({
      line: pending.line,
      text: pending.lines.join('\n'),
      expectedCode: undefined,
      expectedOutput: undefined,
    });
  return commands;
}

/** The text of commands without their comments: `# the tests of queenctl` runs nothing. */
function withoutComments(text: string): string {
  return text
    .split('\n')
    .map((line) => line.replace(/(^|\s)#.*$/, ''))
    .join('\n');
}

function withoutQuotesAndComment(line: string): string {
  return line
    .replace(/'[^']*'/g, "''")
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/(^|\s)#.*$/, '');
}

// --- output shape -----------------------------------------------------------------------------

/** What varies between runs, replaced on both sides before comparing. */
export function normaliseLine(line: string): string {
  return line
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '[ID]')
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z?/g, '[TIME]')
    .replace(/\b\d{2}:\d{2}:\d{2}\.\d{3}\b/g, '[TIME]')
    .replace(/\b\d+(h\d+m\d+s|h\d+m|m\d+s|ms|h|m|s)\b/g, '[DUR]')
    .replace(/(Ms"?:\s*)-?\d+/g, '$1[N]')
    .replace(/\s+/g, ' ')
    .trimEnd();
}

const ANY_LINES = new Set(['...', '…']);

function linePattern(expected: string): RegExp {
  const parts = normaliseLine(expected).split(/\[\.\.\]|…/);
  return new RegExp(`^${parts.map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
}

/** Why `actual` does not have the shape of `expected`, or undefined when it does. */
export function outputMismatch(expected: string[], actual: string): string | undefined {
  const lines = actual.replace(/\n+$/, '').split('\n');
  const got = lines.length === 1 && lines[0] === '' ? [] : lines;
  const matches = (e: number, a: number): boolean => {
    if (e === expected.length) return a === got.length;
    const want = expected[e] as string;
    if (ANY_LINES.has(want.trim())) {
      for (let skip = a; skip <= got.length; skip++) if (matches(e + 1, skip)) return true;
      return false;
    }
    return a < got.length && linePattern(want).test(normaliseLine(got[a] as string)) && matches(e + 1, a + 1);
  };
  if (matches(0, 0)) return undefined;
  return `expected output:\n${expected.join('\n')}\n--- got:\n${got.join('\n')}`;
}

// --- running ----------------------------------------------------------------------------------

/**
 * The scene every block starts from, minted on its own simulator: the tour's (docs/tour.md) (`$LEASE`,
 * `$LEASE2`, `$LEASE3`, `$DEAD`: tools/simulator/scene.ts, which `npm run demo` mints too), and
 * `leases.txt` in the working directory (HOME): `$LEASE`, `$LEASE2` and `$DEAD`, one per line.
 */
export function mintScene(sim: Simulator): Record<string, string> {
  return { ...mintTourScene(sim) };
}

/** A temporary directory removed when the test process exits. */
function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * A directory holding `queenctl`: the bin under test behind timeout(1), for the runs that must be
 * a process (below). Made once per process.
 */
let shimDir: string | undefined;
function queenctlOnPath(): string {
  if (shimDir) return shimDir;
  shimDir = scratchDir('queenctl-doctest-bin-');
  writeFileSync(
    join(shimDir, 'queenctl'),
    `#!/bin/sh\nexec timeout -k 2 ${COMMAND_LIMIT_S} ${cliCommandLine()} "$@"\n`,
    { mode: 0o755 },
  );
  return shimDir;
}

/** Code caches shared by every block of the process, so a Node without shipped caches makes them once. */
let cacheDir: string | undefined;

// --- queenctl in this process ---------------------------------------------------------------------
//
// A Node start-up per command was most of what the doc tests cost (~0.15 CPU-s each, 60-odd of
// them). So a block's `queenctl` is a bash function that runs the command in the test process
// (test/support/in-process.ts) over a loopback connection bash opens itself (/dev/tcp), without
// starting any process: its arguments, exported environment and, when an argument is `-`, its
// standard input go one way; its stdout and stderr, in the order written, and its exit status
// come back; a SIGTERM, SIGINT or SIGHUP the function gets is passed on to the run. Two kinds of
// command still run the bin as a process (through PATH): a watch or run with a command after
// `--`, whose child inherits queenctl's stdio (here the test process's own), unless the child
// prints nothing and reads no inherited stdin: a `sleep`, alone or under timeout(1), or a
// `lease run`'s `sh -c 'cat > /dev/null'` (run gives its command the batch on a pipe); and any
// queenctl a block starts some other way (`sh -c`, xargs). Under QUEENCTL_EXE every command runs
// the executable. The bin itself, its start-up and its signals as a process are test/process/'s
// to prove.

/** Escapes a text for one line of the protocol: `\`, newline and CR as bash's printf %b reads them. */
function escapeLine(text: string): string {
  return text.replaceAll('\\', '\\\\').replaceAll('\n', '\\n').replaceAll('\r', '\\r');
}

function unescapeLine(text: string): string {
  return text.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c === 'r' ? '\r' : c));
}

const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGKILL: 9,
  SIGPIPE: 13,
  SIGTERM: 15,
};

/** One command from a block's bash: `A arg`, `V NAME=value`, `I line`, `J last line`, `R`, then `S SIGNAL`. */
function serveCommand(socket: Socket): void {
  const args: string[] = [];
  const env: Record<string, string> = {};
  let stdin = '';
  let run: RunningInProcess | undefined;
  let buffered = '';
  // Lines go out together once per turn of the event loop: a write per line of output cost a
  // system call and a wake-up of bash each.
  let outgoing: string[] = [];
  const drain = (): void => {
    if (outgoing.length > 0 && !socket.destroyed) socket.write(`${outgoing.join('\n')}\n`);
    outgoing = [];
  };
  const send = (line: string): void => {
    if (outgoing.length === 0) setImmediate(drain);
    outgoing.push(line);
  };
  const start = (): void => {
    const handle = startInProcess(args, { env, stdin, timeoutMs: COMMAND_LIMIT_S * 1000 });
    run = handle;
    let out = 0;
    let err = 0;
    const flush = (): undefined => {
      const stdout = handle.stdout();
      const stderr = handle.stderr();
      if (stdout.length > out) send(`O ${escapeLine(stdout.slice(out))}`);
      if (stderr.length > err) send(`E ${escapeLine(stderr.slice(err))}`);
      out = stdout.length;
      err = stderr.length;
      return undefined;
    };
    // Called on every write, so the two streams come back in the order they were written.
    handle.until(flush, 'the end of the run', COMMAND_LIMIT_S * 1000 + 5000).catch(() => {});
    handle.exited.then(
      (result) => {
        flush();
        // timeout(1)'s status for a run past the limit; a shell's 128+n for one a signal ended.
        const status = result.killed ? 124 : (result.code ?? 128 + (SIGNAL_NUMBERS[result.signal ?? 'SIGKILL'] ?? 9));
        send(`X ${status}`);
        drain();
        socket.end();
      },
      (error: unknown) => {
        flush();
        send(`E ${escapeLine(`queenctl (in the doc test's process): run() threw: ${String(error)}\n`)}`);
        send('X 70');
        drain();
        socket.end();
      },
    );
  };
  socket.setEncoding('utf8');
  socket.on('error', () => run?.kill('SIGKILL'));
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      const value = unescapeLine(line.slice(2));
      if (line.startsWith('A ')) args.push(value);
      else if (line.startsWith('V ')) {
        const eq = value.indexOf('=');
        env[value.slice(0, eq)] = value.slice(eq + 1);
      } else if (line.startsWith('I ')) stdin += `${value}\n`;
      else if (line.startsWith('J ')) stdin += value;
      else if (line === 'R' && !run) start();
      else if (line.startsWith('S ')) run?.kill(value as NodeJS.Signals);
    }
  });
}

/**
 * Where the function writes the names of the exported variables (a builtin's output written to a
 * file costs no fork, unlike `$(...)`).
 */
let envDir: string | undefined;
function namesDir(): string {
  envDir ??= scratchDir('queenctl-doctest-env-');
  return envDir;
}

/** The port of the loopback server that runs blocks' commands in this process; started once. */
let portPromise: Promise<number> | undefined;
function inProcessPort(): Promise<number> {
  portPromise ??= new Promise((resolve, reject) => {
    const server = createServer(serveCommand);
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      // It must not keep the test process alive once the tests are done.
      server.unref();
      resolve((server.address() as AddressInfo).port);
    });
  });
  return portPromise;
}

/** The bash function `queenctl` of a block (see above); $__QUEENCTL_PORT names the server. Written
 * with `@{` for bash's `${`, which a template literal would take for its own. */
const QUEENCTL_FUNCTION = String.raw`__qesc() { __q=@{1//\\/\\\\}; __q=@{__q//$'\n'/\\n}; __q=@{__q//$'\r'/\\r}; }
queenctl() {
  local __a __m= __n __names __fd __line __rc=125 __stdin= __child=
  local __words=" $* " __quiet='^(timeout [^ ]+ )?sleep [^ ]+ $'
  if [[ $__words == *" -- "* && ! @{__words#*' -- '} =~ $__quiet ]] && ! [[ "@{1-} @{2-}" == 'lease run' &&
    @{@: -4:1} == -- && @{@: -3:1} == sh && @{@: -2:1} == -c && @{@: -1} == 'cat > /dev/null' ]]; then
    command queenctl "$@"
    return
  fi
  for __a in "$@"; do
    [[ $__a == -- ]] && __child=1
    [[ $__a == - && -z $__child ]] && __stdin=1
    [[ -z $__child && $__a != -* && $__a != /* && -f $__a ]] && __a=$PWD/$__a
    __qesc "$__a"; __m+="A $__q"$'\n'
  done
  compgen -e > "$__QUEENCTL_TMP/$BASHPID"; mapfile -t __names < "$__QUEENCTL_TMP/$BASHPID"
  for __n in "@{__names[@]}"; do __qesc "@{!__n-}"; __m+="V $__n=$__q"$'\n'; done
  if [[ -n $__stdin ]]; then
    while IFS= read -r __line; do __qesc "$__line"; __m+="I $__q"$'\n'; done
    if [[ -n $__line ]]; then __qesc "$__line"; __m+="J $__q"$'\n'; fi
  fi
  exec {__fd}<>"/dev/tcp/127.0.0.1/$__QUEENCTL_PORT" || return 125
  trap 'printf "S SIGTERM\n" >&$__fd' TERM
  trap 'printf "S SIGINT\n" >&$__fd' INT
  trap 'printf "S SIGHUP\n" >&$__fd' HUP
  printf '%sR\n' "$__m" >&$__fd
  while IFS= read -r -u "$__fd" __line; do
    case @{__line:0:1} in
      O) printf '%b' "@{__line:2}" ;;
      E) printf '%b' "@{__line:2}" >&2 ;;
      X) __rc=@{__line:2}; break ;;
    esac
  done
  trap - TERM INT HUP
  exec {__fd}>&-
  [[ $__rc != 125 ]] || printf 'queenctl (doc test): the in-process runner hung up\n' >&2
  return "$__rc"
}`.replaceAll('@{', '$' + '{');

/**
 * The same function for a bash another test starts (test/process/lease-completion.test.ts): its
 * text, to put before what that bash runs, and the environment it needs; the commands run in this
 * process.
 */
export async function queenctlFunction(): Promise<{ text: string; env: Record<string, string> }> {
  return {
    text: QUEENCTL_FUNCTION,
    env: { __QUEENCTL_PORT: String(await inProcessPort()), __QUEENCTL_TMP: namesDir() },
  };
}

const MARK = '\u001e';

/** The bash script of a block: each command, then a marker line with its index and exit status. */
export function blockScript(block: DocBlock): string {
  const parts = ['set -uo pipefail', 'exec 2>&1', '__rc() { return "$1"; }', '__s=0'];
  if (!EXE) parts.push(QUEENCTL_FUNCTION);
  block.commands.forEach((command, index) => {
    parts.push('__rc "$__s"', command.text, `__s=$?; printf '\\n${MARK}%d %d${MARK}\\n' ${index} "$__s"`);
  });
  // In a subshell: a block's own `exit` (a runbook's `|| exit 1`) ends it, not the script, whose
  // status is then always 0; each command's status is in the marks.
  return `(\n${parts.join('\n')}\n)\nexit 0\n`;
}

export interface CommandOutcome {
  command: DocCommand;
  code: number | undefined;
  output: string;
}

// --- one bash for the blocks -------------------------------------------------------------------
//
// A bash started for each block cost a spawn from this (large) process and bash's own start-up.
// One bash per test process instead runs each block in a job of its own (job control on: each
// job is a process group, killed whole by the kill timer), the block's environment sourced from
// a file in its HOME, its output (stderr joined to stdout, as the block script does) written to
// a file there; it reports `start <id> <pid>` and `end <id> <status>` on its stdout.

const RUNNER_LOOP = `set -m
while IFS=' ' read -r __id __dir; do
  ( ( cd "$__dir" && . ./.doctest-env && . ./.doctest-block ) > "$__dir/.doctest-out" 2>&1 < /dev/null
    echo "end $__id $?" ) &
  echo "start $__id $!"
done
`;

interface Job {
  pid?: number;
  done(status: number | undefined, why?: string): void;
}

let runner: { child: ChildProcessWithoutNullStreams; jobs: Map<number, Job> } | undefined;
let lastJob = 0;

function bashRunner(): NonNullable<typeof runner> {
  if (runner) return runner;
  const child = spawn('bash', ['-c', RUNNER_LOOP], { env: cleanEnv(), stdio: 'pipe' });
  const jobs = new Map<number, Job>();
  const current = { child, jobs };
  runner = current;
  let buffered = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
      const [what, id, value] = buffered.slice(0, end).split(' ');
      buffered = buffered.slice(end + 1);
      const job = jobs.get(Number(id));
      if (!job) continue;
      if (what === 'start') job.pid = Number(value);
      else if (what === 'end') job.done(Number(value));
    }
  });
  child.stderr.resume();
  const gone = (why: string): void => {
    if (runner === current) runner = undefined;
    for (const job of jobs.values()) job.done(undefined, why);
  };
  child.on('error', (error) => gone(`the blocks' bash could not run: ${error.message}`));
  child.on('exit', (code, signal) => gone(`the blocks' bash ended (${signal ?? `exit ${code}`})`));
  // Waiting for a block keeps the test process alive (its kill timer); the idle bash does not, but
  // once nothing else is left the test process ends it and waits for it: no process is left
  // behind, and its CPU time (its jobs' too) is counted in the test process's children's.
  child.unref();
  for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as unknown as Socket).unref();
  process.once('beforeExit', () => {
    child.ref();
    (child.stdout as unknown as Socket).ref();
    child.stdin.end();
  });
  return current;
}

/** Runs a block's script in `home` with `env` on top of the clean environment; its output. */
function runBlockScript(script: string, home: string, timeoutMs: number, env: Record<string, string>): Promise<string> {
  const quote = (value: string): string => `'${value.replaceAll("'", "'\\''")}'`;
  writeFileSync(
    join(home, '.doctest-env'),
    Object.entries(env)
      .map(([name, value]) => `export ${name}=${quote(value)}\n`)
      .join(''),
  );
  writeFileSync(join(home, '.doctest-block'), script);
  const output = (): string => {
    try {
      return readFileSync(join(home, '.doctest-out'), 'utf8');
    } catch {
      return '';
    }
  };
  const { child, jobs } = bashRunner();
  const id = ++lastJob;
  return new Promise((resolve, reject) => {
    const job: Job = {
      done: (status, why) => {
        clearTimeout(timer);
        jobs.delete(id);
        if (status === 0) resolve(output());
        else reject(new Error(`${why ?? `the block's bash ended with status ${status}`}\n--- output\n${output()}`));
      },
    };
    const timer = setTimeout(() => {
      if (job.pid !== undefined) {
        try {
          process.kill(-job.pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
      job.done(undefined, `the block ran past its ${timeoutMs / 1000} s limit: its processes were killed`);
    }, timeoutMs);
    jobs.set(id, job);
    child.stdin.write(`${id} ${home}\n`);
  });
}

/** Runs a block against `sim` (the scene minted on it here); resolves with every problem found. */
export async function checkBlock(block: DocBlock, sim: Simulator): Promise<string[]> {
  if (block.error) return [block.error];
  const vars = mintScene(sim);
  const home = mkdtempSync(join(tmpdir(), 'queenctl-doctest-home-'));
  mkdirSync(join(home, '.queen'));
  writeFileSync(
    join(home, '.queen', 'config.yaml'),
    `current-context: sim\ncontexts:\n  - name: sim\n    server: ${sim.url}\n`,
  );
  writeFileSync(join(home, 'leases.txt'), `${vars.LEASE}\n${vars.LEASE2}\n${vars.DEAD}\n`);
  cacheDir ??= scratchDir('queenctl-doctest-cache-');
  let stdout: string;
  try {
    stdout = await runBlockScript(blockScript(block), home, (block.commands.length * COMMAND_LIMIT_S + 10) * 1000, {
      ...vars,
      HOME: home,
      XDG_CACHE_HOME: cacheDir,
      PATH: `${queenctlOnPath()}:${process.env.PATH ?? ''}`,
      ...(EXE
        ? {}
        : {
            __QUEENCTL_PORT: String(await inProcessPort()),
            __QUEENCTL_TMP: namesDir(),
          }),
    });
  } catch (error) {
    // The kill timer, or a script that could not run: the message quotes what it printed.
    return [`${block.file}:${block.line}: ${(error as Error).message}`];
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
  const outcomes = splitOutcomes(block, stdout.replaceAll(sim.url, 'http://localhost:6632'));
  const problems: string[] = [];
  outcomes.forEach(({ command, code, output }, index) => {
    const where = `${block.file}:${command.line}: \`${command.text}\``;
    if (code === undefined) {
      problems.push(`${where} did not finish (the block stopped before it)\n${output}`);
      return;
    }
    const readByNext = /\$\?/.test(block.commands[index + 1]?.text ?? '');
    const wanted = command.expectedCode ?? (readByNext ? undefined : 0);
    if (code === 124) problems.push(`${where} ran past ${COMMAND_LIMIT_S} s (timeout(1) ended it)\n${output}`);
    else if (wanted !== undefined && code !== wanted)
      problems.push(`${where} exited ${code}, the doc says ${wanted}\n--- output:\n${output}`);
    if (command.expectedOutput) {
      const mismatch = outputMismatch(command.expectedOutput, output);
      if (mismatch) problems.push(`${where}: ${mismatch}`);
    }
  });
  return problems;
}

function splitOutcomes(block: DocBlock, stdout: string): CommandOutcome[] {
  const outcomes: CommandOutcome[] = [];
  let rest = stdout;
  for (const command of block.commands) {
    const marker = new RegExp(`\\n${MARK}(\\d+) (\\d+)${MARK}\\n`).exec(rest);
    if (!marker) {
      outcomes.push({ command, code: undefined, output: rest });
      rest = '';
      continue;
    }
    outcomes.push({ command, code: Number(marker[2]), output: rest.slice(0, marker.index) });
    rest = rest.slice(marker.index + marker[0].length);
  }
  return outcomes;
}
