/**
 * Issue 33: messages that said things that were not so, each against the simulator, in-process.
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import type { Simulator } from '../../tools/simulator/index.js';
import { runInProcess, type InProcessOptions } from '../support/in-process.js';
import { sharedSimulator } from '../support/shared.js';

const simulator = sharedSimulator();
let sim: Simulator;
beforeEach(() => {
  sim = simulator();
  sim.configure({ database: 'connected' });
});
const queenctl = (args: string[], options: InProcessOptions = {}) =>
  runInProcess([...args, '--server', sim.url], options);

describe('a refused token stops a bulk run: said only of ids left unsent', () => {
  it('all six in flight at once (--concurrency 8): no "remaining ids were not sent"', async () => {
    sim.setTokens({ right: { role: 'read-write' } });
    const ids = Array.from({ length: 6 }, () => sim.mint());
    const result = await queenctl(['lease', 'extend', ...ids, '--token', 'wrong', '--concurrency', '8']);
    assert.equal(result.code, 3, result.stderr);
    assert.equal(sim.log.length, 6, 'every id was sent');
    assert.doesNotMatch(result.stderr, /not sent|stopped/);
  });

  it('one at a time: stopped after the first, and the other five were not sent', async () => {
    sim.setTokens({ right: { role: 'read-write' } });
    const ids = Array.from({ length: 6 }, () => sim.mint());
    const result = await queenctl(['lease', 'extend', ...ids, '--token', 'wrong', '--concurrency', '1']);
    assert.equal(result.code, 3, result.stderr);
    assert.equal(sim.log.length, 1);
    const stopped = 'stopped at the first refusal after 1 lease id: 0 renewed, 0 not renewed, 1 unknown';
    assert.match(result.stderr, new RegExp(`^queenctl: ${stopped}: the remaining lease ids were not sent$`, 'm'));
  });

  it('the last id refused: nothing left, nothing said of the rest', async () => {
    sim.setTokens({ right: { role: 'read-write' } });
    const result = await queenctl(['lease', 'inspect', '-', '--token', 'wrong', '--concurrency', '1'], {
      stdin: `${sim.mint()}\n`,
    });
    assert.equal(result.code, 3, result.stderr);
    assert.doesNotMatch(result.stderr, /not sent|stopped/);
  });
});
