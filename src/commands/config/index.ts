/**
 * The `config` group: only wiring. Each verb's module (and the YAML parser) is imported when
 * that verb runs. The file and its precedence are the Go queenctl's (docs/cli-contract.md#config-file).
 */
import { Command, Option } from 'commander';
import type { GlobalContext } from '../globals.js';

const FILE_HELP = `
The file is ~/.queen/config.yaml (or --config, or QUEEN_CONFIG), the same file the Go queenctl
reads. Which context is in force, lowest to highest: its current-context, QUEEN_CONTEXT,
--context; QUEEN_SERVER/QUEEN_TOKEN and --server/--token then override the context's broker
and token (overriding only the server keeps the context's token).`;

export function configCommand(globals: GlobalContext): Command {
  const config = new Command('config')
    .description('show and edit contexts: which broker to use and where its token is kept')
    .addHelpText(
      'after',
      `${FILE_HELP}

Examples:
  queenctl config set-context prod --server https://queen.prod.internal:6632 --token-ref keychain://prod
  queenctl config use-context prod
  queenctl config get-contexts
  queenctl --context staging lease extend "$LEASE"`,
    );

  config
    .command('view')
    .description('print the config file, tokens redacted (a literal: token-ref too)')
    .addHelpText(
      'after',
      `
On a terminal it prints the file as written, comments included; in a pipe, or with -o json,
JSON with current-context and contexts always present. A missing file is an empty config.

Examples:
  queenctl config view
  queenctl config view -o json | jq -r '.contexts[].name'`,
    )
    .action(async (_options: unknown, command: Command) => {
      const { runView } = await import('./view.js');
      await globals.runLocal(command, (runtime) => runView(runtime));
    });

  config
    .command('get-contexts')
    .description('list the contexts, marking the one in force with *')
    .addHelpText(
      'after',
      `
The mark follows the precedence: --context, else QUEEN_CONTEXT, else the file's current-context.
-o wide adds insecure and cacert; -o json prints an array of objects.

Examples:
  queenctl config get-contexts
  queenctl config get-contexts -o json | jq -r '.[] | select(.current) | .server'`,
    )
    .action(async (_options: unknown, command: Command) => {
      const { runGetContexts } = await import('./get-contexts.js');
      await globals.runLocal(command, (runtime) => runGetContexts(runtime));
    });

  config
    .command('current-context')
    .description('print the name of the context in force')
    .addHelpText(
      'after',
      `
The name alone, for scripts; -o json adds where it came from (flag, env or file).
Exits 1 when no context is chosen.

Examples:
  queenctl config current-context
  QUEEN_CONTEXT=staging queenctl config current-context -o json`,
    )
    .action(async (_options: unknown, command: Command) => {
      const { runCurrentContext } = await import('./current-context.js');
      await globals.runLocal(command, (runtime) => runCurrentContext(runtime));
    });

  config
    .command('use-context')
    .description("make a context the file's current-context")
    .argument('<name>', 'a context of the config file')
    .addHelpText(
      'after',
      `
QUEEN_CONTEXT and --context still take precedence over the file where they are set.

Examples:
  queenctl config use-context prod
  queenctl config use-context local && queenctl lease inspect "$LEASE"`,
    )
    .action(async (name: string, _options: unknown, command: Command) => {
      const { runUseContext } = await import('./use-context.js');
      await globals.runLocal(command, (runtime) => runUseContext({ name }, runtime));
    });

  config
    .command('set-context')
    .description('create a context, or change some of its fields')
    .argument('<name>', 'the context to create or change')
    .option('--token-ref <ref>', 'where the token is: env, file:///abs/path, keychain://<name>, or literal:<token>')
    .addOption(new Option('--no-insecure', 'verify TLS certificates again (removes insecure: true)'))
    .addHelpText(
      'after',
      `
Fields: --server <url>[,<url>...] (replicas of one broker, tried in turn), --token-ref <ref>,
--insecure / --no-insecure, --cacert <file> (stored as an absolute path). Only the fields given
change; other fields, other contexts, unknown keys and comments stay as they are. An empty
value removes the field: --server "". The file is written atomically with mode 0600.

token-ref: env reads QUEEN_TOKEN; file:///abs/path reads the file (a trailing newline is
dropped); keychain://<name> reads the platform's keychain (service queenctl, account <name>;
keychain://<service>/<account> names both); literal:<token> keeps the token in this file.

Examples:
  queenctl config set-context prod --server https://queen-a:6632,https://queen-b:6632 --token-ref keychain://prod
  queenctl config set-context local --server http://localhost:6632
  queenctl config set-context staging --token-ref file:///etc/queen/staging.token --cacert ./ca.pem
  queenctl config set-context staging --no-insecure`,
    )
    .action(async (name: string, options: { tokenRef?: string }, command: Command) => {
      const { runSetContext } = await import('./set-context.js');
      // `--no-insecure` only counts when typed: commander defaults a lone negation to true, and
      // that default hides the global --insecure from optsWithGlobals, so ask the program.
      const secure = command.getOptionValueSource('insecure') === 'cli';
      let program = command;
      while (program.parent) program = program.parent;
      const insecure = program.getOptionValueSource('insecure') === 'cli';
      await globals.runLocal(command, (runtime) =>
        runSetContext({ name, tokenRef: options.tokenRef, insecure, secure }, runtime),
      );
    });

  config
    .command('delete-context')
    .description('remove a context from the config file')
    .argument('<name>', 'a context of the config file')
    .addHelpText(
      'after',
      `
Deleting the current context unsets current-context too, and says so: lease commands then stop
with an error until you choose another with use-context (or give --context or --server), rather
than quietly use another broker.

Examples:
  queenctl config delete-context old-staging
  queenctl config delete-context local && queenctl config get-contexts`,
    )
    .action(async (name: string, _options: unknown, command: Command) => {
      const { runDeleteContext } = await import('./delete-context.js');
      await globals.runLocal(command, (runtime) => runDeleteContext({ name }, runtime));
    });

  return config;
}
