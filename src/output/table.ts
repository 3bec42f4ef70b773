/**
 * Tables for people: kubectl-style, borderless, left-aligned. cli-table3 is loaded only when a
 * table is printed.
 *
 * Every cell is outside text until shown otherwise: a string cell is escaped (sanitise.ts), and
 * colour is added here, after escaping, to the words a command marks with a tone. So no cell a
 * broker or a config filled can carry a control character to the terminal, and no command has to
 * remember to escape one (docs/security.md#outside-text-is-data).
 */
import { fitTable, hiddenColumnsNote, type ColumnLike } from './fit.js';
import { escapeText } from './sanitise.js';
import type { Style } from './style.js';
import { loadTerminalText, wrapMessage } from './width.js';

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
 * The table for a pipe or a file, or for `-o wide`: every column, whatever the width. Its bytes
 * are what scripts that read tables have always read.
 */
export async function renderTable({ headers, rows, noHeaders, style }: TableOptions): Promise<string> {
  const { default: Table } = await import('cli-table3');
  const table = new Table({
    head: noHeaders ? [] : headers.map((column) => (typeof column === 'string' ? column : column.header)),
    chars: {
      top: '',
      'top-mid': '',
      'top-left': '',
      'top-right': '',
      bottom: '',
      'bottom-mid': '',
      'bottom-left': '',
      'bottom-right': '',
      left: '',
      'left-mid': '',
      mid: '',
      'mid-mid': '',
      right: '',
      'right-mid': '',
      middle: '   ',
    },
    style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0 },
  });
  table.push(...rows.map((row) => row.map((cell) => showCell(cell, style))));
  return `${table
    .toString()
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n')}\n`;
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
  const text = await loadTerminalText();
  const { stringWidth } = text;
  const fitted = fitTable(table.headers, table.rows, width, {
    noHeaders: table.noHeaders,
    style: table.style,
    measure: stringWidth,
  });
  const { stderrWidth } = target;
  const note = fitted.hidden > 0 && !target.quiet ? hiddenColumnsNote(fitted.hidden, width, stderrWidth) : '';
  return {
    text: fitted.lines.map((line) => `${line}\n`).join(''),
    note: note && stderrWidth !== undefined ? wrapMessage(note, stderrWidth, text) : note,
  };
}
