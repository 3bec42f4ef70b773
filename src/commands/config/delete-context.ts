/** `config delete-context <name>`: removes one context, keeping the rest of the file. */
import { EditableConfig } from '../../config/edit.js';
import { configSourceFor } from '../../config/file.js';
import { DEFAULT_SERVER } from '../../config/resolve.js';
import { ExitCode } from '../../exit.js';
import { write } from '../../io.js';
import { warningMessage } from '../../output/words.js';
import { warnOfConfig, type LocalRuntime } from '../globals.js';

export interface DeleteContextOptions {
  name: string;
}

export async function runDeleteContext(options: DeleteContextOptions, runtime: LocalRuntime): Promise<ExitCode> {
  const { io } = runtime;
  const config = await EditableConfig.load(configSourceFor(runtime.flags.config, runtime.env), false);
  await warnOfConfig(io, config.config);
  const wasCurrent = config.deleteContext(options.name);
  await config.save();
  if (!io.quiet)
    await write(io.stdout, `Deleted context ${JSON.stringify(options.name)} from ${config.config.path}.\n`);
  if (wasCurrent) {
    // Said even with -q: the next lease command stops until a context is chosen.
    const others = config.config.contexts.map((entry) => entry.name);
    await write(
      io.stderr,
      warningMessage(
        others.length > 0
          ? `${JSON.stringify(options.name)} was the current-context, and no context is current now: ` +
              `lease commands stop with an error until you choose one with queenctl config use-context <name> ` +
              `(${others.join(', ')}), or give --context or --server`
          : `${JSON.stringify(options.name)} was the current-context and the last context: ` +
              `lease commands now go to QUEEN_SERVER, --server, or else ${DEFAULT_SERVER}`,
      ),
    );
  }
  return ExitCode.Ok;
}
