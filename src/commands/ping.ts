/**
 * `queenctl ping`: is the broker up, is its database, which version is it, how far is it, and
 * how far off is its clock (docs/cli-contract.md#ping). One `GET /health`, which needs no token;
 * with a token in force, one read a read-only token may make proves it.
 */
import { Command } from 'commander';
import type { BrokerClient } from '../broker/client.js';
import { FAILURE_HINTS } from '../broker/contract.js';
import { type ClockSkew, clockSkew, isHealthy, TOKEN_PROBE_GROUP, type Health } from '../broker/health.js';
import { AuthError, BrokerError, ExitCode, UsageError, signalExitCode } from '../exit.js';
import { write } from '../io.js';
import { formatClockSkew, knownClockSkew } from '../output/clock-skew.js';
import { formatDuration } from '../output/duration.js';
import { isMachineFormat, type OutputFormat } from '../output/format.js';
import { recordSink } from '../output/records.js';
import type { ColumnLike } from '../output/fit.js';
import { tableFor } from '../output/table.js';
import { warningMessage } from '../output/words.js';
import type { GlobalContext } from './globals.js';
import type { Runtime } from './runtime.js';

/** `--timeout` of ping when not given: an answer slower than this is no answer for a runbook. */
export const PING_TIMEOUT_MS = 5_000;

/** A skew known to be at least this is said on stderr: local times are then not to be trusted. */
const SKEW_WARNING_MS = 60_000;

export function pingCommand(globals: GlobalContext): Command {
  return new Command('ping')
    .description("ask the broker's GET /health: status, database, version, latency and clock skew")
    .addHelpText(
      'after',
      `
GET /health needs no token. When a token is in force (--token, --token-file, QUEEN_TOKEN or the
context), ping also proves it with the lightest read a read-only token may make (a consumer-group
route), and exits 3 when the broker refuses it. --timeout is 5s unless given.

The clock skew is the broker's clock minus this machine's, from the answer's Date header. The
header has whole seconds and may lag by one more, so one answer puts the skew in a range about
2s wide: the table says "in sync (within 2s)" when it holds 0, else "ahead by 3s..6s" or
"behind by ..."; -o json gives clockSkewMs, its middle, and clockSkewErrorMs: the skew lies
within clockSkewMs +/- clockSkewErrorMs. Lease deadlines run on the broker's clock: a skew of
minutes means local times say nothing about when a lease expires.

Exit codes:
  0  the broker is healthy (and accepted the token, when one is in force)
  1  usage or configuration error; nothing was sent
  2  unhealthy (its database is disconnected), unreachable, or no answer within --timeout
  3  the broker refused the token (401, 403)

Examples:
  queenctl ping
  queenctl --context prod ping -o json
  queenctl ping -q || { echo "broker down: stop the runbook"; exit 1; }
  queenctl ping -o jsonpath='{.clockSkewMs} {.clockSkewErrorMs}'`,
    )
    .action(async (_options: unknown, command: Command) => {
      const timeoutGiven = command.getOptionValueSourceWithGlobals('timeout') !== 'default';
      await globals.run(
        command,
        (runtime, settings) =>
          runPing(
            {
              timeoutMs: timeoutGiven ? settings.timeoutMs : PING_TIMEOUT_MS,
              tokenInForce: settings.tokenInForce,
              format: settings.format,
              noHeaders: settings.noHeaders,
            },
            runtime,
          ),
        { requests: 'few' },
      );
    });
}

export interface PingOptions {
  timeoutMs: number;
  /** A token is sent with every request: prove it. */
  tokenInForce: boolean;
  /** null: print no results (-q without -o). */
  format: OutputFormat | null;
  noHeaders: boolean;
}

export type PingClient = Pick<BrokerClient, 'health' | 'consumerGroup' | 'server'>;

/** What the token check found: not checked when the broker is unhealthy (exit 2 says enough). */
export type TokenCheck = 'accepted' | 'refused' | 'not-checked' | null;

/** `ping -o json`. */
export interface PingRecord {
  status: string;
  database: string | null;
  version: string | null;
  latencyMs: number;
  /** The broker's clock minus this machine's, the middle of what the Date header allows; null without one. */
  clockSkewMs: number | null;
  /** The skew lies within clockSkewMs ± clockSkewErrorMs (at least 1000); null without a Date header. */
  clockSkewErrorMs: number | null;
  /** The replica that answered. */
  server: string;
  /** null when no token is in force. */
  token: TokenCheck;
}

/** The one health question, timed; a signal ends it with its own status. */
export async function askHealth(
  runtime: Runtime<Pick<BrokerClient, 'health'>>,
  timeoutMs: number,
): Promise<{ health: Health; latencyMs: number; clockSkew: ClockSkew | null }> {
  const { client, clock, signal } = runtime;
  const sentAt = clock.now();
  const health = await client.health({ signal, timeoutMs });
  const receivedAt = clock.now();
  return {
    health,
    latencyMs: Math.max(0, Math.round(receivedAt - sentAt)),
    clockSkew: clockSkew(health, sentAt, receivedAt),
  };
}

async function checkToken(runtime: Runtime<PingClient>, timeoutMs: number): Promise<AuthError | null> {
  try {
    await runtime.client.consumerGroup(TOKEN_PROBE_GROUP, { signal: runtime.signal, timeoutMs });
    return null;
  } catch (error) {
    if (error instanceof AuthError) return error;
    throw error;
  }
}

export async function runPing(options: PingOptions, runtime: Runtime<PingClient>): Promise<ExitCode> {
  const { io, client, signal } = runtime;
  const { format } = options;
  if (format === 'name') {
    throw new UsageError(
      '-o name prints lease ids, and ping prints the health of the broker',
      'use -o json or -o table',
    );
  }
  let asked: Awaited<ReturnType<typeof askHealth>>;
  let refused: AuthError | null = null;
  try {
    asked = await askHealth(runtime, options.timeoutMs);
    if (options.tokenInForce && isHealthy(asked.health)) refused = await checkToken(runtime, options.timeoutMs);
  } catch (error) {
    if (signal.aborted) return signalExitCode(signal.reason);
    throw error;
  }
  const { health } = asked;
  const healthy = isHealthy(health);
  const token: TokenCheck = !options.tokenInForce ? null : !healthy ? 'not-checked' : refused ? 'refused' : 'accepted';
  const record: PingRecord = {
    status: health.status,
    database: health.database,
    version: health.version,
    latencyMs: asked.latencyMs,
    clockSkewMs: asked.clockSkew?.ms ?? null,
    clockSkewErrorMs: asked.clockSkew?.errorMs ?? null,
    server: client.server,
    token,
  };
  if (isMachineFormat(format)) {
    const sink = await recordSink<PingRecord>(io.stdout, format, true);
    await sink.add(record);
  } else if (format) {
    const wide = format === 'wide';
    // On a narrow terminal (output/fit.ts) the status stays; the rest goes from the right.
    const headers: ColumnLike[] = [
      { header: 'STATUS', keep: 'always' },
      { header: 'DATABASE', keep: 5, shrink: 'cut' },
      { header: 'VERSION', keep: 3, shrink: 'cut' },
      { header: 'LATENCY', keep: 4 },
      { header: 'CLOCK SKEW', keep: 2 },
    ];
    const row = [
      record.status,
      record.database ?? '-',
      record.version ?? '-',
      formatDuration(record.latencyMs),
      formatClockSkew(asked.clockSkew),
    ];
    if (token !== null) {
      headers.push('TOKEN');
      row.push(token);
    }
    if (wide) {
      headers.push('SERVER');
      row.push(record.server);
    }
    const table = await tableFor(
      { headers, rows: [row], noHeaders: options.noHeaders },
      { width: io.width, stderrWidth: io.stderrWidth, wide, quiet: io.quiet },
    );
    await write(io.stdout, table.text);
    if (table.note) await write(io.stderr, table.note);
  }
  const skew = knownClockSkew(asked.clockSkew);
  if (skew !== null && skew.leastMs >= SKEW_WARNING_MS && !io.quiet) {
    const direction = skew.ahead ? 'ahead of' : 'behind';
    await write(
      io.stderr,
      warningMessage(
        `the broker's clock is ${skew.range} ${direction} this machine's: lease deadlines run ` +
          "on the broker's clock, so do not judge them by local time (queenctl measures them on the broker's)",
      ),
    );
  }
  if (!healthy) {
    const database = health.database === null ? '' : `, database ${health.database}`;
    throw new BrokerError(
      `the broker at ${record.server} is ${health.status} (HTTP ${health.httpStatus}${database})`,
      false,
      FAILURE_HINTS.database,
      health.httpStatus,
    );
  }
  if (refused) {
    throw new AuthError(
      `the broker is healthy, but it refused the token: ${refused.message}`,
      refused.status,
      refused.hint,
    );
  }
  return ExitCode.Ok;
}
