/** Runs the built queenctl as a user would: a child process, its exit code and its two streams. */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../../bin/queenctl.cjs', import.meta.url));

/** A HOME with no ~/.queen, so the machine's own config never leaks into a test. */
const EMPTY_HOME = mkdtempSync(join(tmpdir(), 'queenctl-home-'));

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  env?: Record<string, string | undefined>;
  stdin?: string;
  /** Kill the child after this long: a hanging queenctl fails its test instead of the suite. */
  timeoutMs?: number;
}

export function cleanEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith('QUEEN_') && key !== 'NO_COLOR' && key !== 'FORCE_COLOR' && !key.startsWith('NODE_TEST'))
      env[key] = value;
  }
  env.HOME = EMPTY_HOME;
  for (const [key, value] of Object.entries(extra)) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  return env;
}

export function runCli(args: string[], options: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: cleanEnv(options.env), stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 15_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.on('error', () => {
      // The CLI may exit before reading all of stdin; that is its right.
    });
    child.stdin.end(options.stdin ?? '');
  });
}
