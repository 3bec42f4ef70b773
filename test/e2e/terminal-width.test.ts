/**
 * Every human output fits the terminal it is on, from 60 columns up (issue 33): each verb's table,
 * its notes and hints on stderr, and help, measured as a terminal measures them (string-width, the
 * colour codes counting nothing). The lease id and the verdict stay whole; a note on stderr says
 * how many columns were hidden; `-o wide` shows them all; COLUMNS is honoured; and a table into a
 * pipe keeps every column.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, it } from 'node:test';
import stringWidth from 'string-width';
import type { Simulator } from '../../tools/simulator/index.js';
import { runInProcess, type InProcessResult } from '../support/in-process.js';
import { sharedSimulator } from '../support/shared.js';

const simulator = sharedSimulator();
let sim: Simulator;
let count = 0;
beforeEach(() => {
  sim = simulator();
});

const WIDTHS = [60, 80] as const;

/** A run on a terminal of `columns` (stdout and stderr both), with colour. */
const onTerminal = (args: string[], columns: number, env: Record<string, string> = {}) =>
  runInProcess(args, { stdoutIsTTY: true, stderrIsTTY: true, columns, env: { FORCE_COLOR: '1', ...env } });

function assertFits(result: InProcessResult, width: number): void {
  for (const [name, text] of [
    ['stdout', result.stdout],
    ['stderr', result.stderr],
  ] as const) {
    for (const line of text.split('\n')) {
      // A command to copy (acquire's ack line) is never wrapped: it must run as shown. Its path is
      // the temporary directory's, far longer here than /tmp's.
      if (name === 'stderr' && line.startsWith('  queenctl lease ack ')) continue;
      assert.ok(stringWidth(line) <= width, `${name}: ${stringWidth(line)} columns > ${width}:\n${text}`);
    }
  }
}

/** The tour's leases: one of two partitions, one of one, and one that was released. */
function leases(): { held: string; other: string; dead: string; queue: string } {
  const queue = `orders-${++count}`;
  const held = sim.mint({ queue, partitions: [{ partition: 'p6' }, { partition: 'p7' }], seconds: 120 });
  const other = sim.mint({ queue, group: 'billing', partitions: [{ partition: 'p7' }], seconds: 300 });
  const dead = sim.mint({ queue, partitions: [{ partition: 'p1' }], seconds: 60 });
  sim.release(dead);
  return { held, other, dead, queue };
}

describe('output on a terminal fits its width', () => {
  for (const width of WIDTHS) {
    it(`lease extend at ${width}: the lease id and RENEWED whole, LEFT kept, a note of what was hidden`, async () => {
      const { held } = leases();
      const result = await onTerminal(['lease', 'extend', held, '--server', sim.url], width);
      assert.equal(result.code, 0, result.stderr);
      assertFits(result, width);
      assert.match(result.stdout, /^LEASE ID\s+RENEWED\s.*LEFT$/m);
      assert.ok(result.stdout.includes(held));
      const note = width === 80 ? 'hidden to fit 80 columns; -o wide shows all' : 'hidden; -o wide shows all';
      assert.match(result.stderr, new RegExp(`^queenctl: \\d columns ${note}$`, 'm'));
    });

    it(`lease extend of a lost lease at ${width}: the verdict whole, the hint wrapped to fit`, async () => {
      const { dead } = leases();
      const result = await onTerminal(['lease', 'extend', dead, '--server', sim.url], width);
      assert.equal(result.code, 4, result.stderr);
      assertFits(result, width);
      assert.ok(result.stdout.includes(dead));
      assert.match(result.stdout, /0 NOT RENEWED/);
      assert.match(result.stderr, /another worker may already have\s+the batch\./);
    });

    it(`lease inspect at ${width}`, async () => {
      const { held, other } = leases();
      const result = await onTerminal(['lease', 'inspect', held, other, '--server', sim.url], width);
      assert.equal(result.code, 0, result.stderr);
      assertFits(result, width);
      assert.match(result.stdout, /^LEASE ID\s+LIVE\b/m);
      assert.ok(result.stdout.includes(held) && result.stdout.includes(other));
    });

    it(`lease list and list --expiry at ${width}`, async () => {
      const { held, queue } = leases();
      for (const extra of [[], ['--expiry']]) {
        const result = await onTerminal(['lease', 'list', '--queue', queue, ...extra, '--server', sim.url], width);
        assert.equal(result.code, 0, result.stderr);
        assertFits(result, width);
        assert.match(result.stdout, /^LEASE ID\s.*LIVE\b/m);
        assert.ok(result.stdout.includes(held));
      }
    });

    it(`lease acquire and ack at ${width}`, async () => {
      const queue = `jobs-${++count}`;
      const another = `jobs-${++count}`;
      for (const name of [queue, another]) {
        sim.createQueue({ name, partitions: ['p1'], leaseTime: 60 });
        sim.push(name, [{ text: '請求書の処理\u001b[2J' }, { n: 2 }], 'p1');
      }
      const acquired = await onTerminal(['lease', 'acquire', queue, '--batch', '5', '--server', sim.url], width);
      assert.equal(acquired.code, 0, acquired.stderr);
      assertFits(acquired, width);
      assert.doesNotMatch(acquired.stdout, /\u001b\[2J/);
      const json = await runInProcess(['lease', 'acquire', another, '--batch', '5', '-o', 'json', '--server', sim.url]);
      assert.equal(json.code, 0, json.stderr);
      const path = join(mkdtempSync(join(tmpdir(), 'queenctl-width-')), 'batch.json');
      writeFileSync(path, json.stdout);
      const acked = await onTerminal(['lease', 'ack', path, '--server', sim.url], width);
      assert.equal(acked.code, 0, acked.stderr);
      assertFits(acked, width);
      assert.match(acked.stdout, /^TRANSACTION ID\s+RESULT/m);
      // The result is coloured, never shown as an escaped escape sequence.
      assert.doesNotMatch(acked.stdout, /\\x1b/);
      // Acked again: the refusal, a line the verb writes itself, fits too.
      const again = await onTerminal(['lease', 'ack', path, '--server', sim.url], width);
      assert.equal(again.code, 4, again.stderr);
      assert.match(again.stderr, /were not\s+acked/);
      assertFits(again, width);
    });

    it(`ping at ${width}`, async () => {
      const result = await onTerminal(['ping', '--server', sim.url], width);
      assert.equal(result.code, 0, result.stderr);
      assertFits(result, width);
      assert.match(result.stdout, /^STATUS\b/m);
    });

    for (const command of [[], ['lease'], ['lease', 'extend'], ['lease', 'list'], ['lease', 'watch']]) {
      it(`${['queenctl', ...command].join(' ')} --help at ${width}`, async () => {
        const result = await onTerminal([...command, '--help'], width);
        assert.equal(result.code, 0, result.stderr);
        assertFits(result, width);
        assert.match(result.stdout, /^Usage: queenctl/);
      });
    }

    it(`a usage error and a broker error at ${width}`, async () => {
      const { held } = leases();
      const refused = await onTerminal(
        ['lease', 'extend', held, '--server', 'http://127.0.0.1:9', '--retries', '0'],
        width,
      );
      assert.equal(refused.code, 2, refused.stderr);
      assertFits(refused, width);
      assert.match(refused.stderr, /^queenctl: /);
    });
  }

  it('help on a wide terminal is at most 100 columns wide, and its prose uses them', async () => {
    const result = await onTerminal(['lease', 'watch', '--help'], 200);
    assert.equal(result.code, 0, result.stderr);
    assertFits(result, 100);
    assert.ok(result.stdout.split('\n').some((line) => stringWidth(line) > 90));
  });

  it('honours COLUMNS over the width the terminal reports', async () => {
    const { held } = leases();
    const result = await onTerminal(['lease', 'extend', held, '--server', sim.url], 200, { COLUMNS: '60' });
    assert.equal(result.code, 0, result.stderr);
    assertFits(result, 60);
    assert.match(result.stderr, /^queenctl: 3 columns hidden; -o wide shows all$/m);
  });

  it('-o wide on a terminal shows every column, and no note', async () => {
    const { held } = leases();
    const result = await onTerminal(['lease', 'extend', held, '-o', 'wide', '--server', sim.url], 60);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /newExpiresAt\s+expiresAt\s+lease_expires_at\s+LEFT\s+BROKER SAID\s+SHAPE\s+CLOCK/);
    assert.doesNotMatch(result.stderr, /hidden/);
  });

  it('-q hides the note, not the fitting', async () => {
    const { held } = leases();
    const result = await onTerminal(['lease', 'extend', held, '-o', 'table', '-q', '--server', sim.url], 60);
    assert.equal(result.code, 0, result.stderr);
    assertFits(result, 60);
    assert.equal(result.stderr, '');
  });

  it('-o table into a pipe keeps every column when COLUMNS is not set', async () => {
    const { held } = leases();
    const result = await runInProcess(['lease', 'extend', held, '-o', 'table', '--server', sim.url], {
      env: { COLUMNS: undefined },
    });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^LEASE ID {3,}RENEWED {3,}newExpiresAt {3,}expiresAt {3,}lease_expires_at {3,}LEFT$/m);
    assert.match(result.stdout, /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z {3}\d{4}/);
    assert.equal(result.stderr, '');
  });

  // watch(1) runs a command with stdout and stderr a pipe, and says its screen's width in COLUMNS
  // (issue 39): the table and the lines for people fit it there as on a terminal.
  it('COLUMNS counts in a pipe too: -o table and its note fit it, as under watch(1)', async () => {
    const { held } = leases();
    const result = await runInProcess(['lease', 'extend', held, '-o', 'table', '--server', sim.url], {
      env: { COLUMNS: '60' },
    });
    assert.equal(result.code, 0, result.stderr);
    assertFits(result, 60);
    assert.match(result.stdout, new RegExp(`^${held} +2 +\\d`, 'm'), 'the lease id and the verdict whole');
    assert.match(result.stderr, /^queenctl: 3 columns hidden(?: to fit 60 columns)?; -o wide shows all\n$/);
  });

  it('lease watch under watch(1): its lines on stderr fit COLUMNS', async () => {
    const { held } = leases();
    const args = ['lease', 'watch', held, '--for', '300ms', '-o', 'table', '--server', sim.url];
    const fitted = await runInProcess(args, { env: { COLUMNS: '60' }, timeoutMs: 20_000 });
    assert.equal(fitted.code, 0, fitted.stderr);
    assert.match(fitted.stderr, /renewed/);
    assertFits(fitted, 60);
    const unset = await runInProcess(args, { env: { COLUMNS: undefined }, timeoutMs: 20_000 });
    assert.ok(
      unset.stderr.split('\n').some((line) => stringWidth(line) > 60),
      `without COLUMNS the lines are as long as they are:\n${unset.stderr}`,
    );
  });
});
