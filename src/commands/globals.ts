/**
 * Global options, read once: where to connect, how to print, how long to wait. This is the
 * one place that turns flags and the environment into the Runtime a verb runs with.
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import { parseCount, parseDuration } from '../args.js';
import { BrokerClient } from '../broker/client.js';
import { DEFAULT_RETRY, type RetryPolicy } from '../broker/retry.js';
import type { Transport } from '../broker/transport.js';
import { systemClock, type Clock } from '../clock.js';
import { memoNotes } from '../config/memo.js';
import { proxySettings, type ProxySettings } from '../config/proxy.js';
import { resolveConnection, type ServerSource } from '../config/resolve.js';
import { CONCURRENCY_CEILING } from '../renewal/concurrency.js';
import { UsageError, type ExitCode } from '../exit.js';
import { write, type IO, type OutputStream } from '../io.js';
import { resolveFormat, type OutputFormat } from '../output/format.js';
import { escapeText } from '../output/sanitise.js';
import { terminalWidth } from '../output/width.js';
import { warningMessage } from '../output/words.js';
import { refuseUnsupervisable, type SupervisingVerb } from '../watch/supervisor.js';
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
    .option(
      '--server <url>',
      'broker URL, or replicas separated by commas, tried in turn ' +
        '(env QUEEN_SERVER; default from the context, else http://localhost:6632)',
    )
    .option('--token <jwt>', 'bearer token (env QUEEN_TOKEN); prefer --token-file, a flag shows in ps')
    .option('--token-file <path>', 'read the bearer token from a file (a trailing newline is ignored)')
    .option('--context <name>', 'context of the config file to use (env QUEEN_CONTEXT)')
    .option(
      '--config <path>',
      'config file (env QUEEN_CONFIG; default ~/.queen/config.yaml, the only one that may be missing)',
    )
    .addOption(
      new Option(
        '-o, --output <format>',
        'table|wide|json|ndjson|yaml|name|jsonpath=<expr> (default: table on a terminal, else json; ' +
          "name: lease ids alone; jsonpath: .key, or kubectl's '{.key}' template, applied to the json)",
      ),
    )
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
    .option('--cacert <file>', 'trust only this CA certificate (PEM) for https, instead of the system CAs');
}

export interface Settings {
  format: OutputFormat | null;
  noHeaders: boolean;
  concurrency: number;
  /** --concurrency was given: watch adapts up to it, else up to its own ceiling. */
  concurrencyGiven: boolean;
  retry: RetryPolicy;
  /** --timeout: the deadline of one request. */
  timeoutMs: number;
  /** -o was given: the format was asked for, not only inferred from where stdout goes. */
  outputGiven: boolean;
  /** The token came from --token, which every user sees in ps for as long as queenctl runs. */
  tokenOnCommandLine: boolean;
  /** A token is sent with every request (flag, env or context). */
  tokenInForce: boolean;
  /** The context in force, undefined without one, and the broker it resolved to (replicas comma-joined). */
  contextName: string | undefined;
  server: string;
  /** Where `server` came from, and the context's own server (version says both when they differ). */
  serverFrom: ServerSource;
  contextServer: string | undefined;
}

/** What a verb may choose of its Runtime. */
export interface RunOptions {
  /**
   * How many requests the run sends, which chooses the transport (docs/architecture.md): `few`
   * (a number the command line fixes: ids given as arguments, one listing, a ping) goes over
   * node:net (node:http for https), which Node has ready, at ~+10 ms of start-up; `many` (ids
   * from standard input, a watch, a listing that asks each lease's expiry) over undici, ~+40 ms
   * to load but cheaper by the request. A broker reached through a proxy is always undici's: the
   * others have no proxy support; a run whose brokers are all exempt from the proxy (localhost,
   * loopback, NO_PROXY) keeps node:net.
   */
  requests: 'few' | 'many';
  /** The system clock unless given; `watch` measures on monotonic time (clock.ts). */
  clock?: Clock;
  /** The verb runs what follows `--` as a supervised command: refused first where it cannot be. */
  supervises?: SupervisingVerb;
}

/** What a verb's action needs from the process; cli.ts provides it. */
export interface ProcessPorts {
  env: NodeJS.ProcessEnv;
  stdout: IO['stdout'];
  stderr: IO['stderr'];
  stdin: IO['stdin'];
  signal: AbortSignal;
  /** What followed the first `--` of the command line (watch's command), null without one. */
  argvAfterDashDash: readonly string[] | null;
  /**
   * While a listener is registered, SIGINT, SIGTERM and SIGHUP go to it and do nothing else:
   * a watched command is running and queenctl must wait for it. Returns the release.
   */
  relaySignals(listener: (signal: NodeJS.Signals) => void): () => void;
  /** An ExitCode, or a watched command's own status. */
  setExitCode(code: number): void;
  /** Whether stdout could not be written, so far (IO.stdoutFailed). */
  stdoutFailed(): boolean;
  /** Every verb's clock, whatever the verb would choose (tests run in-process on a fake one). */
  clock?: Clock;
  /** process.platform, or a test's: what differs on Windows (watch/supervisor.ts, config/). */
  platform: NodeJS.Platform;
}

/** The process bits only `watch` needs, beside the Runtime every verb gets. */
export type VerbProcess = Pick<ProcessPorts, 'env' | 'argvAfterDashDash' | 'relaySignals'>;

/** What a verb that never talks to the broker gets (config, completion). */
export interface LocalRuntime {
  io: IO;
  env: NodeJS.ProcessEnv;
  flags: GlobalFlags;
  /** null: print no results (-q without -o). */
  format: OutputFormat | null;
  noHeaders: boolean;
}

export interface GlobalContext {
  run(
    command: Command,
    verb: (runtime: Runtime<BrokerClient>, settings: Settings, process: VerbProcess) => Promise<number>,
    options: RunOptions,
  ): Promise<void>;
  runLocal(command: Command, verb: (runtime: LocalRuntime) => Promise<ExitCode>): Promise<void>;
}

/**
 * The token never reaches a stream: a broker or proxy that echoes request headers in an error
 * body, quoted in a message, would otherwise print it. Only `write` changes; the stream is
 * otherwise itself (spinners need its TTY methods).
 */
export function redactingStream<T extends OutputStream>(stream: T, secret: string): T {
  const scrub = (chunk: unknown): unknown => {
    if (typeof chunk === 'string') return chunk.replaceAll(secret, '[redacted]');
    if (chunk instanceof Uint8Array) {
      const text = Buffer.from(chunk).toString('utf8');
      return text.includes(secret) ? text.replaceAll(secret, '[redacted]') : chunk;
    }
    return chunk;
  };
  return new Proxy(stream, {
    get(target, property) {
      if (property === 'write') {
        return (chunk: unknown, ...rest: unknown[]) =>
          (target.write as (...args: unknown[]) => boolean).call(target, scrub(chunk), ...rest);
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * The config file's warning (others may read its literal token, or change it: config/file.ts),
 * said once by the verb that read it, even with -q: credentials are at stake. Lease verbs say it
 * with the connection's warnings (config/resolve.ts).
 */
export async function warnOfConfig(io: Pick<IO, 'stderr'>, config: { warning?: string | undefined }): Promise<void> {
  if (config.warning) await write(io.stderr, warningMessage(config.warning));
}

/** Shorter tokens are not real bearer tokens; scrubbing them would mangle ordinary output. */
const MIN_REDACTED_LENGTH = 4;

export function decideColor(flag: boolean | undefined, env: NodeJS.ProcessEnv, isTTY: boolean): boolean {
  if (flag !== undefined) return flag;
  if (env.NO_COLOR) return false;
  if (env.FORCE_COLOR !== undefined) return env.FORCE_COLOR !== '0' && env.FORCE_COLOR !== 'false';
  return isTTY && env.TERM !== 'dumb';
}

export function globalContext(ports: ProcessPorts, version: string): GlobalContext {
  return {
    async run(command, verb, options) {
      // Before the config is read or a secret tool run: nothing of the run happens.
      if (options.supervises && ports.argvAfterDashDash !== null)
        refuseUnsupervisable(options.supervises, ports.platform);
      const flags = command.optsWithGlobals<GlobalFlags>();
      const stdoutIsTTY = Boolean(ports.stdout.isTTY);
      const resolved = await resolveFormat(flags.output, stdoutIsTTY);
      const connection = await resolveConnection(flags, ports.env, { platform: ports.platform });
      const secret =
        connection.token !== undefined && connection.token.length >= MIN_REDACTED_LENGTH ? connection.token : undefined;
      const stdout = secret ? redactingStream(ports.stdout, secret) : ports.stdout;
      const stderr = secret ? redactingStream(ports.stderr, secret) : ports.stderr;
      const io: IO = {
        stdout,
        stderr,
        // Read on use: creating process.stdin costs ~7 ms that only `-` needs.
        get stdin() {
          return ports.stdin;
        },
        color: decideColor(flags.color, ports.env, stdoutIsTTY),
        quiet: Boolean(flags.quiet),
        verbose: Boolean(flags.verbose),
        width: terminalWidth(ports.stdout, ports.env),
        stderrWidth: terminalWidth(ports.stderr, ports.env),
        stdoutFailed: ports.stdoutFailed,
      };
      // Traces quote the broker's answers: escaped as every line for people (output/sanitise.ts).
      const trace = io.verbose ? (line: string) => void stderr.write(`queenctl: ${escapeText(line)}\n`) : undefined;
      // And why a config memo was not trusted, if one was not (src/config/memo.ts).
      for (const note of [...connection.notes, ...memoNotes()]) trace?.(note);
      // Said even with -q: the token or the broker's identity is at stake.
      for (const warning of connection.warnings) stderr.write(warningMessage(warning));
      const concurrencyGiven = command.getOptionValueSourceWithGlobals('concurrency') !== 'default';
      const proxy = await proxyInForce(proxySettings(ports.env), connection.servers, trace);
      const connections = concurrencyGiven ? flags.concurrency : CONCURRENCY_CEILING;
      const transport = await openTransport(options.requests, proxy, {
        // Watch may adapt up to the ceiling; the other verbs keep within --concurrency themselves.
        connections,
        insecure: connection.insecure,
        ca: connection.ca,
        trace,
      });
      const client = new BrokerClient({
        server: connection.server,
        token: connection.token,
        timeoutMs: flags.timeout,
        userAgent: `queenctl/${version}`,
        transport,
        trace,
      });
      try {
        const settings: Settings = {
          // -q silences results people would read; output asked for by -o still prints.
          format: flags.quiet && flags.output === undefined ? null : resolved,
          noHeaders: !flags.headers,
          concurrency: flags.concurrency,
          concurrencyGiven,
          // A Retry-After longer than one request may take is not waited for (broker/retry.ts).
          retry: { ...DEFAULT_RETRY, maxRetryAfterMs: flags.timeout },
          timeoutMs: flags.timeout,
          outputGiven: flags.output !== undefined,
          tokenOnCommandLine: flags.token !== undefined,
          tokenInForce: connection.token !== undefined,
          contextName: connection.contextName,
          server: connection.server,
          serverFrom: connection.serverFrom,
          contextServer: connection.contextServer,
        };
        const { env, argvAfterDashDash, relaySignals } = ports;
        const runtime: Runtime<BrokerClient> = {
          io,
          client,
          clock: ports.clock ?? options.clock ?? systemClock,
          signal: ports.signal,
        };
        ports.setExitCode(await verb(runtime, settings, { env, argvAfterDashDash, relaySignals }));
      } catch (error) {
        // cli.ts prints what escapes a verb on the raw stderr: scrub it here.
        if (secret && error instanceof Error) scrubError(error, secret);
        throw error;
      } finally {
        await client.close();
      }
    },
    async runLocal(command, verb) {
      const flags = command.optsWithGlobals<GlobalFlags>();
      const stdoutIsTTY = Boolean(ports.stdout.isTTY);
      const resolved = await resolveFormat(flags.output, stdoutIsTTY);
      const io: IO = {
        stdout: ports.stdout,
        stderr: ports.stderr,
        // Read on use: creating process.stdin costs ~7 ms that only `-` needs.
        get stdin() {
          return ports.stdin;
        },
        color: decideColor(flags.color, ports.env, stdoutIsTTY),
        quiet: Boolean(flags.quiet),
        verbose: Boolean(flags.verbose),
        width: terminalWidth(ports.stdout, ports.env),
        stderrWidth: terminalWidth(ports.stderr, ports.env),
      };
      const format = flags.quiet && flags.output === undefined ? null : resolved;
      ports.setExitCode(await verb({ io, env: ports.env, flags, format, noHeaders: !flags.headers }));
      // -v traces no requests here, but says why a config memo was not trusted (src/config/memo.ts).
      if (io.verbose) for (const note of memoNotes()) ports.stderr.write(`queenctl: ${escapeText(note)}\n`);
    },
  };
}

/**
 * The requests of a `few` run sent over node:net before the rest go over undici: a connection per
 * request (and a socket in TIME_WAIT each) costs more than loading undici once somewhere between
 * 32 requests (node:net 0.70x undici's time, loopback) and 128 (1.23x; 512: 1.37x).
 */
export const NET_REQUESTS = 64;

/**
 * The transport a run's requests go over, loaded only here, where a request will be sent: never
 * by `--version`, help, config or a usage error. node:net for a few requests, undici for many
 * or behind a proxy (RunOptions.requests); -v names the one chosen.
 */
async function openTransport(
  requests: RunOptions['requests'],
  proxy: ProxySettings | undefined,
  options: { connections: number; insecure: boolean | undefined; ca: string | undefined; trace: Trace },
): Promise<Transport> {
  const { connections, insecure, ca, trace } = options;
  const undici = async (why: string): Promise<Transport> => {
    trace?.(`transport: undici (${why})`);
    const { UndiciTransport } = await import('../broker/undici-transport.js');
    return new UndiciTransport({ connections, insecure, ca, proxy, trace });
  };
  if (requests === 'few' && proxy === undefined) {
    // HTTP/1.1 over node:net for http, node:http for https (net-transport.ts, issue 41); a
    // connection per request, so a command line of many ids goes on over undici's pool.
    trace?.(`transport: node:net (a few requests; node:http for https; undici after ${NET_REQUESTS})`);
    const { NetTransport } = await import('../broker/net-transport.js');
    const overflow = { after: NET_REQUESTS, open: () => undici(`more than ${NET_REQUESTS} requests`) };
    return new NetTransport({ connections, insecure, ca, overflow });
  }
  return undici(proxy === undefined ? 'many requests' : 'a proxy is in force');
}

type Trace = ((line: string) => void) | undefined;

/**
 * The proxy settings, when a broker of this run goes through a proxy by Go's rules
 * (config/proxy-route.ts); undefined when every one is exempt (localhost, loopback, NO_PROXY),
 * so such a run keeps node:http and never loads undici for a proxy it does not use.
 */
async function proxyInForce(
  proxy: ProxySettings | undefined,
  servers: readonly string[],
  trace: Trace,
): Promise<ProxySettings | undefined> {
  if (proxy === undefined) return undefined;
  const { proxyFor } = await import('../config/proxy-route.js');
  if (servers.some((server) => proxyFor(proxy, server) !== undefined)) return proxy;
  trace?.('proxy: none for this broker (localhost, loopback or NO_PROXY): connecting directly');
  return undefined;
}

function scrubError(error: Error, secret: string): void {
  error.message = error.message.replaceAll(secret, '[redacted]');
  const withHint = error as Error & { hint?: string };
  if (typeof withHint.hint === 'string')
    Object.defineProperty(error, 'hint', { value: withHint.hint.replaceAll(secret, '[redacted]') });
}
