/**
 * The names an operator types for the broker's things: consumer groups, queues and partitions
 * (`lease list --group/--queue/--partition`, and any verb that takes them). One rule for all,
 * checked before anything is sent (docs/cli-contract.md#names); a group, queue or partition
 * that goes into a URL path obeys the stricter half too.
 */
import { UsageError } from './exit.js';

/** What a name names, for the words of an error. */
export type NameKind = 'group' | 'queue' | 'partition';

/** Longer names cannot be real and would not fit a URL. */
export const MAX_NAME_LENGTH = 1024;

// C0, DEL and C1: never in a real name, and in a terminal they can rewrite what is shown.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/**
 * What one line of an error shows escaped beyond JSON's own escapes (C0, quotes, backslashes,
 * lone surrogates): DEL and C1 controls, format characters (bidi overrides, zero-width), and
 * every space but U+0020, so what is refused is seen as it is.
 */
const UNSEEN = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}]|(?! )\s/gu;

/** `text` in double quotes for one line of an error, with whatever a terminal would hide escaped. */
export function quoteText(text: string, max = 80): string {
  const quoted = JSON.stringify(text.length > max ? text.slice(0, max) : text).replace(
    UNSEEN,
    (character) => `\\u${(character.codePointAt(0) as number).toString(16).padStart(4, '0')}`,
  );
  return text.length > max ? `${quoted.slice(0, -1)}…"` : quoted;
}

/**
 * Refuses a name that cannot be one: empty, with surrounding whitespace (a copy from a table:
 * the broker's names have none, so it would match nothing and say "no leases"), control
 * characters, not valid Unicode, too long, or `.`/`..`. With `inPath` (the name is a segment of
 * a URL path) also `/` and `\`: percent-encoded they are data by RFC 3986, but proxies and
 * servers that decode them before routing turn `../admin` into another route.
 */
export function checkName(name: string, kind: NameKind, flag: string, inPath: boolean): string {
  const which = `${flag} ${quoteText(name)}`;
  if (name.trim() === '') throw new UsageError(`${flag} takes a ${kind} name, and it is empty`);
  if (name.trim() !== name) {
    throw new UsageError(
      `${which} begins or ends with whitespace, which no ${kind} name has`,
      `did you mean ${flag} ${quoteText(name.trim())}?`,
    );
  }
  if (CONTROL.test(name)) throw new UsageError(`${which} holds control characters`);
  if (LONE_SURROGATE.test(name)) throw new UsageError(`${which} is not valid Unicode text`);
  if (name.length > MAX_NAME_LENGTH) {
    throw new UsageError(`${flag} is ${name.length} characters long; a ${kind} name has at most ${MAX_NAME_LENGTH}`);
  }
  if (name === '.' || name === '..') {
    const means = name === '.' ? 'this route' : 'the route above';
    throw new UsageError(`${which} cannot be a ${kind} name: in a URL path it means ${means}, even percent-encoded`);
  }
  if (inPath && /[/\\]/.test(name)) {
    throw new UsageError(
      `${which} holds ${name.includes('/') ? '/' : '\\'}, which a ${kind} name sent in a URL path may not: ` +
        'servers and proxies that decode it route the request elsewhere',
    );
  }
  return name;
}
