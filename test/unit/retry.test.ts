import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backoffMs, withRetries } from '../../src/broker/retry.js';
import { AuthError, BrokerError } from '../../src/exit.js';
import { instantClock } from '../support/fakes.js';

const policy = { retries: 2, baseDelayMs: 200, maxDelayMs: 5000 };

function failing(errors: Error[], value = 'renewed'): { attempt: () => Promise<string>; calls: () => number } {
  let calls = 0;
  return {
    attempt: async () => {
      const error = errors[calls++];
      if (error) throw error;
      return value;
    },
    calls: () => calls,
  };
}

describe('withRetries', () => {
  it('retries transient failures and returns the first success', async () => {
    const op = failing([new BrokerError('refused', true), new BrokerError('503', true)]);
    assert.equal(await withRetries(op.attempt, policy, { clock: instantClock }), 'renewed');
    assert.equal(op.calls(), 3);
  });

  it('gives up after the configured retries', async () => {
    const op = failing([new BrokerError('a', true), new BrokerError('b', true), new BrokerError('c', true)]);
    await assert.rejects(withRetries(op.attempt, policy, { clock: instantClock }), /c/);
    assert.equal(op.calls(), 3);
  });

  it('never retries an auth refusal or a non-transient broker error', async () => {
    for (const error of [new AuthError('403', 403), new BrokerError('renew failed', false)]) {
      const op = failing([error]);
      await assert.rejects(withRetries(op.attempt, policy, { clock: instantClock }));
      assert.equal(op.calls(), 1);
    }
  });

  it('--retries 0 means one attempt', async () => {
    const op = failing([new BrokerError('refused', true)]);
    await assert.rejects(withRetries(op.attempt, { ...policy, retries: 0 }, { clock: instantClock }));
    assert.equal(op.calls(), 1);
  });

  it('backs off exponentially with jitter, capped', () => {
    assert.equal(
      backoffMs(1, policy, () => 0),
      100,
    );
    assert.equal(
      backoffMs(1, policy, () => 1),
      200,
    );
    assert.equal(
      backoffMs(3, policy, () => 1),
      800,
    );
    assert.equal(
      backoffMs(20, policy, () => 1),
      5000,
    );
  });
});
