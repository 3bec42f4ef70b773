/**
 * `queenctl version [--short]`, as the Go queenctl's (docs/cli-contract.md#version): the first
 * line names this build, and without `--short` the broker of the context in force says which
 * version it runs (`GET /health`). `--short` never contacts the broker, and loads no HTTP client.
 */
import { Command } from 'commander';
import type { BrokerClient } from '../broker/client.js';
import type { BuildInfo } from '../build-info.js';
import { BrokerError, ExitCode, UsageError, signalExitCode } from '../exit.js';
import { write } from '../io.js';
import { isMachineFormat, type OutputFormat } from '../output/format.js';
import { recordSink } from '../output/records.js';
import { escapeText } from '../output/sanitise.js';
import { errorMessage } from '../output/words.js';
import type { GlobalContext } from './globals.js';
import { askHealth, PING_TIMEOUT_MS } from './ping.js';
import type { ServerSource } from '../config/resolve.js';
import type { Runtime } from './runtime.js';

/** What the process tells about itself: the action reads it, the run function takes it. */
export interface Build {
  version: string;
  info: BuildInfo;
  /** `process.version`: the Node.js running queenctl (in the standalone build, the one it carries). */
  node: string;
}

export function versionCommand(globals: GlobalContext, build: Build): Command {
  return new Command('version')
    .description("print queenctl's version, commit, build date and Node.js, then the broker's version")
    .option('--short', 'print the first line only; never contacts the broker')
    .addHelpText(
      'after',
      `
The first line names this build: its version, the commit and build date when the build knows them
(- otherwise), the platform (the standalone build: the one it was built for; the npm package: the
one it runs on), and the Node.js it runs on (in the standalone build, the one built into it). Without
--short, version then asks the broker (GET /health, no token needed) and prints its version,
status and database, and the context's name with the server used: when --server or QUEEN_SERVER
overrides the context's, it says so. --timeout is 5s unless given. -o json prints the same as one
object.

Exit codes:
  0  printed (also when the broker answers that it is unhealthy)
  1  usage or configuration error; nothing was sent
  2  the broker could not be reached, after the first line

Examples:
  queenctl version --short
  queenctl version
  queenctl --context prod version -o json
  queenctl --version`,
    )
    .action(async (options: { short?: boolean }, command: Command) => {
      const local = build;
      if (options.short) {
        await globals.runLocal(command, async ({ io, format, flags }) =>
          runVersionShort({ build: local, format: textUnlessAsked(format, flags.output !== undefined) }, io),
        );
        return;
      }
      const timeoutGiven = command.getOptionValueSourceWithGlobals('timeout') !== 'default';
      await globals.run(
        command,
        (runtime, settings) =>
          runVersion(
            {
              build: local,
              format: textUnlessAsked(settings.format, settings.outputGiven),
              noHeaders: settings.noHeaders,
              timeoutMs: timeoutGiven ? settings.timeoutMs : PING_TIMEOUT_MS,
              context: {
                name: settings.contextName ?? null,
                server: settings.server,
                serverFrom: settings.serverFrom,
                contextServer: settings.contextServer ?? null,
              },
            },
            runtime,
          ),
        { requests: 'few' },
      );
    });
}

/**
 * Lines unless -o asks otherwise, in a pipe too: runbooks capture `$(queenctl version --short)`,
 * as kubectl's and the Go queenctl's version print text wherever stdout goes.
 */
function textUnlessAsked(format: OutputFormat | null, outputGiven: boolean): OutputFormat | null {
  return outputGiven || format === null ? format : 'table';
}

/**
 * The first line: `queenctl 0.1.0 (commit 2c3f314, built 2026-12-03T09:14:00Z, npm package on
 * linux-x64, node v20.20.2)`; the standalone build names the platform it was built for:
 * `linux-arm64 standalone build, bun 1.4.5 built in` (the runtime it carries: Bun, whose
 * process.version is the Node.js it is compatible with, not a Node.js it carries).
 */
export function versionLine(build: Build): string {
  const { commit, date, standalone, platform } = build.info;
  const bun = (process.versions as { bun?: string }).bun;
  const node = standalone
    ? `${platform} standalone build, ${bun ? `bun ${bun}` : `node ${build.node}`} built in`
    : `npm package on ${platform}, node ${build.node}`;
  return `queenctl ${build.version} (commit ${commit ?? '-'}, built ${date ?? '-'}, ${node})`;
}

/**
 * The context in force and the broker this run used: `server` is the one used (replicas
 * comma-joined), `serverFrom` the setting that named it (`--server` and `QUEEN_SERVER` override
 * the context's), `contextServer` the context's own (null without one).
 */
export interface VersionContext {
  name: string | null;
  server: string;
  serverFrom: ServerSource;
  contextServer: string | null;
}

/** `version -o json`: `queenctl` always; `broker` and `context` without --short. */
export interface VersionRecord {
  queenctl: {
    version: string;
    commit: string | null;
    buildDate: string | null;
    node: string;
    standalone: boolean;
    /** BuildInfo.platform: built for (standalone), runs on (npm package). */
    platform: string;
  };
  broker?: { version: string | null; status: string; database: string | null; server: string } | null;
  context?: VersionContext;
  /** Why `broker` is null: it could not be reached. */
  error?: string;
}

function queenctlRecord(build: Build): VersionRecord['queenctl'] {
  const { commit, date, standalone, platform } = build.info;
  return { version: build.version, commit, buildDate: date, node: build.node, standalone, platform };
}

async function printRecord(stdout: Runtime['io']['stdout'], format: OutputFormat, record: VersionRecord) {
  if (!isMachineFormat(format)) return;
  const sink = await recordSink<VersionRecord>(stdout, format, true);
  await sink.add(record);
}

function refuseName(format: OutputFormat | null): void {
  if (format === 'name') throw new UsageError('-o name prints lease ids, and version prints versions', 'use -o json');
}

export async function runVersionShort(
  options: { build: Build; format: OutputFormat | null },
  io: Pick<Runtime['io'], 'stdout'>,
): Promise<ExitCode> {
  const { format } = options;
  refuseName(format);
  if (format === null) return ExitCode.Ok;
  if (isMachineFormat(format)) await printRecord(io.stdout, format, { queenctl: queenctlRecord(options.build) });
  else await write(io.stdout, `${versionLine(options.build)}\n`);
  return ExitCode.Ok;
}

export interface VersionOptions {
  build: Build;
  format: OutputFormat | null;
  noHeaders: boolean;
  timeoutMs: number;
  /** The context in force (null without one) and the broker used. */
  context: VersionContext;
}

/**
 * `context: prod (http://broker:6632)`; when --server or QUEEN_SERVER overrode the server the
 * context names, the one used and why, and the context's own: a context line must never pass the
 * override off as what the context says.
 */
export function contextLine(context: VersionContext): string {
  const { name, server, serverFrom, contextServer } = context;
  const overridden = (serverFrom === '--server' || serverFrom === 'QUEEN_SERVER') && contextServer !== null;
  if (!overridden) return `context: ${name ?? '-'} (${server})`;
  return `context: ${name ?? '-'} (server ${server} from ${serverFrom}, not the context's ${contextServer})`;
}

export async function runVersion(
  options: VersionOptions,
  runtime: Runtime<Pick<BrokerClient, 'health' | 'server'>>,
): Promise<ExitCode> {
  const { io, signal } = runtime;
  const { format, build, context } = options;
  refuseName(format);
  const machine = isMachineFormat(format);
  // People see the first line before the broker is asked: it is known, whatever the broker does.
  if (format !== null && !machine) await write(io.stdout, `${versionLine(build)}\n`);
  let broker: VersionRecord['broker'];
  let failure: BrokerError | null = null;
  try {
    const { health } = await askHealth(runtime, options.timeoutMs);
    const { version, status, database } = health;
    broker = { version, status, database, server: runtime.client.server };
  } catch (error) {
    if (signal.aborted) return signalExitCode(signal.reason);
    if (!(error instanceof BrokerError)) throw error;
    failure = error;
    broker = null;
  }
  if (machine) {
    const record: VersionRecord = { queenctl: queenctlRecord(build), broker, context };
    if (failure) record.error = failure.message;
    await printRecord(io.stdout, format, record);
  } else if (format !== null && broker) {
    const database = broker.database === null ? '' : `, database ${broker.database}`;
    const lines = [
      `broker: ${broker.version ?? '-'} (${broker.status}${database}) at ${broker.server}`,
      contextLine(context),
    ];
    await write(io.stdout, `${lines.map(escapeText).join('\n')}\n`);
  }
  if (failure) {
    await write(io.stderr, errorMessage(failure));
    return ExitCode.Broker;
  }
  return ExitCode.Ok;
}
