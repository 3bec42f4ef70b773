/**
 * The reference pages of docs/reference/ from the command tree (model.ts): one per group
 * (lease.md, config.md) and queenctl.md for queenctl itself and the verbs of no group. Each
 * command: synopsis, description, arguments, flags with defaults and choices, exit codes,
 * examples, as its --help has them. `npm run docs` writes them (scripts/docs.mjs); a test of
 * the suite fails when the committed pages differ from what this renders.
 */
import { ENVIRONMENT, EXIT_CODES, FILES, LOCAL_EXIT_CODES, type Entry } from './environment.js';
import { isLaidOut, type ArgumentDoc, type CommandDoc, type ExitCodeDoc, type OptionDoc } from './model.js';

export interface ReferencePage {
  /** `lease.md`, under docs/reference/. */
  file: string;
  text: string;
}

/** The first line of every page: scripts/docs.mjs removes a page it made that is no longer made. */
export const GENERATED_MARK =
  '<!-- Generated from the command tree by `npm run docs` (src/docs/reference.ts): ' +
  'edit the help in src/commands/, then run npm run docs. -->';

/** What precedes the examples' fence: they name scripts, files and brokers of their own. */
export const EXAMPLES_SKIP =
  '<!-- doctest: skip (examples from --help: they name scripts, files and brokers of their own) -->';

export function referencePages(root: CommandDoc): ReferencePage[] {
  const groups = root.children.filter((child) => child.children.length > 0);
  const verbs = root.children.filter((child) => child.children.length === 0);
  return [
    {
      file: 'queenctl.md',
      text: page([rootSection(root, groups, verbs), ...verbs.map((verb) => section(verb))], root),
    },
    ...groups.map((group) => ({
      file: `${group.path[0]}.md`,
      text: page([groupSection(group), ...group.children.map((verb) => section(verb))], root),
    })),
  ];
}

/** The page a command is documented in: `lease.md`, or `queenctl.md` for the root and its verbs. */
export function referenceFile(command: CommandDoc): string {
  return command.path.length > 1 || (command.path.length === 1 && command.children.length > 0)
    ? `${command.path[0]}.md`
    : 'queenctl.md';
}

/**
 * Markdown text: what CommonMark and GitHub would read as markup (emphasis, links, HTML, code,
 * table cells) escaped with a backslash, and what would start a heading or a list at the start.
 */
export function markdownEscape(text: string): string {
  return text
    .replace(/[\\`*_[\]<>|]/g, '\\$&')
    .replace(/^(#|[-+](?= ))/, '\\$1')
    .replace(/^(\d+)([.)] )/, '$1\\$2');
}

/** A code span, long enough to hold backticks, with table pipes escaped. */
function code(text: string): string {
  const fence = '`'.repeat(Math.max(0, ...(text.match(/`+/g) ?? []).map((run) => run.length)) + 1);
  const padded = text.startsWith('`') || text.endsWith('`') ? ` ${text} ` : text;
  return `${fence}${padded.replace(/\|/g, '\\|')}${fence}`;
}

/** A GitHub heading anchor: lower case, punctuation gone, spaces to hyphens. */
function anchor(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');
}

function page(sections: string[][], root: CommandDoc): string {
  const lines = [GENERATED_MARK, '', ...sections.flatMap((section) => [...section, '']), ...globalSection(root)];
  // Sections end with a blank line and are joined by one: no run of blank lines (there are none in a fence).
  const text = lines.join('\n').replace(/\n{3,}/g, '\n\n');
  return `${text.trimEnd()}\n`;
}

function synopsis(command: CommandDoc): string[] {
  return ['```text', `${command.fullName} ${command.usage}`, '```'];
}

function prose(command: CommandDoc): string[] {
  // A table or an indented line keeps its layout: a block of text, as --help shows it.
  return command.paragraphs.flatMap((paragraph) =>
    isLaidOut(paragraph) ? ['```text', paragraph, '```', ''] : [markdownEscape(paragraph), ''],
  );
}

function rootSection(root: CommandDoc, groups: CommandDoc[], verbs: CommandDoc[]): string[] {
  return [
    `# ${root.fullName}`,
    '',
    markdownEscape(root.description),
    '',
    ...synopsis(root),
    '',
    ...prose(root),
    '| command | what it does | reference |',
    '| --- | --- | --- |',
    ...[...groups, ...verbs].map((child) => {
      const file = referenceFile(child);
      const link = file === 'queenctl.md' ? `#${anchor(child.fullName)}` : file;
      return `| ${code(child.fullName)} | ${markdownEscape(child.description)} | [${child.fullName}](${link}) |`;
    }),
    '',
    'Every command takes the [global options](#global-options), before or after its name.',
    '',
    ...examples(root, 2),
    '## Exit codes',
    '',
    ...exitTable(EXIT_CODES),
    'What each verb means by them: its own section. The contract: [cli-contract.md](../cli-contract.md#exit-codes).',
    '',
    '## Environment',
    '',
    ...entryTable('variable', ENVIRONMENT),
    '## Files',
    '',
    ...entryTable('file', FILES),
  ];
}

function groupSection(group: CommandDoc): string[] {
  return [
    `# ${group.fullName}`,
    '',
    markdownEscape(group.description),
    '',
    ...synopsis(group),
    '',
    ...prose(group),
    '| command | what it does |',
    '| --- | --- |',
    ...group.children.map(
      (child) => `| [${code(child.fullName)}](#${anchor(child.fullName)}) | ${markdownEscape(child.description)} |`,
    ),
    '',
    'Every command takes the [global options](#global-options), before or after its name; queenctl(1) lists ' +
      'the environment and files: [queenctl.md](queenctl.md).',
    '',
    ...examples(group, 2),
  ];
}

function section(command: CommandDoc): string[] {
  const lines = [
    `## ${command.fullName}`,
    '',
    markdownEscape(command.description),
    '',
    ...synopsis(command),
    '',
    ...prose(command),
  ];
  if (command.arguments.length > 0) lines.push('### Arguments', '', ...argumentTable(command.arguments));
  lines.push('### Options', '', ...optionTable(command.options));
  lines.push('Also the [global options](#global-options).', '');
  lines.push('### Exit codes', '', ...exitTable(command.exitCodes.length > 0 ? command.exitCodes : LOCAL_EXIT_CODES));
  for (const note of command.exitNotes) lines.push(markdownEscape(note), '');
  lines.push(...examples(command, 3));
  return lines;
}

function examples(command: CommandDoc, level: number): string[] {
  if (command.examples.length === 0) return [];
  return [`${'#'.repeat(level)} Examples`, '', EXAMPLES_SKIP, '```sh', ...command.examples, '```', ''];
}

function choices(list: readonly string[] | undefined): string {
  return list ? ` (choices: ${list.map(code).join(', ')})` : '';
}

function argumentTable(args: readonly ArgumentDoc[]): string[] {
  return [
    '| argument | description |',
    '| --- | --- |',
    ...args.map((arg) => `| ${code(arg.term)} | ${markdownEscape(arg.description)}${choices(arg.choices)} |`),
    '',
  ];
}

function optionTable(options: readonly OptionDoc[]): string[] {
  return [
    '| flag | description | default |',
    '| --- | --- | --- |',
    ...options.map((option) => {
      const shown = option.defaultValue === undefined ? '' : code(option.defaultValue);
      return `| ${code(option.flags)} | ${markdownEscape(option.description)}${choices(option.choices)} | ${shown} |`;
    }),
    '',
  ];
}

function exitTable(codes: readonly ExitCodeDoc[]): string[] {
  return [
    '| code | meaning |',
    '| --- | --- |',
    ...codes.map((row) => `| ${row.code} | ${markdownEscape(row.meaning)} |`),
    '',
  ];
}

function entryTable(heading: string, entries: readonly Entry[]): string[] {
  return [
    `| ${heading} | |`,
    '| --- | --- |',
    ...entries.map((entry) => `| ${code(entry.name)} | ${markdownEscape(entry.text)} |`),
    '',
  ];
}

function globalSection(root: CommandDoc): string[] {
  return [
    '## Global options',
    '',
    'Taken by every command, before or after its name.',
    '',
    ...optionTable(root.options.filter((option) => !option.names.includes('--help'))),
  ];
}
