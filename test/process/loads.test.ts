/**
 * What a run of the published bin loads (bin/queenctl.cjs, src/commands/globals.ts,
 * docs/architecture.md): start-up cost is a feature (issue 19), decided by what is loaded. Read
 * from the bin's own report (QUEENCTL_DEBUG names each file of the bundle it loads) and from
 * Node's list of the built-in modules it loaded, printed at exit by a preload.
 *
 * - A run that sends nothing loads no HTTP client and not node:v8, whose flag only a run that may
 *   load undici on Node 20 needs.
 * - A run that sends a few requests to an http broker loads node:net, not node:http, and never
 *   undici's file; one that sends many loads undici.
 * - A run whose config file is unchanged since it was last read does not load the YAML parser.
 * - prom-client (queenctl-metrics.cjs) is loaded by a watch with --metrics-address, and by no other run.
 * - The JSONPath parser (queenctl-jsonpath.cjs) is loaded by -o jsonpath, and by no other run.
 * - The live views' libraries (queenctl-live.cjs) are loaded only when a live view is drawn: never
 *   off a terminal (test/process/tty.test.ts draws them).
 * - Colour loads chalk (queenctl-colour.cjs) alone; string-width and wrap-ansi (queenctl-terminal.cjs,
 *   ~34 ms as string-width loads) only for a table with a cell that is not ASCII, or a line too
 *   wide for the terminal.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startSimulator, type Simulator } from '../../tools/simulator/index.js';
import { describeResult } from '../reliability/harness.js';
import { needsNode, runCli } from '../support/cli.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
let sim: Simulator;
let scratch: string;
let preload: string;

before(async () => {
  sim = await startSimulator();
  scratch = mkdtempSync(join(tmpdir(), 'queenctl-loads-'));
  preload = join(scratch, 'builtins.cjs');
  // process.moduleLoadList names each built-in module Node loaded ("NativeModule http").
  writeFileSync(
    preload,
    "process.on('exit', () => process.stderr.write('builtins: ' + process.moduleLoadList.join(',') + '\\n'));\n",
  );
});
after(() => sim.close());

interface Loads {
  /** The built-in modules, by name (`http`, `v8`). */
  builtins: Set<string>;
  undici: boolean;
  yaml: boolean;
  metrics: boolean;
  jsonpath: boolean;
  live: boolean;
  colour: boolean;
  terminal: boolean;
  stdout: string;
  stderr: string;
}

async function loads(
  args: string[],
  options: { stdin?: string; env?: Record<string, string>; code?: number; bin?: string } = {},
): Promise<Loads> {
  // No config: HOME is an empty directory (cleanEnv); a named file that is missing is an error.
  const env = { ...options.env, QUEENCTL_DEBUG: '1' };
  const result = await runCli(args, {
    exit: options.code ?? 0,
    stdin: options.stdin ?? '',
    env,
    nodeArgs: ['--require', preload],
    ...(options.bin ? { entry: options.bin } : {}),
  });
  assert.equal(result.code, options.code ?? 0, describeResult(result));
  const builtins = /^builtins: (.*)$/m.exec(result.stderr)?.[1]?.split(',');
  assert.ok(builtins, `the preload reported the built-in modules:\n${result.stderr}`);
  return {
    builtins: new Set(builtins.filter((name) => name.startsWith('NativeModule ')).map((name) => name.slice(13))),
    undici: /queenctl-undici\.cjs/.test(result.stderr),
    yaml: /queenctl-yaml\.cjs/.test(result.stderr),
    metrics: /queenctl-metrics\.cjs/.test(result.stderr),
    jsonpath: /queenctl-jsonpath\.cjs/.test(result.stderr),
    live: /queenctl-live\.cjs/.test(result.stderr),
    colour: /queenctl-colour\.cjs/.test(result.stderr),
    terminal: /queenctl-terminal\.cjs/.test(result.stderr),
    stdout: result.stdout,
    stderr: result.stderr,
  };
}

const LIFTOFF_NODE = Number.parseInt(process.versions.v8, 10) < 12;

describe('what a run loads', { skip: needsNode('a preload and the bin’s own report') }, () => {
  /** A run that sends nothing: no HTTP client, and not node:v8. */
  const assertSendsNothing = ({ builtins, undici, metrics, jsonpath }: Loads): void => {
    assert.equal(undici, false);
    assert.equal(metrics, false);
    assert.equal(jsonpath, false);
    for (const module of ['v8', 'http', 'https', 'tls']) assert.ok(!builtins.has(module), `${module} was loaded`);
  };
  // And `completion zsh`, `config get-contexts` below: every path of a local run once.
  const local: Array<[string[], number]> = [
    [['--version'], 0],
    [['help'], 0],
    [['--no-such-flag'], 1],
  ];
  for (const [args, code] of local) {
    it(`\`queenctl ${args.join(' ')}\` sends nothing: no HTTP client, and not node:v8`, async () => {
      assertSendsNothing(await loads(args, { code }));
    });
  }

  it('completion: the scripts made when the package was built; never those of another build', async () => {
    const prebuilt = await loads(['completion', 'zsh']);
    // Loaded with its code cache: the shipped one (the build's Node), else one made for this Node.
    assert.match(prebuilt.stderr, /queenctl-completion\.cjs (accepted|written)/);
    assertSendsNothing(prebuilt);
    // A copy whose scripts are of another build: bin/queenctl.cjs refuses the file, and the
    // scripts are generated, the same.
    const copy = join(scratch, 'package');
    mkdirSync(copy);
    cpSync(join(ROOT, 'bin'), join(copy, 'bin'), { recursive: true });
    const notTests = (path: string): boolean => !path.includes('/dist/test');
    cpSync(join(ROOT, 'dist'), join(copy, 'dist'), { recursive: true, filter: notTests });
    symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
    const file = join(copy, 'dist', 'queenctl-completion.cjs');
    writeFileSync(
      file,
      readFileSync(file, 'utf8').replace(/^\/\/ queenctl build [0-9a-f]+/, '// queenctl build 0123456789abcdef'),
    );
    const generated = await loads(['completion', 'zsh'], { bin: join(copy, 'bin', 'queenctl.cjs') });
    assert.doesNotMatch(generated.stderr, /queenctl-completion\.cjs/);
    assert.match(generated.stdout, /_queenctl/, 'a script, not an empty output');
    assert.equal(generated.stdout, prebuilt.stdout);
  });

  it('lease extend <id> -o jsonpath: node:net, not node:http nor undici, V8 flags alone, the parser', async () => {
    const args = ['lease', 'extend', sim.mint(), '--server', sim.url, '-o', 'jsonpath={.renewed}'];
    const { builtins, undici, jsonpath, stdout } = await loads(args);
    assert.equal(stdout, '1');
    assert.equal(jsonpath, true);
    assert.equal(undici, false);
    // HTTP/1.1 over node:net for an http broker (src/broker/net-transport.ts, issue 41).
    assert.equal(builtins.has('net'), true);
    assert.equal(builtins.has('http'), false);
    // Setting a flag would also cost Node its own code cache for Node's modules (bin/queenctl.cjs).
    assert.equal(builtins.has('v8'), false);
  });

  it('lease extend <id> to a loopback broker with HTTP_PROXY set: node:net, never undici (issue 31)', async () => {
    // Go's rules never proxy loopback (src/config/proxy-route.ts): the proxy is not in force.
    const env = { HTTP_PROXY: 'http://127.0.0.1:9', HTTPS_PROXY: 'http://127.0.0.1:9' };
    const exempt = await loads(['lease', 'extend', sim.mint(), '--server', sim.url, '-o', 'json'], { env });
    assert.equal(JSON.parse(exempt.stdout).renewed, 1);
    assert.equal(exempt.undici, false);
    assert.equal(exempt.builtins.has('net'), true);
    assert.equal(exempt.builtins.has('http'), false);
  });

  const flags = LIFTOFF_NODE ? 'with --liftoff-only set (Node 20)' : 'with V8 flags left alone (Node 22+)';
  it(`lease extend - and lease watch: undici, ${flags}`, async () => {
    const leaseId = sim.mint();
    const bulk = await loads(['lease', 'extend', '-', '--server', sim.url, '-o', 'json'], { stdin: `${leaseId}\n` });
    assert.equal(bulk.undici, true);
    assert.equal(bulk.jsonpath, false, 'no JSONPath parser without -o jsonpath');
    assert.equal(bulk.builtins.has('v8'), LIFTOFF_NODE);
    // The caches of the files loaded before the flag are never written under it: V8 would refuse them.
    if (LIFTOFF_NODE)
      assert.match(bulk.stderr, /queenctl-undici\.cjs accepted \(shipped with the package\): .*net\+liftoff/);
    const watch = ['lease', 'watch', leaseId, '--for', '300ms', '--server', sim.url, '-o', 'ndjson'];
    const watched = await loads(watch);
    assert.equal(watched.undici, true);
    assert.equal(watched.metrics, false, 'no prom-client without --metrics-address');
    assert.equal(watched.live, false, 'no live view off a terminal');
    assert.equal(bulk.live, false);
  });

  it('lease watch --metrics-address: prom-client, from a file of its own', async () => {
    const leaseId = sim.mint();
    const watch = ['lease', 'watch', leaseId, '--for', '300ms', '--server', sim.url, '-o', 'ndjson'];
    const served = await loads([...watch, '--metrics-address', '127.0.0.1:0']);
    assert.equal(served.metrics, true);
    assert.match(served.stderr, /serving metrics on http:\/\/127\.0\.0\.1:\d+\/metrics/);
  });

  it('a table in colour loads chalk alone; string-width only for a cell that is not ASCII', async () => {
    const table = (leaseId: string): string[] => ['lease', 'extend', leaseId, '--server', sim.url, '-o', 'table'];
    const piped = await loads([...table(sim.mint()), '--color']);
    assert.match(piped.stdout, /\u001b\[32m1\u001b\[39m/);
    assert.deepEqual([piped.colour, piped.terminal], [true, false]);
    // Fitted to 60 columns (COLUMNS stands for a terminal): columns hidden, a note that fits.
    const fitted = await loads([...table(sim.mint()), '--color'], { env: { COLUMNS: '60' } });
    assert.match(fitted.stderr, /^queenctl: 3 columns hidden; -o wide shows all$/m);
    assert.deepEqual([fitted.colour, fitted.terminal], [true, false]);
    // A queue named in another script is measured as a terminal measures it: two columns a character.
    const named = sim.mint({ queue: '注文', seconds: 120 });
    const listed = await loads(['lease', 'list', '--server', sim.url, '-o', 'table', '--queue', '注文']);
    assert.match(listed.stdout, new RegExp(`^${named}   \\(queue mode\\)   注文    p1`, 'm'));
    assert.deepEqual([listed.colour, listed.terminal], [false, true]);
    // A failure wider than the terminal is wrapped by wrap-ansi.
    const wrapped = await loads(['lease', 'extend', sim.mint(), '--server', 'http://127.0.0.1:9', '--retries', '0'], {
      env: { COLUMNS: '40' },
      code: 2,
    });
    assert.equal(wrapped.terminal, true);
  });

  it('a config file read before, unchanged, is not parsed again (src/config/memo.ts): no YAML parser', async () => {
    const config = join(scratch, 'config.yaml');
    writeFileSync(config, 'current-context: a\ncontexts:\n  - name: a\n    server: http://127.0.0.1:9\n  - name: b\n');
    const env = { QUEEN_CONFIG: config, XDG_CACHE_HOME: join(scratch, 'memo-cache') };
    const first = await loads(['config', 'get-contexts', '-o', 'name'], { env });
    assert.equal(first.yaml, true);
    assertSendsNothing(first);
    const again = await loads(['config', 'current-context'], { env });
    assert.equal(again.stdout, 'a\n');
    assert.equal(again.yaml, false);
    // An edit is read at once: the memo is for one text of the file (this one of the same length).
    writeFileSync(config, readFileSync(config, 'utf8').replace('current-context: a', 'current-context: b'));
    const edited = await loads(['config', 'current-context'], { env });
    assert.equal(edited.stdout, 'b\n');
    assert.equal(edited.yaml, true);
  });
});
