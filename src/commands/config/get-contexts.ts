/**
 * `config get-contexts`: every context of the file, the one in force marked. The mark follows
 * the same precedence as every command (--context, QUEEN_CONTEXT, current-context), so it shows
 * what a lease command run here and now would use.
 */
import { readConfigFor, type ContextEntry } from '../../config/file.js';
import { redactTokenRef } from '../../config/redact.js';
import { chooseContext } from '../../config/resolve.js';
import { ExitCode } from '../../exit.js';
import { write } from '../../io.js';
import { isMachineFormat } from '../../output/format.js';
import { recordSink } from '../../output/records.js';
import type { ColumnLike } from '../../output/fit.js';
import { tableFor } from '../../output/table.js';
import { warningMessage } from '../../output/words.js';
import { warnOfConfig, type LocalRuntime } from '../globals.js';

/** One context as -o json prints it: every key present, secrets redacted. */
export interface ContextRecord {
  current: boolean;
  name: string;
  server: string | null;
  'token-ref': string | null;
  insecure: boolean;
  cacert: string | null;
}

export function contextRecord(entry: ContextEntry, current: boolean): ContextRecord {
  return {
    current,
    name: entry.name,
    server: entry.server ?? null,
    'token-ref': entry['token-ref'] === undefined ? null : redactTokenRef(entry['token-ref']),
    insecure: entry.insecure ?? false,
    cacert: entry.cacert ?? null,
  };
}

export async function runGetContexts(runtime: LocalRuntime): Promise<ExitCode> {
  const { io, format } = runtime;
  const config = await readConfigFor(runtime.flags.config, runtime.env);
  await warnOfConfig(io, config);
  const chosen = chooseContext(runtime.flags, runtime.env, config);
  const records = config.contexts.map((entry) => contextRecord(entry, entry.name === chosen?.name));
  if (!io.quiet) {
    if (!config.exists) {
      await write(
        io.stderr,
        `queenctl: no config file at ${config.path}; ` +
          'create a context with: queenctl config set-context <name> --server <url>\n',
      );
    } else if (!chosen && records.length > 0) {
      await write(
        io.stderr,
        'queenctl: no context is current, so lease commands stop until one is chosen: ' +
          'queenctl config use-context <name>, --context or --server\n',
      );
    } else if (chosen && !records.some((record) => record.current)) {
      await write(
        io.stderr,
        warningMessage(
          `${chosen.how} names the context ${JSON.stringify(chosen.name)}, which ${config.path} does not have`,
        ),
      );
    } else if (
      chosen &&
      chosen.from !== 'file' &&
      config.currentContext !== undefined &&
      config.currentContext !== chosen.name
    ) {
      await write(
        io.stderr,
        `queenctl: ${chosen.how} chooses ${JSON.stringify(chosen.name)} ` +
          `over the file's current-context ${JSON.stringify(config.currentContext)}\n`,
      );
    }
  }
  if (format === null) return ExitCode.Ok;
  if (format === 'name') {
    if (records.length > 0) await write(io.stdout, `${records.map((record) => record.name).join('\n')}\n`);
    return ExitCode.Ok;
  }
  if (isMachineFormat(format)) {
    const sink = await recordSink<ContextRecord>(io.stdout, format, false);
    for (const record of records) await sink.add(record);
    await sink.end();
    return ExitCode.Ok;
  }
  if (records.length === 0) return ExitCode.Ok;
  const wide = format === 'wide';
  // On a narrow terminal (output/fit.ts): names and servers are cut before the token goes.
  const headers: ColumnLike[] = [
    { header: 'CURRENT', keep: 'always' },
    { header: 'NAME', keep: 'always' },
    { header: 'SERVER', keep: 2, shrink: 'cut', minWidth: 16 },
    { header: 'TOKEN', keep: 1, shrink: 'cut' },
    ...(wide ? ['INSECURE', 'CACERT'] : []),
  ];
  const rows = records.map((record) => [
    record.current ? '*' : '',
    record.name,
    record.server ?? '(default http://localhost:6632)',
    record['token-ref'] ?? '-',
    ...(wide ? [String(record.insecure), record.cacert ?? '-'] : []),
  ]);
  const table = await tableFor(
    { headers, rows, noHeaders: runtime.noHeaders },
    { width: io.width, stderrWidth: io.stderrWidth, wide, quiet: io.quiet },
  );
  await write(io.stdout, table.text);
  if (table.note) await write(io.stderr, table.note);
  return ExitCode.Ok;
}
