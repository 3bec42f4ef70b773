/**
 * queenctl on a real terminal, as people see it: the built queenctl (`bin/queenctl.cjs`, or
 * QUEENCTL_EXE's standalone executable, as test/support/cli.ts runs it) in a tmux pane of a given
 * width and height, and the screen tmux shows once it has ended, wrapping included
 * (docs/development.md#terminal-snapshots).
 *
 * Each run has a tmux server of its own: a socket in a fresh temporary directory (`-S`), a config
 * file of its own (`-f`, nothing from ~/.tmux.conf), no status line, the pane kept once its
 * command ends (`remain-on-exit`, with no "Pane is dead" line), and `kill-server` at the end
 * whatever happens. The command's exit code is written to a file by the shell that runs it; the
 * run waits, polling, until that file exists and tmux says the pane is dead (tmux marks it dead
 * only once it has read everything the command wrote), with a generous time limit: the machine's
 * speed decides how long a run takes, never what it shows.
 *
 * Colours stay on, as on a person's terminal (TERM=xterm-256color, no NO_COLOR), and the screen is
 * captured as text without them (`capture-pane -p`, no `-e`): a snapshot holds the characters and
 * where they are, so it does not change with the colour depth a library detects.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { cliCommandLine, runProcess } from './cli.js';

/** Whether tmux can be run here (the snapshot tests skip, saying so, where it cannot). */
export const hasTmux = spawnSync('tmux', ['-V'], { stdio: 'ignore', timeout: 10_000 }).status === 0;

/** How long one screen may take, start to end, before the run fails with what it shows. */
const SCREEN_TIMEOUT_MS = 60_000;
/** How often the run asks tmux whether the command has ended (or the screen shows `until`). */
const POLL_MS = 100;

export interface ScreenOptions {
  /** queenctl's arguments. */
  args: string[];
  /** Terminal width and height (default height 30). */
  cols: number;
  rows?: number;
  /** The exit code queenctl must end with; any other fails the run, quoting the screen. */
  exit: number;
  /** Set on top of the clean environment (test/support/cli.ts cleanEnv). */
  env?: Record<string, string | undefined>;
  /**
   * A live view that runs until stopped: once the screen matches `when`, type `keys` (tmux
   * send-keys names, e.g. `C-c`), as a person would.
   */
  interrupt?: { when: RegExp; keys: string };
  /** Files written into the directory queenctl runs in (empty otherwise), by name. */
  files?: Record<string, string>;
  timeoutMs?: number;
}

export interface Screen {
  /** The screen's rows, history included, as tmux shows them: trailing spaces and blank rows cut. */
  rows: string[];
  /**
   * The lines queenctl wrote, wrapped rows joined again (`capture-pane -J`), trailing spaces cut:
   * what `widestLine` measures.
   */
  lines: string[];
  /** Where tmux wrapped: `wraps[i]` holds the lengths of line i's rows, trailing spaces included. */
  wraps: number[][];
  code: number;
}

/** A word as sh reads it: single-quoted unless it needs no quoting. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** The tmux configuration of a run: see the file's comment. */
const TMUX_CONF = [
  'set -g remain-on-exit on',
  'set -g remain-on-exit-format ""',
  'set -g status off',
  'set -g default-shell /bin/sh',
  'set -g default-terminal xterm-256color',
  'set -g history-limit 10000',
  '',
].join('\n');

/** Runs queenctl in a tmux pane of `cols` x `rows` and returns its screen once it has ended. */
export async function runOnScreen(options: ScreenOptions): Promise<Screen> {
  const { cols, rows = 30 } = options;
  const dir = mkdtempSync(join(tmpdir(), 'queenctl-pty-'));
  const socket = join(dir, 'tmux.sock');
  const status = join(dir, 'status');
  writeFileSync(join(dir, 'tmux.conf'), TMUX_CONF);
  const work = join(dir, 'work');
  mkdirSync(work);
  for (const [name, text] of Object.entries(options.files ?? {})) writeFileSync(join(work, basename(name)), text);
  // The exit code goes to a file, written whole (a rename), never onto the screen.
  const script = [
    // ^C (an `interrupt`) signals the pane's whole foreground group: the shell outlives it to
    // write the exit code (a trapped signal is reset to its default in queenctl).
    'trap : INT',
    `cd ${shellWord(work)}`,
    `${cliCommandLine()} ${options.args.map(shellWord).join(' ')}`,
    `printf '%s' "$?" > ${shellWord(`${status}.part`)}`,
    `mv ${shellWord(`${status}.part`)} ${shellWord(status)}`,
    '',
  ].join('\n');
  writeFileSync(join(dir, 'run.sh'), script);
  const env = {
    // The pane's own: what a person's terminal gives. tmux sets TERM from default-terminal.
    TMUX: undefined,
    TMUX_PANE: undefined,
    COLUMNS: undefined,
    LINES: undefined,
    NO_COLOR: undefined,
    FORCE_COLOR: undefined,
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    ...options.env,
  };
  const tmux = (args: string[]) =>
    runProcess('tmux', ['-S', socket, ...args], { exit: 0, env, timeoutMs: 20_000 }).then((r) => r.stdout);
  const deadline = Date.now() + (options.timeoutMs ?? SCREEN_TIMEOUT_MS);
  const capture = (extra: string[]) => tmux(['capture-pane', '-p', '-t', 'snap', '-S', '-', '-E', '-', ...extra]);
  try {
    await tmux([
      '-f',
      join(dir, 'tmux.conf'),
      'new-session',
      '-d',
      '-s',
      'snap',
      '-x',
      String(cols),
      '-y',
      String(rows),
      `sh ${shellWord(join(dir, 'run.sh'))}`,
    ]);
    let interrupted = options.interrupt === undefined;
    for (;;) {
      const dead = (await tmux(['display-message', '-p', '-t', 'snap', '#{pane_dead}'])).trim() === '1';
      if (dead && existsSync(status)) break;
      if (dead) throw new Error(`the pane ended without an exit code\n${await capture([])}`);
      if (!interrupted && options.interrupt) {
        if (options.interrupt.when.test(await capture([]))) {
          await tmux(['send-keys', '-t', 'snap', options.interrupt.keys]);
          interrupted = true;
        }
      }
      if (Date.now() > deadline) {
        const shown = await capture([]);
        throw new Error(
          `queenctl ${options.args.join(' ')} on ${cols} columns: not ended after ` +
            `${options.timeoutMs ?? SCREEN_TIMEOUT_MS} ms` +
            (interrupted ? '' : ` (the screen never matched ${String(options.interrupt?.when)})`) +
            `\n--- screen\n${shown}`,
        );
      }
      await delay(POLL_MS);
    }
    const code = Number(readFileSync(status, 'utf8'));
    // -N keeps each row's trailing spaces, so a wrapped row is exactly as wide as the terminal and
    // the rows of one line can be matched with -J's joined line.
    const screenRows = trimBlankEnd((await capture(['-N'])).split('\n'));
    const lines = trimBlankEnd((await capture(['-J'])).split('\n'));
    const screen: Screen = {
      rows: screenRows.map((row) => row.trimEnd()),
      lines: lines.map((line) => line.trimEnd()),
      wraps: wrapsOf(screenRows, lines),
      code,
    };
    if (code !== options.exit) {
      throw new Error(
        `queenctl ${options.args.join(' ')} on ${cols} columns: expected exit ${options.exit}, got ${code}\n` +
          `--- screen\n${screen.rows.join('\n')}`,
      );
    }
    return screen;
  } finally {
    await runProcess('tmux', ['-S', socket, 'kill-server'], { exit: [0, 1], env, timeoutMs: 20_000 }).catch(
      () => undefined,
    );
    rmSync(dir, { recursive: true, force: true });
  }
}

function trimBlankEnd(rows: string[]): string[] {
  const out = [...rows];
  while (out.length > 0 && (out.at(-1) as string).trim() === '') out.pop();
  return out;
}

/** The rows (with -N's trailing spaces) each joined line took: rows are taken until they make it. */
function wrapsOf(rows: string[], lines: string[]): number[][] {
  const wraps: number[][] = [];
  let next = 0;
  for (const line of lines) {
    const want = line.trimEnd();
    let joined = '';
    const lengths: number[] = [];
    do {
      const row = rows[next] ?? '';
      joined += row;
      lengths.push(row.length);
      next++;
    } while (joined.trimEnd() !== want && next < rows.length && joined.length < want.length);
    if (joined.trimEnd() !== want)
      throw new Error(`the screen's rows do not make its joined line ${JSON.stringify(want)} (row ${next})`);
    wraps.push(lengths);
  }
  return wraps;
}

/**
 * The widest line queenctl wrote on a screen, in characters (each character of these screens
 * takes one column): what a person's terminal must be to show it unwrapped. For measuring, not
 * for asserting: the snapshot is the assertion.
 */
export function widestLine(screen: Pick<Screen, 'lines'>): { width: number; line: string } {
  let widest = { width: 0, line: '' };
  for (const line of screen.lines) {
    const width = [...line].length;
    if (width > widest.width) widest = { width, line };
  }
  return widest;
}

/**
 * A replacement of text that differs from run to run, applied to each line queenctl wrote (its
 * wrapped rows joined) and split back at the same places, so it must keep the text's length:
 * the screen's wrapping stays tmux's.
 */
export interface Mask {
  name: string;
  pattern: RegExp;
  replace: (match: string) => string;
}

/**
 * The replacement rules (docs/development.md#terminal-snapshots):
 *
 * - `port`: the port of a loopback URL (the simulator's, a free one each run) becomes `PPPPP`,
 *   one P per digit.
 * - `uuid`: a UUID-shaped id that the case did not fix (the simulator's pops and messages draw
 *   theirs at random) becomes `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxx001`, numbered by first
 *   appearance on the screen, so the same id is the same mask throughout.
 *
 * - `clock`: a time of day on this machine's clock, HH:MM:SS.mmm (the log lines of a watch),
 *   becomes `hh:mm:ss.sss`.
 *
 * Broker timestamps and durations need none: the simulator's clock is fixed, and the leases of a
 * case last hours, so a time left rounds to whole minutes whatever the machine's speed.
 */
export function masks(fixedIds: readonly string[]): Mask[] {
  const seen = new Map<string, number>();
  return [
    {
      name: 'port',
      pattern: /(?<=\b(?:127\.0\.0\.1|localhost|\[::1\]):)\d{1,5}\b/g,
      replace: (match) => 'P'.repeat(match.length),
    },
    {
      name: 'clock',
      pattern: /\b\d\d:\d\d:\d\d\.\d{3}\b(?!Z)/g,
      replace: () => 'hh:mm:ss.sss',
    },
    {
      name: 'uuid',
      pattern: /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi,
      replace: (match) => {
        if (fixedIds.includes(match)) return match;
        const ordinal = seen.get(match) ?? seen.size + 1;
        seen.set(match, ordinal);
        return `xxxxxxxx-xxxx-xxxx-xxxx-${String(ordinal).padStart(12, 'x')}`;
      },
    },
  ];
}

/** The screen with `masks` applied, its rows where tmux wrapped them. */
export function maskedRows(screen: Screen, rules: readonly Mask[]): string[] {
  const out: string[] = [];
  screen.lines.forEach((line, i) => {
    let masked = line;
    for (const rule of rules) {
      masked = masked.replace(rule.pattern, (match) => {
        const replaced = rule.replace(match);
        if (replaced.length !== match.length) throw new Error(`mask ${rule.name} changed a length: ${match}`);
        return replaced;
      });
    }
    // Split back where tmux wrapped: the joined line is its rows one after another.
    let at = 0;
    const lengths = screen.wraps[i] ?? [];
    lengths.forEach((length, row) => {
      out.push((row === lengths.length - 1 ? masked.slice(at) : masked.slice(at, at + length)).trimEnd());
      at += length;
    });
  });
  return out;
}
