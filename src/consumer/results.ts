/**
 * The command's own word on each message: the file `QUEEN_RESULTS_FILE` names, where it may
 * append one JSON object a line, `{"transactionId":"…","status":"completed"|"retry"|"failed",
 * "error":"…"}` (docs/cli-contract.md#lease-run, "What the command says"). `partitionId` may
 * narrow a transaction id that several partitions of the batch share. The last line about a
 * message wins; a line that is not such an object, or names no message of the batch, is ignored
 * and counted (one warning says how many).
 *
 * The file is the command's, so hostile: read without following a link, only when it is a
 * regular file, and only up to a size no honest report reaches. A file that cannot be trusted
 * this way says nothing of any message, and the caller fails what it cannot vouch for.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import type { BatchMessage } from '../broker/batch.js';
import type { Reported } from './outcomes.js';

/** An error text kept with an ack: a reason, not a document (as `lease ack --error`). */
export const MAX_REPORTED_ERROR = 4096;
/** Room per message for a line of the largest error, and then some. */
const BYTES_PER_MESSAGE = 8 * 1024;
const BASE_BYTES = 64 * 1024;

export type ResultsRead = { ok: true; reported: Map<number, Reported>; ignored: number } | { ok: false; why: string };

const STATUSES = new Set(['completed', 'retry', 'failed']);
/** Half a surrogate pair: not text, and no JSON parser of the broker's takes it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

export function resultsCap(messages: number): number {
  return BASE_BYTES + BYTES_PER_MESSAGE * messages;
}

/** Reads and parses the results file of a batch of these messages. */
export function readResults(path: string, messages: readonly BatchMessage[]): ResultsRead {
  const cap = resultsCap(messages.length);
  let text: string;
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // Removed by the command: it reported nothing.
    if (code === 'ENOENT') return { ok: true, reported: new Map(), ignored: 0 };
    return { ok: false, why: `it could not be opened (${code ?? (error as Error).message})` };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { ok: false, why: 'it is no longer a regular file' };
    if (stat.size > cap) return { ok: false, why: `it is ${stat.size} bytes long, more than ${cap} for this batch` };
    const buffer = Buffer.alloc(Math.min(cap + 1, stat.size + 1));
    let length = 0;
    for (;;) {
      const read = readSync(fd, buffer, length, buffer.length - length, null);
      if (read === 0) break;
      length += read;
      if (length > cap) return { ok: false, why: `it grew past ${cap} bytes` };
      if (length === buffer.length) break;
    }
    text = buffer.subarray(0, length).toString('utf8');
  } finally {
    closeSync(fd);
  }
  return { ok: true, ...parseResults(text, messages) };
}

/** The lines of a results file, matched to the batch's messages (by index). */
export function parseResults(
  text: string,
  messages: readonly BatchMessage[],
): { reported: Map<number, Reported>; ignored: number } {
  const byTransaction = new Map<string, number[]>();
  messages.forEach((message, index) => {
    const list = byTransaction.get(message.transactionId);
    if (list) list.push(index);
    else byTransaction.set(message.transactionId, [index]);
  });
  const reported = new Map<number, Reported>();
  let ignored = 0;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const said = parseLine(line);
    const matches = said === null ? undefined : byTransaction.get(said.transactionId);
    const named =
      said === null || matches === undefined
        ? []
        : said.partitionId === undefined
          ? matches
          : matches.filter((index) => (messages[index] as BatchMessage).partitionId === said.partitionId);
    if (said === null || named.length === 0) {
      ignored++;
      continue;
    }
    for (const index of named) reported.set(index, { status: said.status, error: said.error });
  }
  return { reported, ignored };
}

function parseLine(line: string): (Reported & { transactionId: string; partitionId?: string }) | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  const { transactionId, partitionId, status, error } = parsed as Record<string, unknown>;
  if (typeof transactionId !== 'string' || typeof status !== 'string' || !STATUSES.has(status)) return null;
  if (partitionId !== undefined && typeof partitionId !== 'string') return null;
  if (error !== undefined && error !== null && typeof error !== 'string') return null;
  return {
    transactionId,
    ...(partitionId !== undefined && { partitionId }),
    status: status as Reported['status'],
    error: typeof error === 'string' ? reason(error) : null,
  };
}

/**
 * The command's error text as the broker can store it: well-formed Unicode (a lone surrogate makes
 * the broker's JSON parser refuse the whole ack), no NUL (PostgreSQL text refuses it), cut to
 * MAX_REPORTED_ERROR code units between two characters, never inside one.
 */
export function reason(text: string): string {
  let clean = text.replace(LONE_SURROGATE, '\uFFFD').replaceAll('\u0000', '\uFFFD');
  if (clean.length > MAX_REPORTED_ERROR) {
    const cut = clean.charCodeAt(MAX_REPORTED_ERROR - 1);
    clean = clean.slice(0, cut >= 0xd800 && cut <= 0xdbff ? MAX_REPORTED_ERROR - 1 : MAX_REPORTED_ERROR);
  }
  return clean;
}
