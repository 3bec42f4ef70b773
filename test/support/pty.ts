/**
 * queenctl on a real terminal, as people see it: the built queenctl (`bin/queenctl.cjs`, or
 * QUEENCTL_EXE's standalone executable, as test/support/cli.ts runs it) in a tmux pane of a given
 * width and height, and the screen tmux shows once it has ended, wrapping included
 * (docs/development.md#terminal-snapshots).
 *
 * Each run has a tmux server of its own: a socket in a fresh temporary directory (`-S`), a config
 * file of its own (`-f`, nothing from ~/.tmux.conf), no status line, the pane kept once its
 * command ends (`remain-on-exit`, with no "Pane is dead" line), and `kill-server` at the end
 * whatever happens. The shell that runs the command writes its exit code to a file, then signals
 * a tmux channel (`wait-for`); the run waits on that channel, then polls until tmux says the pane
 * is dead (tmux marks it dead only once it has read everything the command wrote), all within a
 * generous time limit: the machine's speed decides how long a run takes, never what it shows.
 * The wait, each poll and the end of the server share tmux clients where they can: each is a
 * process this (large) test process spawns. (tmux's `pane-died` hook would save the polls, but
 * tmux 3.3a drops it now and then: seen, 6 runs in 60.)
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
/** How often the run asks tmux for the screen (a live view's `when`, the pane's death). */
const POLL_MS = 100;

export interface ScreenOptions {
  /** queenctl's arguments. */
  args: string[];
  /** Terminal width and height (default height 30). */
  cols: number;
  rows?: number;
  /** The exit code queenctl must end with; any other fails the run, quoting the screen. */
  exit: number;
  /** Set in the pane's environment (the rest is fixed: see runOnScreen). */
  env?: Record<string, string | undefined>;
  /**
   * A live view that runs until stopped: once `when` holds (of the screen's text, or of anything
   * the test can see, such as the simulator's log), type `keys` (tmux send-keys names, e.g.
   * `C-c`), as a person would.
   */
  interrupt?: { when: (screen: string) => boolean; keys: string };
  /** Files written into the directory queenctl runs in (empty otherwise), by name. */
  files?: Record<string, string>;
  timeoutMs?: number;
}

/** A screen: what tmux shows at one moment. */
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
}

/** A run: the screen once queenctl ended, its exit code, and for a live view, the screen it showed. */
export interface ScreenRun extends Screen {
  code: number;
  /** With `interrupt`: the screen at the moment the keys were typed (just before). */
  live?: Screen;
}

/** A word as sh reads it: single-quoted unless it needs no quoting. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** What the pane's environment takes from the test's (with cleanEnv's HOME). */
const PANE_KEEPS = ['PATH', 'TMPDIR', 'HOME'];

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
export async function runOnScreen(options: ScreenOptions): Promise<ScreenRun> {
  const { cols, rows = 30 } = options;
  const dir = mkdtempSync(join(tmpdir(), 'queenctl-pty-'));
  const socket = join(dir, 'tmux.sock');
  const status = join(dir, 'status');
  writeFileSync(join(dir, 'tmux.conf'), TMUX_CONF);
  const work = join(dir, 'work');
  mkdirSync(work);
  for (const [name, text] of Object.entries(options.files ?? {})) writeFileSync(join(work, basename(name)), text);
  // The exit code goes to a file, never onto the screen.
  const script = [
    // ^C (an `interrupt`) signals the pane's whole foreground group: the shell outlives it to
    // write the exit code (a trapped signal is reset to its default in queenctl).
    'trap : INT',
    `cd ${shellWord(work)}`,
    `${cliCommandLine()} ${options.args.map(shellWord).join(' ')}`,
    `printf '%s' "$?" > ${shellWord(status)}`,
    // What the run waits on (a signal sent before anyone waits is kept by tmux).
    `tmux -S ${shellWord(socket)} wait-for -S ended`,
    '',
  ].join('\n');
  writeFileSync(join(dir, 'run.sh'), script);
  // The pane's environment is a terminal's, the same on every machine: only PATH (to find node
  // and tmux), TMPDIR and cleanEnv's empty HOME come from here, so no CI, COLORTERM, NO_COLOR or
  // FORCE_COLOR of the machine running the tests changes what queenctl chooses to show.
  const env: Record<string, string | undefined> = {};
  for (const key of Object.keys(process.env)) if (!PANE_KEEPS.includes(key)) env[key] = undefined;
  Object.assign(env, { LANG: 'C.UTF-8', ...options.env });

  const tmux = (args: string[]) =>
    runProcess('tmux', ['-u', '-S', socket, ...args], { exit: 0, env, timeoutMs: 20_000 }).then((r) => r.stdout);
  const limitMs = options.timeoutMs ?? SCREEN_TIMEOUT_MS;
  const deadline = Date.now() + limitMs;
  let serverEnded = false;
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
    const left = (): number => Math.max(1, deadline - Date.now());
    const overdue = async (why: string): Promise<never> => {
      throw new Error(
        `queenctl ${options.args.join(' ')} on ${cols} columns: ${why} after ${limitMs} ms, its time limit\n` +
          `--- screen\n${await capture([])}`,
      );
    };
    // One client call reads the pane's state and both captures: -N keeps each row's trailing
    // spaces, so a wrapped row is as wide as the terminal and the rows of a line match -J's
    // joined line.
    const separator = `queenctl-pty-${Math.random().toString(36).slice(2)}`;
    const all = ['-S', '-', '-E', '-'];
    /** The screen, read by one tmux client that may first wait (`before`) and then go on (`after`). */
    const screenNow = async (
      before: string[] = [],
      after: string[] = [],
      timeoutMs = 20_000,
    ): Promise<{ dead: boolean; screen: Screen }> => {
      const out = await runProcess(
        'tmux',
        [
          ...['-u', '-S', socket, ...before],
          ...['display-message', '-p', '-t', 'snap', '#{pane_dead}', ';'],
          ...['capture-pane', '-p', '-N', '-t', 'snap', ...all, ';'],
          ...['display-message', '-p', separator, ';'],
          ...['capture-pane', '-p', '-J', '-t', 'snap', ...all, ...after],
        ],
        { exit: 0, env, timeoutMs },
      ).then((r) => r.stdout);
      const [dead = '', rest = ''] = out.split(/\n(.*)/s);
      const [rowsText = '', linesText = ''] = rest.split(`${separator}\n`);
      const screenRows = trimBlankEnd(rowsText.split('\n'));
      const lines = trimBlankEnd(linesText.split('\n'));
      return {
        dead: dead === '1',
        screen: {
          rows: screenRows.map((row) => row.trimEnd()),
          lines: lines.map((line) => line.trimEnd()),
          wraps: wrapsOf(screenRows, lines),
        },
      };
    };
    let live: Screen | undefined;
    if (options.interrupt) {
      // A live view: type the keys once the screen shows what the case waits for, the same on two
      // captures in a row (spinner frames aside): a spinner clears its line before drawing it
      // again, and a capture between the two is no screen a person reads.
      let before = '';
      for (;;) {
        const { screen } = await screenNow();
        const text = screen.rows.join('\n');
        const settled = text.replace(/[\u2800-\u28ff]/g, '.');
        if (settled === before && options.interrupt.when(text)) {
          live = screen;
          break;
        }
        before = settled;
        if (Date.now() > deadline) await overdue(`the moment to type ${options.interrupt.keys} never came`);
        await delay(POLL_MS);
      }
      await tmux(['send-keys', '-t', 'snap', options.interrupt.keys]);
    }
    // The shell is ending: once tmux says the pane is dead, it has read all the pane's output,
    // and the client that saw it so ends the server too. One client waits and then looks.
    const endIfDead = [';', 'if-shell', '-F', '-t', 'snap', '#{pane_dead}', 'kill-server'];
    let end = await screenNow(['wait-for', 'ended', ';'], endIfDead, left()).catch(() => overdue('not ended'));
    while (!end.dead) {
      if (Date.now() > deadline) await overdue('the pane still not dead');
      await delay(POLL_MS / 2);
      end = await screenNow([], endIfDead);
    }
    serverEnded = true;
    if (!existsSync(status)) throw new Error(`the pane ended without an exit code\n${end.screen.rows.join('\n')}`);
    const code = Number(readFileSync(status, 'utf8'));
    const screen: ScreenRun = { ...end.screen, code, ...(live && { live }) };
    if (code !== options.exit) {
      throw new Error(
        `queenctl ${options.args.join(' ')} on ${cols} columns: expected exit ${options.exit}, got ${code}\n` +
          `--- screen\n${screen.rows.join('\n')}`,
      );
    }
    return screen;
  } finally {
    if (!serverEnded)
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
 * - `kept-batch`: the random parts of the directory `lease acquire` keeps a batch's record in, and
 *   of the pane's temporary directory (/tmp/queenctl-snap-XXXXXX), become `XXXXXX`.
 * - `spinner`: a frame of a spinner (the braille dots ora draws, U+2800 to U+28FF) becomes `⠿`:
 *   which frame a live screen catches is the machine's timing.
 * - `clock`: a time of day on this machine's clock, HH:MM:SS.mmm (the log lines of a watch),
 *   becomes `hh:mm:ss.sss`; `clock-seconds`: HH:MM:SS (the status line of a live view), `hh:mm:ss`.
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
      // The record `lease acquire` keeps of a batch it printed as tables: a directory made anew.
      name: 'kept-batch',
      pattern: /(?<=\/queenctl-(?:batch|snap)-)[A-Za-z0-9]{6}(?=\/)/g,
      replace: () => 'XXXXXX',
    },
    {
      name: 'spinner',
      pattern: /[\u2800-\u28ff]/g,
      replace: () => '\u28ff',
    },
    {
      name: 'clock',
      pattern: /\b\d\d:\d\d:\d\d\.\d{3}\b(?!Z)/g,
      replace: () => 'hh:mm:ss.sss',
    },
    {
      name: 'clock-seconds',
      pattern: /\b\d\d:\d\d:\d\d\b(?![.:Z\d])/g,
      replace: () => 'hh:mm:ss',
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
