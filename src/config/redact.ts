/**
 * What of the config file may be shown. A token-ref is a pointer (env, file://, keychain://)
 * and is shown, except `literal:`, which is the token itself, wherever it appears: under any
 * key, behind an anchor and its aliases, in a list, a key, a block scalar or a comment (a
 * commented-out token is as readable). Keys this tool does not know but that are named like
 * secrets are hidden too: the Go tool may add some.
 */
export const REDACTED = '[redacted]';

const SECRET_KEY = /(^|[-_])(token|password|passwd|secret|credentials?|api[-_]?key)$/i;

/** `literal:` and the rest of its line: all of it may be token (docs/security.md). */
const LITERAL = /literal:[^\n]*/gi;

export function redactTokenRef(ref: string): string {
  return ref.startsWith('literal:') ? `literal:${REDACTED}` : ref;
}

/** The text with every `literal:` token (the rest of its line) replaced. */
export function redactLiterals(text: string): string {
  return /literal:/i.test(text) ? text.replace(LITERAL, `literal:${REDACTED}`) : text;
}

/** A server URL without the password it should not carry (parseServers refuses it anyway). */
function redactUrlPassword(value: string): string {
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:]*):[^/@]*@/i, `$1:${REDACTED}@`);
}

/** The value to show for `key: value`; the value itself when nothing in it is secret. */
export function redactValue(key: string, value: unknown): unknown {
  if (typeof value !== 'string') return value;
  if (key === 'token-ref') return redactTokenRef(value);
  if (SECRET_KEY.test(key)) return REDACTED;
  const shown = redactLiterals(value);
  if (key === 'server') return shown.split(',').map(redactUrlPassword).join(',');
  return shown;
}

/** Whether the value under `key` is hidden whole (a secret-looking key). */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

/**
 * Keys made equal by redaction (`literal:a: 1` and `literal:b: 2`) told apart again, so the
 * view keeps one entry per key of the file: `literal:[redacted]`, `literal:[redacted] (2)`.
 */
export function distinctKeys(keys: readonly string[]): string[] {
  const seen = new Set<string>();
  return keys.map((key) => {
    let candidate = key;
    for (let index = 2; seen.has(candidate); index++) candidate = `${key} (${index})`;
    seen.add(candidate);
    return candidate;
  });
}

/** A deep copy of parsed YAML with every secret replaced. */
export function redactData(value: unknown, key = ''): unknown {
  if (Array.isArray(value)) return value.map((item) => redactData(item, key));
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value);
    const keys = distinctKeys(entries.map(([k]) => redactLiterals(k)));
    return Object.fromEntries(entries.map(([k, v], index) => [keys[index], redactData(v, k)]));
  }
  return redactValue(key, value);
}
