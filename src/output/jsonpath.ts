/**
 * `-o jsonpath=<expr>` (docs/cli-contract.md#jsonpath-output): the two forms operators already
 * type, as a thin layer over an RFC 9535 implementation (json-p3, which passes the standard's whole
 * compliance test suite: test/unit/jsonpath-cts.test.ts), which parses and evaluates every path:
 *
 * - the Go queenctl's, one path (`.newExpiresAt`, `.rows[0].partition`, or an RFC 9535 query
 *   from `$`): what it selects, then a newline;
 * - kubectl's template: text with `{path}` actions, `{"\t"}` string literals and
 *   `{range path}…{end}` loops, printed exactly as written (no newline added).
 *
 * Which of the two an expression is: `isTemplate`. A query from `$` is taken as RFC 9535 reads
 * it, whole. Otherwise a path may leave out the `$` (`.a`, `[0].b`, `a`): it is read from the current object, which is
 * the whole output, or the element of the innermost `{range}`; `$` names the whole output and `@`
 * the current object. A member name with a dash (`.token-ref`, as kubectl allows) becomes
 * `['token-ref']`. A string prints bare, anything else as JSON; several values of one action are
 * separated by a space; a path that selects nothing prints nothing.
 *
 * The library is loaded by `parseJsonPath` alone, so only runs given `-o jsonpath=` pay for it.
 */
import { UsageError } from '../exit.js';
import { escapeText } from './sanitise.js';

type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
/** A path compiled by the library: the values it selects from a value, in order (its nodelist). */
type Query = (input: JsonValue) => JsonValue[];

/** One piece of a template: literal text, the values of a path, or a loop over them. */
type Part =
  | { kind: 'text'; text: string }
  | { kind: 'path'; path: RfcPath }
  | { kind: 'range'; path: RfcPath; body: Part[] };

/** A path as the library compiled it, and whether it starts at the whole output or the current object. */
interface RfcPath {
  query: Query;
  fromRoot: boolean;
}

export interface JsonPathTemplate {
  /** The expression as given after `jsonpath=`. */
  readonly expression: string;
  /** The text for one value: a whole `-o json` output, or one event of a stream. */
  render(value: unknown): string;
  /** The same, ending with exactly one newline: one line per event of a stream. */
  renderLine(value: unknown): string;
  /**
   * What a path (either form that is not a template) selects of `value`: its nodelist's values,
   * in order, before they are printed. A template has no one list: null.
   */
  readonly select: ((value: unknown) => unknown[]) | null;
}

/** A malformed expression: a usage error, found before anything is sent. */
function malformed(expression: string, at: number, what: string): UsageError {
  const caret = `${' '.repeat(Math.max(0, at))}^`;
  return new UsageError(
    `-o jsonpath: the expression is malformed at character ${at + 1}: ${what}`,
    `${expression}\n  ${caret}\n  forms: jsonpath=.leaseId, jsonpath='{.renewed}', ` +
      `jsonpath='{range [*]}{.leaseId}{"\\n"}{end}'`,
  );
}

/** Position of a character of a path's RFC 9535 text in the expression the user typed. */
type Positions = number[];

/**
 * A path of either form as RFC 9535 text, with the position each character came from, so an
 * error of the library points into what the user typed.
 */
function toRfcPath(path: string, start: number): { rfc: string; positions: Positions; fromRoot: boolean } {
  let text = path;
  let offset = start;
  // Leading and trailing blanks are layout inside `{ }`.
  const lead = text.length - text.trimStart().length;
  text = text.trim();
  offset += lead;
  const positions: Positions = [];
  let rfc = '';
  const emit = (chars: string, at: number): void => {
    rfc += chars;
    for (let i = 0; i < chars.length; i++) positions.push(at);
  };
  let fromRoot = false;
  let i = 0;
  if (text.startsWith('$')) {
    fromRoot = true;
    emit('$', offset);
    i = 1;
  } else if (text.startsWith('@')) {
    emit('$', offset);
    i = 1;
  } else if (text === '.' || text === '') {
    emit('$', offset);
    return { rfc, positions, fromRoot };
  } else if (text.startsWith('.') || text.startsWith('[')) {
    emit('$', offset);
  } else {
    emit('$.', offset);
  }
  // Copy the rest, turning a dotted member name with a dash into a bracketed one. Inside
  // brackets (selectors, filters, their strings) nothing is rewritten.
  let depth = 0;
  let quote: string | null = null;
  while (i < text.length) {
    const char = text[i] as string;
    if (quote) {
      emit(char, offset + i);
      if (char === '\\' && i + 1 < text.length) {
        emit(text[i + 1] as string, offset + i + 1);
        i += 2;
        continue;
      }
      if (char === quote) quote = null;
      i++;
      continue;
    }
    if (depth > 0 && (char === '"' || char === "'")) quote = char;
    if (char === '[') depth++;
    if (char === ']') depth = Math.max(0, depth - 1);
    const dotted = depth === 0 && char === '.' && text[i + 1] !== '.' && (i === 0 || text[i - 1] !== '.');
    if (dotted) {
      const name = /^[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff-]*/.exec(text.slice(i + 1))?.[0];
      if (name?.includes('-')) {
        emit(`['${name}']`, offset + i + 1);
        i += 1 + name.length;
        continue;
      }
    }
    emit(char, offset + i);
    i++;
  }
  return { rfc, positions, fromRoot };
}

/** What the library's errors carry: where in the RFC 9535 text it broke, and what it found. */
interface JsonPathErrorLike {
  message?: string;
  token?: { index?: number; kind?: string; value?: string };
}

/** Compiles RFC 9535 text, or throws the library's error. */
type Compile = (rfc: string) => Query;

/** Compiles a path with the library; its error is reported where the user typed it. */
function checkPath(compile: Compile, expression: string, path: string, start: number): RfcPath {
  return compilePath(compile, expression, toRfcPath(path, start), start + path.length);
}

/**
 * Compiles RFC 9535 text whose characters came from `positions` of the expression; an error
 * past its end points at `end`.
 */
function compilePath(
  compile: Compile,
  expression: string,
  { rfc, positions, fromRoot }: { rfc: string; positions: Positions; fromRoot: boolean },
  end: number,
): RfcPath {
  try {
    return { query: compile(rfc), fromRoot };
  } catch (error) {
    const { message = '', token } = (error ?? {}) as JsonPathErrorLike;
    const rfcAt = token?.index ?? rfc.length;
    const at = positions[rfcAt] ?? end;
    // The library's words, less the excerpt it adds (`('$.rows[':7)`): the caret shows where.
    const words = message.replace(/\s*\('[\s\S]*':\d+\)$/, '');
    const what =
      rfcAt >= rfc.length
        ? 'the path ends too early'
        : token?.kind !== 'TOKEN_ERROR' && /^unexpected/.test(words) && token?.value
          ? `unexpected ${JSON.stringify(token.value)}`
          : words || 'not a JSONPath';
    throw malformed(expression, at, what);
  }
}

/**
 * Whether an expression is kubectl's template rather than one path. One that starts with `$` is
 * an RFC 9535 query, whole and as the RFC reads it, never a template, whatever braces its strings
 * hold (`$[?match(@.q, '\\p{Lu}')]`). Otherwise a `{` makes a template, unless it is inside a
 * quoted string within `[ ]`, where JSONPath has strings: `.rows[?match(@.q, 'p{2}')]` is a path,
 * `lease {.leaseId}` and `it's {.a}` are templates.
 */
export function isTemplate(expression: string): boolean {
  if (expression.startsWith('$')) return false;
  let depth = 0;
  let quote: string | null = null;
  for (let i = 0; i < expression.length; i++) {
    const char = expression[i];
    if (quote) {
      if (char === '\\') i++;
      else if (char === quote) quote = null;
    } else if (char === '{') return true;
    else if (char === '[') depth++;
    else if (char === ']') depth = Math.max(0, depth - 1);
    else if (depth > 0 && (char === '"' || char === "'")) quote = char;
  }
  return false;
}

/** The end of the `{…}` action that starts at `open`: the matching `}` outside quotes. */
function actionEnd(expression: string, open: number): number {
  let quote: string | null = null;
  for (let i = open + 1; i < expression.length; i++) {
    const char = expression[i];
    if (quote) {
      if (char === '\\') i++;
      else if (char === quote) quote = null;
    } else if (char === '"' || char === "'") quote = char;
    else if (char === '}') return i;
  }
  throw malformed(expression, open, 'a "{" without its "}"');
}

/** kubectl's template: text, `{path}`, `{"literal"}`, `{range path}`…`{end}`. */
function parseTemplate(compile: Compile, expression: string): Part[] {
  const root: Part[] = [];
  const stack: Array<{ parts: Part[]; at: number }> = [{ parts: root, at: 0 }];
  let i = 0;
  const current = (): Part[] => (stack[stack.length - 1] as { parts: Part[] }).parts;
  while (i < expression.length) {
    const open = expression.indexOf('{', i);
    if (open === -1) {
      current().push({ kind: 'text', text: expression.slice(i) });
      break;
    }
    if (open > i) current().push({ kind: 'text', text: expression.slice(i, open) });
    const close = actionEnd(expression, open);
    const inner = expression.slice(open + 1, close);
    const body = inner.trim();
    const bodyAt = open + 1 + (inner.length - inner.trimStart().length);
    if (body === 'end') {
      if (stack.length === 1) throw malformed(expression, bodyAt, '{end} without a {range}');
      stack.pop();
    } else if (/^range(\s|$)/.test(body)) {
      const pathText = body.slice('range'.length);
      if (pathText.trim() === '') throw malformed(expression, bodyAt + body.length, '{range} needs a path');
      const path = checkPath(compile, expression, pathText, bodyAt + 'range'.length);
      const loop: Part = { kind: 'range', path, body: [] };
      current().push(loop);
      stack.push({ parts: loop.body, at: bodyAt });
    } else if (body.startsWith('"')) {
      let text: unknown;
      try {
        text = JSON.parse(body);
      } catch {
        throw malformed(expression, bodyAt, 'a string literal that is not a quoted string');
      }
      current().push({ kind: 'text', text: String(text) });
    } else if (body === '') {
      throw malformed(expression, open, 'an empty {}');
    } else {
      current().push({ kind: 'path', path: checkPath(compile, expression, inner, open + 1) });
    }
    i = close + 1;
  }
  if (stack.length > 1) {
    const open = stack[stack.length - 1] as { at: number };
    throw malformed(expression, open.at, '{range} without its {end}');
  }
  return root;
}

function valueText(value: JsonValue): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * A selected value as printed: exact for a program, escaped on a terminal, where a value the
 * broker filled could otherwise drive it (docs/security.md#outside-text-is-data). The template's
 * own text (`{"\n"}`) is the user's and stays as written.
 */
type ShowValue = (value: JsonValue) => string;

function renderParts(parts: readonly Part[], root: JsonValue, current: JsonValue, show: ShowValue): string {
  let out = '';
  for (const part of parts) {
    if (part.kind === 'text') {
      out += part.text;
      continue;
    }
    const values = part.path.query(part.path.fromRoot ? root : current);
    if (part.kind === 'path') {
      out += values.map(show).join(' ');
      continue;
    }
    // `{range .rows}` over one array means its elements, as `{range .rows[*]}` does.
    const items = values.length === 1 && Array.isArray(values[0]) ? (values[0] as JsonValue[]) : values;
    for (const item of items) out += renderParts(part.body, root, item, show);
  }
  return out;
}

/**
 * Parses `expression` (what follows `jsonpath=`) into a template, loading the library. A
 * malformed expression is a UsageError naming jsonpath and where it broke.
 */
export async function parseJsonPath(
  expression: string,
  { terminal = false }: { terminal?: boolean } = {},
): Promise<JsonPathTemplate> {
  if (expression.trim() === '') {
    throw new UsageError(
      '-o jsonpath: the expression is empty',
      "give a path after jsonpath=, e.g. -o jsonpath=.leaseId or -o jsonpath='{.renewed}'",
    );
  }
  const { JSONPathEnvironment } = await import('json-p3');
  // Strict: RFC 9535 as written, none of the library's extensions.
  const environment = new JSONPathEnvironment({ strict: true });
  const compile: Compile = (rfc) => {
    const compiled = environment.compile(rfc);
    return (input) => compiled.query(input).values() as JsonValue[];
  };
  const goForm = !isTemplate(expression);
  // A query from `$` is taken as the RFC reads it: no blanks trimmed, no kubectl dashes.
  const whole = (): RfcPath =>
    expression.startsWith('$')
      ? compilePath(
          compile,
          expression,
          { rfc: expression, positions: [...expression].map((_, at) => at), fromRoot: true },
          expression.length,
        )
      : checkPath(compile, expression, expression, 0);
  const parts: Part[] = goForm ? [{ kind: 'path', path: whole() }] : parseTemplate(compile, expression);
  const show: ShowValue = terminal ? (value) => escapeText(valueText(value)) : valueText;
  // What -o json would print: the records are plain JSON values already.
  const asJson = (value: unknown): JsonValue => JSON.parse(JSON.stringify(value ?? null)) as JsonValue;
  const [first] = parts;
  const select = goForm && first?.kind === 'path' ? (value: unknown) => first.path.query(asJson(value)) : null;
  const render = (value: unknown): string => {
    if (!select) {
      const json = asJson(value);
      return renderParts(parts, json, json, show);
    }
    // The Go form's line ends with a newline, but a path that selects nothing prints nothing
    // (docs/cli-contract.md#jsonpath-output), not an empty line.
    const values = select(value);
    return values.length === 0 ? '' : `${values.map(show).join(' ')}\n`;
  };
  return {
    expression,
    select,
    render,
    renderLine: (value) => {
      const text = render(value);
      return text === '' ? '' : `${text.replace(/\n+$/, '')}\n`;
    },
  };
}
