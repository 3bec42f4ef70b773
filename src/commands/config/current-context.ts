/**
 * `config current-context`: the name of the context in force, alone on a line so scripts can
 * use it as is (`ctx=$(queenctl config current-context)`), as kubectl does.
 */
import { readConfigFor } from '../../config/file.js';
import { chooseContext, noContextChosen } from '../../config/resolve.js';
import { ExitCode } from '../../exit.js';
import { write } from '../../io.js';
import { warningMessage } from '../../output/words.js';
import { warnOfConfig, type LocalRuntime } from '../globals.js';

export async function runCurrentContext(runtime: LocalRuntime): Promise<ExitCode> {
  const { io } = runtime;
  const config = await readConfigFor(runtime.flags.config, runtime.env);
  await warnOfConfig(io, config);
  const chosen = chooseContext(runtime.flags, runtime.env, config);
  if (!chosen) throw noContextChosen(config, false);
  if (!config.contexts.some((entry) => entry.name === chosen.name) && !io.quiet) {
    await write(
      io.stderr,
      warningMessage(
        `${chosen.how} names ${JSON.stringify(chosen.name)}, which is not a context of ${config.path}: ` +
          'lease commands will stop with an error',
      ),
    );
  }
  // The bare name unless -o asks for more, even in a pipe: it is what scripts expect.
  const asked = runtime.flags.output;
  if (asked === 'json' || asked === 'ndjson') {
    await write(io.stdout, `${JSON.stringify({ name: chosen.name, from: chosen.from })}\n`);
  } else if (asked === 'yaml') {
    const { stringify } = await import('yaml');
    await write(io.stdout, stringify({ name: chosen.name, from: chosen.from }));
  } else {
    await write(io.stdout, `${chosen.name}\n`);
  }
  return ExitCode.Ok;
}
