/**
 * What changes when queenctl runs on Windows, run here on Linux with the platform injected
 * (the run's ports say win32; test/support/in-process.ts): `lease watch -- <command>` and `lease
 * run` are refused before anything happens (no request to the broker, no message popped, no
 * lease taken, the command never started), with a usage error (exit 1) naming WSL; each is
 * compared with the same run on Linux, which goes ahead. `lease watch <id>` without a command and
 * `lease extend` work; a config file's mode is not warned about (Windows has no such modes); and
 * a run stopped by a signal ends with its status, not by raising the signal again (cli.ts).
 * Nothing here ran on Windows: docs/install.md says what was tested where.
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { endingSignal } from '../../src/cli.js';
import { runInProcess } from '../support/in-process.js';
import { RunScene } from '../support/lease-run.js';

const scene = new RunScene();
const REFUSAL = (verb: string) =>
  `queenctl: ${verb} is not available on Windows: it runs its command in a POSIX process group (signals ` +
  'passed on to the whole group, whatever it started stopped with it), which Windows does not have. Nothing was ' +
  'sent\n  run it in WSL (Windows Subsystem for Linux), with the Linux queenctl; here, lease watch <id> without ' +
  'a command and every other verb work\n';

describe('on Windows, the verbs that supervise a command are refused before anything happens', () => {
  it('lease run: exit 1 naming WSL, no request sent, every message still there; on Linux it runs', async () => {
    scene.queueWith(3);
    const started = scene.file('started');
    // sh, not node: what is tested is whether the command starts (development.md: a node start
    // costs ~0.09 CPU-s, sh ~0.002). It reads its batch: one it did not read would come back.
    const command = ['sh', '-c', 'cat > /dev/null && : > "$0"', started];
    const refused = await scene.run(['--batch', '10'], command, { platform: 'win32' });
    assert.deepEqual([refused.code, refused.stdout, refused.stderr], [1, '', REFUSAL('lease run')]);
    assert.deepEqual(scene.sim.log, [], 'nothing was sent to the broker');
    const states = () => scene.sim.messageStates(scene.queue)?.messages.map((message) => message.state);
    assert.deepEqual(states(), ['pending', 'pending', 'pending']);
    assert.equal(existsSync(started), false, 'the command never ran');

    const ran = await scene.run(['--batch', '10', '-o', 'ndjson'], command, { platform: 'linux' });
    assert.equal(ran.code, 0, ran.stderr);
    assert.deepEqual(states(), ['consumed', 'consumed', 'consumed']);
    assert.equal(existsSync(started), true);
  });

  it('lease watch -- <command>: exit 1 naming WSL, the lease not renewed, the command not started', async () => {
    const leaseId = scene.sim.mint({ seconds: 30 });
    const started = scene.file('started');
    const args = (platform: string) => [
      'lease',
      'watch',
      leaseId,
      '--server',
      scene.sim.url,
      '--metrics-address',
      '127.0.0.1:0',
      '--',
      'sh',
      '-c',
      'printf %s "$1" > "$0"',
      started,
      platform,
    ];
    const refused = await runInProcess(args('win32'), { platform: 'win32' });
    assert.deepEqual([refused.code, refused.stdout, refused.stderr], [1, '', REFUSAL('lease watch -- <command>')]);
    assert.deepEqual(scene.sim.log, []);
    assert.equal(existsSync(started), false);

    const ran = await runInProcess(args('linux'), { platform: 'linux' });
    assert.equal(ran.code, 0, ran.stderr);
    assert.ok(scene.sim.log.length > 0);
    assert.equal(existsSync(started), true);
  });

  it('lease run without a command is the usage error it always is, not the Windows refusal', async () => {
    const result = await runInProcess(['lease', 'run', scene.queue, '--server', scene.sim.url], {
      platform: 'win32',
    });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /^queenctl: lease run needs the command to run for each batch after --\n/);
  });
});

describe('on Windows, the rest works', () => {
  it('lease watch <id> without a command renews, and ends at --for with 0', async () => {
    const leaseId = scene.sim.mint({ seconds: 30 });
    const result = await runInProcess(
      ['lease', 'watch', leaseId, '--server', scene.sim.url, '--for', '1s', '-o', 'ndjson'],
      { platform: 'win32' },
    );
    assert.equal(result.code, 0, result.stderr);
    const events = result.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line).event);
    assert.equal(events[0], 'renewed');
    assert.equal(events.at(-1), 'stopped');
  });

  it('lease extend renews; a config file at 0644 holding a literal token is warned about on Linux only', async () => {
    const leaseId = scene.sim.mint({ seconds: 30 });
    const config = scene.file('config.yaml');
    writeFileSync(
      config,
      `current-context: a\ncontexts:\n  - name: a\n    server: ${scene.sim.url}\n    token-ref: literal:tok-123456\n`,
    );
    chmodSync(config, 0o644);
    const windows = await runInProcess(['lease', 'extend', leaseId, '--config', config], { platform: 'win32' });
    assert.equal(windows.code, 0, windows.stderr);
    assert.equal(JSON.parse(windows.stdout).renewed, 1);
    assert.equal(windows.stderr, '');
    const linux = await runInProcess(['lease', 'extend', leaseId, '--config', config], { platform: 'linux' });
    assert.equal(linux.code, 0, linux.stderr);
    assert.match(linux.stderr, /^queenctl: warning: the config file .* can be read by other users \(mode 0644\)/);
  });

  it('a run stopped by a signal ends with its status: raised again on Linux, exited with on Windows', () => {
    assert.deepEqual(
      [129, 130, 143, 1, 141].map((status) => endingSignal(status, 'linux')),
      ['SIGHUP', 'SIGINT', 'SIGTERM', undefined, undefined],
    );
    assert.deepEqual(
      [129, 130, 143].map((status) => endingSignal(status, 'win32')),
      [undefined, undefined, undefined],
    );
  });
});
