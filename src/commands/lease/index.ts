/**
 * The `lease` group: only wiring. Each verb's module is imported when that verb runs, so
 * start-up pays for commander and nothing else.
 */
import { Command, Option } from 'commander';
import { parseCount, parseSeconds } from '../../args.js';
import { flagParser, type GlobalContext } from '../globals.js';

const EXIT_CODES = `
Exit codes:
  0  every lease renewed
  1  usage or configuration error; nothing was sent
  2  broker error: unreachable, timed out, 5xx, or an answer outside the contract
  3  authentication or authorization refused (401, 403)
  4  a lease was not renewed (renewed: 0), even though the broker said HTTP 200
With several ids the status is the first that applies of 3, 2, 4, 0.`;

function secondsOption(defaultSeconds: string, description: string): Option {
  return new Option('--seconds <n>', description)
    .default(parseSeconds(defaultSeconds), defaultSeconds)
    .argParser(flagParser((text) => parseSeconds(text)));
}

function retriesOption(): Option {
  return new Option('--retries <n>', 'retries of a transient failure (refused, reset, timeout, 502/503/504, 500 pool)')
    .default(2)
    .argParser(flagParser((text) => parseCount(text, '--retries', 0, 10)));
}

export function leaseCommand(globals: GlobalContext): Command {
  const lease = new Command('lease').description('extend, inspect and watch broker leases').showHelpAfterError('(add --help for usage)');

  lease
    .command('extend')
    .description('renew leases; exit 4 when the broker renewed nothing, whatever its HTTP status')
    .argument('<leaseId...>', 'lease ids the pop returned; - reads them from standard input')
    .addOption(secondsOption('60', 'extend to now + seconds on the broker clock (1 to 2147483647)'))
    .addOption(retriesOption())
    .addHelpText(
      'after',
      `
Retries: connection refused or reset, timeouts, 502/503/504 and 500 {"error":"pool"} are retried
with backoff (renewing takes the later deadline, so a repeat never shortens a lease). 401/403,
other 4xx, other 500s ("renew failed") and answers outside the contract are not.
${EXIT_CODES}

Examples:
  queenctl lease extend 0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90 --seconds 120
  queenctl lease extend "$LEASE" -o json | jq -r .lease_expires_at
  cut -f1 leases.txt | queenctl lease extend - -o ndjson
  queenctl lease extend "$LEASE" -q || echo "lease lost: stop the job"`,
    )
    .action(async (leaseIds: string[], options: { seconds: number; retries: number }, command: Command) => {
      const { runExtend } = await import('./extend.js');
      await globals.run(command, async (runtime, settings) =>
        runExtend(
          {
            leaseIds,
            seconds: options.seconds,
            retry: { ...settings.retry, retries: options.retries },
            concurrency: settings.concurrency,
            format: settings.format,
            noHeaders: settings.noHeaders,
          },
          runtime,
        ),
      );
    });

  return lease;
}
