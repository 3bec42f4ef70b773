/**
 * Tables for people: kubectl-style, borderless, left-aligned. cli-table3 is loaded only when a
 * table is printed.
 *
 * Every cell is outside text until shown otherwise: a string cell is escaped (sanitise.ts), and
 * colour is added here, after escaping, to the words a command marks with a tone. So no cell a
 * broker or a config filled can carry a control character to the terminal, and no command has to
 * remember to escape one (docs/security.md#outside-text-is-data).
 */
import { escapeText } from './sanitise.js';
import type { Style } from './style.js';

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
  headers: string[];
  rows: Cell[][];
  noHeaders: boolean;
  /** Colours the toned cells; plain without one. */
  style?: Style;
}

export async function renderTable({ headers, rows, noHeaders, style }: TableOptions): Promise<string> {
  const { default: Table } = await import('cli-table3');
  const table = new Table({
    head: noHeaders ? [] : headers,
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
