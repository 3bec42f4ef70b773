/**
 * YAML output, one function for every `-o yaml` (records, watch and list events, config view).
 * yaml is loaded only by a run that prints YAML. The yaml library writes a multi-line string with
 * a line of only spaces or tabs as a block scalar that reads back different (`" \n"` as `|+`
 * then a line of three spaces, which parses as `"\n"`): such a string is written double-quoted
 * instead, so what a script parses is what queenctl meant (test/reliability/properties.test.ts).
 */
export type YamlStringify = (value: unknown) => string;

const BLANK_LINE_WITH_SPACE = /(^|\n)[ \t]+(\n|$)/;

/** Loads yaml and gives the stringify of every `-o yaml` output. */
export async function yamlStringify(): Promise<YamlStringify> {
  const { Document, Scalar, visit } = await import('yaml');
  return (value) => {
    const document = new Document(value);
    visit(document, {
      Scalar(_key, node) {
        if (typeof node.value === 'string' && node.value.includes('\n') && BLANK_LINE_WITH_SPACE.test(node.value))
          node.type = Scalar.QUOTE_DOUBLE;
      },
    });
    return document.toString({ lineWidth: 0 });
  };
}
