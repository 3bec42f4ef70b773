/**
 * The words queenctl prints to people: what happened, what it means for the batch, and what
 * to do. Commands decide what happened; this module says it.
 */
import { QueenctlError } from '../exit.js';
import { formatCountdown } from './duration.js';
import { escapeText } from './sanitise.js';

/** Why renewed: 0 happens and what to do about it (docs/broker.md#lost-lease). */
export function lostLeaseMeaning(several: boolean): string {
  return (
    `${several ? 'Each' : 'It'} expired, was released by an ack or nack, or belongs to another tenant\n` +
    '  (the broker makes these look the same on purpose); another worker may already have the batch.'
  );
}
export const LOST_LEASE_ACTION =
  'Stop work that is not idempotent and let the redelivery own the batch.\n' +
  '  Do not ack without the lease id: that can move the cursor under the other worker.';

export function listSome(items: readonly string[], max = 5): string {
  return items.length <= max ? items.join(', ') : `${items.slice(0, max).join(', ')} and ${items.length - max} more`;
}

/**
 * An error's one line, then its hint, each escaped: messages quote the broker's words, config
 * values and ids (docs/security.md#outside-text-is-data). A hint of several lines keeps them.
 */
export function errorMessage(error: QueenctlError | Error): string {
  const hint = error instanceof QueenctlError && error.hint ? `\n  ${escapeLines(error.hint)}` : '';
  return `queenctl: ${escapeText(error.message)}${hint}\n`;
}

export function warningMessage(text: string): string {
  return `queenctl: warning: ${escapeText(text)}\n`;
}

/**
 * A hint's lines, each escaped and each after the first indented under the error: its line breaks
 * are queenctl's (a caret under an expression, a wait then what to check), and no line of it can
 * pass for a `queenctl:` line of its own.
 */
function escapeLines(text: string): string {
  return text
    .split('\n')
    .map((line, i) => (i === 0 || line.startsWith('  ') ? escapeText(line) : `  ${escapeText(line)}`))
    .join('\n');
}

/** A request of extend or inspect that is retried: the lease, the error, the next try. */
export function retryNote(leaseId: string, message: string, attempt: number, retries: number, delayMs: number): string {
  const retry = `retry ${attempt} of ${retries} in ${formatCountdown(delayMs)}`;
  return `queenctl: ${escapeText(leaseId)}: ${escapeText(message)}; ${retry}\n`;
}

/**
 * Why a file could not be read, in words, for the errors people meet most (a path mistyped, a
 * file of another user, a directory given for a file); the rarer ones keep their errno, which is
 * what a search finds.
 */
const READ_FAILURE_WORDS: Record<string, string> = {
  ENOENT: 'no such file',
  ENOTDIR: 'no such file (a part of its path is a file, not a directory)',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a directory, not a file',
  ELOOP: 'too many levels of symbolic links (a link that points back at itself?)',
  ENAMETOOLONG: 'the name is too long',
  EMFILE: 'too many files open',
  ENFILE: 'too many files open',
};

/** `no such file` and the like for a common errno; undefined for the rest. */
export function readFailureWords(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === undefined ? undefined : READ_FAILURE_WORDS[code];
}

/** What an errno means to someone choosing another place for a file, in a few words. */
const FILE_SYSTEM_REASONS: Record<string, string> = {
  ENOENT: 'the file system there takes no new entries (ENOENT)',
  EACCES: 'permission denied (EACCES)',
  EPERM: 'not permitted there (EPERM)',
  EROFS: 'read-only file system (EROFS)',
  ENOTDIR: 'not a directory (ENOTDIR)',
  ENOSPC: 'no space left on the device (ENOSPC)',
  EDQUOT: 'over the disk quota (EDQUOT)',
  ELOOP: 'too many symbolic links (ELOOP)',
  ENAMETOOLONG: 'the name is too long (ENAMETOOLONG)',
};

/** Where a config file can go instead: said on the same line as the error, so scripts get one line. */
export const CONFIG_ELSEWHERE = 'point --config or QUEEN_CONFIG at a file in a writable directory, or set HOME to one';

/**
 * The directory of the config file could not be made (config/files.ts): the directory, the level
 * that failed when it is another, why, and where to go instead; one line.
 */
export function configDirectoryFailure(directory: string, level: string, code: string): string {
  const why =
    code === 'EBASE'
      ? `${level} does not exist`
      : code === 'ENOTDIR'
        ? `${level === directory ? 'it' : level} exists and is not a directory (ENOTDIR)`
        : `${level === directory ? '' : `${level}: `}${FILE_SYSTEM_REASONS[code] ?? code}`;
  return `cannot create the config directory ${directory}: ${why}; ${CONFIG_ELSEWHERE}`;
}

/** The config file could not be written (its temporary file, its fsync or its rename); one line. */
export function configWriteFailure(path: string, code: string): string {
  return `cannot write the config file ${path}: ${FILE_SYSTEM_REASONS[code] ?? code}; ${CONFIG_ELSEWHERE}`;
}

/**
 * `word` as a shell needs it to stay one word when a person pastes it: bare when it is plain,
 * else in single quotes (a quote inside as '\''), and with $'…' escapes when it holds a control
 * character, which is never printed as is (bash, zsh and POSIX.1-2024 shells read $'…').
 */
export function shellWord(word: string): string {
  if (/^[A-Za-z0-9@%+=:,./_-]+$/.test(word)) return word;
  const control = /[\u0000-\u001f\u007f-\u009f]/;
  if (!control.test(word)) return `'${word.replaceAll("'", "'\\''")}'`;
  let escaped = '';
  for (const char of word) {
    const code = char.codePointAt(0) as number;
    if (char === '\\' || char === "'") escaped += `\\${char}`;
    else if (control.test(char)) escaped += `\\x${code.toString(16).padStart(2, '0')}`;
    else escaped += char;
  }
  return `$'${escaped}'`;
}
