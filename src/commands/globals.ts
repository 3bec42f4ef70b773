/**
 * Global options, read once: where to connect, how to print, how long to wait. This is the
 * one place that turns flags and the environment into the Runtime a verb runs with.
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import { parseCount, parseDuration } from '../args.js';
import { BrokerClient } from '../broker/client.js';
import { DEFAULT_RETRY, type RetryPolicy } from '../broker/retry.js';
import { systemClock } from '../clock.js';
import { resolveConnection } from '../config/resolve.js';
import { ExitCode, UsageError } from '../exit.js';
import type { IO } from '../io.js';
import { resolveFormat, type OutputFormat } from '../output/format.js';
import type { Runtime } from './runtime.js';

/** Turns a UsageError of a flag's parser into commander's own kind, so it reports the flag. */
export function flagParser<T>(parse: (text: string) => T): (text: string) => T {
  return (text) => {
    try {
      return parse(text);
    } catch (error) {
      if (error instanceof UsageError) throw new InvalidArgumentError(error.message);
      throw error;
    }
  };
}

export interface GlobalFlags {
  server?: string;
  token?: string;
  tokenFile?: string;
  context?: string;
  config?: string;
  output?: string;
  timeout: number;
  concurrency: number;
  quiet?: boolean;
  color?: boolean;
  headers: boolean;
  verbose?: boolean;
  insecure?: boolean;
  cacert?: string;
}

export function addGlobalOptions(program: Command): Command {
  return program
    .option('--server <url>', 'broker URL (env QUEEN_SERVER; default from the context, else http://localhost:6632)')
    .option('--token <jwt>', 'bearer token (env QUEEN_TOKEN); prefer --token-file, a flag shows in ps')
    .option('--token-file <path>', 'read the bearer token from a file (a trailing newline is ignored)')
    .option('--context <name>', 'context of the config file to use (env QUEEN_CONTEXT)')
    .option('--config <path>', 'config file (env QUEEN_CONFIG; default ~/.queen/config.yaml)')
    .addOption(new Option('-o, --output <format>', 'table|wide|json|ndjson|yaml (default: table on a terminal, else json)'))
    .addOption(
      new Option('--timeout <duration>', 'deadline of one HTTP request: 250ms, 10s, 1m')
        .default(10_000, '10s')
        .argParser(flagParser((text) => parseDuration(text, '--timeout'))),
    )
    .addOption(
      new Option('--concurrency <n>', 'requests in flight at once for many lease ids')
        .default(16)
        .argParser(flagParser((text) => parseCount(text, '--concurrency', 1, 256))),
    )
    .option('-q, --quiet', 'print nothing but errors (machine output asked for with -o still prints)')
    .option('--color', 'colour even when not on a terminal (env FORCE_COLOR)')
    .option('--no-color', 'no colour (env NO_COLOR)')
    .option('--no-headers', 'omit table headers')
    .option('-v, --verbose', 'trace requests on stderr (the token is never shown)')
    .option('--insecure', 'skip TLS certificate verification (https; not for production)')
    .option('--cacert <file>', 'trust this CA certificate (PEM) for https');
}

export interface Settings {
  format: OutputFormat | null;
  noHeaders: boolean;
  concurrency: number;
  retry: RetryPolicy;
}

/** What a verb's action needs from the process; cli.ts provides it. */
export interface ProcessPorts {
  env: NodeJS.ProcessEnv;
  stdout: IO['stdout'];
  stderr: IO['stderr'];
  stdin: IO['stdin'];
  signal: AbortSignal;
  setExitCode(code: ExitCode): void;
}

export interface GlobalContext {
  run(command: Command, verb: (runtime: Runtime, settings: Settings) => Promise<ExitCode>): Promise<void>;
}

export function decideColor(flag: boolean | undefined, env: NodeJS.ProcessEnv, isTTY: boolean): boolean {
  if (flag !== undefined) return flag;
  if (env.NO_COLOR) return false;
  if (env.FORCE_COLOR !== undefined) return env.FORCE_COLOR !== '0' && env.FORCE_COLOR !== 'false';
  return isTTY && env.TERM !== 'dumb';
}

export function globalContext(ports: ProcessPorts, version: string): GlobalContext {
  return {
    async run(command, verb) {
      const flags = command.optsWithGlobals<GlobalFlags>();
      const stdoutIsTTY = Boolean(ports.stdout.isTTY);
      const resolved = resolveFormat(flags.output, stdoutIsTTY);
      const connection = await resolveConnection(flags, ports.env);
      const io: IO = {
        stdout: ports.stdout,
        stderr: ports.stderr,
        stdin: ports.stdin,
        color: decideColor(flags.color, ports.env, stdoutIsTTY),
        quiet: Boolean(flags.quiet),
        verbose: Boolean(flags.verbose),
      };
      const client = new BrokerClient({
        server: connection.server,
        token: connection.token,
        timeoutMs: flags.timeout,
        userAgent: `queenctl/${version}`,
        connections: flags.concurrency,
        insecure: connection.insecure,
        ca: connection.ca,
        trace: io.verbose ? (line) => void ports.stderr.write(`queenctl: ${line}\n`) : undefined,
      });
      try {
        const settings: Settings = {
          // -q silences results people would read; output asked for by -o still prints.
          format: flags.quiet && flags.output === undefined ? null : resolved,
          noHeaders: !flags.headers,
          concurrency: flags.concurrency,
          retry: DEFAULT_RETRY,
        };
        ports.setExitCode(await verb({ io, client, clock: systemClock, signal: ports.signal }, settings));
      } finally {
        await client.close();
      }
    },
  };
}
