/**
 * Which output a run gets, decided once: a table for people on a terminal, JSON for programs
 * (contract: "table on a terminal, else json").
 */
import { UsageError } from '../exit.js';

export const OUTPUT_FORMATS = ['table', 'wide', 'json', 'ndjson', 'yaml', 'name'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export function resolveFormat(flag: string | undefined, stdoutIsTTY: boolean): OutputFormat {
  if (flag === undefined) return stdoutIsTTY ? 'table' : 'json';
  if ((OUTPUT_FORMATS as readonly string[]).includes(flag)) return flag as OutputFormat;
  throw new UsageError(`-o/--output takes ${OUTPUT_FORMATS.join(', ')}, not ${JSON.stringify(flag)}`);
}

export type MachineFormat = Extract<OutputFormat, 'json' | 'ndjson' | 'yaml'>;

export function isMachineFormat(format: OutputFormat | null): format is MachineFormat {
  return format === 'json' || format === 'ndjson' || format === 'yaml';
}
