/**
 * The process's streams, as a parameter: commands write through an IO so tests pass buffers,
 * and so nothing outside cli.ts touches `process`.
 */
import type { StdinLike } from './args.js';

export interface OutputStream {
  write(chunk: string): boolean;
  once?(event: 'drain' | 'close', listener: () => void): unknown;
  off?(event: 'drain' | 'close', listener: () => void): unknown;
  isTTY?: boolean;
  /** A terminal's width, as it reports it. */
  columns?: number;
  /** A stream that is closed never drains: writing to it must not wait. */
  destroyed?: boolean;
}

export interface IO {
  stdout: OutputStream;
  stderr: OutputStream;
  stdin: StdinLike;
  /** Colour on stdout/stderr, decided once from flags, NO_COLOR/FORCE_COLOR and the terminal. */
  color: boolean;
  /** Suppress everything but errors (and machine output that was asked for by -o). */
  quiet: boolean;
  /** -v: say what happens on the wire (never the token). */
  verbose: boolean;
  /**
   * The width of the terminal stdout is (output/width.ts: COLUMNS, else what it reports): tables
   * are fitted to it. Undefined when stdout is no terminal: nothing is fitted there.
   */
  width?: number | undefined;
  /** The same of stderr: messages and hints there are wrapped at it (at most 100). */
  stderrWidth?: number | undefined;
  /**
   * Whether stdout could not be written (a full disk, an I/O error; not a reader gone): what a
   * verb printed there as its only record is lost (docs/cli-contract.md, "Output that cannot be
   * written"). Absent: never.
   */
  stdoutFailed?: () => boolean;
}

/** Writes, and waits when the stream asks for it, so streaming output keeps memory flat. */
export async function write(stream: OutputStream, text: string): Promise<void> {
  if (stream.write(text) || !stream.once || stream.destroyed) return;
  await new Promise<void>((resolve) => {
    const done = (): void => {
      stream.off?.('drain', done);
      stream.off?.('close', done);
      resolve();
    };
    stream.once?.('drain', done);
    stream.once?.('close', done);
  });
}
