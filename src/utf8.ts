/**
 * Bytes that must be UTF-8 text: the command line and standard input. Node.js decodes both with
 * replacement, so an invalid byte would become U+FFFD and be sent as if the user had typed it;
 * queenctl refuses such text before anything is sent, naming the byte offset
 * (docs/cli-contract.md#lease-ids). A U+FFFD that really was in the input (EF BF BD) is text.
 */
import { UsageError } from './exit.js';

/** Where bytes stop being UTF-8: the offset of the ill-formed sequence's first byte, and that byte. */
export interface Utf8Fault {
  offset: number;
  byte: number;
  /** The bytes ended inside a sequence (more may follow in a stream). */
  truncated: boolean;
}

/**
 * An incremental UTF-8 validator (RFC 3629: no overlong forms, no surrogates, nothing past
 * U+10FFFF), fed chunk by chunk; offsets count from the first byte ever fed.
 */
export class Utf8Checker {
  /** Bytes fed so far. */
  private offset = 0;
  /** Continuation bytes still expected, and where the current sequence began. */
  private needed = 0;
  private sequenceStart = 0;
  private sequenceLead = 0;
  /** The range the next continuation byte must fall in (narrower after E0, ED, F0, F4). */
  private low = 0x80;
  private high = 0xbf;

  /** The first fault in `chunk`, given what came before; null when it is well-formed so far. */
  push(chunk: Uint8Array): Utf8Fault | null {
    for (let index = 0; index < chunk.length; index++, this.offset++) {
      const byte = chunk[index] as number;
      if (this.needed > 0) {
        if (byte < this.low || byte > this.high) return this.fault(false);
        this.needed--;
        this.low = 0x80;
        this.high = 0xbf;
        continue;
      }
      this.sequenceStart = this.offset;
      this.sequenceLead = byte;
      if (byte <= 0x7f) continue;
      if (byte >= 0xc2 && byte <= 0xdf) this.needed = 1;
      else if (byte >= 0xe0 && byte <= 0xef) {
        this.needed = 2;
        if (byte === 0xe0) this.low = 0xa0; // overlong
        if (byte === 0xed) this.high = 0x9f; // surrogates
      } else if (byte >= 0xf0 && byte <= 0xf4) {
        this.needed = 3;
        if (byte === 0xf0) this.low = 0x90; // overlong
        if (byte === 0xf4) this.high = 0x8f; // past U+10FFFF
      } else return this.fault(false); // 80-C1 (a stray continuation, overlong leads), F5-FF
    }
    return null;
  }

  /** The end of the input: a sequence left open is a fault. */
  end(): Utf8Fault | null {
    return this.needed > 0 ? this.fault(true) : null;
  }

  private fault(truncated: boolean): Utf8Fault {
    return { offset: this.sequenceStart, byte: this.sequenceLead, truncated };
  }
}

/** The first fault of a whole byte string, or null when it is UTF-8. */
export function utf8Fault(bytes: Uint8Array): Utf8Fault | null {
  const checker = new Utf8Checker();
  return checker.push(bytes) ?? checker.end();
}

/** `byte 0xff at offset 2 of <of>`, or where it ends inside a character: for the one line of an error. */
export function describeUtf8Fault(fault: Utf8Fault, of: string): string {
  const byte = `0x${fault.byte.toString(16).padStart(2, '0')}`;
  return fault.truncated
    ? `${of} ends inside a character begun by byte ${byte} at offset ${fault.offset}`
    : `byte ${byte} at offset ${fault.offset} of ${of}`;
}

/**
 * The command line as the process got it, when a string of `argv` (as Node.js decoded it) may
 * hide bytes that were not UTF-8: Linux keeps the real argv in /proc/self/cmdline, NUL-separated.
 * Its last `argv.length` entries are queenctl's own arguments, however the process was started
 * (`node [flags] bin/queenctl.cjs ...`, the standalone executable): each is checked against the
 * string Node.js made of it, and on any mismatch (or off Linux) the strings are kept as they are.
 * Costs nothing unless a string holds U+FFFD, the only trace an invalid byte leaves.
 */
export function rawArgv(argv: readonly string[], readCmdline: () => Uint8Array): Array<string | Uint8Array> {
  if (!argv.some((arg) => arg.includes('\uFFFD'))) return [...argv];
  let cmdline: Uint8Array;
  try {
    cmdline = readCmdline();
  } catch {
    return [...argv];
  }
  const entries = splitNul(cmdline);
  if (entries.length < argv.length) return [...argv];
  const raw = entries.slice(entries.length - argv.length);
  const lenient = new TextDecoder('utf-8', { ignoreBOM: true });
  for (const [index, bytes] of raw.entries()) {
    const text = argv[index] as string;
    const decoded = lenient.decode(bytes);
    // Node.js and TextDecoder replace the same way; either way, an entry that is not the string
    // Node.js made means the layout is not what we think: trust nothing of it.
    if (decoded !== text && !(utf8Fault(bytes) && text.includes('\uFFFD'))) return [...argv];
  }
  return argv.map((arg, index) => (arg.includes('\uFFFD') ? (raw[index] as Uint8Array) : arg));
}

function splitNul(bytes: Uint8Array): Uint8Array[] {
  const entries: Uint8Array[] = [];
  let start = 0;
  for (let index = 0; index < bytes.length; index++) {
    if (bytes[index] !== 0) continue;
    entries.push(bytes.subarray(start, index));
    start = index + 1;
  }
  // The kernel ends each entry with a NUL; a last one without (a rewritten argv) is kept.
  if (start < bytes.length) entries.push(bytes.subarray(start));
  return entries;
}

/** Bytes for one line of an error: printable ASCII as it is, anything else as \xNN; at most 80 bytes. */
export function showBytes(bytes: Uint8Array): string {
  let shown = '';
  for (const byte of bytes.subarray(0, 80)) {
    if (byte === 0x22 || byte === 0x5c) shown += `\\${String.fromCharCode(byte)}`;
    else if (byte >= 0x20 && byte < 0x7f) shown += String.fromCharCode(byte);
    else shown += `\\x${byte.toString(16).padStart(2, '0')}`;
  }
  return `"${shown}${bytes.length > 80 ? '…' : ''}"`;
}

/**
 * The command line as text: a raw argument (see rawArgv) is decoded, and one that is not UTF-8
 * is a usage error naming it and the byte offset, before anything is parsed or sent. That holds
 * for the command after `--` of a watch too: Node.js could only pass it on with U+FFFD in place
 * of the bytes.
 */
export function decodeArgv(argv: readonly (string | Uint8Array)[]): string[] {
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  return argv.map((arg, index) => {
    if (typeof arg === 'string') return arg;
    const fault = utf8Fault(arg);
    if (fault) {
      const where = describeUtf8Fault(fault, 'the argument');
      throw new UsageError(
        `argument ${index + 1} ${showBytes(arg)} is not valid UTF-8: ${where}; nothing was sent`,
        'lease ids, names, paths and the command after -- must be UTF-8 text',
      );
    }
    return decoder.decode(arg);
  });
}
