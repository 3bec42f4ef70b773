/**
 * The process boundary: argv, streams, signals and the exit code. Everything below takes
 * them as parameters (commands/globals.ts builds the Runtime).
 */
import { setMaxListeners } from 'node:events';
import { fstatSync, statSync, writeSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { completeCommand, completionCommand } from './commands/completion.js';
import { configCommand } from './commands/config/index.js';
import { leaseCommand } from './commands/lease/index.js';
import { globalContext, addGlobalOptions } from './commands/globals.js';
import { ExitCode, QueenctlError, UsageError, signalExitCode } from './exit.js';
import type { OutputStream } from './io.js';
import { errorMessage } from './output/words.js';
import { VERSION } from './version.js';

export async function main(argv: string[]): Promise<void> {
  const controller = new AbortController();
  // Every request in flight listens to this one signal; a bulk run has many by design.
  setMaxListeners(0, controller.signal);
  let signalled: NodeJS.Signals | null = null;
  // Set while `watch` runs a command: signals are the command's to act on, and queenctl waits
  // for it. No path below may exit then, or the command would run on unsupervised.
  let relay: ((signal: NodeJS.Signals) => void) | null = null;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (relay) return relay(signal);
    // A second signal means "now": the first one is still finishing in-flight requests.
    if (signalled) process.exit(signalExitCode(signal));
    signalled = signal;
    controller.abort(signal);
  };
  process.on('SIGINT', onSignal).on('SIGTERM', onSignal);
  // SIGHUP (the terminal or the ssh session went away) is caught only by the verbs that talk to
  // the broker: they take it as SIGINT (stop issuing, report, exit 129), and a watch passes it on
  // to its command. Everywhere else (config, completion) it ends queenctl at once, as by default.
  let catchingHangup = false;
  const catchHangup = (): void => {
    if (catchingHangup) return;
    catchingHangup = true;
    process.on('SIGHUP', onSignal);
  };
  const relaySignals = (listener: (signal: NodeJS.Signals) => void): (() => void) => {
    relay = listener;
    catchHangup();
    return () => {
      if (relay === listener) relay = null;
    };
  };
  // A reader that went away (`| head -1`) ends the run quietly, as SIGPIPE would; a watch with
  // a running command carries on without its event stream instead, and ends with its status.
  let readerGone = false;
  const onStdoutError = (error: NodeJS.ErrnoException): void => {
    if (error.code === 'EPIPE') {
      readerGone ||= relay !== null;
      if (!readerGone) process.exit(128 + 13);
      return;
    }
    throw error;
  };
  // Diagnostics that nobody can read any more must not change the outcome: unhandled, a closed
  // stderr would crash with status 1 ("nothing was sent") after a lease was renewed or lost.
  const streams = { stdout: false, stderr: false };
  const stdout = (): NodeJS.WriteStream => {
    if (!streams.stdout) process.stdout.on('error', onStdoutError);
    streams.stdout = true;
    return process.stdout;
  };
  const stderr = (): NodeJS.WriteStream => {
    if (!streams.stderr) process.stderr.on('error', () => {});
    streams.stderr = true;
    return process.stderr;
  };
  // What commander prints (the version, usage errors, help) goes straight to the descriptor while
  // no stream was made: making process.stdout or stderr loads node:net and the stream modules,
  // ~5 ms that `--version` or a usage error need not pay (issue 19).
  const writeOut = (text: string): void => writeDirect(1, text, streams.stdout, stdout, onStdoutError);
  const writeErr = (text: string): void => writeDirect(2, text, streams.stderr, stderr, () => {});

  // Output that is a pipe, a file or /dev/null is no terminal: it is written to directly too, as
  // the stream would (synchronously, there), and nothing loads node:tty and node:net to ask.
  const direct = {
    stdout: undefined as OutputStream | null | undefined,
    stderr: undefined as OutputStream | null | undefined,
  };
  const port = (name: 'stdout' | 'stderr'): OutputStream => {
    if (direct[name] === undefined) {
      const write = name === 'stdout' ? writeOut : writeErr;
      direct[name] = isPlainOutput(name === 'stdout' ? 1 : 2)
        ? {
            isTTY: false,
            write: (text: string) => {
              write(text);
              return true;
            },
          }
        : null;
    }
    return direct[name] ?? (name === 'stdout' ? stdout() : stderr());
  };

  const ports = {
    env: process.env,
    get stdout() {
      return port('stdout');
    },
    get stderr() {
      return port('stderr');
    },
    get stdin() {
      return process.stdin;
    },
    signal: controller.signal,
    argvAfterDashDash: argv.includes('--') ? argv.slice(argv.indexOf('--') + 1) : null,
    relaySignals,
    catchHangup,
    setExitCode: (code: number) => {
      process.exitCode = code;
    },
  };
  const program = addGlobalOptions(new Command('queenctl'))
    .description('Lease tooling for Queen MQ operators: renewals that never call a dead lease renewed')
    .version(VERSION, '--version', 'print the version')
    .showHelpAfterError('(add --help for usage)')
    .exitOverride()
    .configureOutput({
      writeErr,
      writeOut,
    });
  const globals = globalContext(ports, VERSION);
  program.addCommand(leaseCommand(globals));
  program.addCommand(configCommand(globals));
  program.addCommand(completionCommand(globals));
  program.addCommand(completeCommand(globals), { hidden: true });
  program.addHelpText(
    'after',
    `
Examples:
  queenctl lease extend "$LEASE" --seconds 120
  queenctl --context prod lease inspect "$LEASE" -o json
  queenctl config get-contexts
  source <(queenctl completion bash)`,
  );
  program
    .command('version')
    .description('print the version of queenctl and of Node.js')
    .addHelpText('after', '\nExamples:\n  queenctl version\n  queenctl --version')
    .action(() => {
      writeOut(`queenctl ${VERSION} (node ${process.version})\n`);
    });
  // Commander's own `help` looks one word deep: `help lease extend` would show the group's help.
  program
    .command('help')
    .description('show the help of a command: queenctl help lease extend')
    .argument('[command...]', 'a command, or a group and its verb')
    .addHelpText('after', '\nExamples:\n  queenctl help lease extend\n  queenctl help config')
    .action((path: string[]) => showHelpOf(program, path));
  // Subcommands built elsewhere do not inherit these settings; give them to every command.
  const everyCommand = (command: Command): Command[] => [command, ...command.commands.flatMap(everyCommand)];
  for (const command of everyCommand(program)) {
    command.exitOverride().configureHelp({ showGlobalOptions: true }).configureOutput({ writeErr, writeOut });
  }

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (error) {
    process.exitCode = exitCodeFor(error, writeErr);
  }
  if (signalled) process.exitCode = signalExitCode(signalled);
}

/**
 * `queenctl help lease extend` prints what `queenctl lease extend --help` prints (exit 0), as
 * `kubectl help` and `gh help` do. An unknown word is a usage error listing the known ones.
 */
function showHelpOf(program: Command, path: readonly string[]): void {
  let command = program;
  for (const [depth, name] of path.entries()) {
    const next = command.commands.find((child) => child.name() === name || child.aliases().includes(name));
    if (!next) {
      const where = ['queenctl', ...path.slice(0, depth)].join(' ');
      // Hidden ones (__complete) are found when named, never offered; a group's own `help` neither.
      const known = command
        .createHelp()
        .visibleCommands(command)
        .filter((child) => command.commands.includes(child))
        .map((child) => child.name());
      throw new UsageError(
        `unknown command ${JSON.stringify(name)} for "${where}"`,
        known.length > 0
          ? `the commands of ${where} are: ${known.join(', ')}`
          : `${where} has no subcommands; its help: ${['queenctl help', ...path.slice(0, depth)].join(' ')}`,
      );
    }
    command = next;
  }
  // Prints on stdout and ends the run with exit 0 (a CommanderError, through exitOverride).
  command.help();
}

function exitCodeFor(error: unknown, writeErr: (text: string) => void): ExitCode {
  if (error instanceof CommanderError) {
    // Commander has already printed its message (or the help); usage errors are 1.
    return error.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage;
  }
  if (error instanceof QueenctlError) {
    writeErr(errorMessage(error));
    return error.exitCode;
  }
  // A bug, not an outcome: say so plainly, and never exit 0. The stack only with QUEENCTL_DEBUG.
  const detail = process.env.QUEENCTL_DEBUG
    ? ((error as Error)?.stack ?? String(error))
    : String((error as Error)?.message ?? error);
  writeErr(
    `queenctl: internal error: ${detail}\n  please report it with the command you ran (QUEENCTL_DEBUG=1 shows where)\n`,
  );
  return ExitCode.Broker;
}

/**
 * Writes to descriptor `fd` at once, as process.stdout and stderr do on Linux (files, pipes and
 * terminals are synchronous there), without making the stream. Once the stream exists, or when
 * the descriptor would block (one left non-blocking by another process), the stream takes the
 * rest, so the order stays. A reader gone (EPIPE) is the stream's error.
 */
function writeDirect(
  fd: number,
  text: string,
  made: boolean,
  stream: () => NodeJS.WriteStream,
  onError: (error: NodeJS.ErrnoException) => void,
): void {
  if (made) {
    stream().write(text);
    return;
  }
  let rest = Buffer.from(text);
  try {
    while (rest.length > 0) rest = rest.subarray(writeSync(fd, rest));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EPIPE') return onError(error as NodeJS.ErrnoException);
    stream().write(rest);
  }
}

/** A pipe, a regular file or /dev/null: output that no terminal shows. */
function isPlainOutput(fd: number): boolean {
  try {
    const stat = fstatSync(fd);
    if (stat.isFIFO() || stat.isFile()) return true;
    return stat.isCharacterDevice() && stat.rdev === statSync('/dev/null').rdev;
  } catch {
    return false;
  }
}
