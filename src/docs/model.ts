/**
 * The command tree as the reference docs and man pages read it: each visible command's usage,
 * description, arguments, flags with their defaults and choices, and the sections of the text its
 * help prints after the flags (prose, `Exit codes:`, `Examples:`). Both renderers (reference.ts,
 * man.ts) take this, so `--help`, docs/reference/ and `man` say the same from one source.
 */
import type { EventEmitter } from 'node:events';
import { Help, type Argument, type Command, type Option } from 'commander';

export interface ArgumentDoc {
  /** `<leaseId...>`, `[command...]`. */
  term: string;
  description: string;
  choices: readonly string[] | undefined;
}

export interface OptionDoc {
  /** `-o, --output <format>`. */
  flags: string;
  /** The spellings alone: `-o`, `--output`. */
  names: string[];
  /** `<format>`, or '' for a switch. */
  value: string;
  description: string;
  /** As --help shows it (`10s`, `16`), undefined when --help shows none. */
  defaultValue: string | undefined;
  choices: readonly string[] | undefined;
}

export interface ExitCodeDoc {
  /** `0`, `129/130/143`. */
  code: string;
  meaning: string;
}

export interface CommandDoc {
  /** From the root: [] for queenctl itself, ['lease', 'extend']. */
  path: string[];
  /** `queenctl lease extend`. */
  fullName: string;
  /** `[options] <leaseId...>`, as --help's Usage line has it after the name. */
  usage: string;
  description: string;
  arguments: ArgumentDoc[];
  /** Its own flags, --help included. */
  options: OptionDoc[];
  /** The visible subcommands (a group's verbs); commander's implicit `help` of a group is not one. */
  children: CommandDoc[];
  /** Paragraphs of the help's text after the flags, each one line (the help's own wrapping undone). */
  paragraphs: string[];
  /** The `Exit codes:` block of the help, empty when it has none. */
  exitCodes: ExitCodeDoc[];
  /** Paragraphs that follow the exit codes in that block (how several ids combine). */
  exitNotes: string[];
  /** The `Examples:` lines, as written (a trailing `# comment` kept). */
  examples: string[];
}

/** The visible tree under `program`; hidden commands (`__complete`) are left out. */
export function describeProgram(program: Command): CommandDoc {
  return describe(program, []);
}

function describe(command: Command, path: string[]): CommandDoc {
  const help = new Help();
  const after = parseAfterHelp(afterHelpText(command));
  const children = help
    .visibleCommands(command)
    // A group's implicit `help` is commander's, not one of queenctl's commands.
    .filter((child) => command.commands.includes(child))
    .map((child) => describe(child, [...path, child.name()]));
  return {
    path,
    fullName: ['queenctl', ...path].join(' '),
    usage: command.usage(),
    description: command.description(),
    arguments: help.visibleArguments(command).map(argumentDoc),
    options: help.visibleOptions(command).map(optionDoc),
    children,
    ...after,
  };
}

/** The global options: queenctl's own flags (`--version` and `--help` included). */
export function globalOptions(root: CommandDoc): OptionDoc[] {
  return root.options;
}

/** Every command of the tree, the root first, depth first in the order --help lists them. */
export function everyCommand(root: CommandDoc): CommandDoc[] {
  return [root, ...root.children.flatMap(everyCommand)];
}

function argumentDoc(argument: Argument): ArgumentDoc {
  const name = `${argument.name()}${argument.variadic ? '...' : ''}`;
  return {
    term: argument.required ? `<${name}>` : `[${name}]`,
    description: argument.description,
    choices: argument.argChoices,
  };
}

function optionDoc(option: Option): OptionDoc {
  const names = [option.short, option.long].filter((name): name is string => Boolean(name));
  const value = option.flags.replace(/^[^<[]*/, '').trim();
  return {
    flags: option.flags,
    names,
    value,
    description: option.description,
    defaultValue: shownDefault(option),
    choices: option.argChoices,
  };
}

/** The default --help shows (commander's Help.optionDescription): none for switches and --no-x. */
function shownDefault(option: Option): string | undefined {
  if (option.defaultValue === undefined) return undefined;
  const shown = option.required || option.optional || (option.isBoolean() && typeof option.defaultValue === 'boolean');
  if (!shown || (option.negate && option.defaultValue === true)) return undefined;
  return option.defaultValueDescription || JSON.stringify(option.defaultValue);
}

/**
 * What `addHelpText('after', ...)` gave the command: commander keeps it only as a listener of
 * `afterHelp`, which writes it when help is printed; here it writes into a string instead.
 */
function afterHelpText(command: Command): string {
  let text = '';
  (command as unknown as EventEmitter).emit('afterHelp', {
    error: false,
    command,
    write: (chunk: string) => {
      text += chunk;
    },
  });
  return text;
}

type AfterHelp = Pick<CommandDoc, 'paragraphs' | 'exitCodes' | 'exitNotes' | 'examples'>;

/**
 * Splits the help's text after the flags into its sections. The help texts (src/commands/) write
 * blocks separated by blank lines: prose, wrapped by hand at ~100 columns; `Exit codes:` and its
 * indented `code  meaning` rows, then unindented lines that add to it; `Examples:` and its
 * indented command lines.
 */
export function parseAfterHelp(text: string): AfterHelp {
  const result: AfterHelp = { paragraphs: [], exitCodes: [], exitNotes: [], examples: [] };
  const blocks = text
    .replace(/\r\n/g, '\n')
    .split(/\n[ \t]*\n/)
    .map((block) => block.replace(/^\n+|\s+$/g, ''))
    .filter((block) => block.trim() !== '');
  for (const block of blocks) {
    const [first = '', ...rest] = block.split('\n');
    if (first.trim() === 'Examples:') {
      result.examples.push(...rest.map((line) => line.replace(/^ {2}/, '')).filter((line) => line.trim() !== ''));
    } else if (first.trim() === 'Exit codes:') {
      const notes: string[] = [];
      for (const line of rest) {
        const row = /^\s+(\S+)\s{2,}(.*)$/.exec(line);
        if (row && notes.length === 0) result.exitCodes.push({ code: row[1]!, meaning: row[2]!.trim() });
        else if (/^\s/.test(line) && notes.length === 0 && result.exitCodes.length > 0) {
          // A row's meaning wrapped onto an indented line of its own.
          const last = result.exitCodes[result.exitCodes.length - 1]!;
          last.meaning = `${last.meaning} ${line.trim()}`;
        } else notes.push(line.trim());
      }
      if (notes.length > 0) result.exitNotes.push(notes.join(' '));
    } else {
      result.paragraphs.push(isLaidOut(block) ? block : unwrap(block));
    }
  }
  return result;
}

/**
 * A block laid out by hand, a table or an indented line among prose: a line after the first that
 * starts with two spaces. It keeps its lines and their indents (a renderer shows it unfilled);
 * any other paragraph is one line, filled by the renderer.
 */
export function isLaidOut(paragraph: string): boolean {
  return /\n {2}/.test(paragraph);
}

/** A paragraph wrapped by hand, as one line: the renderers (or man) wrap it for the reader. */
function unwrap(block: string): string {
  return block
    .split('\n')
    .map((line) => line.trim())
    .join(' ');
}
