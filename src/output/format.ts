/**
 * Which output a run gets, decided once: a table for people on a terminal, JSON for programs
 * (contract: "table on a terminal, else json"), or what `-o jsonpath=<expr>` selects of the JSON.
 */
import { UsageError } from '../exit.js';
import { closestWord } from './closest.js';
import type { JsonPathTemplate } from './jsonpath.js';

export const OUTPUT_FORMATS = ['table', 'wide', 'json', 'ndjson', 'yaml', 'name'] as const;
export type NamedFormat = (typeof OUTPUT_FORMATS)[number];

/** `-o jsonpath=<expr>`: the template applied to what `-o json` prints (output/jsonpath.ts). */
export interface JsonPathFormat {
  readonly kind: 'jsonpath';
  readonly template: JsonPathTemplate;
}

export type OutputFormat = NamedFormat | JsonPathFormat;

/**
 * The format `-o` asks for, else the default. A jsonpath expression is parsed here, before
 * anything is sent: a malformed one is a usage error. Its library is loaded only then.
 */
export async function resolveFormat(flag: string | undefined, stdoutIsTTY: boolean): Promise<OutputFormat> {
  if (flag === undefined) return stdoutIsTTY ? 'table' : 'json';
  if ((OUTPUT_FORMATS as readonly string[]).includes(flag)) return flag as NamedFormat;
  if (flag.startsWith('jsonpath=')) {
    const { parseJsonPath } = await import('./jsonpath.js');
    // On a terminal the values it selects are escaped (sanitise.ts); in a pipe they are exact.
    const template = await parseJsonPath(flag.slice('jsonpath='.length), { terminal: stdoutIsTTY });
    return { kind: 'jsonpath', template };
  }
  throw new UsageError(
    `-o/--output takes ${OUTPUT_FORMATS.join(', ')} or jsonpath=<expr>, not ${JSON.stringify(flag)}`,
    flag === 'jsonpath'
      ? "give the expression after an =: -o jsonpath='{.leaseId}'"
      : (formatSuggestion(flag) ?? 'queenctl --help says what each format prints'),
  );
}

/**
 * `did you mean -o table?` for a format mistyped (`tabel`, `JSON`, `yml`), and for a mistyped
 * `jsonpath=` (`jsonpth={.leaseId}`); undefined when nothing is close.
 */
function formatSuggestion(flag: string): string | undefined {
  const equals = flag.indexOf('=');
  if (equals > 0) {
    const named = closestWord(flag.slice(0, equals), ['jsonpath']);
    return named && shellSafe(flag) ? `did you mean -o ${named}${flag.slice(equals)}?` : undefined;
  }
  const named = closestWord(flag, OUTPUT_FORMATS);
  return named ? `did you mean -o ${named}?` : undefined;
}

/** A jsonpath expression repeated in a hint only when it is plain printable text. */
function shellSafe(text: string): boolean {
  return /^[\x20-\x7e]*$/.test(text);
}

export type MachineFormat = Extract<OutputFormat, 'json' | 'ndjson' | 'yaml'> | JsonPathFormat;

export function isMachineFormat(format: OutputFormat | null): format is MachineFormat {
  return format === 'json' || format === 'ndjson' || format === 'yaml' || isJsonPath(format);
}

export function isJsonPath(format: OutputFormat | null): format is JsonPathFormat {
  return typeof format === 'object' && format !== null && format.kind === 'jsonpath';
}
