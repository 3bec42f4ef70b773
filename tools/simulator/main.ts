/**
 * Runs a broker simulator as its own process:
 *
 *   node dist/tools/simulator/main.js [--port N] [--host H] [--shape documented|array]
 *     [--token TOKEN=ROLE[:TENANT]]... [--clock-offset MS] [--no-log]
 *
 * Once listening it prints exactly one line of JSON, `{"url":"http://127.0.0.1:PORT"}`, and runs
 * until SIGINT or SIGTERM. Drive it through its control interface (control.ts). A negative clock
 * offset is written `--clock-offset=-5000`.
 */
import { parseArgs } from 'node:util';
import { startSimulator, type Shape, type SimulatorOptions, type TokenGrant } from './index.js';

const USAGE =
  'usage: main.js [--port N] [--host H] [--shape documented|array] ' +
  '[--token TOKEN=ROLE[:TENANT]]... [--clock-offset MS] [--no-log]';

class UsageError extends Error {}

function integer(flag: string, text: string, min: number, max: number): number {
  const value = Number(text);
  if (!/^-?\d+$/.test(text.trim()) || value < min || value > max) {
    throw new UsageError(`${flag} must be an integer from ${min} to ${max}, got '${text}'`);
  }
  return value;
}

function shape(text: string): Shape {
  if (text !== 'documented' && text !== 'array') {
    throw new UsageError(`--shape must be documented or array, got '${text}'`);
  }
  return text;
}

/** `TOKEN=ROLE[:TENANT]`, split at the last `=` (a token may contain one, a role never does). */
function token(text: string): [string, TokenGrant] {
  const eq = text.lastIndexOf('=');
  const name = text.slice(0, eq);
  const [role = '', tenant] = text.slice(eq + 1).split(/:(.*)/s);
  if (eq <= 0 || role === '') throw new UsageError(`--token must be TOKEN=ROLE[:TENANT], got '${text}'`);
  return [name, tenant === undefined || tenant === '' ? { role } : { role, tenant }];
}

function parseOptions(argv: string[]): SimulatorOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      shape: { type: 'string' },
      token: { type: 'string', multiple: true },
      'clock-offset': { type: 'string' },
      'no-log': { type: 'boolean' },
    },
  });
  const opts: SimulatorOptions = {};
  if (values.port !== undefined) opts.port = integer('--port', values.port, 0, 65535);
  if (values.host !== undefined) opts.host = values.host;
  if (values.shape !== undefined) opts.shape = shape(values.shape);
  if (values.token !== undefined) opts.tokens = Object.fromEntries(values.token.map(token));
  if (values['clock-offset'] !== undefined) {
    opts.clockOffsetMs = integer(
      '--clock-offset',
      values['clock-offset'],
      -Number.MAX_SAFE_INTEGER,
      Number.MAX_SAFE_INTEGER,
    );
  }
  if (values['no-log'] === true) opts.logLimit = 0;
  return opts;
}

async function main(): Promise<void> {
  let opts: SimulatorOptions;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n${USAGE}\n`);
    process.exit(1);
  }
  const simulator = await startSimulator(opts);
  const stop = (): void => {
    simulator.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  process.stdout.write(`${JSON.stringify({ url: simulator.url })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`simulator: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
