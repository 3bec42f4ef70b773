/**
 * How a batch reaches the command (docs/cli-contract.md#lease-run, "What the command gets"): a
 * directory of its own per batch, made new (never reused by name) and readable by the user only,
 * holding the batch record (`QUEEN_BATCH_FILE`) and the empty results file
 * (`QUEEN_RESULTS_FILE`); the messages as lines for its standard input; and its environment, in
 * which nothing the broker sent can split, glob, forge a variable or grow past what the system
 * lets a process start with.
 */
import { lstatSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BatchRecord } from '../broker/batch.js';

export const INPUTS = ['stdin', 'none'] as const;
export type InputMode = (typeof INPUTS)[number];

/**
 * The prefix of a batch directory in the temporary directory; the run's pid follows it, so that
 * the directory of a run that died (SIGKILL, the OOM killer) can be told from a living one's.
 */
export const BATCH_DIR_PREFIX = 'queenctl-run-';
const BATCH_DIR = /^queenctl-run-(\d+)-[A-Za-z0-9]{6}$/;
/**
 * QUEEN_PARTITIONS at most this long: far below Linux's 128 KiB for one variable and 2 MiB for
 * them all, whatever else the environment holds. Past it the names are in the batch file only.
 */
export const MAX_PARTITIONS_VARIABLE = 16 * 1024;
/** No whitespace, quotes, glob, expansion or control characters: safe unquoted in any shell. */
const PLAIN_NAME = /^[A-Za-z0-9._:@%+,=^-]+$/;

export interface Delivery {
  batchFile: string;
  resultsFile: string;
  /** Set in the command's environment. */
  env: Record<string, string>;
  /** The lines of its standard input, one message each; empty with --input none. */
  input: string[];
  /** Removes the directory; a command that removed or replaced what is in it is no error. */
  remove(): void;
}

/**
 * `QUEEN_PARTITIONS`: the names separated by spaces, only when every name is plain and the whole
 * is small; otherwise undefined, and the names are in the batch file.
 */
export function partitionsVariable(names: readonly string[]): string | undefined {
  if (names.length === 0 || !names.every((name) => PLAIN_NAME.test(name))) return undefined;
  const value = names.join(' ');
  return value.length <= MAX_PARTITIONS_VARIABLE ? value : undefined;
}

/** The temporary directory of this environment, as os.tmpdir() reads it on POSIX. */
export function temporaryDirectory(env: NodeJS.ProcessEnv): string {
  const named = env.TMPDIR || env.TMP || env.TEMP || '/tmp';
  return named.length > 1 && named.endsWith('/') ? named.slice(0, -1) : named;
}

/**
 * Writes a batch's files in a directory made for it under `parent`. Throws what the file system said (a
 * temporary directory that cannot be written): the caller settles the batch as not run.
 */
export function prepareDelivery(
  parent: string,
  record: BatchRecord,
  input: InputMode,
  lineOf: (message: BatchRecord['messages'][number]) => string,
  recordText: (record: BatchRecord) => string,
): Delivery {
  // mkdtemp makes the directory 0700 with a name nobody could have guessed or made first; the
  // files are created new in it (wx: no link followed), 0600.
  const dir = mkdtempSync(join(parent, `${BATCH_DIR_PREFIX}${process.pid}-`));
  const remove = (): void => rmSync(dir, { recursive: true, force: true });
  try {
    const batchFile = join(dir, 'batch.json');
    const resultsFile = join(dir, 'results.jsonl');
    writeFileSync(batchFile, `${recordText(record)}\n`, { mode: 0o600, flag: 'wx' });
    writeFileSync(resultsFile, '', { mode: 0o600, flag: 'wx' });
    const env: Record<string, string> = {
      QUEEN_QUEUE: record.queue,
      QUEEN_CONSUMER_GROUP: record.consumerGroup,
      QUEEN_BATCH_FILE: batchFile,
      QUEEN_RESULTS_FILE: resultsFile,
    };
    const partitions = partitionsVariable(record.partitions);
    if (partitions !== undefined) env.QUEEN_PARTITIONS = partitions;
    const lines = input === 'none' ? [] : record.messages.map((message) => `${lineOf(message)}\n`);
    return { batchFile, resultsFile, env, input: lines, remove };
  } catch (error) {
    remove();
    throw error;
  }
}

/**
 * Removes the batch directories a dead run of this user left behind (a run killed by SIGKILL
 * cannot remove its own: the messages would stay on disk). Only a directory named as queenctl
 * names them, not a link, owned by this user, mode 0700, whose run's process is gone; anything
 * else is left alone. Best effort: what cannot be read or removed stays, silently.
 */
export function removeStaleBatchDirectories(parent: string, alive = isAlive): number {
  const uid = process.getuid?.();
  if (uid === undefined) return 0;
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    const pid = BATCH_DIR.exec(name)?.[1];
    if (pid === undefined || alive(Number(pid))) continue;
    const path = join(parent, name);
    try {
      const stat = lstatSync(path);
      if (!stat.isDirectory() || stat.uid !== uid || (stat.mode & 0o777) !== 0o700) continue;
      rmSync(path, { recursive: true, force: true });
      removed++;
    } catch {
      // Gone meanwhile, or not ours to remove.
    }
  }
  return removed;
}

/** True while a process of this pid exists (EPERM: it does, another user's). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
