/**
 * `GET /health` as the real broker answers it (docs/broker.md#health): no token needed, even with
 * authentication on; 200 with `"status":"healthy"` while its database is connected, 503 with
 * `"status":"unhealthy"` and `"database":"disconnected"` once PostgreSQL is gone. The body has the
 * recorded answer's keys; the switch between the two is `database` in the simulator's config.
 */
import { fail } from './input.js';
import type { Reply } from './wire.js';

export type DatabaseState = 'connected' | 'disconnected';

/** The version the recorded broker reports. */
export const BROKER_VERSION = '1.0.0';

export function parseDatabaseState(value: unknown): DatabaseState {
  if (value !== 'connected' && value !== 'disconnected') fail('database must be "connected" or "disconnected"');
  return value;
}

export function healthReply(database: DatabaseState): Reply {
  const healthy = database === 'connected';
  // Key order and shape as recorded (the real broker sorts its keys).
  const body = {
    database,
    queen: { status: 'active', worker_id: 0 },
    server: 'C++ Queen Server (libqueen)',
    shared_state: {
      enabled: false,
      maintenance_mode: false,
      pop_maintenance_mode: false,
      queue_config_cache: { hit_rate: 0.0, hits: 0, misses: 0, size: 10 },
      running: false,
      server_health: {
        heartbeats_received: 0,
        restarts_detected: 0,
        servers_alive: 0,
        servers_dead: 0,
        servers_tracked: 0,
      },
      server_id: 'simulator:6632',
    },
    status: healthy ? 'healthy' : 'unhealthy',
    version: BROKER_VERSION,
    worker_id: 0,
  };
  return {
    status: healthy ? 200 : 503,
    ...(healthy ? {} : { statusMessage: 'Service Unavailable' }),
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  };
}
