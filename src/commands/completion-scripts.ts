/**
 * The completion scripts, generated from the commander tree: the tree as data (names, flags,
 * descriptions, what values follow) and one small walker per shell. See completion.ts.
 */
import { Help, type Command, type Option } from 'commander';
import { OUTPUT_FORMATS } from '../output/format.js';
import type { Shell } from './completion.js';

// ---------------------------------------------------------------------------------------------
// The tree, as the scripts need it
// ---------------------------------------------------------------------------------------------

/**
 * What may follow a flag or stand as an argument: nothing to offer, files, contexts, the lease
 * ids held now, the broker's consumer groups, queues or partitions, words.
 */
type ValueKind = 'any' | 'file' | 'context' | 'lease' | BrokerKind | `words:${string}`;

/** The names the scripts ask the broker for, each through `__complete <kind>s`. */
type BrokerKind = 'group' | 'queue' | 'partition';
const BROKER_KINDS: readonly BrokerKind[] = ['group', 'queue', 'partition'];
/** Every kind a script asks the broker for through `__complete`, with the connection flags. */
const BROKER_NAMES = ['lease', ...BROKER_KINDS];

/** The verbs whose operands are lease ids held now. */
const LEASE_ID_VERBS = ['lease extend', 'lease inspect', 'lease watch'];

/**
 * The flags that say which broker and token to use: passed on to `__complete leases` (and groups,
 * queues, partitions), so names come from the broker the command line names. Values may follow
 * after a space or an `=`.
 */
const CONNECTION_FLAGS = ['--context', '--server', '--config', '--token-file', '--cacert'];

interface FlagSpec {
  /** `-o`, `--output`: every spelling. */
  names: string[];
  description: string;
  /** null: a switch, it takes no value. */
  value: ValueKind | null;
}

interface CommandSpec {
  /** Space-separated names from the root: '' for queenctl itself, 'lease extend'. */
  path: string;
  name: string;
  description: string;
  children: CommandSpec[];
  /** Own flags only; a command also takes every ancestor's. */
  flags: FlagSpec[];
  /** What its first argument completes to, when anything. */
  argument: ValueKind | null;
}

/**
 * `-o jsonpath=`: offered with the formats, and the expression is typed right after the `=`, so
 * no shell adds a space after it (the scripts leave a word ending in `=` open).
 */
const JSONPATH_PREFIX = 'jsonpath=';

/**
 * Flags whose values are files, contexts or the broker's names; the rest say so through
 * commander's choices.
 */
const FLAG_VALUES: Record<string, ValueKind> = {
  '--output': `words:${[...OUTPUT_FORMATS, JSONPATH_PREFIX].join(' ')}`,
  '--group': 'group',
  '--queue': 'queue',
  '--partition': 'partition',
  '--context': 'context',
  '--config': 'file',
  '--token-file': 'file',
  '--cacert': 'file',
};

function isBrokerName(kind: ValueKind): boolean {
  return (BROKER_NAMES as readonly string[]).includes(kind);
}

function flagSpec(option: Option): FlagSpec {
  const names = [option.short, option.long].filter((name): name is string => Boolean(name));
  const takesValue = option.required || option.optional;
  const choices = option.argChoices;
  const value: ValueKind | null = !takesValue
    ? null
    : choices
      ? `words:${choices.join(' ')}`
      : (FLAG_VALUES[option.long ?? ''] ?? 'any');
  return { names, description: option.description, value };
}

function argumentKind(path: string, command: Command): ValueKind | null {
  const first = command.registeredArguments[0];
  if (!first) return null;
  if (first.argChoices) return `words:${first.argChoices.join(' ')}`;
  // The config verbs name their context `<name>`.
  if (path.startsWith('config ') && first.name() === 'name') return 'context';
  if (LEASE_ID_VERBS.includes(path)) return 'lease';
  // lease acquire <queue>, and any verb that takes a queue first.
  if (first.name() === 'queue') return 'queue';
  // A batch record, the file lease acquire -o json wrote.
  if (path === 'lease ack') return 'file';
  return null;
}

export function commandTree(command: Command, path = ''): CommandSpec {
  const help = new Help();
  const flags = help.visibleOptions(command).map(flagSpec);
  const children = help
    .visibleCommands(command)
    .map((child) => commandTree(child, path ? `${path} ${child.name()}` : child.name()));
  // `help lease extend` walks the same names as `lease extend`: the help command completes them.
  const helpSpec = children.find((child) => child.name === 'help');
  if (helpSpec) {
    helpSpec.children = children.filter((child) => child !== helpSpec).map((child) => namesOnly(child, helpSpec.path));
  }
  return {
    path,
    name: command.name(),
    description: command.description(),
    children,
    flags,
    argument: argumentKind(path, command),
  };
}

/** A command's names and descriptions under another path, for `help`: no flags, no arguments. */
function namesOnly(spec: CommandSpec, under: string): CommandSpec {
  const path = `${under} ${spec.name}`;
  return {
    path,
    name: spec.name,
    description: spec.description,
    children: spec.children.filter((child) => child.name !== 'help').map((child) => namesOnly(child, path)),
    flags: [],
    argument: null,
  };
}

function everyCommand(spec: CommandSpec): CommandSpec[] {
  return [spec, ...spec.children.flatMap(everyCommand)];
}

/** A command's own flags and its ancestors', each spelling once (help and version included). */
function flagsAt(root: CommandSpec, path: string): FlagSpec[] {
  const chain: CommandSpec[] = [root];
  for (const name of path ? path.split(' ') : []) {
    const next = chain[chain.length - 1]!.children.find((child) => child.name === name);
    if (next) chain.push(next);
  }
  const seen = new Set<string>();
  const flags: FlagSpec[] = [];
  for (const spec of chain.reverse()) {
    for (const flag of spec.flags) {
      if (flag.names.some((name) => seen.has(name))) continue;
      for (const name of flag.names) seen.add(name);
      flags.push(flag);
    }
  }
  return flags;
}

export function completionScript(shell: Shell, program: Command): string {
  const root = commandTree(program);
  const name = program.name();
  switch (shell) {
    case 'bash':
      return bashScript(name, root);
    case 'zsh':
      return zshScript(name, root);
    case 'fish':
      return fishScript(name, root);
  }
}

// ---------------------------------------------------------------------------------------------
// Quoting
// ---------------------------------------------------------------------------------------------

/** POSIX single quotes, which bash, zsh and fish all read the same for these characters. */
function sq(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

/** fish single quotes: only \\ and \' are special inside. */
function fq(text: string): string {
  return `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** The case arms shared by bash and zsh: which words a path has, which flags take values. */
function shellTables(fn: string, root: CommandSpec, entry: (spec: CommandSpec) => string): string {
  const arms = everyCommand(root).map((spec) => `    ${sq(spec.path)}) ${entry(spec)} ;;`);
  return `${fn}() {\n  case "$1" in\n${arms.join('\n')}\n    *) REPLY= ; reply=() ;;\n  esac\n}\n`;
}

function valueTable(fn: string, root: CommandSpec): string {
  const arms: string[] = [];
  for (const spec of everyCommand(root)) {
    const byKind = new Map<ValueKind, string[]>();
    for (const flag of flagsAt(root, spec.path)) {
      if (flag.value === null) continue;
      byKind.set(flag.value, [...(byKind.get(flag.value) ?? []), ...flag.names]);
    }
    if (byKind.size === 0) continue;
    const inner = [...byKind].map(([kind, names]) => `        ${names.join('|')}) REPLY=${sq(kind)} ;;`);
    arms.push(`    ${sq(spec.path)})\n      case "$2" in\n${inner.join('\n')}\n      esac ;;`);
  }
  return `${fn}() {\n  REPLY=\n  case "$1" in\n${arms.join('\n')}\n  esac\n}\n`;
}

function argumentTable(fn: string, root: CommandSpec): string {
  const arms = everyCommand(root)
    .filter((spec) => spec.argument !== null)
    .map((spec) => `    ${sq(spec.path)}) REPLY=${sq(spec.argument!)} ;;`);
  return `${fn}() {\n  REPLY=\n  case "$1" in\n${arms.join('\n')}\n  esac\n}\n`;
}

function header(shell: Shell, name: string, load: string): string {
  return `# ${shell} completion for ${name}, generated from its command tree by \`${name} completion ${shell}\`.
# Regenerate after an upgrade. Load it with: ${load}
`;
}

// ---------------------------------------------------------------------------------------------
// bash
// ---------------------------------------------------------------------------------------------

function bashScript(name: string, root: CommandSpec): string {
  const fn = `_${name.replace(/[^A-Za-z0-9_]/g, '_')}`;
  return `${header('bash', name, `source <(${name} completion bash)`)}
${shellTables(`${fn}_commands`, root, (spec) => `REPLY=${sq(spec.children.map((child) => child.name).join(' '))}`)}
${shellTables(
  `${fn}_flags`,
  root,
  (spec) =>
    `REPLY=${sq(
      flagsAt(root, spec.path)
        .flatMap((flag) => flag.names)
        .join(' '),
    )}`,
)}
${valueTable(`${fn}_value`, root)}
${argumentTable(`${fn}_argument`, root)}
# Adds to COMPREPLY each candidate ($2...) that starts with the word typed ($1), quoted by printf %q
# for the command line. A candidate is data: nothing in it is expanded, here or once inserted
# (compgen -W would run a $(...) in a lease id the broker sent, or in a context name).
${fn}_add() {
  local prefix=$1 word quoted
  shift
  for word in "$@"; do
    [[ -n $word && $word == "$prefix"* ]] || continue
    printf -v quoted '%q' "$word"
    COMPREPLY+=("$quoted")
  done
}

# Adds the words of $2 (queenctl's own, space-separated) that start with $1.
${fn}_words() {
  local -a words
  read -ra words <<< "$2"
  ${fn}_add "$1" "\${words[@]}"
}

${fn}_offer() {
  local -a names
  case "$1" in
    file) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- "$2") ;;
    context)
      mapfile -t names < <("$3" __complete contexts 2>/dev/null)
      ${fn}_add "$2" "\${names[@]}" ;;
    ${BROKER_NAMES.join('|')})
      # Asked of the broker the line names: lease -> __complete leases, group -> groups.
      ${fn}_connection
      mapfile -t names < <("$3" __complete "$1"s "\${REPLY[@]}" 2>/dev/null)
      ${fn}_add "$2" "\${names[@]}" ;;
    words:*)
      ${fn}_words "$2" "\${1#words:}"
      # A word ending in = (jsonpath=) is left open: its value follows it, with no space.
      [[ \${#COMPREPLY[@]} == 1 && \${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null ;;
  esac
}

# The words after \`--\` (at $1 of COMP_WORDS) are a command line of their own, watch's or run's:
# the command's name (a path, ./run.sh, is a file), then its own completion through
# bash-completion's _command_offset where that is loaded, else files.
${fn}_command_line() {
  local -a names
  if declare -F _command_offset >/dev/null; then
    _command_offset "$1"
  elif ((COMP_CWORD == $1)) && [[ $2 != */* ]]; then
    mapfile -t names < <(compgen -c -- "$2" | sort -u)
    ${fn}_add "$2" "\${names[@]}"
  else
    compopt -o default 2>/dev/null
  fi
}

# The flags of the command line that name a broker or a token, from COMP_LINE: COMP_WORDS splits
# a URL at its colons.
${fn}_connection() {
  local -a line
  local i
  read -ra line <<< "$COMP_LINE"
  REPLY=()
  for ((i = 1; i < \${#line[@]}; i++)); do
    case \${line[i]} in
      --) break ;;
      ${CONNECTION_FLAGS.join('|')}) REPLY+=("\${line[i]}" "\${line[i+1]}"); ((i++)) ;;
      ${CONNECTION_FLAGS.map((flag) => `${flag}=*`).join('|')}|--insecure) REPLY+=("\${line[i]}") ;;
    esac
  done
}

${fn}() {
  local cur=\${COMP_WORDS[COMP_CWORD]} cmdpath= word option i REPLY
  COMPREPLY=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=\${COMP_WORDS[i]}
    if [[ $word == -- ]]; then
      ${fn}_command_line $((i + 1)) "$cur"
      return 0
    fi
    if [[ $word == -* ]]; then
      [[ $word == *=* ]] && continue
      ${fn}_value "$cmdpath" "$word"
      [[ -n $REPLY ]] && ((i++))
      continue
    fi
    ${fn}_commands "$cmdpath"
    [[ " $REPLY " == *" $word "* ]] && cmdpath=\${cmdpath:+$cmdpath }$word
  done
  # The value of a flag: "--output json", or "--output=json" (bash splits at =).
  option=\${COMP_WORDS[COMP_CWORD-1]}
  [[ $option == = && COMP_CWORD -gt 2 ]] && option=\${COMP_WORDS[COMP_CWORD-2]}
  if ((COMP_CWORD > 1)) && [[ $option == -* ]]; then
    ${fn}_value "$cmdpath" "$option"
    if [[ -n $REPLY ]]; then
      ${fn}_offer "$REPLY" "$cur" "\${COMP_WORDS[0]}"
      return 0
    fi
  fi
  if [[ $cur == -* ]]; then
    ${fn}_flags "$cmdpath"
    ${fn}_words "$cur" "$REPLY"
    return 0
  fi
  ${fn}_commands "$cmdpath"
  if [[ -n $REPLY ]]; then
    ${fn}_words "$cur" "$REPLY"
    return 0
  fi
  ${fn}_argument "$cmdpath"
  [[ -n $REPLY ]] && ${fn}_offer "$REPLY" "$cur" "\${COMP_WORDS[0]}"
  return 0
}

complete -F ${fn} ${name}
`;
}

// ---------------------------------------------------------------------------------------------
// zsh
// ---------------------------------------------------------------------------------------------

/** `name:description` for _describe, with the colons of a name escaped. */
function described(names: string[], description: string): string[] {
  return names.map((name) => sq(`${name.replaceAll(':', '\\:')}:${oneLine(description)}`));
}

function zshScript(name: string, root: CommandSpec): string {
  const fn = `_${name.replace(/[^A-Za-z0-9_]/g, '_')}`;
  const subcommands = (spec: CommandSpec): string =>
    spec.children.flatMap((child) => described([child.name], child.description)).join(' ');
  return `#compdef ${name}
${header('zsh', name, `source <(${name} completion zsh), after compinit`)}
${shellTables(`${fn}_commands`, root, (spec) => `reply=(${subcommands(spec)})`)}
${shellTables(
  `${fn}_flags`,
  root,
  (spec) =>
    `reply=(${flagsAt(root, spec.path)
      .flatMap((flag) => described(flag.names, flag.description))
      .join(' ')})`,
)}
${valueTable(`${fn}_value`, root)}
${argumentTable(`${fn}_argument`, root)}
${fn}_offer() {
  local -a names open
  case "$1" in
    file) _files ;;
    context) names=(\${(f)"$(\${words[1]} __complete contexts 2>/dev/null)"}); compadd -a names ;;
    ${BROKER_NAMES.join('|')})
      # Asked of the broker the line names: lease -> __complete leases, group -> groups.
      names=(\${(f)"$(\${words[1]} __complete \${1}s "\${connection[@]}" 2>/dev/null)"})
      compadd -a names ;;
    words:*)
      names=(\${=\${1#words:}})
      # A word ending in = (jsonpath=) is left open: its value follows it, with no space.
      open=(\${(M)names:#*=})
      names=(\${names:#*=})
      compadd -a names
      compadd -S '' -a open ;;
    *) _message 'value' ;;
  esac
}

${fn}() {
  local cmdpath= word option REPLY i
  local -a reply connection
  for ((i = 2; i < CURRENT; i++)); do
    word=\${words[i]}
    # The flags naming a broker or a token go on to \`__complete leases\`.
    case $word in
      ${CONNECTION_FLAGS.join('|')}) connection+=($word \${(Q)words[i+1]}) ;;
      ${CONNECTION_FLAGS.map((flag) => `${flag}=*`).join('|')}|--insecure) connection+=(\${(Q)word}) ;;
    esac
    if [[ $word == -- ]]; then
      # The rest is a command line of its own (watch's, run's): the command's name, then what
      # that command completes, as zsh completes any command line.
      shift $i words
      (( CURRENT -= i ))
      _normal
      return
    fi
    if [[ $word == -* ]]; then
      [[ $word == *=* ]] && continue
      ${fn}_value "$cmdpath" "$word"
      [[ -n $REPLY ]] && (( i++ ))
      continue
    fi
    ${fn}_commands "$cmdpath"
    (( \${reply[(I)\${word}:*]} )) && cmdpath=\${cmdpath:+$cmdpath }$word
  done
  option=\${words[CURRENT-1]}
  if (( CURRENT > 2 )) && [[ $option == -* ]]; then
    ${fn}_value "$cmdpath" "$option"
    if [[ -n $REPLY ]]; then
      ${fn}_offer "$REPLY"
      return
    fi
  fi
  if [[ \${words[CURRENT]} == -* ]]; then
    ${fn}_flags "$cmdpath"
    _describe -t options 'option' reply
    return
  fi
  ${fn}_commands "$cmdpath"
  if (( \${#reply} )); then
    _describe -t commands 'command' reply
    return
  fi
  ${fn}_argument "$cmdpath"
  [[ -n $REPLY ]] && ${fn}_offer "$REPLY"
}

if [[ \${funcstack[1]} == ${fn} ]]; then
  ${fn} "$@"
else
  compdef ${fn} ${name}
fi
`;
}

// ---------------------------------------------------------------------------------------------
// fish
// ---------------------------------------------------------------------------------------------

function fishScript(name: string, root: CommandSpec): string {
  const fn = `__${name.replace(/[^A-Za-z0-9_]/g, '_')}`;
  const specs = everyCommand(root);
  const lines: string[] = [];
  const commandArms = specs.map((spec) => {
    const children = spec.children.map((child) => fq(child.name)).join(' ');
    return `        case ${fq(spec.path)}\n            printf '%s\\n' ${children}`;
  });
  const valueArms = specs.flatMap((spec) => {
    const names = flagsAt(root, spec.path)
      .filter((flag) => flag.value !== null)
      .flatMap((flag) => flag.names);
    return names.length > 0
      ? [`        case ${fq(spec.path)}\n            contains -- $argv[2] ${names.map(fq).join(' ')}`]
      : [];
  });
  const complete = (condition: string, rest: string): string => `complete -c ${name} -n ${fq(condition)} ${rest}`;
  const flagLine = (flag: FlagSpec, condition: string): string => {
    const spellings = flag.names
      .map((spelling) => (spelling.startsWith('--') ? `-l ${spelling.slice(2)}` : `-s ${spelling.slice(1)}`))
      .join(' ');
    const value =
      flag.value === null
        ? ''
        : flag.value === 'file'
          ? ' -r -F'
          : flag.value === 'context'
            ? ` -x -a ${fq(`(${fn}_contexts)`)}`
            : isBrokerName(flag.value)
              ? ` -x -a ${fq(`(${fn}_broker ${flag.value}s)`)}`
              : flag.value === 'any'
                ? ' -x'
                : ` -x -a ${fq(flag.value.slice('words:'.length))}`;
    return complete(condition, `${spellings}${value} -d ${fq(oneLine(flag.description))}`);
  };
  for (const spec of specs) {
    const at = `${fn}_at ${fq(spec.path)}`;
    for (const child of spec.children)
      lines.push(complete(at, `-a ${fq(child.name)} -d ${fq(oneLine(child.description))}`));
    // The program's own flags are accepted after any command, so they are offered everywhere.
    const condition = spec.path === '' ? `not ${fn}_at __dashdash` : at;
    for (const flag of spec.flags) lines.push(flagLine(flag, condition));
    if (spec.argument !== null) {
      const kind = spec.argument;
      const offer =
        kind === 'file'
          ? '-F'
          : kind === 'context'
            ? `-a ${fq(`(${fn}_contexts)`)}`
            : isBrokerName(kind)
              ? `-a ${fq(`(${fn}_broker ${kind}s)`)}`
              : kind === 'any'
                ? ''
                : `-a ${fq(kind.slice('words:'.length))}`;
      if (offer) lines.push(complete(at, offer));
    }
  }
  return `${header('fish', name, `${name} completion fish | source`)}
function ${fn}_commands
    switch "$argv[1]"
${commandArms.join('\n')}
    end
end

function ${fn}_takes_value
    switch "$argv[1]"
${valueArms.join('\n')}
        case '*'
            return 1
    end
end

# The command path typed so far ('config use-context'), or __dashdash after watch's --.
function ${fn}_path
    set -l words (commandline -opc)
    set -e words[1]
    set -l cmdpath
    set -l skip 0
    for word in $words
        if test $skip = 1
            set skip 0
            continue
        end
        if test "$word" = --
            echo __dashdash
            return
        end
        switch $word
            case '--*=*'
            case '-*'
                ${fn}_takes_value (string join ' ' $cmdpath) $word; and set skip 1
            case '*'
                contains -- $word (${fn}_commands (string join ' ' $cmdpath)); and set -a cmdpath $word
        end
    end
    string join ' ' $cmdpath
end

function ${fn}_at
    set -l here (${fn}_path)
    test "$here" = "$argv[1]"
end

function ${fn}_contexts
    set -l words (commandline -opc)
    $words[1] __complete contexts 2>/dev/null
end

# What the broker holds or knows ($argv[1]: leases, groups, queues, partitions), from the broker
# and token the command line names.
function ${fn}_broker
    set -l words (commandline -opc)
    set -l connection
    set -l take 0
    for word in $words[2..-1]
        if test $take = 1
            set -a connection $word
            set take 0
            continue
        end
        switch $word
            case --
                break
            case ${CONNECTION_FLAGS.join(' ')}
                set -a connection $word
                set take 1
            case ${CONNECTION_FLAGS.map((flag) => `'${flag}=*'`).join(' ')} --insecure
                set -a connection $word
        end
    end
    $words[1] __complete $argv[1] $connection 2>/dev/null
end

# The words after -- are a command line of their own (watch's, run's): completed as fish completes
# that line on its own, the command's name first, then what the command completes.
function ${fn}_command_line
    set -l rest
    set -l after 0
    for word in (commandline -opc)[2..-1]
        if test $after = 1
            set -a rest (string escape -- $word)
        else if test "$word" = --
            set after 1
        end
    end
    complete -C (string join ' ' -- $rest (commandline -ct))
end

complete -c ${name} -f
complete -c ${name} -n ${fq(`${fn}_at __dashdash`)} -a ${fq(`(${fn}_command_line)`)}
${lines.join('\n')}
`;
}
