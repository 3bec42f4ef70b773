/**
 * `config view`: the config file with every secret redacted. People get the file as written,
 * comments included; programs get JSON with `current-context` and `contexts` always present.
 */
import { configPathFor, parseConfigDocument, readConfigText } from '../../config/file.js';
import { redactData, redactValue } from '../../config/redact.js';
import { ExitCode, UsageError } from '../../exit.js';
import { write } from '../../io.js';
import { isJsonPath } from '../../output/format.js';
import type { LocalRuntime } from '../globals.js';
import { yamlStringify } from '../../output/yaml.js';

export async function runView(runtime: LocalRuntime): Promise<ExitCode> {
  const { io, format } = runtime;
  const path = configPathFor(runtime.flags.config, runtime.env);
  const text = await readConfigText(path);
  if (text === null && !io.quiet) {
    await write(
      io.stderr,
      `queenctl: no config file at ${path} (an empty config); ` +
        'create one with: queenctl config set-context <name> --server <url>\n',
    );
  }
  if (format === null) return ExitCode.Ok;
  if (format === 'name') throw new UsageError('config view prints the file: use -o yaml or -o json, not -o name');
  const yaml = await import('yaml');
  const document = text === null ? new yaml.Document({}) : (await parseConfigDocument(path, text)).document;
  // Redacted in the document itself, so the view keeps the file's comments and order.
  yaml.visit(document, {
    Pair(_key, pair) {
      if (yaml.isScalar(pair.key) && yaml.isScalar(pair.value)) {
        pair.value.value = redactValue(String(pair.key.value), pair.value.value);
      }
    },
    Seq(_key, seq, path) {
      // A list of scalars under a secret-looking key (`tokens: [...]`) is redacted item by item.
      const parent = path[path.length - 1];
      const key = yaml.isPair(parent) && yaml.isScalar(parent.key) ? String(parent.key.value) : '';
      for (const item of seq.items) if (yaml.isScalar(item)) item.value = redactValue(key, item.value);
    },
  });
  if (format === 'table' || format === 'wide') {
    if (text !== null) await write(io.stdout, document.toString());
    return ExitCode.Ok;
  }
  const data = redactData(document.toJS() ?? {}) as Record<string, unknown>;
  const view = { 'current-context': null, contexts: [], ...data };
  view['current-context'] ??= null;
  view.contexts ??= [];
  if (isJsonPath(format)) await write(io.stdout, format.template.render(view));
  else if (format === 'yaml') await write(io.stdout, (await yamlStringify())(view));
  else if (format === 'ndjson') await write(io.stdout, `${JSON.stringify(view)}\n`);
  else await write(io.stdout, `${JSON.stringify(view, null, 2)}\n`);
  return ExitCode.Ok;
}
