/**
 * Tables for people: kubectl-style, borderless, left-aligned, laid out by fit.ts: fitted to a
 * terminal, or every column at full width for a pipe, a file and `-o wide`.
 *
 * Every cell is outside text until shown otherwise: a string cell is escaped (sanitise.ts), and
 * colour is added here, after escaping, to the words a command marks with a tone. So no cell a
 * broker or a config filled can carry a control character to the terminal, and no command has to
 * remember to escape one (docs/security.md#outside-text-is-data).
 */
import { type ColumnLike, columnSpecs, fitTable, hiddenColumnsNote } from './fit.js';
import { escapeText } from './sanitise.js';
import type { Style } from './style.js';
import { loadTerminalText, proseWidth, type StringWidth, wrapMessage } from './width.js';

/** A word of queenctl's own, coloured by its tone (`yes` ok, `NO` bad) when colour is on. */
export interface TonedCell {
  text: string;
  tone: 'ok' | 'bad' | 'warn';
}

/** Outside text (a string), or queenctl's own word with a tone. */
export type Cell = string | TonedCell;

export const ok = (text: string): TonedCell => ({ text, tone: 'ok' });
export const bad = (text: string): TonedCell => ({ text, tone: 'bad' });

/** A cell as it is shown: escaped, then coloured by its tone. */
export function showCell(cell: Cell, style?: Style): string {
  if (typeof cell === 'string') return escapeText(cell);
  const text = escapeText(cell.text);
  return style ? style[cell.tone](text) : text;
}

export interface TableOptions {
  /** Each column's header, and on a terminal what it is worth when space is short (fit.ts). */
  headers: ColumnLike[];
  rows: Cell[][];
  noHeaders: boolean;
  /** Colours the toned cells; plain without one. */
  style?: Style;
}

/**
 * The table for a pipe or a file, or for `-o wide`: every column, whatever the width, each as wide
 * as its widest cell and at least one column (an empty one under --no-headers too), three spaces
 * between (fit.ts at no width limit). Its bytes are what scripts that read tables have always
 * read: cli-table3's, which made these until issue 41's fifth look and took time in the square of
 * the rows (7 s for 10,000, ~3 minutes for 50,000: docs/performance.md#tables-in-a-pipe). Where
 * they differ: a few characters that are not ASCII are measured as a terminal shows them (the
 * same page); no rows under --no-headers print nothing, not an empty line; and a row is never
 * wider than its headers (cli-table3 printed the extra cells). Every caller prints a table only
 * with rows, of the headers' width.
 */
export async function renderTable(table: TableOptions): Promise<string> {
  const { headers, rows, noHeaders, style } = table;
  const measure = await measureFor(table);
  const fitted = fitTable(headers, rows, Number.POSITIVE_INFINITY, { noHeaders, style, measure, minColumnWidth: 1 });
  return fitted.lines.map((line) => `${line}\n`).join('');
}

/** 7-bit ASCII: escaped (sanitise.ts), it is printable ASCII, one column a character. */
const ASCII = /^[\u0000-\u007f]*$/;
const isAscii = (cell: Cell): boolean => ASCII.test(typeof cell === 'string' ? cell : cell.text);

/**
 * How a table measures its cells: by their length when every header and cell is ASCII (ids,
 * timestamps and most names), so the run does not load string-width for it (~34 ms as it loads,
 * ~25 ms more at its first character outside ASCII: docs/performance.md#tables-in-a-pipe); else
 * as a terminal does, by string-width.
 */
async function measureFor({ headers, rows }: TableOptions): Promise<StringWidth> {
  const ascii =
    columnSpecs(headers).every((spec) => ASCII.test(spec.header)) && rows.every((row) => row.every(isAscii));
  return ascii ? (text) => text.length : (await loadTerminalText()).stringWidth;
}

/** A table as printed: its text for stdout, and the note for stderr when columns were hidden. */
export interface PrintedTable {
  text: string;
  note: string;
}

/**
 * The table for stdout: on a terminal of `width` columns (IO.width), fitted to it (fit.ts), with a
 * note for stderr when columns had to go (none with -q); in a pipe, or with `-o wide`, every
 * column, as `renderTable` prints it.
 */
export async function tableFor(
  table: TableOptions,
  target: { width?: number | undefined; stderrWidth?: number | undefined; wide: boolean; quiet: boolean },
): Promise<PrintedTable> {
  const { width } = target;
  if (width === undefined || target.wide) return { text: await renderTable(table), note: '' };
  const fitted = fitTable(table.headers, table.rows, width, {
    noHeaders: table.noHeaders,
    style: table.style,
    measure: await measureFor(table),
  });
  const { stderrWidth } = target;
  const note = fitted.hidden > 0 && !target.quiet ? hiddenColumnsNote(fitted.hidden, width, stderrWidth) : '';
  // The note is queenctl's own ASCII words, a column a character: wrapped (wrap-ansi, in the
  // terminal file of the bundle) only when it is wider than stderr's prose.
  const narrow = note !== '' && stderrWidth !== undefined && note.length - 1 > proseWidth(stderrWidth);
  return {
    text: fitted.lines.map((line) => `${line}\n`).join(''),
    note: narrow ? wrapMessage(note, stderrWidth, await loadTerminalText()) : note,
  };
}
