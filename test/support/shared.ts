/** Set-up shared by test files: one simulator per file, reset before each test. */
import assert from 'node:assert/strict';
import { after, before, beforeEach } from 'node:test';
import { UsageError } from '../../src/exit.js';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../tools/simulator/index.js';

/** Starts a simulator for the file and resets its state before each test; call at top level. */
export function sharedSimulator(): () => Simulator {
  let sim: Simulator | undefined;
  before(async () => {
    sim = await startSimulator();
  });
  after(() => sim?.close());
  beforeEach(() => {
    if (!sim) return;
    sim.clearFaults();
    sim.setShape('documented');
    sim.setTokens(null);
    sim.setClockOffset(0);
    sim.resetLog();
  });
  return () => {
    assert.ok(sim, 'the simulator starts in before()');
    return sim;
  };
}

/** Runs a scenario against a simulator of its own, closed after it whatever happens. */
export async function withSimulator(
  scenario: (sim: Simulator) => Promise<void>,
  options: SimulatorOptions = {},
): Promise<void> {
  const sim = await startSimulator(options);
  try {
    await scenario(sim);
  } finally {
    await sim.close();
  }
}

/** The UsageError a promise rejects with; fails the test on anything else. */
export async function usageError(promise: Promise<unknown>): Promise<UsageError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof UsageError, `a UsageError, not ${String(error)}`);
    return error;
  }
  assert.fail('expected a UsageError');
}
