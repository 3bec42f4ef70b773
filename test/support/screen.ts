/**
 * A terminal screen for the live views' tests (src/output/live.ts): what the bytes written to a
 * terminal leave on it. It knows what log-update writes (cursor up and down, to the first column,
 * erase a line or its end, synchronized output, cursor shown or hidden) and ignores colour. A line
 * written past the width would wrap on a terminal: here it is kept whole, and counted in
 * `overflows`, so a test can say no line ever wrapped.
 */
import stringWidth from 'string-width';

/**
 * The columns a line takes: its length when every character is one column for certain (printable
 * ASCII, and the ·, …, bars and box lines the views draw), else string-width's answer, which costs
 * a segmentation of the line: asked after every write, it was most of the CPU of the live views'
 * tests. test/unit/terminal-screen.test.ts holds the two to the same answers.
 */
export const NARROW = /^[\x20-\x7e\u00b7\u2026\u2500-\u259f]*$/;
export const widthOf = (line: string): number => (NARROW.test(line) ? line.length : stringWidth(line));

export class Screen {
  lines: string[] = [''];
  row = 0;
  col = 0;
  /** The lines that went past the width at some point (each time one did). */
  readonly overflows: string[] = [];
  cursorShown = true;
  /** Sequences this screen does not know: a test fails on them. */
  readonly unknown: string[] = [];

  constructor(readonly columns: number) {}

  write(text: string): void {
    const tokens = text.matchAll(/\u001b\[([?0-9;]*)([A-Za-z])|\n|\r|[^\u001b\n\r]+/g);
    for (const [token, params, command] of tokens) {
      if (command !== undefined) this.csi(params ?? '', command);
      else if (token === '\n') this.moveTo(this.row + 1, 0);
      else if (token === '\r') this.col = 0;
      else this.put(token);
    }
  }

  /** The screen's lines, trailing blanks dropped. */
  text(): string[] {
    const lines = this.lines.map((line) => line.trimEnd());
    while (lines.length > 0 && lines.at(-1) === '') lines.pop();
    return lines;
  }

  private moveTo(row: number, col: number): void {
    this.row = Math.max(0, row);
    while (this.lines.length <= this.row) this.lines.push('');
    this.col = Math.max(0, col);
  }

  private put(text: string): void {
    const line = this.lines[this.row] ?? '';
    const chars = [...line];
    while (chars.length < this.col) chars.push(' ');
    const added = [...text];
    chars.splice(this.col, added.length, ...added);
    this.lines[this.row] = chars.join('');
    this.col += added.length;
    if (widthOf(this.lines[this.row] as string) > this.columns) this.overflows.push(this.lines[this.row] as string);
  }

  private csi(params: string, command: string): void {
    const n = params === '' ? 1 : Number(params);
    switch (command) {
      case 'A':
        return this.moveTo(this.row - n, this.col);
      case 'B':
        return this.moveTo(this.row + n, this.col);
      case 'G':
        return this.moveTo(this.row, params === '' ? 0 : n - 1);
      case 'K':
        if (params === '2') this.lines[this.row] = '';
        else this.lines[this.row] = [...(this.lines[this.row] ?? '')].slice(0, this.col).join('');
        return;
      case 'm':
        return;
      case 'h':
      case 'l':
        if (params === '?25') this.cursorShown = command === 'h';
        else if (params !== '?2026') this.unknown.push(`${params}${command}`);
        return;
      default:
        this.unknown.push(`${params}${command}`);
    }
  }
}

/** What a terminal of `columns` shows after `written`. */
export function screenOf(written: string, columns: number): Screen {
  const screen = new Screen(columns);
  screen.write(written);
  return screen;
}

/**
 * The screen of a stream still being written (`read` gives all written so far, which only
 * grows): each call feeds the screen only what came since the last, so a wait that looks at the
 * screen on every write costs what the new bytes cost, not the whole stream again (the live views'
 * tests spent most of their CPU re-reading it). An escape sequence not finished yet waits for its
 * end.
 */
export function followScreen(read: () => string, columns: number): () => Screen {
  const screen = new Screen(columns);
  let fed = 0;
  return () => {
    const written = read();
    const unfinished = /\u001b(\[[?0-9;]*)?$/.exec(written);
    const end = unfinished ? unfinished.index : written.length;
    if (end > fed) {
      screen.write(written.slice(fed, end));
      fed = end;
    }
    return screen;
  };
}
