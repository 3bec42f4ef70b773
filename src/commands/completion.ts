/**
 * `queenctl completion bash|zsh|fish`: shell completion generated from the commander tree at the
 * moment it is asked for (in the npm package, when it is built), so a command, verb or flag
 * added anywhere is completed without anyone touching this file. The generator
 * (completion-scripts.ts) is imported only when a script is generated; this module is the wiring
 * cli.ts loads on every run.
 */
import { Argument, Command } from 'commander';
import { parseDuration } from '../args.js';
import { readConfigFor } from '../config/file.js';
import { heldLeases } from '../broker/consumer-groups.js';
import { ExitCode } from '../exit.js';
import { write } from '../io.js';
import { nameLines, refusedLeaseIdMessage } from '../output/names.js';
import { checkName, type NameKind } from '../names.js';
import { hasUnsafeText } from '../output/sanitise.js';
import type { GlobalContext } from './globals.js';
import { readHolders, type ListRuntime } from './lease/list.js';

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
from the config file while you type; lease ids (lease extend, inspect and watch) are the ones held
now, and consumer groups, queues and partitions (--group, --queue, --partition, acquire's queue)
the ones the broker knows, found as lease list finds them through the context's server and token
(and the --context, --server, --config and --token-file typed on the line), within a second, or
none. -o offers jsonpath= with the formats. After --, the command watch runs completes as any
command line: its name, then its own arguments.

Examples:
  source <(queenctl completion bash)                          # this bash session
  queenctl completion bash > ~/.local/share/bash-completion/completions/queenctl
  queenctl completion zsh > "\${fpath[1]}/_queenctl"           # zsh, with compinit
  queenctl completion fish > ~/.config/fish/completions/queenctl.fish`,
    )
    .action(async (shell: Shell, _options: unknown, command: Command) => {
      let program = command;
      while (program.parent) program = program.parent;
      const script =
        (await prebuiltScript(shell)) ?? (await import('./completion-scripts.js')).completionScript(shell, program);
      await globals.runLocal(command, async ({ io }) => {
        await write(io.stdout, script);
        return ExitCode.Ok;
      });
    });
}

/**
 * The npm package's scripts, made from this very build when it was built (scripts/bundle.mjs:
 * bin/queenctl.cjs loads no file of another build) and the text the generator would give, without
 * its ~4 ms at each run: `source <(queenctl completion bash)` runs with every shell. Where there
 * is none (tests run unbundled, the standalone executable), the scripts are generated.
 */
async function prebuiltScript(shell: Shell): Promise<string | undefined> {
  try {
    return ((await import(PREBUILT_COMPLETION)) as { scripts: Record<Shell, string> }).scripts[shell];
  } catch {
    return undefined;
  }
}

/** Beside the bundle; not a literal, so that the bundler leaves it to be required when run. */
const PREBUILT_COMPLETION: string = './queenctl-completion.cjs';

/**
 * `queenctl __complete contexts|leases|groups|queues|partitions`: what the scripts call for
 * context names, the lease ids held now, and the broker's consumer groups, queues and
 * partitions; never fails loudly (the scripts also send stderr away). What it prints is
 * data to the scripts, which add each line as one candidate and never let the shell expand it
 * (completion-scripts.ts); a lease id `-o name` would not print, a context name with a control
 * character, or a group, queue or partition name the verbs would refuse, is not offered at all
 * (docs/security.md#outside-text-is-data).
 */
export function completeCommand(globals: GlobalContext): Command {
  return new Command('__complete')
    .description('names for shell completion (used by the completion scripts)')
    .addArgument(new Argument('<what>').choices(['contexts', 'leases', 'groups', 'queues', 'partitions']))
    .action(async (what: string, _options: unknown, command: Command) => {
      if (what !== 'contexts') {
        try {
          await globals.run(
            command,
            (runtime, _settings, { env }) =>
              what === 'leases'
                ? completeLeaseIds(runtime, completionBudgetMs(env))
                : completeBrokerNames(what as BrokerNames, runtime, completionBudgetMs(env)),
            { requests: 'few' },
          );
        } catch {
          // No broker, a bad config, a refused token: nothing to offer, and nothing to say.
        }
        return;
      }
      await globals.runLocal(command, async ({ io, env, flags }) => {
        try {
          const config = await readConfigFor(flags.config, env);
          const names = config.contexts.map((entry) => entry.name).filter(isContextCandidate);
          await write(io.stdout, names.map((name) => `${name}\n`).join(''));
        } catch {
          // A malformed file completes nothing; the command itself will say what is wrong.
        }
        return ExitCode.Ok;
      });
    });
}

/**
 * What the listing may take, so that TAB answers within a second of the key press: the process
 * starting, the config and the HTTP client loading take the rest.
 */
export const COMPLETION_BUDGET_MS = 500;

/** A context name a script may offer: one line of text a terminal shows as it is. */
function isContextCandidate(name: string): boolean {
  return name.trim() !== '' && !hasUnsafeText(name);
}

/**
 * The budget, or QUEENCTL_COMPLETION_TIMEOUT (a duration) where a broker is far away or slow
 * (docs/config.md): TAB then waits longer for the ids. A value that is no duration is ignored,
 * as everything else of completion fails quietly.
 */
export function completionBudgetMs(env: NodeJS.ProcessEnv): number {
  const text = env.QUEENCTL_COMPLETION_TIMEOUT;
  if (!text) return COMPLETION_BUDGET_MS;
  try {
    return parseDuration(text, 'QUEENCTL_COMPLETION_TIMEOUT');
  } catch {
    return COMPLETION_BUDGET_MS;
  }
}

/**
 * What `read` gives within `budgetMs`, or undefined: the budget ends the wait even for a request
 * that does not hear the signal, and a signal of the run (SIGINT) ends it too. No retries: a
 * completion that waited for a second attempt would hang the shell.
 */
async function withinBudget<T>(
  runtime: ListRuntime,
  budgetMs: number,
  read: (runtime: ListRuntime) => Promise<T>,
): Promise<T | undefined> {
  const budget = new AbortController();
  const stop = (): void => budget.abort(runtime.signal.reason);
  runtime.signal.addEventListener('abort', stop, { once: true });
  const timer = setTimeout(() => budget.abort(new Error('completion budget spent')), budgetMs);
  try {
    const reading = read({ ...runtime, signal: budget.signal });
    const spent = new Promise<never>((_, reject) => {
      budget.signal.addEventListener('abort', () => reject(budget.signal.reason), { once: true });
    });
    reading.catch(() => {});
    const result = await Promise.race([reading, spent]);
    return budget.signal.aborted ? undefined : result;
  } catch {
    // Unreachable, too slow, refused: a completion offers nothing rather than an error.
    return undefined;
  } finally {
    clearTimeout(timer);
    runtime.signal.removeEventListener('abort', stop);
  }
}

const NO_RETRIES = { retries: 0, baseDelayMs: 0, maxDelayMs: 0 };
const EVERY_HOLDER = { groups: [], queues: [], partitions: [], all: false };

/**
 * The lease ids held now, one a line, found as `lease list` finds them, through the context's
 * server and token; nothing at all when the broker does not answer within `budgetMs`.
 */
export async function completeLeaseIds(runtime: ListRuntime, budgetMs: number): Promise<ExitCode> {
  const holders = await withinBudget(runtime, budgetMs, (budgeted) =>
    readHolders({ ...EVERY_HOLDER, retry: NO_RETRIES, concurrency: 16 }, budgeted),
  );
  if (holders === undefined) return ExitCode.Ok;
  const { text, refused } = nameLines(heldLeases(holders, EVERY_HOLDER).map((lease) => lease.leaseId));
  if (text) await write(runtime.io.stdout, text);
  for (const leaseId of refused) await write(runtime.io.stderr, refusedLeaseIdMessage(leaseId));
  // An answer outside the contract, as `lease list -o name` says it (the scripts ignore it).
  return refused.length > 0 ? ExitCode.Broker : ExitCode.Ok;
}

/** What `__complete` lists of the broker's names, for --group, --queue and --partition. */
export type BrokerNames = 'groups' | 'queues' | 'partitions';

const NAME_KIND: Record<BrokerNames, { kind: NameKind; flag: string; inPath: boolean }> = {
  // A group goes into the URL path of every verb that takes one (list, acquire).
  groups: { kind: 'group', flag: '--group', inPath: true },
  queues: { kind: 'queue', flag: '--queue', inPath: false },
  partitions: { kind: 'partition', flag: '--partition', inPath: false },
};

/**
 * Whether a name from the broker may be offered: one word a shell keeps as one (no whitespace),
 * that a terminal shows as it is (nothing the sanitiser escapes), and that the verb would accept
 * (the name rules of names.ts). Anything else is left out, silently: a name that cannot be typed
 * is no candidate (docs/security.md#outside-text-is-data).
 */
export function isNameCandidate(name: string, what: BrokerNames): boolean {
  if (/\s/u.test(name) || hasUnsafeText(name)) return false;
  const { kind, flag, inPath } = NAME_KIND[what];
  try {
    checkName(name, kind, flag, inPath);
    return true;
  } catch {
    return false;
  }
}

/**
 * The consumer groups, queues or partitions the broker knows, one a line, each once: groups and
 * queues from GET /api/v1/consumer-groups (one request), partitions from each group's partitions
 * (as `lease list` reads them). Nothing when the broker does not answer within `budgetMs`.
 */
export async function completeBrokerNames(
  what: BrokerNames,
  runtime: ListRuntime,
  budgetMs: number,
): Promise<ExitCode> {
  const names = await withinBudget(runtime, budgetMs, async (budgeted): Promise<string[]> => {
    if (what === 'partitions') {
      const holders = await readHolders({ ...EVERY_HOLDER, retry: NO_RETRIES, concurrency: 16 }, budgeted);
      return holders.map((holder) => holder.partition);
    }
    const known = await budgeted.client.consumerGroups({ signal: budgeted.signal });
    return known.map((entry) => (what === 'groups' ? entry.group : entry.queue));
  });
  const offered = [...new Set(names ?? [])].filter((name) => isNameCandidate(name, what));
  if (offered.length > 0) await write(runtime.io.stdout, offered.map((name) => `${name}\n`).join(''));
  return ExitCode.Ok;
}
