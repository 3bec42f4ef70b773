import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Command } from 'commander';
import type { Health } from '../../src/broker/health.js';
import { BUILD_INFO } from '../../src/build-info.js';
import { globalContext } from '../../src/commands/globals.js';
import { buildProgram } from '../../src/commands/program.js';
import {
  type Build,
  contextLine,
  runVersion,
  runVersionShort,
  type VersionContext,
  versionLine,
} from '../../src/commands/version.js';
import { BrokerError, UsageError } from '../../src/exit.js';
import { resolveFormat } from '../../src/output/format.js';
import { bufferIO, FakeClock } from '../support/fakes.js';
import { runInProcess } from '../support/in-process.js';

const npm: Build = {
  version: '0.1.0',
  info: { commit: '2c3f314', date: '2026-12-03T09:14:00Z', standalone: false, platform: 'linux-x64' },
  node: 'v20.20.2',
};
const unknown: Build = { ...npm, info: { commit: null, date: null, standalone: false, platform: 'linux-x64' } };
const standalone: Build = {
  ...npm,
  info: { ...npm.info, standalone: true, platform: 'linux-arm64' },
  node: 'v24.11.0',
};

const healthy: Health = {
  status: 'healthy',
  database: 'connected',
  version: '1.0.0',
  httpStatus: 200,
  brokerDateMs: Date.parse('2026-12-02T10:00:00Z'),
};

/** A broker that answers GET /health with `answer` (or fails with it), counting the requests. */
function broker(answer: Health | BrokerError) {
  const asked: Array<number | undefined> = [];
  return {
    asked,
    client: {
      server: 'http://broker:6632',
      async health(options: { timeoutMs?: number } = {}) {
        asked.push(options.timeoutMs);
        if (answer instanceof BrokerError) throw answer;
        return answer;
      },
    },
  };
}

const context: VersionContext = {
  name: 'prod',
  server: 'http://broker:6632',
  serverFrom: 'context',
  contextServer: 'http://broker:6632',
};

describe('version: the first line', () => {
  it('names the version, commit, build date and Node; - for what the build does not know', () => {
    assert.equal(
      versionLine(npm),
      'queenctl 0.1.0 (commit 2c3f314, built 2026-12-03T09:14:00Z, npm package on linux-x64, node v20.20.2)',
    );
    assert.equal(versionLine(unknown), 'queenctl 0.1.0 (commit -, built -, npm package on linux-x64, node v20.20.2)');
  });

  it('says when it is the standalone build carrying its own Node.js, and the platform it was built for', () => {
    assert.match(versionLine(standalone), /, linux-arm64 standalone build, node v24\.11\.0 built in\)$/);
  });

  it('the npm package names the platform it runs on (BUILD_INFO unbundled: this process)', () => {
    assert.equal(BUILD_INFO.standalone, false);
    assert.equal(BUILD_INFO.platform, `${process.platform}-${process.arch}`);
  });
});

describe('version --short', () => {
  it('prints the first line alone, or the build as JSON', async () => {
    const io = bufferIO();
    await runVersionShort({ build: npm, format: 'table' }, io);
    assert.equal(io.stdout.text, `${versionLine(npm)}\n`);
    const json = bufferIO();
    await runVersionShort({ build: npm, format: 'json' }, json);
    assert.deepEqual(JSON.parse(json.stdout.text), {
      queenctl: {
        version: '0.1.0',
        commit: '2c3f314',
        buildDate: '2026-12-03T09:14:00Z',
        node: 'v20.20.2',
        standalone: false,
        platform: 'linux-x64',
      },
    });
  });

  it('refuses -o name', async () => {
    await assert.rejects(runVersionShort({ build: npm, format: 'name' }, bufferIO()), UsageError);
  });
});

describe('version names the server used, and where it came from (issue 39)', () => {
  it("the context's own server: as before", () => {
    assert.equal(contextLine(context), 'context: prod (http://broker:6632)');
    assert.equal(
      contextLine({ name: null, server: 'http://localhost:6632', serverFrom: 'default', contextServer: null }),
      'context: - (http://localhost:6632)',
    );
  });

  it("QUEEN_SERVER or --server over the context: the server used, which setting, and the context's own", () => {
    const overridden = { ...context, server: 'http://127.0.0.1:7000', serverFrom: 'QUEEN_SERVER' as const };
    assert.equal(
      contextLine(overridden),
      "context: prod (server http://127.0.0.1:7000 from QUEEN_SERVER, not the context's http://broker:6632)",
    );
    assert.equal(
      contextLine({ name: null, server: 'http://127.0.0.1:7000', serverFrom: '--server', contextServer: null }),
      'context: - (http://127.0.0.1:7000)',
      'no context, or one without a server: nothing was overridden',
    );
  });
});

describe('version, asking the broker', () => {
  const run = async (answer: Health | BrokerError, format: 'table' | 'json' | `jsonpath=${string}` = 'table') => {
    const io = bufferIO();
    const { client, asked } = broker(answer);
    const resolved = await resolveFormat(format, false);
    const code = await runVersion(
      { build: npm, format: resolved, noHeaders: false, timeoutMs: 5000, context },
      { io, client, clock: new FakeClock(), signal: new AbortController().signal },
    );
    return { code, io, asked };
  };

  it("prints the first line, the broker's version, status and database, and the context", async () => {
    const { code, io, asked } = await run(healthy);
    assert.equal(code, 0);
    assert.equal(
      io.stdout.text,
      `${versionLine(npm)}\nbroker: 1.0.0 (healthy, database connected) at http://broker:6632\n` +
        'context: prod (http://broker:6632)\n',
    );
    assert.deepEqual(asked, [5000], 'one GET /health, within the timeout given');
  });

  it('an unhealthy broker is still an answer: exit 0, its status printed', async () => {
    const { code, io } = await run({ ...healthy, status: 'unhealthy', database: 'disconnected', httpStatus: 503 });
    assert.equal(code, 0);
    assert.match(io.stdout.text, /broker: 1\.0\.0 \(unhealthy, database disconnected\)/);
  });

  it('an unreachable broker: the first line, then exit 2 and the reason on stderr', async () => {
    const down = new BrokerError('cannot reach the broker at http://broker:6632: connection refused', true);
    const { code, io } = await run(down);
    assert.equal(code, 2);
    assert.equal(io.stdout.text, `${versionLine(npm)}\n`);
    assert.match(io.stderr.text, /connection refused/);
  });

  it('-o json is one object; broker null and the error when it cannot be reached', async () => {
    const ok = await run(healthy, 'json');
    assert.deepEqual(JSON.parse(ok.io.stdout.text), {
      queenctl: {
        version: '0.1.0',
        commit: '2c3f314',
        buildDate: '2026-12-03T09:14:00Z',
        node: 'v20.20.2',
        standalone: false,
        platform: 'linux-x64',
      },
      broker: { version: '1.0.0', status: 'healthy', database: 'connected', server: 'http://broker:6632' },
      context,
    });
    const down = await run(new BrokerError('no answer from http://broker:6632 within 5s', true), 'json');
    assert.equal(down.code, 2);
    const record = JSON.parse(down.io.stdout.text);
    assert.equal(record.broker, null);
    assert.equal(record.error, 'no answer from http://broker:6632 within 5s');
  });

  it('-o jsonpath= applies to the object', async () => {
    const { io } = await run(healthy, 'jsonpath={.broker.version} {.context.name}');
    assert.equal(io.stdout.text, '1.0.0 prod');
  });
});

describe('the command tree a command line builds (issue 41)', () => {
  it('lease <verb>: that verb alone; any other command line: all; --version prints the same', async () => {
    const globals = globalContext(
      {
        env: {},
        platform: 'linux',
        stdout: { write: () => true },
        stderr: { write: () => true },
        stdin: undefined as never,
        signal: new AbortController().signal,
        argvAfterDashDash: null,
        relaySignals: () => () => {},
        setExitCode: () => {},
        stdoutFailed: () => false,
      },
      npm.version,
    );
    const tree = (argv?: string[]): string[] => {
      const names = (command: Command): string[] => [
        command.name(),
        ...command.commands.flatMap((child) => names(child).map((name) => `${command.name()} ${name}`)),
      ];
      return names(buildProgram(globals, npm, undefined, argv)).slice(1);
    };
    const whole = tree();
    assert.ok(whole.includes('queenctl config get-contexts') && whole.includes('queenctl lease run'));
    // `lease <verb>` first: that verb alone; anything else (help, an option first, a typo): the whole tree.
    assert.deepEqual(tree(['lease', 'extend', 'x', '-o', 'json']), ['queenctl lease', 'queenctl lease extend']);
    assert.deepEqual(tree(['lease', 'run', 'q', '--', 'cmd', '--help']), ['queenctl lease', 'queenctl lease run']);
    for (const argv of [
      ['--version'],
      ['--version', 'lease'],
      ['lease', 'extend', 'x', '--help'],
      ['lease', 'extend', 'help'],
      ['--context', 'lease', 'lease', 'extend', 'x'],
      ['lease', 'exten', 'x'],
      ['lease', 'toString'],
      ['config', 'get-contexts'],
    ])
      assert.deepEqual(tree(argv), whole, argv.join(' '));
    for (const argv of [['--version'], ['--version', '-q'], ['lease', '--version']]) {
      const result = await runInProcess(argv);
      assert.deepEqual([result.code, result.stdout, result.stderr], [0, `${npm.version}\n`, ''], argv.join(' '));
    }
  });
});
