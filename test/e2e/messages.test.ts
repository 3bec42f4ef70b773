/**
 * Issue 33: messages that said things that were not so, each against the simulator, in-process.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, it } from 'node:test';
import { ENVIRONMENT } from '../../src/docs/environment.js';
import type { Simulator } from '../../tools/simulator/index.js';
import { ROOT } from '../support/doctest.js';
import { runInProcess, type InProcessOptions } from '../support/in-process.js';
import { sharedSimulator } from '../support/shared.js';

const simulator = sharedSimulator();
let sim: Simulator;
beforeEach(() => {
  sim = simulator();
  sim.configure({ database: 'connected' });
});
const queenctl = (args: string[], options: InProcessOptions = {}) =>
  runInProcess([...args, '--server', sim.url], options);

describe('a refused token stops a bulk run: said only of ids left unsent', () => {
  it('all six in flight at once (--concurrency 8): no "remaining ids were not sent"', async () => {
    sim.setTokens({ right: { role: 'read-write' } });
    const ids = Array.from({ length: 6 }, () => sim.mint());
    const result = await queenctl(['lease', 'extend', ...ids, '--token', 'wrong', '--concurrency', '8']);
    assert.equal(result.code, 3, result.stderr);
    assert.equal(sim.log.length, 6, 'every id was sent');
    assert.doesNotMatch(result.stderr, /not sent|stopped/);
  });

  it('one at a time: stopped after the first, and the other five were not sent', async () => {
    sim.setTokens({ right: { role: 'read-write' } });
    const ids = Array.from({ length: 6 }, () => sim.mint());
    const result = await queenctl(['lease', 'extend', ...ids, '--token', 'wrong', '--concurrency', '1']);
    assert.equal(result.code, 3, result.stderr);
    assert.equal(sim.log.length, 1);
    const stopped = 'stopped at the first refusal after 1 lease id: 0 renewed, 0 not renewed, 1 unknown';
    assert.match(result.stderr, new RegExp(`^queenctl: ${stopped}: the remaining lease ids were not sent$`, 'm'));
  });

  it('the last id refused: nothing left, nothing said of the rest', async () => {
    sim.setTokens({ right: { role: 'read-write' } });
    const result = await queenctl(['lease', 'inspect', '-', '--token', 'wrong', '--concurrency', '1'], {
      stdin: `${sim.mint()}\n`,
    });
    assert.equal(result.code, 3, result.stderr);
    assert.doesNotMatch(result.stderr, /not sent|stopped/);
  });
});

describe('lease watch with a command', () => {
  it('a dead lease beside a live one: the command was never started, and the lines say so', async () => {
    const live = sim.mint();
    const command = ['--', 'sh', '-c', 'exit 0'];
    const result = await runInProcess(['lease', 'watch', 'gone', live, '--server', sim.url, ...command]);
    assert.equal(result.code, 4, result.stderr);
    assert.match(result.stderr, /sh was not started/);
    assert.match(
      result.stderr,
      new RegExp(`lease ${live}: another lease of this watch is gone, so the command was not started`),
    );
    assert.doesNotMatch(result.stderr, /and the command with it/);
  });
});

describe('- on a terminal names the verb that was run', () => {
  for (const verb of ['watch', 'inspect', 'extend']) {
    it(`lease ${verb} -`, async () => {
      const result = await queenctl(['lease', verb, '-'], { stdin: null, stdinIsTTY: true });
      assert.equal(result.code, 1);
      assert.match(result.stderr, new RegExp(`pipe them in: cat ids.txt \\| queenctl lease ${verb} -$`, 'm'));
    });
  }
});

describe('--allow-empty: - reading nothing is nothing to do, as xargs -r', () => {
  it('extend and inspect: exit 0, [] in JSON, nothing sent; without it exit 1 says the flag', async () => {
    for (const verb of ['extend', 'inspect']) {
      const result = await queenctl(['lease', verb, '-', '--allow-empty', '-o', 'json'], { stdin: '\n' });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, '[]\n');
      assert.match(result.stderr, /^queenctl: no lease ids on standard input: nothing was sent$/m);
      const quiet = await queenctl(['lease', verb, '-', '--allow-empty', '-q'], { stdin: '' });
      assert.deepEqual([quiet.code, quiet.stdout, quiet.stderr], [0, '', '']);
    }
    assert.deepEqual(sim.log, [], 'nothing reached the broker');
    const refused = await queenctl(['lease', 'extend', '-'], { stdin: '' });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /no lease ids on standard input.*\n.*--allow-empty/);
  });

  it('ids given: the flag changes nothing', async () => {
    const live = sim.mint();
    const result = await queenctl(['lease', 'extend', '-', '--allow-empty', '-o', 'name'], { stdin: `${live} gone` });
    assert.equal(result.code, 4, result.stderr);
    assert.equal(result.stdout, `${live}\n`);
  });

  it('watch: exit 0 at once, and the command is not started', async () => {
    const args = ['lease', 'watch', '-', '--allow-empty', '--server', sim.url, '--', 'sh', '-c', 'echo ran; exit 7'];
    const result = await runInProcess(args, { stdin: '' });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /^queenctl: no lease ids on standard input: nothing to watch; sh was not started$/m);
  });
});

describe('a command that cannot be run', () => {
  it('/etc/passwd (not executable): exit 126, and words instead of "spawn /etc/passwd EACCES"', async () => {
    const leaseId = sim.mint();
    const result = await runInProcess(['lease', 'watch', leaseId, '--server', sim.url, '--', '/etc/passwd']);
    assert.equal(result.code, 126, result.stderr);
    assert.match(result.stderr, /cannot run \/etc\/passwd: permission denied: it is not an executable file/);
    assert.doesNotMatch(result.stderr, /spawn|EACCES/);
  });
});

describe('-o jsonpath= that selects nothing', () => {
  it('prints nothing, not an empty line', async () => {
    const result = await queenctl(['lease', 'extend', sim.mint(), '-o', 'jsonpath=.nosuch']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, '');
  });
});

describe('the man pages and the reference', () => {
  it("say QUEEN_LEASE_EXPIRES_AT is the earliest expiry, as the contract does, not the first lease's", () => {
    const entry = ENVIRONMENT.find((item) => item.name.includes('QUEEN_LEASE_EXPIRES_AT'));
    assert.ok(entry);
    assert.match(entry.text, /earliest expiry/);
    assert.doesNotMatch(entry.text, /first lease's expiry/);
  });
});

describe("docs/broker.md's outcome table", () => {
  it('renewed: 0 without leaseId is exit 2, and the docs say so where they say renewed: 0 is 4', async () => {
    const body = '{"success":false,"renewed":0,"newExpiresAt":null,"expiresAt":null,"lease_expires_at":null}';
    sim.inject({ kind: 'body', body });
    const result = await queenctl(['lease', 'extend', 'some-lease', '--retries', '0']);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /leaseId is missing/);
    const broker = readFileSync(join(ROOT, 'docs/broker.md'), 'utf8');
    const row = broker.split('\n').find((line) => line.startsWith('| 200, documented, `renewed: 0`'));
    assert.match(
      row ?? '',
      /`leaseId` ours \| not renewed \| 4 \|/,
      'the 4 is said only of an answer naming the lease',
    );
    assert.match(broker, /`leaseId` is missing or another lease's \(also with `renewed: 0`/);
  });
});

describe('config set-context suggests what can be pasted', () => {
  it('"my ctx": use-context \'my ctx\', one word', async () => {
    const home = mkdtempSync(join(tmpdir(), 'queenctl-home-'));
    const env = { QUEEN_CONFIG: join(home, 'config.yaml') };
    await runInProcess(['config', 'set-context', 'prod', '--server', 'http://a:1'], { env });
    await runInProcess(['config', 'use-context', 'prod'], { env });
    const result = await runInProcess(['config', 'set-context', 'my ctx', '--server', 'http://b:1'], { env });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /queenctl config use-context 'my ctx' {3}\(or --context 'my ctx'\)/);
  });
});

describe('connection failures name what failed', () => {
  it('https:// to a port that speaks plain HTTP: says so and to use http://, not --insecure', async () => {
    for (const transport of [[], ['-']]) {
      const https = sim.url.replace(/^http:/, 'https:');
      const live = sim.mint();
      const args = transport.length ? ['lease', 'extend', '-'] : ['lease', 'extend', live];
      const result = await runInProcess([...args, '--server', https, '--insecure', '--retries', '0'], {
        stdin: `${live}\n`,
      });
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, /the server answered in plain HTTP, not TLS/);
      assert.match(result.stderr, /use http:\/\/ instead of https:\/\//);
      const error = result.stderr.replace(/^queenctl: warning: --insecure: .*\n/m, '');
      assert.doesNotMatch(
        error,
        /ssl3_get_record|deps\/openssl|--insecure/,
        'nor suggests the --insecure it was given',
      );
    }
  });

  it('a proxy that refuses: the proxy cannot be reached, not the broker', async () => {
    // A port nobody listens on: the simulator's, once it has been closed, would race; port 9 (discard) is not served.
    // The broker is not loopback: a loopback broker is never proxied (docs/config.md#proxies).
    const result = await runInProcess(
      ['lease', 'extend', 'x', '--retries', '0', '--server', 'http://broker.invalid:6632'],
      {
        env: { HTTP_PROXY: 'http://127.0.0.1:9', NO_PROXY: '' },
      },
    );
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /^queenctl: cannot reach the proxy in front of http:\/\/[^ ]+: connection refused/m);
    assert.doesNotMatch(result.stderr, /cannot reach the broker/);
  });

  it('http_proxy=ftp://x is reported as http_proxy, the variable that was read', async () => {
    const result = await queenctl(['lease', 'extend', 'x'], { env: { http_proxy: 'ftp://x', HTTP_PROXY: undefined } });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /^queenctl: http_proxy does not start with http:\/\//);
  });
});

describe('usage errors in one voice', () => {
  const cases: Array<[string[], RegExp]> = [
    [
      ['lease', 'extend', 'x', '--no-such-flag'],
      /^queenctl: unknown option '--no-such-flag'\n {2}see queenctl lease extend --help for its usage\n$/,
    ],
    [
      ['completion', 'powershell'],
      /^queenctl: command-argument value 'powershell' is invalid .*fish\.\n {2}see queenctl completion --help/,
    ],
    [
      ['lease', 'exten', 'x'],
      /^queenctl: unknown command 'exten'\n {2}did you mean extend\? see queenctl lease --help/,
    ],
    [['lease', 'extend'], /^queenctl: missing required argument 'leaseId'\n {2}see queenctl lease extend --help/],
  ];
  for (const [args, stderr] of cases) {
    it(args.join(' '), async () => {
      const result = await runInProcess(args);
      assert.equal(result.code, 1, 'the exit code stays 1');
      assert.equal(result.stdout, '');
      assert.match(result.stderr, stderr);
      assert.doesNotMatch(result.stderr, /^error:|\(add --help for usage\)/m);
    });
  }
});
