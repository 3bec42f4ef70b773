/** `config use-context <name>`: sets the file's current-context, keeping the rest of the file. */
import { EditableConfig } from '../../config/edit.js';
import { configSourceFor } from '../../config/file.js';
import { ExitCode } from '../../exit.js';
import { write } from '../../io.js';
import { warningMessage } from '../../output/words.js';
import { warnOfConfig, type LocalRuntime } from '../globals.js';

export interface UseContextOptions {
  name: string;
}

export async function runUseContext(options: UseContextOptions, runtime: LocalRuntime): Promise<ExitCode> {
  const { io, env } = runtime;
  const config = await EditableConfig.load(configSourceFor(runtime.flags.config, env), false);
  await warnOfConfig(io, config.config);
  config.useContext(options.name);
  await config.save();
  if (!io.quiet)
    await write(io.stdout, `Switched to context ${JSON.stringify(options.name)} in ${config.config.path}.\n`);
  // The file changed, but in this shell the variable still decides.
  const variable = env.QUEEN_CONTEXT?.trim();
  if (variable && variable !== options.name) {
    await write(
      io.stderr,
      warningMessage(
        `QUEEN_CONTEXT=${variable} is set and takes precedence here: unset it to use ${JSON.stringify(options.name)}`,
      ),
    );
  }
  return ExitCode.Ok;
}
