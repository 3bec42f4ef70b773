/**
 * The command tree: queenctl with its global options, groups, verbs and help texts. `run()` of
 * cli.ts parses argv with it; the generators of the reference docs and man pages (src/docs/,
 * run by the build, never by a run of queenctl) read the same tree without running anything.
 */
import { Command, type OutputConfiguration } from 'commander';
import type { BuildInfo } from '../build-info.js';
import { UsageError } from '../exit.js';
import { errorMessage } from '../output/words.js';
import { completeCommand, completionCommand } from './completion.js';
import { configCommand } from './config/index.js';
import { addGlobalOptions, type GlobalContext } from './globals.js';
import { LEASE_VERBS, leaseCommand } from './lease/index.js';
import { pingCommand } from './ping.js';
import { versionCommand } from './version.js';

/** What `queenctl version` and `--version` say of this build. */
export interface ProgramBuild {
  version: string;
  info: BuildInfo;
  /** process.version of the Node.js that runs queenctl. */
  node: string;
}

/**
 * queenctl's commander program. `output` is where commander writes help and its errors (the
 * run's ports); every command gets it, exitOverride and the global options in its help.
 */
export function buildProgram(
  globals: GlobalContext,
  build: ProgramBuild,
  output?: OutputConfiguration,
  argv?: readonly string[],
): Command {
  const program = addGlobalOptions(new Command('queenctl'))
    .description('Lease tooling for Queen MQ operators: renewals that never call a dead lease renewed')
    .version(build.version, '--version', 'print the version')
    .exitOverride();
  const verb = namedLeaseVerb(argv);
  program.addCommand(leaseCommand(globals, verb));
  // A command line that starts with `lease <verb>` reaches that verb only: the rest of the tree,
  // ~2 ms to build, is left out (issue 41). Help, which lists commands, builds it all.
  if (verb !== undefined) return configureEvery(program, output);
  program.addCommand(configCommand(globals));
  program.addCommand(pingCommand(globals));
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
  program.addCommand(versionCommand(globals, { version: build.version, info: build.info, node: build.node }));
  // The global options, once: a verb's help keeps to its own flags and names this (kubectl options).
  program
    .command('options')
    .description('print the global options, which every command takes')
    .addHelpText('after', '\nExamples:\n  queenctl options\n  queenctl --context prod -o json lease inspect "$LEASE"')
    .action(() => {
      const text = globalOptionsText(program);
      const write = output?.writeOut ?? ((chunk: string) => process.stdout.write(chunk));
      write(text);
    });
  // Commander's own `help` looks one word deep: `help lease extend` would show the group's help.
  program
    .command('help')
    .description('show the help of a command: queenctl help lease extend')
    .argument('[command...]', 'a command, or a group and its verb')
    .addHelpText('after', '\nExamples:\n  queenctl help lease extend\n  queenctl help config')
    .action((path: string[]) => showHelpOf(program, path));
  return configureEvery(program, output);
}

/**
 * The verb of `lease <verb> ...`: the first two words, with no option before them (whose value
 * could be taken for a word), and no help asked for anywhere before `--`. undefined otherwise.
 */
function namedLeaseVerb(argv: readonly string[] | undefined): string | undefined {
  if (argv === undefined || argv[0] !== 'lease' || !Object.hasOwn(LEASE_VERBS, argv[1] ?? '')) return undefined;
  const words = argv.includes('--') ? argv.slice(0, argv.indexOf('--')) : argv;
  if (words.some((word) => word === '-h' || word === '--help' || word === 'help')) return undefined;
  return argv[1];
}

/** Subcommands built elsewhere do not inherit these settings; give them to every command. */
function configureEvery(program: Command, output: OutputConfiguration | undefined): Command {
  const everyCommand = (command: Command): Command[] => [command, ...command.commands.flatMap(everyCommand)];
  for (const command of everyCommand(program)) {
    // Descriptions wrap down to 20 columns: commander's 40 leaves them unwrapped, and far too
    // wide, on a terminal of 60 (issue 33). Off a terminal help is 80 wide, where nothing changes.
    command.exitOverride().configureHelp({ showGlobalOptions: false, minWidthToWrap: 20 });
    if (command !== program) {
      command.addHelpText('after', `\n${GLOBAL_OPTIONS_LINE}`);
    }
    // Commander's usage errors in queenctl's voice, with the line every error has on what to do
    // (its "(add --help for usage)" is that line's job now); still exit 1 (cli.ts).
    command.showHelpAfterError(false);
    if (output) {
      command.configureOutput({
        ...output,
        outputError: (text, write) => write(usageErrorText(text, commandPath(command))),
      });
    }
  }
  return program;
}

/** The last line of every command's help but queenctl's own, which lists them. */
export const GLOBAL_OPTIONS_LINE =
  'Global options (--server, --token, --context, -o, --timeout, ...): queenctl options';

/** `queenctl options`: queenctl's own flags, as its help lists them (wrapped alike), and nothing else. */
function globalOptionsText(program: Command): string {
  const help = program.helpInformation();
  const options = /^Options:\n((?: {2}.*\n| {2,}.*\n)*)/m.exec(help)?.[1] ?? '';
  return `The global options, which every command takes (before or after its name):\n\n${options}`;
}

/** `queenctl lease extend`: the words that run `command`. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let at: Command | null = command; at; at = at.parent) names.unshift(at.name());
  return names.join(' ');
}

/**
 * A usage error of commander's (`error: unknown option '--x'`, and its `(Did you mean …?)`) as
 * queenctl says every error: `queenctl: <what>`, then what to do.
 */
export function usageErrorText(text: string, path: string): string {
  let message = text.trim().replace(/^error: /, '');
  let suggestion = '';
  const didYouMean = /\n?\(Did you mean (.+)\?\)$/.exec(message);
  if (didYouMean) {
    message = message.slice(0, didYouMean.index).trimEnd();
    suggestion = `did you mean ${didYouMean[1]}? `;
  }
  return errorMessage(new UsageError(message, `${suggestion}see ${path} --help for its usage`));
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
