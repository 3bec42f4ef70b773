/**
 * Man pages from the command tree (model.ts): queenctl(1), one per group (queenctl-lease(1)) and
 * one per verb (queenctl-lease-extend(1)), in man(7) macros. Text from the help strings is
 * escaped, never wrapped here (man fills the paragraphs to the reader's width); examples are
 * kept as written, in no-fill blocks. Run by the build (scripts/docs.mjs), never by queenctl.
 */
import { ENVIRONMENT, EXIT_CODES, FILES, LOCAL_EXIT_CODES, type Entry } from './environment.js';
import { everyCommand, isLaidOut, type CommandDoc, type ExitCodeDoc, type OptionDoc } from './model.js';

export interface ManPage {
  /** `queenctl-lease-extend.1`. */
  file: string;
  text: string;
}

export interface ManOptions {
  /** The package's version, in the page's footer. */
  version: string;
  /** YYYY-MM-DD, in the footer: the build's date (SOURCE_DATE_EPOCH for a reproducible one). */
  date: string;
}

/** The page name of a command: queenctl, queenctl-lease, queenctl-lease-extend. */
export function manName(command: CommandDoc): string {
  return ['queenctl', ...command.path].join('-');
}

/** One page per command of the tree (hidden ones are not in it). */
export function manPages(root: CommandDoc, options: ManOptions): ManPage[] {
  return everyCommand(root).map((command) => ({
    file: `${manName(command)}.1`,
    text: manPage(command, root, options),
  }));
}

/**
 * Text for roff: a backslash is `\e`, every `-` a minus (`\-`: a flag copied from the page
 * must be the ASCII hyphen-minus), quotes and the characters groff would typeset as other glyphs
 * named, and a line starting with a control character (`.` or `'`) guarded by `\&`.
 */
export function roffEscape(text: string): string {
  const escaped = text
    .replace(/\\/g, '\\e')
    .replace(/-/g, '\\-')
    .replace(/'/g, '\\(aq')
    .replace(/"/g, '\\(dq')
    .replace(/`/g, '\\(ga')
    .replace(/\^/g, '\\(ha')
    .replace(/~/g, '\\(ti');
  return escaped.replace(/^\./gm, '\\&.');
}

/** A filled line: its leading spaces (a break in roff) and line ends (a new input line) removed. */
function filled(text: string): string {
  return roffEscape(text.replace(/\s+/g, ' ').trim());
}

function bold(text: string): string {
  return `\\fB${roffEscape(text)}\\fR`;
}

function italic(text: string): string {
  return `\\fI${roffEscape(text)}\\fR`;
}

/** A macro's argument: quoted, with its own quotes named. */
function argument(text: string): string {
  return `"${roffEscape(text)}"`;
}

function manPage(command: CommandDoc, root: CommandDoc, options: ManOptions): string {
  const name = manName(command);
  const lines: string[] = [
    `.\\" ${name}(1), generated from queenctl's command tree by src/docs/man.ts: edit the help in src/commands/.`,
    `.TH ${argument(name.toUpperCase())} 1 ${argument(options.date)} ${argument(`queenctl ${options.version}`)} ` +
      `${argument('queenctl manual')}`,
    // Ragged right, no hyphenation: flags and URLs are long words that justification would stretch
    // lines around (groff warns that it cannot adjust them on an 80-column terminal).
    '.nh',
    '.ad l',
    '.SH NAME',
    `${roffEscape(name)} \\- ${filled(command.description)}`,
    '.SH SYNOPSIS',
    ...synopsis(command),
    '.SH DESCRIPTION',
    filled(sentence(command.description)),
    // A table or an indented line keeps its layout: a no-fill block, as the examples are.
    ...command.paragraphs.flatMap((paragraph) =>
      isLaidOut(paragraph)
        ? ['.PP', '.nf', ...paragraph.split('\n').map(roffEscape), '.fi']
        : ['.PP', filled(paragraph)],
    ),
  ];
  if (command.children.length > 0) {
    lines.push('.SH COMMANDS');
    for (const child of command.children) {
      const see = `See \\fB${roffEscape(manName(child))}\\fR(1).`;
      lines.push('.TP', bold(child.path[child.path.length - 1]!), `${filled(sentence(child.description))} ${see}`);
    }
  }
  if (command.arguments.length > 0) {
    lines.push('.SH ARGUMENTS');
    for (const arg of command.arguments) {
      lines.push('.TP', italic(arg.term), filled(withChoices(arg.description, arg.choices, undefined)));
    }
  }
  const isRoot = command.path.length === 0;
  lines.push('.SH OPTIONS', ...optionList(command.options));
  if (!isRoot) {
    const own = new Set(command.options.flatMap((option) => option.names));
    const global = root.options.filter((option) => !option.names.some((spelling) => own.has(spelling)));
    lines.push('.SS Global options', 'Taken by every command, before or after its name:', ...optionList(global));
  }
  lines.push('.SH EXIT STATUS', ...exitStatus(command));
  lines.push('.SH ENVIRONMENT', ...entryList(ENVIRONMENT));
  lines.push('.SH FILES', ...entryList(FILES));
  if (command.examples.length > 0) {
    lines.push('.SH EXAMPLES', '.RS 4', '.EX', ...command.examples.map(roffEscape), '.EE', '.RE');
  }
  lines.push('.SH SEE ALSO', seeAlso(command, root));
  return `${lines.join('\n')}\n`;
}

function synopsis(command: CommandDoc): string[] {
  return [`.B ${roffEscape(command.fullName)}`, roffEscape(command.usage)];
}

/** A description as the start of DESCRIPTION: a capital and a full stop. */
function sentence(text: string): string {
  const trimmed = text.trim();
  const capital = trimmed.charAt(0).toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}

function withChoices(description: string, choices: readonly string[] | undefined, defaultValue: string | undefined) {
  const extra = [
    ...(choices ? [`choices: ${choices.join(', ')}`] : []),
    ...(defaultValue !== undefined ? [`default: ${defaultValue}`] : []),
  ];
  return extra.length > 0 ? `${description} (${extra.join('; ')})` : description;
}

function optionList(options: readonly OptionDoc[]): string[] {
  return options.flatMap((option) => {
    const value = option.value ? ` ${italic(option.value.replace(/^<(.*)>$/, '$1'))}` : '';
    const tag = `${option.names.map(bold).join(', ')}${value}`;
    return ['.TP', tag, filled(withChoices(option.description, option.choices, option.defaultValue))];
  });
}

function exitStatus(command: CommandDoc): string[] {
  const codes: readonly ExitCodeDoc[] =
    command.path.length === 0 ? EXIT_CODES : command.exitCodes.length > 0 ? command.exitCodes : LOCAL_EXIT_CODES;
  const lines = codes.flatMap((row) => ['.TP', bold(row.code), filled(row.meaning)]);
  for (const note of command.exitNotes) lines.push('.PP', filled(note));
  return lines;
}

function entryList(entries: readonly Entry[]): string[] {
  return entries.flatMap((entry) => ['.TP', bold(entry.name), filled(entry.text)]);
}

/** The root, the group above, the commands beside and below: `.BR` pages, comma-separated. */
function seeAlso(command: CommandDoc, root: CommandDoc): string {
  const related: CommandDoc[] = [];
  const add = (doc: CommandDoc | undefined): void => {
    if (doc && doc !== command && !related.includes(doc)) related.push(doc);
  };
  add(root);
  const parent = everyCommand(root).find((doc) => doc.children.includes(command));
  add(parent);
  for (const child of command.children) add(child);
  if (parent && parent !== root) for (const sibling of parent.children) add(sibling);
  if (command === root) for (const doc of everyCommand(root)) add(doc);
  return related
    .map((doc, index) => `.BR ${roffEscape(manName(doc))} (1)${index < related.length - 1 ? ',' : ''}`)
    .join('\n');
}
