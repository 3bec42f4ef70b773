/**
 * What of the config file may be shown. A token-ref is a pointer (env, file://, keychain://)
 * and is shown, except `literal:`, which is the token itself. Keys this tool does not know
 * but that are named like secrets are hidden too: the Go tool may add some.
 */
export const REDACTED = '[redacted]';

const SECRET_KEY = /(^|[-_])(token|password|passwd|secret|credentials?|api[-_]?key)$/i;

export function redactTokenRef(ref: string): string {
  return ref.startsWith('literal:') ? `literal:${REDACTED}` : ref;
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
  if (key === 'server') return value.split(',').map(redactUrlPassword).join(',');
  return value;
}

/** A deep copy of parsed YAML with every secret replaced. */
export function redactData(value: unknown, key = ''): unknown {
  if (Array.isArray(value)) return value.map((item) => redactData(item, key));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactData(v, k)]));
  }
  return redactValue(key, value);
}
