/**
 * `config set-context <name>`: creates a context or changes the fields given, keeping every
 * other field, context, unknown key and comment. --server, --insecure and --cacert are the
 * global flags (commander hands them to the program wherever they are typed); here they say
 * what to store, not where to connect.
 */
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { access } from 'node:fs/promises';
import { EditableConfig, type ContextChanges } from '../../config/edit.js';
import { configPathFor } from '../../config/file.js';
import { parseKeychainRef } from '../../config/keychain.js';
import { DEFAULT_SERVER, parseServers } from '../../config/resolve.js';
import { ExitCode, UsageError } from '../../exit.js';
import { write } from '../../io.js';
import { shellWord, warningMessage } from '../../output/words.js';
import { warnOfConfig, type LocalRuntime } from '../globals.js';

export interface SetContextOptions {
  name: string;
  tokenRef: string | undefined;
  /** --insecure was typed (the global flag). */
  insecure: boolean;
  /** --no-insecure was typed. */
  secure: boolean;
}

/** Checks a token-ref as the resolver will read it; never echoes a literal token. */
export function checkTokenRef(ref: string): string {
  if (ref === 'env') return ref;
  if (ref.startsWith('literal:')) {
    if (!/^[\x21-\x7e]+$/.test(ref.slice('literal:'.length))) {
      throw new UsageError(
        'the literal: token-ref is empty or holds spaces or line breaks (it is not shown)',
        'a bearer token is the JWT alone',
      );
    }
    return ref;
  }
  if (ref.startsWith('file://')) {
    let path: string;
    try {
      path = new URL(ref).pathname;
    } catch {
      path = '';
    }
    if (!ref.startsWith('file:///') || !isAbsolute(decodeURIComponent(path))) {
      throw new UsageError(
        `--token-ref ${ref} is not a file URL of an absolute path`,
        'write it as file:///abs/path/to/token',
      );
    }
    return ref;
  }
  if (ref.startsWith('keychain://')) {
    parseKeychainRef(ref);
    return ref;
  }
  throw new UsageError(
    `--token-ref ${JSON.stringify(ref)} is none of env, file:///abs/path, keychain://<name>, literal:<token>`,
  );
}

export async function runSetContext(options: SetContextOptions, runtime: LocalRuntime): Promise<ExitCode> {
  const { io, flags } = runtime;
  if (flags.token !== undefined || flags.tokenFile !== undefined) {
    throw new UsageError(
      'set-context stores where the token is, never the token: --token and --token-file do not apply',
      'use --token-ref file:///abs/path, --token-ref keychain://<name>, --token-ref env (QUEEN_TOKEN), ' +
        'or --token-ref literal:<token>',
    );
  }
  if (options.insecure && options.secure) throw new UsageError('give --insecure or --no-insecure, not both');
  if (options.name.trim() === '') throw new UsageError('the context name is empty');

  const changes: ContextChanges = {};
  const warnings: string[] = [];
  if (flags.server !== undefined) {
    changes.server = flags.server.trim() === '' ? null : parseServers(flags.server, '--server').join(',');
  }
  if (options.tokenRef !== undefined) {
    changes['token-ref'] = options.tokenRef === '' ? null : checkTokenRef(options.tokenRef);
    if (options.tokenRef.startsWith('literal:')) {
      warnings.push(
        'the token is now kept in clear text in the config file (mode 0600), ' +
          'and was typed where ps and shell history can see it; ' +
          'keychain://<name> or file:///abs/path keep it out of both',
      );
    }
  }
  if (options.insecure) {
    changes.insecure = true;
    warnings.push(
      `context ${JSON.stringify(options.name)} skips TLS verification: ` +
        'anyone on the network path can pose as its broker. Prefer --cacert <file>',
    );
  }
  if (options.secure) changes.insecure = null;
  if (flags.cacert !== undefined) {
    if (flags.cacert === '') changes.cacert = null;
    else {
      changes.cacert = resolvePath(flags.cacert);
      if (
        !(await access(changes.cacert).then(
          () => true,
          () => false,
        ))
      )
        warnings.push(`${changes.cacert} cannot be read now; commands using this context will stop until it can`);
    }
  }

  // The file it names is made when missing: set-context is how one is made (docs/config.md).
  const config = await EditableConfig.load(configPathFor(flags.config, runtime.env));
  await warnOfConfig(io, config.config);
  const known = config.config.contexts.some((entry) => entry.name === options.name);
  if (known && Object.keys(changes).length === 0) {
    if (!io.quiet)
      await write(
        io.stdout,
        `Context ${JSON.stringify(options.name)} unchanged: ` +
          'give --server, --token-ref, --insecure, --no-insecure or --cacert.\n',
      );
    return ExitCode.Ok;
  }
  const created = config.setContext(options.name, changes);
  await config.save();
  if (!io.quiet) {
    const quoted = JSON.stringify(options.name);
    await write(
      io.stdout,
      created && Object.values(changes).every((value) => value === null)
        ? `Created an empty context ${quoted} in ${config.config.path}: no server (so ${DEFAULT_SERVER}) ` +
            'and no token.\n' +
            `Fill it in with: queenctl config set-context ${shellWord(options.name)} --server <url> --token-ref <ref>\n`
        : `Context ${quoted} ${created ? 'created' : 'modified'} in ${config.config.path}.\n`,
    );
    if (created && config.config.currentContext !== options.name) {
      const name = shellWord(options.name);
      await write(io.stdout, `Use it with: queenctl config use-context ${name}   (or --context ${name})\n`);
    }
  }
  for (const warning of warnings) await write(io.stderr, warningMessage(warning));
  return ExitCode.Ok;
}
