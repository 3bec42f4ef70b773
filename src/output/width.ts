/**
 * How wide a terminal is, and text made to fit it (issue 33): widths measured as terminals
 * measure them (East Asian wide characters count two columns, escape sequences none) by
 * string-width, prose wrapped by wrap-ansi. Both are loaded only by a run that wraps help or a
 * message for a terminal, or prints a table with a cell outside ASCII (they sit in the terminal
 * file of the bundle, with ora; chalk has a file of its own): string-width costs ~34 ms as it
 * loads (docs/performance.md#tables-in-a-pipe).
 */
/** Prose is wrapped at the terminal's width, but never wider than this: longer lines read badly. */
export const PROSE_MAX_WIDTH = 100;

/** A terminal that says nothing of its width is taken to have this many columns. */
export const DEFAULT_TERMINAL_WIDTH = 80;

/** What this module needs of a stream: whether it is a terminal, and the width it reports. */
export interface SizedStream {
  isTTY?: boolean;
  columns?: number;
}

/**
 * The width output for people on `stream` is fitted to, or undefined: not fitted. `COLUMNS` comes
 * first, wherever the stream goes, as POSIX has it (the user's preferred width) and as ls -C and
 * Python's shutil read it: watch(1) runs a command with stdout and stderr a pipe and says the
 * width of its screen in COLUMNS. Without it, a terminal's own width, and undefined for a pipe
 * or a file, so that what scripts read is never cut (docs/cli-contract.md#fitting-the-terminal).
 * `COLUMNS` is outside text: only a plain number from 1 to 10000 counts.
 */
export function terminalWidth(stream: SizedStream, env: NodeJS.ProcessEnv): number | undefined {
  const fromEnv = env.COLUMNS;
  if (fromEnv !== undefined && /^[1-9]\d{0,4}$/.test(fromEnv) && Number(fromEnv) <= 10000) return Number(fromEnv);
  if (!stream.isTTY) return undefined;
  const reported = stream.columns;
  return typeof reported === 'number' && Number.isInteger(reported) && reported > 0 ? reported : DEFAULT_TERMINAL_WIDTH;
}

/** The width prose gets on a terminal of `width` columns. */
export function proseWidth(width: number): number {
  return Math.min(width, PROSE_MAX_WIDTH);
}

export type StringWidth = (text: string) => number;
type WrapAnsi = (text: string, columns: number, options?: { hard?: boolean; trim?: boolean }) => string;

/** The libraries that measure and wrap text for a terminal. */
export interface TerminalText {
  stringWidth: StringWidth;
  wrapAnsi: WrapAnsi;
}

let loaded: TerminalText | undefined;

/** A package's default export, whichever way the bundle hands it over (see output/watch.ts on ora). */
function defaultExport<T>(module: unknown): T {
  const outer = (module as { default: unknown }).default;
  return (typeof outer === 'function' ? outer : (outer as { default: T }).default) as T;
}

/** Loads string-width and wrap-ansi, once. */
export async function loadTerminalText(): Promise<TerminalText> {
  if (!loaded) {
    const [stringWidth, wrapAnsi] = await Promise.all([import('string-width'), import('wrap-ansi')]);
    loaded = { stringWidth: defaultExport<StringWidth>(stringWidth), wrapAnsi: defaultExport<WrapAnsi>(wrapAnsi) };
  }
  return loaded;
}

/** The libraries if a run loaded them already: help is written synchronously (see cli.ts). */
export function loadedTerminalText(): TerminalText | undefined {
  return loaded;
}

const PRINTABLE_ASCII = /^[\u0020-\u007e]*$/;

/**
 * `text` cut to at most `max` columns, with `…` where it was cut; whole grapheme clusters only,
 * so an accent or a wide character is never split.
 */
export function truncateToWidth(text: string, max: number, measure: StringWidth): string {
  if (measure(text) <= max) return text;
  if (max <= 0) return '';
  // Printable ASCII is a column a character: no segmenter to make (~11 ms, the first in a run).
  if (PRINTABLE_ASCII.test(text)) return `${text.slice(0, max - 1)}…`;
  let kept = '';
  let used = 0;
  for (const { segment } of new Intl.Segmenter().segment(text)) {
    const width = measure(segment);
    if (used + width > max - 1) break;
    kept += segment;
    used += width;
  }
  return `${kept}…`;
}

/**
 * One line made to fit `width` columns: wrapped at spaces by wrap-ansi (a word longer than the
 * line is cut), each further line indented by `hanging` spaces.
 */
export function wrapLine(line: string, width: number, hanging: number, text: TerminalText): string {
  if (text.stringWidth(line) <= width) return line;
  const indent = /^ */.exec(line)?.[0].length ?? 0;
  const first = text.wrapAnsi(line.slice(indent), Math.max(1, width - indent), { hard: true, trim: true }).split('\n');
  const head = `${' '.repeat(indent)}${first[0] ?? ''}`;
  const rest = first.slice(1).join(' ');
  if (!rest) return head;
  const pad = Math.min(hanging, Math.max(0, width - 10));
  const more = text.wrapAnsi(rest, Math.max(1, width - pad), { hard: true, trim: true }).split('\n');
  return [head, ...more.map((part) => `${' '.repeat(pad)}${part}`)].join('\n');
}

/**
 * Lines queenctl says to people on stderr (`queenctl: ...` and the hint lines under it), each
 * that is wider than `width` wrapped: a `queenctl:` line's next lines two spaces in, an indented
 * line's at its own indent. Line breaks queenctl put there stay.
 */
export function wrapMessage(message: string, width: number, text: TerminalText): string {
  const max = proseWidth(width);
  return message
    .split('\n')
    .map((line) => {
      const indent = /^ */.exec(line)?.[0].length ?? 0;
      return wrapLine(line, max, indent > 0 ? indent : 2, text);
    })
    .join('\n');
}

/** A heading of a help text, alone on its line: `Examples:`, `Exit status:`. */
const HEADING = /^[A-Z][A-Za-z /-]*:$/;

/**
 * Help text on a terminal of `width` columns (at most PROSE_MAX_WIDTH): the paragraphs of prose
 * (lines that start at column 0, up to a blank line or a heading) flowed again at that width;
 * indented lines (examples, option and exit-code lists) wrapped only when they are too wide, their
 * next lines under the description when there is a column of them (`  4  what it means`).
 */
export function fitHelp(help: string, width: number, text: TerminalText): string {
  const max = proseWidth(width);
  const out: string[] = [];
  let paragraph: string[] = [];
  const flush = (): void => {
    if (paragraph.length === 0) return;
    out.push(text.wrapAnsi(paragraph.join(' '), max, { hard: true, trim: true }));
    paragraph = [];
  };
  for (const line of help.split('\n')) {
    if (line.trim() === '' || HEADING.test(line) || /^\s/.test(line) || line.startsWith('Usage:')) {
      flush();
      const column = /^(\s+\S+(?: \S+)*?\s{2,})\S/.exec(line)?.[1]?.length;
      const indent = /^ */.exec(line)?.[0].length ?? 0;
      out.push(wrapLine(line, max, column ?? indent + 2, text));
    } else {
      paragraph.push(line.trim());
    }
  }
  flush();
  return out.join('\n');
}

/** Where a message for people goes: stderr, and its width when it is a terminal. */
export interface MessageTarget {
  stderr: { write(text: string): boolean };
  stderrWidth?: number | undefined;
}

/**
 * A message for people (`queenctl: ...` lines and the hint lines under them) written to stderr,
 * wrapped to the terminal's width when stderr is one (wrapMessage), as it is otherwise. Use it for
 * every message a verb writes itself: errors thrown are wrapped by cli.ts.
 */
export async function writeMessage(target: MessageTarget, message: string): Promise<void> {
  const { stderrWidth } = target;
  target.stderr.write(
    stderrWidth === undefined ? message : wrapMessage(message, stderrWidth, await loadTerminalText()),
  );
}

/**
 * The same, at once, for callers that cannot wait (they write between other lines): wrapped when
 * the libraries are loaded already (a run that draws for a terminal loads them early), as it is
 * otherwise.
 */
export function writeMessageNow(target: MessageTarget, message: string): void {
  const { stderrWidth } = target;
  const text = stderrWidth === undefined ? undefined : loadedTerminalText();
  target.stderr.write(stderrWidth === undefined || !text ? message : wrapMessage(message, stderrWidth, text));
}
