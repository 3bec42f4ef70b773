/**
 * What the lease verbs share on their command line: the lease ids operand, --seconds, --retries,
 * durations, and the part of the exit-code help every verb prints the same way.
 */
import { Option } from 'commander';
import { parseCount, parseDuration, parseSeconds } from '../../args.js';
import { flagParser } from '../globals.js';

export const LEASE_IDS_ARGUMENT = [
  '<leaseId...>',
  'lease ids the pop returned; - reads them from standard input',
] as const;

/** --allow-empty (docs/cli-contract.md): `-` reading nothing is nothing to do, as `xargs -r`. */
export function allowEmptyOption(): Option {
  return new Option('--allow-empty', 'with -: no lease id on standard input is no error: nothing is sent, exit 0');
}

export function secondsOption(defaultSeconds: string, description: string): Option {
  return new Option('--seconds <n>', description)
    .default(parseSeconds(defaultSeconds), defaultSeconds)
    .argParser(flagParser((text) => parseSeconds(text)));
}

export function retriesOption(
  description = 'retries of a transient failure (refused, reset, timeout, 429, 502/503/504, 500 pool)',
): Option {
  return new Option('--retries <n>', description)
    .default(2)
    .argParser(flagParser((text) => parseCount(text, '--retries', 0, 10)));
}

/** A duration flag such as `--every <duration>`: 250ms, 30s, 2m, 1h or a number of seconds. */
export function durationOption(flags: string, description: string): Option {
  const name = flags.split(' ')[0] as string;
  return new Option(flags, description).argParser(flagParser((text) => parseDuration(text, name)));
}

/**
 * The `Exit codes:` block of a verb's help: 1 and 3 mean the same for every verb; what 0, 2
 * and 4 mean is the verb's to say. Lines a verb adds (more codes, how several ids combine)
 * follow it.
 */
export function exitCodesHelp(codes: { ok: string; broker?: string; notHeld: string }): string {
  const broker = codes.broker ?? 'broker error: unreachable, timed out, 5xx, or an answer outside the contract';
  return `Exit codes:
  0  ${codes.ok}
  1  usage or configuration error; nothing was sent
  2  ${broker}
  3  authentication or authorization refused (401, 403)
  4  ${codes.notHeld}`;
}
