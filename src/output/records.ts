/**
 * Machine output, streamed: one record per lease as soon as it is known and in input order.
 * `json` prints one object for a single lease id given as an argument, else an array;
 * `ndjson` one object per line; `yaml` one mapping, or a sequence. `jsonpath=` applies its
 * template to what `json` would print: the one object at once, the array once it is complete.
 */
import { write, type OutputStream } from '../io.js';
import type { MachineFormat } from './format.js';
import { yamlStringify } from './yaml.js';

export interface RecordSink<T> {
  add(record: T): Promise<void>;
  end(): Promise<void>;
}

/**
 * `text`: a record's JSON text for `json` and `ndjson` (one line, no newline), when
 * JSON.stringify is not the way (a batch record keeps its messages' text as the broker sent it:
 * batch.ts, batchRecordText).
 */
export async function recordSink<T extends object>(
  stream: OutputStream,
  format: MachineFormat,
  single: boolean,
  text: (record: T) => string = (record) => JSON.stringify(record),
): Promise<RecordSink<T>> {
  if (typeof format === 'object') {
    const { template } = format;
    if (single) return { add: (record) => write(stream, template.render(record)), end: async () => {} };
    const records: T[] = [];
    return {
      add: async (record) => void records.push(record),
      end: () => write(stream, template.render(records)),
    };
  }
  if (format === 'ndjson') {
    return { add: (record) => write(stream, `${text(record)}\n`), end: async () => {} };
  }
  if (format === 'yaml') {
    // Loaded only when asked for: YAML output must not slow down every JSON run.
    const stringify = await yamlStringify();
    let count = 0;
    return {
      add: (record) => {
        count++;
        return write(stream, stringify(single ? record : [record]));
      },
      // An empty sequence still has to parse as one.
      end: () => (single || count > 0 ? Promise.resolve() : write(stream, '[]\n')),
    };
  }
  if (single) {
    return { add: (record) => write(stream, `${text(record)}\n`), end: async () => {} };
  }
  let count = 0;
  return {
    add: (record) => write(stream, `${count++ === 0 ? '[\n' : ',\n'}${text(record)}`),
    end: () => write(stream, count === 0 ? '[]\n' : '\n]\n'),
  };
}
