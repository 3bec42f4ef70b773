/**
 * YAML output, one function for every `-o yaml` (records, watch and list events, config view).
 * yaml is loaded only by a run that prints YAML. The yaml library writes a multi-line string with
 * a line of only spaces or tabs as a block scalar that reads back different (`" \n"` as `|+`
 * then a line of three spaces, which parses as `"\n"`): such a string is written double-quoted
 * instead, so what a script parses is what queenctl meant (test/reliability/properties.test.ts).
 *
 * A string holding a character a terminal would obey (sanitise.ts: controls but the line feed,
 * DEL, C1, bidi) is double-quoted too, and each such character written as YAML's own escape
 * (`\x1b`, `\u202e`), which the library leaves raw for DEL, C1 and bidi: `-o yaml` read on a
 * terminal shows them as text, and a YAML parser reads back the exact string
 * (docs/security.md#outside-text-is-data).
 */
import { UNSAFE_PATTERN } from './sanitise.js';

export type YamlStringify = (value: unknown) => string;

const BLANK_LINE_WITH_SPACE = /(^|\n)[ \t]+(\n|$)/;
/**
 * Those characters but the line feed: a multi-line string keeps its readable block form, whose
 * lines are indented (no line of it can pass for a key), and the document's own lines end in one.
 */
const UNSAFE_BUT_LINE_FEED = `(?!\\n)(?:${UNSAFE_PATTERN})`;
const UNSAFE = new RegExp(UNSAFE_BUT_LINE_FEED);
const UNSAFE_ALL = new RegExp(UNSAFE_BUT_LINE_FEED, 'g');

/** YAML's escape of one character of a double-quoted scalar: `\xNN` below U+0100, else `\uNNNN`. */
function yamlEscape(character: string): string {
  const code = character.charCodeAt(0);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** Loads yaml and gives the stringify of every `-o yaml` output. */
export async function yamlStringify(): Promise<YamlStringify> {
  const { Document, Scalar, visit } = await import('yaml');
  return (value) => {
    const document = new Document(value);
    let unsafe = false;
    visit(document, {
      Scalar(_key, node) {
        if (typeof node.value !== 'string') return;
        if (UNSAFE.test(node.value)) {
          unsafe = true;
          node.type = Scalar.QUOTE_DOUBLE;
        } else if (node.value.includes('\n') && BLANK_LINE_WITH_SPACE.test(node.value)) {
          node.type = Scalar.QUOTE_DOUBLE;
        }
      },
    });
    const text = document.toString({ lineWidth: 0 });
    // Every such character is inside a double-quoted scalar now, where an escape means itself.
    return unsafe ? text.replace(UNSAFE_ALL, yamlEscape) : text;
  };
}
