/**
 * `config view`: the config file with every secret redacted. People get the file as written,
 * comments included; programs get JSON with `current-context` and `contexts` always present.
 */
import { configSourceFor, configWarning, parseConfigDocument, readConfigText } from '../../config/file.js';
import { distinctKeys, redactData, redactLiterals, redactValue } from '../../config/redact.js';
import { ExitCode, UsageError } from '../../exit.js';
import { write } from '../../io.js';
import { isJsonPath } from '../../output/format.js';
import { warnOfConfig, type LocalRuntime } from '../globals.js';
import { escapeText } from '../../output/sanitise.js';
import { yamlStringify } from '../../output/yaml.js';
import type { Document, Node as YamlNode } from 'yaml';

export async function runView(runtime: LocalRuntime): Promise<ExitCode> {
  const { io, format } = runtime;
  const source = configSourceFor(runtime.flags.config, runtime.env);
  const { path } = source;
  const text = await readConfigText(source);
  if (text === null && !io.quiet) {
    await write(
      io.stderr,
      `queenctl: no config file at ${path} (an empty config); ` +
        'create one with: queenctl config set-context <name> --server <url>\n',
    );
  }
  if (format === 'name') throw new UsageError('config view prints the file: use -o yaml or -o json, not -o name');
  const yaml = await import('yaml');
  const parsed = text === null ? undefined : await parseConfigDocument(path, text);
  if (text !== null && parsed) await warnOfConfig(io, { warning: configWarning(path, text, parsed.config.contexts) });
  if (format === null) return ExitCode.Ok;
  const document = parsed?.document ?? new yaml.Document({});
  redactDocument(yaml, document);
  if (format === 'table' || format === 'wide') {
    // For people on a terminal, what a terminal would act on (a context name's bidi override)
    // is shown escaped, as in every human output; into a pipe, the YAML as it is.
    const shown = io.stdout.isTTY ? document.toString().split('\n').map(escapeText).join('\n') : document.toString();
    if (text !== null) await write(io.stdout, shown);
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

/**
 * Every secret of the document replaced in place, so the view keeps the file's comments, order,
 * anchors and aliases (config/redact.ts): `literal:` in any scalar, key or comment; the value of
 * a secret-looking key, the node an alias there names included (`password: *shared` hides
 * `shared: &shared ...` too); then keys that redaction made equal told apart.
 */
function redactDocument(yaml: typeof import('yaml'), document: Document): void {
  const comments = (node: { commentBefore?: string | null; comment?: string | null }): void => {
    if (node.commentBefore) node.commentBefore = redactLiterals(node.commentBefore);
    if (node.comment) node.comment = redactLiterals(node.comment);
  };
  comments(document);
  const target = (node: unknown): unknown => (yaml.isAlias(node) ? node.resolve(document) : node);
  const keyOf = (pair: unknown): string =>
    yaml.isPair(pair) && yaml.isScalar(target(pair.key)) ? String((target(pair.key) as { value: unknown }).value) : '';
  yaml.visit(document, (_key, node, path) => {
    if (yaml.isNode(node)) comments(node as YamlNode);
    if (yaml.isScalar(node) && typeof node.value === 'string') node.value = redactLiterals(node.value);
    if (yaml.isPair(node)) {
      const value = target(node.value);
      if (yaml.isScalar(value)) value.value = redactValue(keyOf(node), value.value);
    }
    if (yaml.isSeq(node)) {
      // A list of scalars under a secret-looking key (`tokens: [...]`) is redacted item by item.
      const key = keyOf(path[path.length - 1]);
      for (const item of node.items) {
        const value = target(item);
        if (yaml.isScalar(value)) value.value = redactValue(key, value.value);
      }
    }
    return undefined;
  });
  yaml.visit(document, {
    Map(_key, map) {
      const scalarKeys = map.items.filter((pair) => yaml.isScalar(pair.key));
      const names = distinctKeys(scalarKeys.map((pair) => String((pair.key as { value: unknown }).value)));
      scalarKeys.forEach((pair, index) => {
        const key = pair.key as { value: unknown };
        if (names[index] !== String(key.value)) key.value = names[index];
      });
    },
  });
}
