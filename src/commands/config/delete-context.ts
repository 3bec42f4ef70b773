/** `config delete-context <name>`: removes one context, keeping the rest of the file. */
import { EditableConfig } from '../../config/edit.js';
import { configPathFor } from '../../config/file.js';
import { ExitCode } from '../../exit.js';
import { write } from '../../io.js';
import { warningMessage } from '../../output/words.js';
import type { LocalRuntime } from '../globals.js';

export interface DeleteContextOptions {
  name: string;
}

export async function runDeleteContext(options: DeleteContextOptions, runtime: LocalRuntime): Promise<ExitCode> {
  const { io } = runtime;
  const config = await EditableConfig.load(configPathFor(runtime.flags.config, runtime.env));
  const wasCurrent = config.config.currentContext === options.name;
  config.deleteContext(options.name);
  await config.save();
  if (!io.quiet)
    await write(io.stdout, `Deleted context ${JSON.stringify(options.name)} from ${config.config.path}.\n`);
  if (wasCurrent) {
    // Left as it is (the Go queenctl and kubectl do the same): commands stop with an error
    // rather than quietly fall back to another broker.
    const others = config.config.contexts.map((entry) => entry.name);
    await write(
      io.stderr,
      warningMessage(
        `${JSON.stringify(options.name)} was the current-context: commands stop with an error until you choose another with queenctl config use-context <name>` +
          (others.length > 0 ? ` (${others.join(', ')})` : ''),
      ),
    );
  }
  return ExitCode.Ok;
}
