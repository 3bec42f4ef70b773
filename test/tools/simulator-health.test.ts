/**
 * The simulator's GET /health against the real broker's recorded answers
 * (test/fixtures/real-broker-health.txt): the same keys and statuses, no token needed, and the
 * switch to 503 unhealthy through the config and the control interface.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import {
  SimulatorControl,
  SimulatorControlError,
  startSimulator,
  type Simulator,
} from '../../tools/simulator/index.js';

/** The JSON bodies of the recording, in order: healthy, the 401 of a group route, unhealthy. */
function recordedBodies(): Array<Record<string, unknown>> {
  const text = readFileSync(new URL('../../../test/fixtures/real-broker-health.txt', import.meta.url), 'utf8');
  return text
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The shape of a JSON value: its keys, recursively, without the values. */
function shape(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return typeof value;
  return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, shape(inner)]));
}

describe('simulator: GET /health as the real broker answers it', () => {
  let sim: Simulator | undefined;
  const simulator = (): Simulator => {
    assert.ok(sim, 'simulator not started');
    return sim;
  };
  before(async () => {
    sim = await startSimulator({ tokens: { ro: { role: 'read-only' } } });
  });
  after(async () => {
    await sim?.close();
  });
  const health = async (): Promise<{ status: number; body: Record<string, unknown>; date: string | null }> => {
    const res = await fetch(`${simulator().url}/health`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown>, date: res.headers.get('date') };
  };
  const [healthy, unauthorized, unhealthy] = recordedBodies();

  it('answers 200 healthy with the recorded keys, without a token while auth is on', async () => {
    const answer = await health();
    assert.equal(answer.status, 200);
    assert.deepEqual(shape(answer.body), shape(healthy));
    assert.equal(answer.body.status, 'healthy');
    assert.equal(answer.body.database, 'connected');
    assert.equal(answer.body.version, healthy?.version);
    assert.match(answer.date ?? '', /GMT$/, "the broker's clock in a Date header");
    const groups = await fetch(`${simulator().url}/api/v1/consumer-groups`);
    assert.equal(groups.status, 401, 'a group route still needs a token');
    assert.deepEqual(await groups.json(), unauthorized);
  });

  it('answers 503 unhealthy, database disconnected, once the database is switched off', async () => {
    simulator().configure({ database: 'disconnected' });
    try {
      const answer = await health();
      assert.equal(answer.status, 503);
      assert.deepEqual(shape(answer.body), shape(unhealthy));
      assert.equal(answer.body.status, 'unhealthy');
      assert.equal(answer.body.database, 'disconnected');
    } finally {
      simulator().configure({ database: 'connected' });
    }
    assert.equal((await health()).status, 200, 'and healthy again when it is back');
  });

  it('switches through the control interface, and refuses a state it does not know', async () => {
    const control = new SimulatorControl(simulator().url);
    await control.configure({ database: 'disconnected' });
    assert.equal((await health()).status, 503);
    await control.configure({ database: 'connected' });
    assert.equal((await health()).status, 200);
    await assert.rejects(
      control.configure({ database: 'gone' as never }),
      (error: unknown) => error instanceof SimulatorControlError && error.status === 400,
    );
    assert.equal((await health()).status, 200, 'a refused config changes nothing');
  });

  it('meets injected faults like every broker route', async () => {
    simulator().inject({ kind: 'status', status: 502, times: 1 });
    assert.equal((await fetch(`${simulator().url}/health`)).status, 502);
    assert.equal((await health()).status, 200);
  });
});
