/**
 * Tables, help and hints made to fit a terminal (issue 33; src/output/fit.ts, width.ts): every
 * line within the width as terminals measure it (string-width: a CJK character is two columns,
 * an escape sequence none), the lease id and the verdict whole, timestamps shortened before a
 * column goes, and the least wanted column dropped first.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import stringWidth from 'string-width';
import { fitTable, hiddenColumnsNote, type ColumnSpec } from '../../src/output/fit.js';
import { loadStyle } from '../../src/output/style.js';
import { bad, ok, renderTable, tableFor, type Cell } from '../../src/output/table.js';
import { fitHelp, loadTerminalText, terminalWidth, truncateToWidth, wrapMessage } from '../../src/output/width.js';

const LEASE = '01a23d98-0c02-76f4-a11b-e22d5fa09334';
const TIME = '2026-12-03T20:30:24.586000Z';

const extendColumns: ColumnSpec[] = [
  { header: 'LEASE ID', keep: 'always' },
  { header: 'RENEWED', keep: 'always' },
  { header: 'newExpiresAt', keep: 3, shrink: 'time' },
  { header: 'expiresAt', keep: 1, shrink: 'time' },
  { header: 'lease_expires_at', keep: 2, shrink: 'time' },
  { header: 'LEFT', keep: 4 },
];
const extendRows: Cell[][] = [
  [LEASE, ok('1'), TIME, TIME, TIME, '1m59s'],
  ['01a23d98-0c02-7525-b33c-4e5449e6f285', bad('0 NOT RENEWED'), 'null', 'null', 'null', '-'],
];

const listColumns: ColumnSpec[] = [
  { header: 'LEASE ID', keep: 'always' },
  { header: 'GROUP', keep: 4, shrink: 'cut' },
  { header: 'QUEUE', keep: 3, shrink: 'cut' },
  { header: 'PARTITIONS', keep: 6, shrink: 'cut' },
  { header: 'LIVE', keep: 'always' },
];

const fit = (columns: ColumnSpec[], rows: Cell[][], width: number) =>
  fitTable(columns, rows, width, { noHeaders: false, measure: stringWidth });

function assertFits(lines: string[], width: number): void {
  for (const line of lines) assert.ok(stringWidth(line) <= width, `${stringWidth(line)} > ${width}: ${line}`);
}

describe('fitTable', () => {
  it('keeps every column and kubectl gap when the table fits (200 columns)', () => {
    const { lines, hidden } = fit(extendColumns, extendRows, 200);
    assert.equal(hidden, 0);
    assert.match(lines[0] ?? '', /^LEASE ID {3,}RENEWED {3,}newExpiresAt {3,}expiresAt {3,}lease_expires_at {3,}LEFT$/);
    assert.ok(lines[1]?.includes(`${LEASE}   1`), lines[1]);
    assert.equal((lines[1]?.match(/2026-12-03T20:30:24\.586000Z/g) ?? []).length, 3);
  });

  it('at 80 drops the two copies of the expiry, shortens the one left, keeps LEFT', () => {
    const { lines, hidden } = fit(extendColumns, extendRows, 80);
    assertFits(lines, 80);
    assert.equal(hidden, 2);
    assert.match(lines[0] ?? '', /^LEASE ID\s+RENEWED\s+newExpiresAt\s+LEFT$/);
    assert.match(lines[1] ?? '', new RegExp(`^${LEASE}\\s+1\\s+(2026-12-03T)?20:30:24Z\\s+1m59s$`));
    assert.match(lines[2] ?? '', /0 NOT RENEWED/, 'the verdict is never cut');
  });

  it('at 60 keeps the lease id and the verdict whole and LEFT, and drops the expiries', () => {
    const { lines, hidden } = fit(extendColumns, extendRows, 60);
    assertFits(lines, 60);
    assert.equal(hidden, 3);
    assert.match(lines[0] ?? '', /^LEASE ID\s+RENEWED\s+LEFT$/);
    assert.ok(lines[1]?.startsWith(LEASE));
    assert.ok(lines[2]?.includes('0 NOT RENEWED'));
  });

  it('shortens a timestamp to its time of day before dropping its column', () => {
    const columns: ColumnSpec[] = [
      { header: 'LEASE ID', keep: 'always' },
      { header: 'EXPIRES AT', keep: 1, shrink: 'time' },
    ];
    const rows: Cell[][] = [[LEASE, TIME]];
    assert.ok(fit(columns, rows, 200).lines[1]?.endsWith(TIME));
    assert.ok(fit(columns, rows, 60).lines[1]?.endsWith('2026-12-03T20:30:24Z'));
    assert.ok(fit(columns, rows, 50).lines[1]?.endsWith('20:30:24Z'));
    const { lines, hidden } = fit(columns, rows, 45);
    assert.equal(hidden, 1);
    assert.equal(lines[1], LEASE);
  });

  it('cuts names with … at their column, counting CJK characters as two columns', () => {
    const rows: Cell[][] = [
      [LEASE, '請求書グループ名前がとても長い', 'キュー名前はとても長いです', 'p1, p2, p3', ok('yes')],
      ['01a23d98-0c02-70de-8a7a-e8862b7ce482', 'billing', 'orders', 'p7', bad('NO')],
    ];
    // At 60 the names go rather than PARTITIONS (issue 39): nothing is left to cut.
    assert.match(fit(listColumns, rows, 60).lines[0] ?? '', /^LEASE ID +PARTITIONS +LIVE$/);
    for (const width of [80, 100]) {
      const { lines } = fit(listColumns, rows, width);
      assertFits(lines, width);
      assert.ok(
        lines.some((line) => line.includes('…')),
        lines.join('\n'),
      );
      assert.ok(lines[1]?.startsWith(LEASE));
      assert.match(lines[1] ?? '', /yes$/);
      assert.match(lines[2] ?? '', /NO$/);
    }
    // Wide enough: nothing cut, and the columns line up as a terminal shows them.
    const { lines } = fit(listColumns, rows, 200);
    assert.ok(!lines.some((line) => line.includes('…')));
    const at = (line: string, text: string): number => stringWidth(line.slice(0, line.indexOf(text)));
    assert.equal(at(lines[1] ?? '', 'yes'), at(lines[2] ?? '', 'NO'));
  });

  it('measures escape sequences in cells as the terminal shows them: escaped, never raw', () => {
    const evil = 'orders\u001b[2J\u001b]0;title\u0007\u202e';
    const rows: Cell[][] = [[LEASE, 'billing', evil, 'p7', ok('yes')]];
    for (const width of [60, 80, 200]) {
      const { lines } = fit(listColumns, rows, width);
      assertFits(lines, width);
      for (const line of lines) assert.doesNotMatch(line, /[\u0000-\u001f\u007f-\u009f\u202e]/);
    }
    assert.ok(fit(listColumns, rows, 200).lines[1]?.includes('orders\\x1b[2J'));
  });

  it('colours toned cells after measuring them: a coloured verdict still lines up', async () => {
    const style = await loadStyle(true);
    const { lines } = fitTable(extendColumns, extendRows, 80, { noHeaders: false, style, measure: stringWidth });
    assertFits(lines, 80);
    assert.match(lines[1] ?? '', /\u001b\[32m1\u001b\[39m/);
    const plain = fit(extendColumns, extendRows, 80).lines;
    assert.deepEqual(
      lines.map((line) => line.replace(/\u001b\[[0-9;]*m/g, '')),
      plain,
    );
  });

  it('with --no-headers fits the rows alone', () => {
    const { lines } = fitTable(extendColumns, extendRows, 60, { noHeaders: true, measure: stringWidth });
    assert.equal(lines.length, 2);
    assert.ok(lines[0]?.startsWith(LEASE));
  });

  it('tableFor: off a terminal, or with -o wide, the table of today; on one, fitted, and a note', async () => {
    const table = { headers: extendColumns, rows: extendRows, noHeaders: false };
    const piped = await tableFor(table, { width: undefined, wide: false, quiet: false });
    assert.match(piped.text, /lease_expires_at/);
    assert.equal(piped.note, '');
    const wide = await tableFor(table, { width: 60, wide: true, quiet: false });
    assert.equal(wide.text, piped.text);
    const narrow = await tableFor(table, { width: 60, wide: false, quiet: false });
    assert.doesNotMatch(narrow.text, /lease_expires_at/);
    assert.equal(narrow.note, 'queenctl: 3 columns hidden to fit 60 columns; -o wide shows all\n');
    assert.equal((await tableFor(table, { width: 60, wide: false, quiet: true })).note, '');
    const noted = await tableFor(table, { width: 60, stderrWidth: 40, wide: false, quiet: false });
    assertFits(noted.note.split('\n'), 40);
  });

  it('hiddenColumnsNote says one column or several, and keeps to one line of a narrow stderr', () => {
    assert.equal(hiddenColumnsNote(1, 80), 'queenctl: 1 column hidden to fit 80 columns; -o wide shows all\n');
    assert.equal(hiddenColumnsNote(3, 60, 60), 'queenctl: 3 columns hidden; -o wide shows all\n');
  });
});

describe('the table for a pipe, a file or -o wide (renderTable)', () => {
  const headers = ['LEASE ID', 'RENEWED', 'newExpiresAt', 'QUEUE', 'LEFT'];
  const rows: Cell[][] = [
    [LEASE, ok('1'), TIME, 'orders', '1m59s'],
    ['01a23d98-0c02-7525-b33c-4e5449e6f285', bad('0 NOT RENEWED'), 'null', '注文-заказы', '-'],
    ['x', ok('1'), '', 'q\u001b[2J', ''],
  ];

  it('prints the bytes cli-table3 printed before it: full columns, three spaces, no trailing blank', async () => {
    // Captured from cli-table3 0.6.5, which made these tables until issue 41's fifth look: scripts
    // read these bytes. A line each, its cells' padding spelled out.
    const lines = (...texts: string[]): string => texts.map((text) => `${text}\n`).join('');
    const gap = (count: number): string => ' '.repeat(count);
    const header = `LEASE ID${gap(31)}RENEWED${gap(9)}newExpiresAt${gap(18)}QUEUE${gap(9)}LEFT`;
    const first = (verdict: string) => `${LEASE}   ${verdict}${gap(15)}${TIME}   orders        1m59s`;
    const second = (verdict: string) =>
      `01a23d98-0c02-7525-b33c-4e5449e6f285   ${verdict}   null${gap(26)}注文-заказы   -`;
    const third = (verdict: string) => `x${gap(38)}${verdict}${gap(45)}q\\x1b[2J`;
    const body = [first('1'), second('0 NOT RENEWED'), third('1')];
    assert.equal(await renderTable({ headers, rows, noHeaders: false }), lines(header, ...body));
    assert.equal(await renderTable({ headers, rows, noHeaders: true }), lines(...body));
    const green = '\u001b[32m1\u001b[39m';
    const red = '\u001b[31m\u001b[1m0 NOT RENEWED\u001b[22m\u001b[39m';
    assert.equal(
      await renderTable({ headers, rows, noHeaders: false, style: await loadStyle(true) }),
      lines(header, first(green), second(red), third(green)),
    );
    assert.equal(
      await renderTable({ headers, rows: [], noHeaders: false }),
      lines('LEASE ID   RENEWED   newExpiresAt   QUEUE   LEFT'),
    );
  });

  it('ASCII with escaped controls, and an empty column under --no-headers: as cli-table3 printed', async () => {
    // Measured by length (all ASCII): the escapes, not the raw characters, set the padding.
    const escaped = await renderTable({
      headers: ['ID', 'QUEUE', 'NOTE'],
      rows: [
        ['a', 'q\u001b[31m', 'x'],
        ['bb', 'tab\there', 'y'],
        ['c', 'del\u007f', 'zz'],
      ],
      noHeaders: false,
    });
    assert.equal(escaped, 'ID   QUEUE       NOTE\na    q\\x1b[31m   x\nbb   tab\\there   y\nc    del\\x7f     zz\n');
    // config get-contexts with no current context: CURRENT is empty on every row, still a column wide.
    const contexts = await renderTable({
      headers: ['CURRENT', 'NAME', 'SERVER'],
      rows: [
        ['', 'a', 'http://127.0.0.1:9'],
        ['', 'bb', 'http://x'],
      ],
      noHeaders: true,
    });
    assert.equal(contexts, '    a    http://127.0.0.1:9\n    bb   http://x\n');
  });

  it('measures each cell a fixed number of times: a table of thousands of rows costs in proportion', () => {
    // cli-table3 took 7 s for 10,000 rows and ~3 minutes for 50,000: its layout was quadratic.
    const calls = (count: number, width: number): number => {
      let measured = 0;
      const measure = (text: string): number => {
        measured++;
        return stringWidth(text);
      };
      const many = Array.from({ length: count }, (_, r) => rows[r % rows.length] as Cell[]);
      fitTable(extendColumns, many, width, { noHeaders: false, measure });
      return measured;
    };
    // The same rows again and again: a layout whose work grows with the rows alone adds the same
    // number of measures for each 300 more; a quadratic one adds more each time.
    for (const width of [Number.POSITIVE_INFINITY, 80, 60]) {
      const [one, two, three] = [300, 600, 900].map((count) => calls(count, width)) as [number, number, number];
      assert.equal(three - two, two - one, `at width ${width}: ${one}, ${two}, ${three} measures`);
    }
  });
});

describe('terminal width and text', () => {
  it('terminalWidth: COLUMNS first, on a terminal or not; then what a terminal reports, else 80', () => {
    assert.equal(terminalWidth({ isTTY: false, columns: 120 }, { COLUMNS: '60' }), 60, 'watch(1): a pipe, and COLUMNS');
    assert.equal(terminalWidth({ isTTY: false, columns: 120 }, {}), undefined, 'a pipe: not fitted');
    for (const junk of ['', '0', '60x', '99999999'])
      assert.equal(terminalWidth({ isTTY: false }, { COLUMNS: junk }), undefined, junk);
    assert.equal(terminalWidth({ isTTY: true, columns: 120 }, { COLUMNS: '60' }), 60);
    assert.equal(terminalWidth({ isTTY: true, columns: 120 }, {}), 120);
    assert.equal(terminalWidth({ isTTY: true }, {}), 80);
    for (const junk of ['', '0', '-5', '60x', ' 60', '1e3', '99999999'])
      assert.equal(terminalWidth({ isTTY: true, columns: 120 }, { COLUMNS: junk }), 120, junk);
  });

  it('truncateToWidth never splits a wide character or a cluster, and ends with …', () => {
    assert.equal(truncateToWidth('orders', 6, stringWidth), 'orders');
    assert.equal(truncateToWidth('orders-eu', 6, stringWidth), 'order…');
    const cut = truncateToWidth('請求書グループ', 6, stringWidth);
    assert.equal(cut, '請求…');
    assert.ok(stringWidth(cut) <= 6);
    assert.equal(truncateToWidth('e\u0301e\u0301e\u0301e\u0301', 3, stringWidth), 'e\u0301e\u0301…');
  });

  it('wrapMessage: a queenctl line too wide is wrapped, its next lines two spaces in', async () => {
    const text = await loadTerminalText();
    const message = `queenctl: ${LEASE}: no answer from http://127.0.0.1:36745 within 10s; retry 1 of 2 in 143ms\n`;
    const wrapped = wrapMessage(message, 60, text);
    const lines = wrapped.split('\n');
    assertFits(lines, 60);
    assert.ok(lines.length > 2);
    assert.ok(lines.slice(1, -1).every((line) => line.startsWith('  ') && !line.startsWith('   ')));
    assert.equal(wrapped.replace(/\n {2}/g, ' '), message);
    assert.equal(wrapMessage('queenctl: short\n', 60, text), 'queenctl: short\n');
    // At most 100 columns, however wide the terminal.
    assertFits(wrapMessage(`queenctl: ${'word '.repeat(60)}\n`, 300, text).split('\n'), 100);
  });

  it('fitHelp flows prose paragraphs at the width (at most 100) and keeps lists and examples', async () => {
    const text = await loadTerminalText();
    const help = [
      'Retries: connection refused or reset, timeouts, 502/503/504 and 500 {"error":"pool"} are retried',
      'with backoff (renewing takes the later deadline, so a repeat never shortens a lease).',
      '',
      'Exit status:',
      '  4  a lease was not renewed (renewed: 0), even though the broker said HTTP 200 to the request',
      '',
      'Examples:',
      '  queenctl lease extend "$LEASE" -o json | jq -r .lease_expires_at',
    ].join('\n');
    for (const width of [60, 80, 200]) {
      const lines = fitHelp(help, width, text).split('\n');
      assertFits(lines, Math.min(width, 100));
      assert.ok(lines.includes('Exit status:') && lines.includes('Examples:'));
    }
    const at60 = fitHelp(help, 60, text).split('\n');
    const exit = at60.findIndex((line) => line.startsWith('  4  a lease'));
    assert.ok(at60[exit + 1]?.startsWith('     ') && !at60[exit + 1]?.startsWith('      '), at60.join('\n'));
    const wide = fitHelp(help, 200, text);
    assert.ok(
      wide.startsWith('Retries: connection refused or reset, timeouts, 502/503/504 and 500 {"error":"pool"} are'),
    );
  });
});
