/**
 * A live view on a terminal: a frame redrawn in place, as watch(1) and top draw theirs
 * (docs/cli-contract.md#live-views). Each line of a frame is cut to the terminal's width, never
 * wrapped, and a frame holds at most one line less than the terminal has rows, so it never
 * scrolls. log-update redraws it; string-width and cli-truncate measure and cut as terminals
 * count columns (East Asian wide characters, escape sequences). The three are loaded only here,
 * when a live view is drawn, from a file of the bundle of their own (scripts/bundle.mjs).
 *
 * On close the last frame stays on the screen, the cursor shown again and below it: the operator
 * keeps what was seen when the view stopped (SIGINT included).
 *
 * Width fitting is local to the live views; the tables of the static verbs fit elsewhere.
 */
import type { OutputStream } from '../io.js';

export interface TerminalSize {
  columns: number;
  rows: number;
}

/** What a renderer of frames measures and cuts with: the terminal's own counting. */
export interface Fit {
  /** Columns `text` takes on a terminal (colour codes take none, a wide character two). */
  width(text: string): number;
  /** `text` cut to at most `columns`, an ellipsis where it was cut. */
  cut(text: string, columns: number): string;
  /** `text` cut or padded with spaces to exactly `columns`. */
  pad(text: string, columns: number): string;
}

export interface LiveScreen {
  readonly fit: Fit;
  /** The terminal's size now (it may change between frames). */
  size(): TerminalSize;
  /** Redraws the frame in place of the last one. */
  draw(lines: readonly string[]): void;
  /** A line (newline included) printed above the frame, kept in the scrollback. */
  above(text: string): void;
  /** Leaves the last frame on the screen and shows the cursor again. */
  close(): void;
}

type Sized = OutputStream & { columns?: number; rows?: number };

/** A positive whole number of a variable (COLUMNS, LINES), else undefined. */
function fromEnv(value: string | undefined): number | undefined {
  if (value === undefined || !/^[1-9][0-9]{0,4}$/.test(value)) return undefined;
  return Number(value);
}

/** `COLUMNS` and `LINES` when set (the user's word), else the terminal's own size, else 80x24. */
export function terminalSize(stream: OutputStream, env: NodeJS.ProcessEnv): TerminalSize {
  const tty = stream as Sized;
  const own = (value: number | undefined): number | undefined =>
    typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined;
  return {
    columns: fromEnv(env.COLUMNS) ?? own(tty.columns) ?? 80,
    rows: fromEnv(env.LINES) ?? own(tty.rows) ?? 24,
  };
}

/**
 * A live view needs a terminal that moves its cursor: not a pipe or a file (they keep the
 * appended lines), not TERM=dumb, and not a terminal of no width nobody gave a COLUMNS.
 */
export function canRedraw(stream: OutputStream, env: NodeJS.ProcessEnv): boolean {
  if (!stream.isTTY || env.TERM === 'dumb') return false;
  return ((stream as Sized).columns ?? 0) > 0 || fromEnv(env.COLUMNS) !== undefined;
}

/** The smallest frame a live view draws: narrower terminals get it cut. */
export const MIN_COLUMNS = 20;

const HIDE_CURSOR = '\u001b[?25l';
const SHOW_CURSOR = '\u001b[?25h';

type Module<T> = T | { default: T };
/**
 * A package that is an ES module only, through the bundle's CommonJS file of its own: Node's
 * interop makes its whole namespace the default export (as for ora in watch.ts).
 */
function exported<T>(loaded: { default: Module<T> }): T {
  const inner = loaded.default as { default?: T };
  return (typeof loaded.default === 'function' ? loaded.default : inner.default) as T;
}

type CreateLogUpdate = typeof import('log-update').createLogUpdate;

export async function loadFit(): Promise<Fit> {
  const stringWidth = exported<typeof import('string-width').default>(await import('string-width'));
  const cliTruncate = exported<typeof import('cli-truncate').default>(await import('cli-truncate'));
  const width = (text: string): number => stringWidth(text);
  const cut = (text: string, columns: number): string =>
    columns <= 0 ? '' : width(text) <= columns ? text : cliTruncate(text, columns, { position: 'end' });
  return {
    width,
    cut,
    pad: (text, columns) => {
      const shown = cut(text, columns);
      return shown + ' '.repeat(Math.max(0, columns - width(shown)));
    },
  };
}

export async function openLiveScreen(stream: OutputStream, env: NodeJS.ProcessEnv): Promise<LiveScreen> {
  const fit = await loadFit();
  const loaded = (await import('log-update')) as { createLogUpdate?: CreateLogUpdate; default?: unknown };
  const createLogUpdate =
    loaded.createLogUpdate ?? (loaded.default as { createLogUpdate: CreateLogUpdate }).createLogUpdate;
  const size = (): TerminalSize => terminalSize(stream, env);
  // The cursor is hidden and shown here, not by log-update: its way (cli-cursor) hooks the
  // process's exit and signals, which are cli.ts's alone.
  const update = createLogUpdate(stream as unknown as NodeJS.WriteStream, {
    showCursor: true,
    defaultWidth: size().columns,
    defaultHeight: size().rows,
  });
  let last: string | null = null;
  let hidden = false;
  let closed = false;
  const frame = (lines: readonly string[]): string => {
    const { columns, rows } = size();
    const fitted = lines.slice(0, Math.max(1, rows - 1)).map((line) => fit.cut(line, Math.max(MIN_COLUMNS, columns)));
    return fitted.join('\n');
  };
  return {
    fit,
    size,
    draw(lines) {
      if (closed) return;
      if (!hidden) {
        stream.write(HIDE_CURSOR);
        hidden = true;
      }
      last = frame(lines);
      update(last);
    },
    above(text) {
      if (closed) return void stream.write(text);
      update.persist(text.endsWith('\n') ? text.slice(0, -1) : text);
      if (last !== null) update(last);
    },
    close() {
      if (closed) return;
      closed = true;
      // done() forgets the frame without erasing it: it stays, and the cursor is below it.
      update.done();
      if (hidden) stream.write(SHOW_CURSOR);
    },
  };
}

/**
 * Time left drawn against a whole: `width` cells, full for all of it, empty for none (and for a
 * time unknown, drawn as dots).
 */
export function bar(part: number | null, whole: number | null, width: number): string {
  if (width <= 0) return '';
  if (part === null || whole === null || !(whole > 0)) return '·'.repeat(width);
  // Any time left shows: a cell at least, so a bar is empty only for a lease with none.
  const filled = part > 0 ? Math.max(1, Math.min(width, Math.round((part / whole) * width))) : 0;
  return '█'.repeat(filled) + '░'.repeat(width - filled);
}
