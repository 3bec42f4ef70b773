/**
 * `queenctl completion bash|zsh|fish`: shell completion generated from the commander tree at the
 * moment it is asked for, so a command, verb or flag added anywhere is completed without
 * anyone touching this file. The generator (completion-scripts.ts) is imported only when a
 * script is asked for; this module is the wiring cli.ts loads on every run.
 */
import { Argument, Command } from 'commander';
import { configPathFor, readConfigFile } from '../config/file.js';
import { ExitCode } from '../exit.js';
import { write } from '../io.js';
import type { GlobalContext } from './globals.js';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

export function completionCommand(globals: GlobalContext): Command {
  return new Command('completion')
    .description('print a shell completion script for bash, zsh or fish')
    .addArgument(new Argument('<shell>', 'the shell to complete in').choices(SHELLS))
    .addHelpText(
      'after',
      `
The script is generated from queenctl's own commands and flags, so it always matches this
version; regenerate it after an upgrade. Context names (--context, use-context, ...) are read
from the config file while you type.

Examples:
  source <(queenctl completion bash)                          # this bash session
  queenctl completion bash > ~/.local/share/bash-completion/completions/queenctl
  queenctl completion zsh > "\${fpath[1]}/_queenctl"           # zsh, with compinit
  queenctl completion fish > ~/.config/fish/completions/queenctl.fish`,
    )
    .action(async (shell: Shell, _options: unknown, command: Command) => {
      let program = command;
      while (program.parent) program = program.parent;
      const { completionScript } = await import('./completion-scripts.js');
      await globals.runLocal(command, async ({ io }) => {
        await write(io.stdout, completionScript(shell, program));
        return ExitCode.Ok;
      });
    });
}

/** `queenctl __complete contexts`: what the scripts call for context names; never fails loudly. */
export function completeCommand(globals: GlobalContext): Command {
  return new Command('__complete')
    .description('names for shell completion (used by the completion scripts)')
    .addArgument(new Argument('<what>').choices(['contexts']))
    .action(async (_what: string, _options: unknown, command: Command) => {
      await globals.runLocal(command, async ({ io, env, flags }) => {
        try {
          const config = await readConfigFile(configPathFor(flags.config, env));
          await write(io.stdout, config.contexts.map((entry) => `${entry.name}\n`).join(''));
        } catch {
          // A malformed file completes nothing; the command itself will say what is wrong.
        }
        return ExitCode.Ok;
      });
    });
}
