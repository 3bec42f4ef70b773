/**
 * The `lease` group: only assembly. Each verb is one file that exports its command (flags, help,
 * examples) and the run function behind it; adding a verb is adding it to the list below.
 */
import { Command } from 'commander';
import type { GlobalContext } from '../globals.js';
import { ackCommand } from './ack.js';
import { acquireCommand } from './acquire.js';
import { extendCommand } from './extend.js';
import { inspectCommand } from './inspect.js';
import { listCommand } from './list.js';
import { runCommand } from './run.js';
import { watchCommand } from './watch.js';

/** The verbs by name, in the order `queenctl lease --help` lists them. */
export const LEASE_VERBS: Readonly<Record<string, (globals: GlobalContext) => Command>> = {
  extend: extendCommand,
  inspect: inspectCommand,
  list: listCommand,
  watch: watchCommand,
  acquire: acquireCommand,
  ack: ackCommand,
  run: runCommand,
};

/** The group with all its verbs, or with `only` (program.ts: a command line that names it). */
export function leaseCommand(globals: GlobalContext, only?: string): Command {
  const lease = new Command('lease')
    .description('extend, inspect, list and watch broker leases; take a batch and ack it, or run a consumer')
    .addHelpText(
      'after',
      `
Examples:
  queenctl lease extend "$LEASE" --seconds 120
  queenctl lease inspect "$LEASE" -o json
  queenctl lease list --queue orders --partition p7
  queenctl lease watch "$LEASE" -- ./process-batch.sh
  queenctl lease acquire orders --batch 10 -o json > batch.json && queenctl lease ack batch.json
  queenctl lease run orders --batch 10 --until-empty -- ./process-batch.sh`,
    );
  // As lease.command() would: a verb built on its own takes the group's settings (help after an error).
  const verbs = only === undefined ? Object.values(LEASE_VERBS) : [LEASE_VERBS[only] as (typeof LEASE_VERBS)[string]];
  for (const verb of verbs) lease.addCommand(verb(globals).copyInheritedSettings(lease));
  return lease;
}
