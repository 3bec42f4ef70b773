/**
 * Runs a broker simulator as its own process:
 *
 *   node dist/tools/simulator/main.js [--port N] [--host H] [--shape documented|array]
 *     [--token TOKEN=ROLE[:TENANT]]... [--clock-offset MS] [--no-log] [-h | --help]
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

/** What `--help` prints on stdout: the usage line, then each option. */
const HELP = `${USAGE}

A Queen MQ broker simulator for queenctl's tests and demos. Once listening it prints one line of
JSON, {"url":"http://127.0.0.1:PORT"}, and runs until SIGINT or SIGTERM; drive it through its
control routes (tools/simulator/control.ts).

Options:
  --port N                  port to listen on, 0 to 65535 (default 0: a free port)
  --host H                  address to listen on (default 127.0.0.1)
  --shape documented|array  how extend answers: the documented object, or the older broker's
                            one-element array (default documented)
  --token TOKEN=ROLE[:TENANT]
                            accept TOKEN as a bearer token of ROLE (read-only, read-write or admin),
                            in TENANT if given; repeatable. Without it, no token is needed
  --clock-offset MS         the broker's clock runs MS milliseconds ahead of this machine's
                            (negative: behind; write it --clock-offset=-5000)
  --no-log                  keep no request log
  -h, --help                print this help and exit 0
`;

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

/** The options to start with, or `help` when asked for it. */
function parseOptions(argv: string[]): SimulatorOptions | 'help' {
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
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) return 'help';
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
  let opts: SimulatorOptions | 'help';
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n${USAGE}\n(--help lists the options)\n`);
    process.exit(1);
  }
  if (opts === 'help') {
    process.stdout.write(HELP);
    return;
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
