/**
 * Text from outside (a broker's answer, a batch file) on its way to a terminal: control
 * characters, `\r` included, and the bidirectional overrides that reorder a line are shown as
 * `\u001b`-style escapes, never sent to the terminal (kubectl's fix for CVE-2021-25743 does the
 * same at its human printers). JSON and YAML output keep their own escaping and do not need it.
 */
// eslint-disable-next-line no-control-regex
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** At most `max` characters of `text` (made printable first), an ellipsis where it was cut. */
export function shortened(text: string, max: number): string {
  const shown = printable(text);
  return shown.length <= max ? shown : `${shown.slice(0, Math.max(0, max - 1))}…`;
}
