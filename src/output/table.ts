/**
 * Tables for people: kubectl-style, borderless, left-aligned. cli-table3 is loaded only when a
 * table is printed.
 */
export interface TableOptions {
  headers: string[];
  rows: string[][];
  noHeaders: boolean;
}

export async function renderTable({ headers, rows, noHeaders }: TableOptions): Promise<string> {
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
  table.push(...rows);
  return `${table
    .toString()
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n')}\n`;
}
