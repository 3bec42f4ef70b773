/**
 * A table made to fit a terminal (issue 33), as gh and kubectl do: when the columns are wider
 * than the terminal, the gap between them narrows, then timestamps get shorter and names are cut
 * with `…`, then columns are dropped, least wanted first, until the table fits. Each table says
 * what its columns are worth (`ColumnSpec`): the lease id and the verdict (RENEWED, LIVE) are
 * never dropped nor cut. Fewer columns dropped always beats shorter cells: once the columns that
 * must go are gone, the others get back as much as fits.
 *
 * A pipe, a file and `-o wide` get the same layout with no width to fit: every column at full
 * width (table.ts). Widths are the caller's `measure`: string-width's (width.ts), so a wide
 * character counts two columns, or the length of a table that is all ASCII (table.ts). Cells are
 * escaped before they are measured (sanitise.ts): what is measured is what the terminal shows.
 * Each cell is measured a fixed number of times, so a table of thousands of rows (a bulk extend,
 * a listing) costs time in proportion to its rows.
 */
import { escapeText } from './sanitise.js';
import type { Style } from './style.js';
import type { Cell } from './table.js';
import { truncateToWidth, type StringWidth } from './width.js';

export interface ColumnSpec {
  header: string;
  /** 'always': never dropped nor cut (the lease id, the verdict); a number: higher is kept longer. */
  keep: 'always' | number;
  /**
   * How its cells get narrower before the column is dropped: 'time', an ISO 8601 timestamp
   * without its fraction of a second, then its time of day alone (`20:30:24Z`); 'cut', text cut
   * with `…` down to `minWidth` columns.
   */
  shrink?: 'time' | 'cut';
  /** For 'cut': the narrowest its cells are cut to (default 10). */
  minWidth?: number;
}

/** A column given as its header alone: kept as long as possible, the rightmost dropped first. */
export type ColumnLike = string | ColumnSpec;

export interface FitOptions {
  noHeaders: boolean;
  style?: Style | undefined;
  measure: StringWidth;
  /** The narrowest a column is, header or not (default 0: a column empty on every row takes none). */
  minColumnWidth?: number;
}

export interface FittedTable {
  /** The lines, without their line breaks, each at most `width` wide when the table could fit. */
  lines: string[];
  /** How many columns were dropped. */
  hidden: number;
}

/** Cut shorter, a name no longer says which it is: the column goes instead. */
const DEFAULT_MIN_WIDTH = 10;
/** The gap kubectl puts between columns, and gh's narrower one, used before anything is cut. */
const GAP = 3;
const NARROW_GAP = 2;

/** `2026-12-03T20:30:24.586000Z`: date, time of day, fraction, zone. */
const ISO_TIME = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)$/;
/** How wide a timestamp is at each level of shortening (what is not one is cut to that). */
const TIME_WIDTHS = [Number.POSITIVE_INFINITY, 20, 9];

function timeForm(text: string, level: number, measure: StringWidth): string {
  if (level === 0) return text;
  const match = ISO_TIME.exec(text);
  if (!match) return truncateToWidth(text, TIME_WIDTHS[level] as number, measure);
  const [, date, time, , zone] = match;
  return level === 1 ? `${date}T${time}${zone}` : `${time}${zone}`;
}

export function columnSpecs(columns: readonly ColumnLike[]): ColumnSpec[] {
  return columns.map((column, index) =>
    typeof column === 'string' ? { header: column, keep: columns.length - index } : column,
  );
}

interface Layout {
  gap: number;
  dropped: Set<number>;
  levels: number[];
  limits: number[];
}

/**
 * `rows` under `columns` fitted to `width` columns. A table that cannot fit even with every
 * column that may go dropped and every cell shortened (the lease ids alone are wider) is shown
 * that way, as narrow as it gets.
 */
export function fitTable(
  columns: readonly ColumnLike[],
  rows: readonly Cell[][],
  width: number,
  options: FitOptions,
): FittedTable {
  const specs = columnSpecs(columns);
  const { measure, noHeaders } = options;
  const texts = rows.map((row) => specs.map((_, c) => escapeText(cellText(row[c]))));
  const least = options.minColumnWidth ?? 0;
  const headerWidths = specs.map((spec) => Math.max(least, noHeaders ? 0 : measure(spec.header)));

  const shown = (layout: Layout, r: number, c: number): string => {
    const spec = specs[c] as ColumnSpec;
    const text = texts[r]?.[c] ?? '';
    const formed = spec.shrink === 'time' ? timeForm(text, layout.levels[c] as number, measure) : text;
    return truncateToWidth(formed, layout.limits[c] as number, measure);
  };
  // A column's width depends on its own level and limit only: each is measured once (a run of
  // extend over thousands of ids makes a table of thousands of rows).
  const widthCache = new Map<string, number>();
  const columnWidth = (layout: Layout, c: number): number => {
    const key = `${c}:${layout.levels[c]}:${layout.limits[c]}`;
    let widest = widthCache.get(key);
    if (widest === undefined) {
      widest = texts.reduce((most, _, r) => Math.max(most, measure(shown(layout, r, c))), headerWidths[c] as number);
      widthCache.set(key, widest);
    }
    return widest;
  };
  const total = (layout: Layout): number => {
    const kept = specs.map((_, c) => c).filter((c) => !layout.dropped.has(c));
    return kept.reduce((sum, c) => sum + columnWidth(layout, c), 0) + layout.gap * Math.max(0, kept.length - 1);
  };

  /** One step narrower for the least wanted column that can still shrink; false when none can. */
  const shrinkOne = (layout: Layout, excess: number): boolean => {
    if (layout.gap > NARROW_GAP) {
      layout.gap = NARROW_GAP;
      return true;
    }
    const candidates = specs
      .map((spec, c) => ({ spec, c }))
      .filter(({ spec, c }) => spec.keep !== 'always' && spec.shrink && !layout.dropped.has(c))
      .sort((a, b) => (a.spec.keep as number) - (b.spec.keep as number) || b.c - a.c);
    for (const { spec, c } of candidates) {
      const now = columnWidth(layout, c);
      if (spec.shrink === 'time' && (layout.levels[c] as number) < TIME_WIDTHS.length - 1) {
        layout.levels[c] = (layout.levels[c] as number) + 1;
        return true;
      }
      const min = Math.max(spec.minWidth ?? DEFAULT_MIN_WIDTH, headerWidths[c] as number);
      if (spec.shrink === 'cut' && now > min) {
        layout.limits[c] = Math.max(min, now - excess);
        return true;
      }
    }
    return false;
  };

  const droppable = specs
    .map((spec, c) => ({ spec, c }))
    .filter(({ spec }) => spec.keep !== 'always')
    .sort((a, b) => (a.spec.keep as number) - (b.spec.keep as number) || b.c - a.c)
    .map(({ c }) => c);
  let layout: Layout | undefined;
  for (let drop = 0; drop <= droppable.length; drop++) {
    layout = {
      gap: GAP,
      dropped: new Set(droppable.slice(0, drop)),
      levels: specs.map(() => 0),
      limits: specs.map(() => Number.POSITIVE_INFINITY),
    };
    let excess = total(layout) - width;
    while (excess > 0 && shrinkOne(layout, excess)) excess = total(layout) - width;
    if (excess <= 0) break;
  }
  const final = layout as Layout;
  const kept = specs.map((_, c) => c).filter((c) => !final.dropped.has(c));
  const widths = kept.map((c) => columnWidth(final, c));
  /** A row's cells padded to their columns' widths (measured before colour), then coloured. */
  const line = (cells: { text: string; cell?: Cell | undefined }[]): string =>
    cells
      .map(({ text, cell }, i) => {
        const pad = ' '.repeat(Math.max(0, (widths[i] as number) - measure(text)));
        return `${toned(cell, text, options.style)}${pad}`;
      })
      .join(' '.repeat(final.gap))
      .trimEnd();
  const lines: string[] = [];
  if (!noHeaders) lines.push(line(kept.map((c) => ({ text: (specs[c] as ColumnSpec).header }))));
  rows.forEach((row, r) => {
    lines.push(line(kept.map((c) => ({ text: shown(final, r, c), cell: row[c] }))));
  });
  return { lines, hidden: final.dropped.size };
}

function cellText(cell: Cell | undefined): string {
  if (cell === undefined) return '';
  return typeof cell === 'string' ? cell : cell.text;
}

/** `text` (already escaped and shortened) in the colour of `cell`'s tone. */
function toned(cell: Cell | undefined, text: string, style: Style | undefined): string {
  return style && cell !== undefined && typeof cell !== 'string' ? style[cell.tone](text) : text;
}

/**
 * The note that says columns were dropped, for stderr: `-o wide` shows them. On a stderr narrower
 * than the note (`room`), without the width, so it stays one line.
 */
export function hiddenColumnsNote(hidden: number, width: number, room = Number.POSITIVE_INFINITY): string {
  const columns = hidden === 1 ? 'column' : 'columns';
  const note = `queenctl: ${hidden} ${columns} hidden to fit ${width} columns; -o wide shows all`;
  return `${note.length <= room ? note : `queenctl: ${hidden} ${columns} hidden; -o wide shows all`}\n`;
}
