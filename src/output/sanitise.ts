/**
 * Outside text is data (docs/security.md#outside-text-is-data): a queue, partition or group name,
 * an error string, a reason, a version, a context name reach people's output only through
 * `escapeText`, which shows every character a terminal would obey as a visible escape instead of
 * emitting it. kubectl learned this as CVE-2021-25743 and escapes in every human printer, `\r`
 * included (kubernetes/kubernetes#112553).
 *
 * Escaped: C0 controls (newline, tab and carriage return included: a line break in a reason
 * would forge a `queenctl:` line, a `\r` hides the prefix of a refusal), DEL, C1 controls, the
 * Unicode bidi controls (which reorder what is shown), the line and paragraph separators, and
 * lone surrogates (half a character: a UTF-8 stream would show U+FFFD and hide what was sent).
 * Everything else, wide and combining characters included, is printed as it is.
 *
 * JSON keeps its own escaping (exact, as `JSON.stringify` gives it); `-o yaml` double-quotes such
 * strings with YAML's escapes (yaml.ts); `-o jsonpath=` escapes its values on a terminal only
 * (jsonpath.ts).
 */

/** Each character `escapeText` replaces, in one class. */
const UNSAFE_CLASS = '[\\u0000-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u2028-\\u202e\\u2066-\\u2069]';
/** Half a surrogate pair: a high one not followed by a low one, or a low one not after a high one. */
const LONE_SURROGATE = '[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]';
/** The characters `escapeText` replaces, for a regular expression of another module (yaml.ts). */
export const UNSAFE_PATTERN = `${UNSAFE_CLASS}|${LONE_SURROGATE}`;
const UNSAFE = new RegExp(UNSAFE_PATTERN, 'g');
const UNSAFE_TEST = new RegExp(UNSAFE_PATTERN);

/** The short escapes people know; every other character is `\xNN` (below U+0100) or `\uNNNN`. */
const SHORT: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeOne(character: string): string {
  const short = SHORT[character];
  if (short) return short;
  const code = character.charCodeAt(0);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** `text` with every character a terminal would act on shown as a visible escape (`\x1b`, `\u202e`). */
export function escapeText(text: string): string {
  return UNSAFE_TEST.test(text) ? text.replace(UNSAFE, escapeOne) : text;
}

/** At most `max` characters of `text` (escaped first), an ellipsis where it was cut. */
export function shortened(text: string, max: number): string {
  const shown = escapeText(text);
  return shown.length <= max ? shown : `${shown.slice(0, Math.max(0, max - 1))}…`;
}

/** Whether `text` holds a character `escapeText` would replace. */
export function hasUnsafeText(text: string): boolean {
  return UNSAFE_TEST.test(text);
}
