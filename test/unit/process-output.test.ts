/**
 * The process's output written to its descriptor (src/cli.ts, processOutput): a write that
 * failed (a full disk) is reported once, and nothing is written after it, even once the
 * descriptor would take it again: output that resumed would leave a hole in the middle of a file
 * that looks whole (docs/cli-contract.md, "Output that cannot be written").
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { processOutput } from '../../src/cli.js';

it('after a failed write nothing more is written, and the failure is reported once', () => {
  const written: string[] = [];
  let full = false;
  const writeFd = (_fd: number, data: Uint8Array): number => {
    if (full) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28 });
    written.push(Buffer.from(data).toString());
    return data.length;
  };
  const noStream = (): NodeJS.WriteStream => assert.fail('a plain descriptor is written without its stream');
  const port = processOutput(1, noStream, () => true, writeFd)();
  const errors: Array<string | undefined> = [];
  port.on?.('error', (error: NodeJS.ErrnoException) => errors.push(error.code));
  port.write('one\n');
  full = true;
  port.write('two\n');
  port.write('three\n');
  full = false; // the disk has room again
  port.write('four\n');
  assert.deepEqual(written, ['one\n']);
  assert.deepEqual(errors, ['ENOSPC']);
});
