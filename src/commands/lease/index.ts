/**
 * The `lease` group: only wiring. Each verb's module is imported when that verb runs, so
 * start-up pays for commander and nothing else.
 */
import { Command, Option } from 'commander';
import { parseCount, parseDuration, parseSeconds } from '../../args.js';
import { flagParser, type GlobalContext, type Settings } from '../globals.js';
import type { LeaseRunOptions } from './lease-run.js';

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

/** What extend and inspect take from the global settings (see lease-run.ts). */
function leaseRunOptions(leaseIds: string[], retries: number, settings: Settings): Omit<LeaseRunOptions, 'seconds'> {
  const { retry, concurrency, format, noHeaders } = settings;
  return { leaseIds, retry: { ...retry, retries }, concurrency, format, noHeaders };
}

export function leaseCommand(globals: GlobalContext): Command {
  const lease = new Command('lease')
    .description('extend, inspect and watch broker leases')
    .showHelpAfterError('(add --help for usage)')
    .addHelpText(
      'after',
      '\nExamples:\n  queenctl lease extend "$LEASE" --seconds 120\n  queenctl lease inspect "$LEASE" -o json\n  queenctl lease watch "$LEASE" -- ./process-batch.sh',
    );

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
        runExtend({ ...leaseRunOptions(leaseIds, options.retries, settings), seconds: options.seconds }, runtime),
      );
    });

  lease
    .command('inspect')
    .description('say whether leases are held, by how many partitions and for how long, without shortening them')
    .argument('<leaseId...>', 'lease ids the pop returned; - reads them from standard input')
    .addOption(retriesOption())
    .addHelpText(
      'after',
      `
How it works: the broker has no read-only lease lookup, so inspect asks the extend route for
{"seconds": 1}. The broker sets the deadline to the later of the current one and now + 1 s, so a
live lease keeps the deadline it had and an expired one is not brought back. The one edge: a
lease in its very last second gets at most one more second.

Remaining time is measured on the broker's clock, not this machine's: it is the expiry minus the
broker's time taken from its Date header (whole seconds, so within about a second). A local
clock that is minutes or hours off changes nothing. Older brokers do not report how many
partitions a lease holds: HELD is then ? (null in JSON).

Exit codes:
  0  every lease is live
  1  usage or configuration error; nothing was sent
  2  broker error: unreachable, timed out, 5xx, or an answer outside the contract
  3  authentication or authorization refused (401, 403)
  4  a lease is not held (expired, released by an ack or nack, or another tenant's)

Examples:
  queenctl lease inspect "$LEASE"
  queenctl lease inspect "$LEASE" -o json | jq .remainingMs
  queenctl lease inspect - -o ndjson < leases.txt`,
    )
    .action(async (leaseIds: string[], options: { retries: number }, command: Command) => {
      const { runInspect } = await import('./inspect.js');
      await globals.run(command, async (runtime, settings) =>
        runInspect(leaseRunOptions(leaseIds, options.retries, settings), runtime),
      );
    });

  lease
    .command('watch')
    .description('keep leases renewed through broker faults, and run a command only while they are held')
    .argument('<leaseId...>', 'lease ids the pop returned; - reads them from standard input')
    .addOption(secondsOption('60', 'each renewal extends to now + seconds on the broker clock (1 to 2147483647)'))
    .addOption(durationOption('--every <duration>', 'renew this often (default: a third of --seconds)'))
    .addOption(durationOption('--for <duration>', 'stop watching after this long (without a command)'))
    .addOption(
      durationOption('--kill-after <duration>', 'SIGKILL the command this long after SIGTERM').default(10_000, '10s'),
    )
    .usage('[options] <leaseId...> [-- <command> [args...]]')
    .addHelpText(
      'after',
      `
Renewals: at once, then every --every, and always before the expiry the broker reported, less a
safety margin. Deadlines are measured without trusting this machine's clock to agree with the
broker's. Failures that may pass (unreachable, reset, timeout, 5xx) are retried with backoff for
as long as the lease has time left; each request's timeout is cut to that time.

A lease is lost when the broker renews nothing (renewed: 0), or when its expiry passes with no
successful renewal. Without a command the watch goes on with the leases still held.

With -- <command>: it starts once every lease has been renewed, in its own process group, with
QUEEN_LEASE_ID, QUEEN_LEASE_IDS and QUEEN_LEASE_EXPIRES_AT set and QUEEN_TOKEN removed. SIGINT,
SIGTERM and SIGHUP go to its whole group and queenctl waits for it; when it exits, renewal stops.
A command still running --kill-after after SIGINT or SIGTERM gets SIGKILL. When a lease is lost,
its group gets SIGTERM, then SIGKILL after --kill-after. It runs outside the terminal's
foreground job: Ctrl+C reaches it through queenctl. With -o json/ndjson its stdout goes to
stderr, so stdout stays one event per line.

Output: -o json or -o ndjson streams events on stdout, one per line (renewed, retry, lost,
stopped), also the default in a pipe without a command. Otherwise: a spinner on a terminal, one
line per event on stderr when not on one or when a command shares the terminal; -q only errors.

Exit codes:
  0  --for elapsed and no lease was lost
  1  usage or configuration error; nothing was sent
  2  broker error: a lease could not be renewed even once
  3  authentication or authorization refused (401, 403)
  4  a lease was lost (without a command: once none is left, or at --for)
  130/143  stopped by SIGINT/SIGTERM (without a command)
With a command: its own exit status (128 + signal number when a signal ended it), or 4 when a
lease was lost and the command was stopped for that.

Examples:
  queenctl lease watch "$LEASE" -- ./reprocess.sh --batch 7
  queenctl lease watch "$LEASE" -q & WATCH=$!       # keep it alive while working by hand;
  ...; kill $WATCH                                   # -q: only a loss is printed
  queenctl lease watch - --for 30m -o ndjson < leases.txt | jq -c 'select(.event == "lost")'`,
    )
    .action(
      async (
        operands: string[],
        options: { seconds: number; every?: number; for?: number; killAfter: number },
        command: Command,
      ) => {
        const { runWatch } = await import('./watch.js');
        // A long watch measures on monotonic time: an NTP step must not move every deadline.
        const { monotonicClock } = await import('../../watch/monotonic-clock.js');
        const { watchOutputMode } = await import('../../output/watch.js');
        const flags = command.optsWithGlobals<{ output?: string; token?: string; quiet?: boolean }>();
        await globals.run(command, async (runtime, settings, proc) => {
          // Commander puts what follows `--` among the operands: it is the command, not lease ids.
          const after = proc.argvAfterDashDash;
          const leaseIds = after === null ? operands : operands.slice(0, Math.max(0, operands.length - after.length));
          return runWatch(
            {
              leaseIds,
              seconds: options.seconds,
              everyMs: options.every,
              forMs: options.for,
              killAfterMs: options.killAfter,
              requestTimeoutMs: settings.timeoutMs,
              concurrency: settings.concurrency,
              concurrencyGiven: settings.concurrencyGiven,
              command: after,
              output: watchOutputMode({
                format: settings.format,
                outputGiven: flags.output !== undefined,
                hasCommand: after !== null,
                quiet: Boolean(flags.quiet),
                stderrIsTTY: Boolean(runtime.io.stderr.isTTY),
                term: proc.env.TERM,
              }),
              tokenOnCommandLine: flags.token !== undefined,
            },
            { ...runtime, clock: monotonicClock },
            proc,
          );
        });
      },
    );

  return lease;
}

function durationOption(flags: string, description: string): Option {
  const name = flags.split(' ')[0] as string;
  return new Option(flags, description).argParser(flagParser((text) => parseDuration(text, name)));
}
