/**
 * Durations for people (docs/cli-contract.md#durations-for-people): rounded to the unit shown,
 * and a countdown to what queenctl will do never shown below the truth (issue 33: 1989 ms was
 * printed "next renewal in 1s", a 4 s timeout "within 3999ms").
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatCountdown, formatDuration } from '../../src/output/duration.js';
import { eventWords } from '../../src/output/watch.js';

describe('formatDuration', () => {
  const cases: Array<[number, string]> = [
    [250, '250ms'],
    [0, '0ms'],
    [-5, '0ms'],
    [1989, '2s'],
    [3999, '4s'],
    [999.6, '1s'],
    [5_000, '5s'],
    [2_500, '2.5s'],
    [1_234, '1.2s'],
    [9_960, '10s'],
    [59_600, '1m00s'],
    [118_250, '1m58s'],
    [118_600, '1m59s'],
    [3_660_000, '1h01m'],
    [3_599_700, '1h00m'],
  ];
  for (const [ms, text] of cases) it(`${ms} ms is ${text}`, () => assert.equal(formatDuration(ms), text));
});

describe('formatCountdown never shows less than is left', () => {
  const cases: Array<[number, string]> = [
    [1989, '2s'],
    [1001, '1.1s'],
    [9_901, '10s'],
    [1000, '1s'],
    [0.2, '1ms'],
    [999.2, '1s'],
    [59_001, '1m00s'],
    [60_001, '1m01s'],
    [3_600_001, '1h01m'],
  ];
  for (const [ms, text] of cases) it(`${ms} ms is ${text}`, () => assert.equal(formatCountdown(ms), text));
});

describe('the watch says durations as people read them', () => {
  it('a renewal 1989 ms away is "next renewal in 2s", with 29.6 s left "30s left"', () => {
    const words = eventWords({
      event: 'renewed',
      leaseId: 'L1',
      at: '2026-12-02T10:00:00.000Z',
      renewed: 1,
      expiresAt: '2026-12-02T10:00:30.000Z',
      remainingMs: 29_600,
      nextRenewalInMs: 1989,
    });
    assert.match(words, /: 30s left, next renewal in 2s$/);
  });
});
