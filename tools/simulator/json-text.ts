/**
 * JSON text of any depth. V8's JSON.parse is iterative and reads any depth, but its
 * JSON.stringify recurses and throws RangeError past roughly 4,000 levels; a consumer test pushes
 * data nested deeper than that and expects it back unchanged. So the simulator keeps each
 * message's data as text (queues.ts splices it into a pop's answer) and writes JSON through
 * `stringifyAnyDepth`, which falls back to a loop with its own stack where V8 gives up.
 */

/** What JSON.stringify(value) gives, at any depth (undefined where JSON.stringify gives undefined). */
export function stringifyAnyDepth(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    return stringifyIteratively(value);
  }
}

/** A message's data as text: `null` for data JSON has no text for (undefined, a function). */
export function dataText(data: unknown): string {
  return stringifyAnyDepth(data) ?? 'null';
}

type Frame =
  | { kind: 'array'; value: unknown[]; next: number }
  | { kind: 'object'; value: Record<string, unknown>; keys: string[]; next: number; written: number };

const omitted = (value: unknown): boolean =>
  value === undefined || typeof value === 'function' || typeof value === 'symbol';

function withToJson(value: unknown, key: string): unknown {
  if (value !== null && typeof value === 'object') {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') return (toJSON as (key: string) => unknown).call(value, key);
  }
  return value;
}

/** JSON.stringify's output for JSON-like values, with an explicit stack instead of recursion. */
function stringifyIteratively(root: unknown): string | undefined {
  const out: string[] = [];
  const stack: Frame[] = [];
  const open = new Set<object>();
  const write = (value: unknown): void => {
    if (value === null || typeof value !== 'object') {
      // Strings, numbers (non-finite ones as null), booleans: JSON.stringify of a leaf never recurses.
      out.push(JSON.stringify(value) ?? 'null');
      return;
    }
    if (open.has(value)) throw new TypeError('Converting circular structure to JSON');
    open.add(value);
    if (Array.isArray(value)) {
      out.push('[');
      stack.push({ kind: 'array', value, next: 0 });
    } else {
      const record = value as Record<string, unknown>;
      out.push('{');
      stack.push({ kind: 'object', value: record, keys: Object.keys(record), next: 0, written: 0 });
    }
  };
  const first = withToJson(root, '');
  if (omitted(first)) return undefined;
  write(first);
  while (stack.length > 0) {
    const frame = stack[stack.length - 1] as Frame;
    if (frame.kind === 'array') {
      if (frame.next === frame.value.length) {
        out.push(']');
        open.delete(frame.value);
        stack.pop();
        continue;
      }
      if (frame.next > 0) out.push(',');
      const item = withToJson(frame.value[frame.next], String(frame.next));
      frame.next++;
      write(omitted(item) ? null : item);
      continue;
    }
    let key: string | undefined;
    let item: unknown;
    while (frame.next < frame.keys.length) {
      const candidate = frame.keys[frame.next++] as string;
      const value = withToJson(frame.value[candidate], candidate);
      if (!omitted(value)) {
        key = candidate;
        item = value;
        break;
      }
    }
    if (key === undefined) {
      out.push('}');
      open.delete(frame.value);
      stack.pop();
      continue;
    }
    if (frame.written++ > 0) out.push(',');
    out.push(JSON.stringify(key), ':');
    write(item);
  }
  return out.join('');
}
