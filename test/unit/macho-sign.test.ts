/**
 * scripts/macho-sign.mjs on Mach-O executables built here, a few pages each, laid out as a linker
 * lays one out (__PAGEZERO, __TEXT, __DATA, __LINKEDIT last with the symbol strings and then the
 * signature): one carrying a stale certificate signature like the one Bun 1.4.5 leaves on its
 * darwin-x64 output (hardened runtime, special slots, requirements, entitlements, CMS), signed
 * again ad hoc and checked by scripts/binary-format.mjs (every page matches, ad hoc, no CMS); a
 * file changed afterwards caught; hostile files refused with the reason and left untouched. The
 * real executables Bun makes: test/release/binary-format.test.ts.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type * as BinaryFormat from '../../scripts/binary-format.mjs';
import type * as MachOSign from '../../scripts/macho-sign.mjs';

// The scripts are plain JS at the root's scripts/, not compiled into dist/.
const { BinaryFormatError, inspectExecutable, verifyCodeSignature }: typeof BinaryFormat = await import(
  new URL('../../../scripts/binary-format.mjs', import.meta.url).href
);
const { adhocSign, adhocSignatureSize, readSignature }: typeof MachOSign = await import(
  new URL('../../../scripts/macho-sign.mjs', import.meta.url).href
);

const dir = mkdtempSync(join(tmpdir(), 'macho-sign-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
function file(bytes: Uint8Array): string {
  const path = join(dir, `f${files++}`);
  writeFileSync(path, bytes);
  return path;
}

const CPU_X64 = 0x01000007;
const CPU_ARM64 = 0x0100000c;
const TEXT_SIZE = 3 * 4096;
const DATA_SIZE = 4096;
const LINKEDIT_AT = TEXT_SIZE + DATA_SIZE;
const STRINGS = 100; // the symbol strings at the start of __LINKEDIT
const SIGNATURE_AT = LINKEDIT_AT + 112; // after them, 16-byte aligned
/** Where each command starts (header 32; __PAGEZERO 72; __TEXT 72 + 80; __DATA 72; __LINKEDIT 72). */
const AT = { text: 32 + 72, linkedit: 32 + 72 + 152 + 72, symtab: 32 + 72 + 152 + 72 + 72 };
const SIGNATURE_COMMAND_AT = AT.symtab + 24 + 24; // after LC_SYMTAB and LC_BUILD_VERSION

interface Options {
  cpu?: number;
  /** An old signature of that many bytes of CMS (a stale certificate signature), or none. */
  oldSignature?: { cms: number; identifier?: string } | null;
}
/**
 * A thin Mach-O executable: the commands, code and data filled with a pattern, the symbol
 * strings, and (unless `oldSignature` is null) an LC_CODE_SIGNATURE whose signature's hashes
 * are stale (zero), as in a file changed after it was signed.
 */
function macho({ cpu = CPU_X64, oldSignature = { cms: 9000 } }: Options = {}): Buffer {
  const old = oldSignature === null ? null : staleSignature(oldSignature.cms, oldSignature.identifier ?? 'bun');
  const end = old === null ? SIGNATURE_AT : SIGNATURE_AT + old.length;
  const bytes = Buffer.alloc(end);
  for (let at = 4096; at < SIGNATURE_AT; at++) bytes[at] = (at * 7) & 0xff;
  bytes.fill(0, TEXT_SIZE - 16, TEXT_SIZE); // some zero bytes, as a linker's padding
  const segment = (at: number, name: string, vmaddr: number, vmsize: number, fileoff: number, filesize: number) => {
    bytes.writeUInt32LE(0x19, at);
    bytes.writeUInt32LE(name === '__TEXT' ? 72 + 80 : 72, at + 4);
    bytes.write(name, at + 8, 'latin1');
    bytes.writeBigUInt64LE(BigInt(vmaddr), at + 24);
    bytes.writeBigUInt64LE(BigInt(vmsize), at + 32);
    bytes.writeBigUInt64LE(BigInt(fileoff), at + 40);
    bytes.writeBigUInt64LE(BigInt(filesize), at + 48);
    bytes.writeUInt32LE(name === '__TEXT' ? 1 : 0, at + 64);
  };
  const base = 0x1_0000_0000;
  segment(32, '__PAGEZERO', 0, base, 0, 0);
  segment(AT.text, '__TEXT', base, TEXT_SIZE, 0, TEXT_SIZE);
  bytes.write('__text', AT.text + 72, 'latin1');
  bytes.write('__TEXT', AT.text + 72 + 16, 'latin1');
  bytes.writeBigUInt64LE(BigInt(TEXT_SIZE - 4096), AT.text + 72 + 40); // size
  bytes.writeUInt32LE(4096, AT.text + 72 + 48); // offset: the code starts on the second page
  segment(AT.text + 152, '__DATA', base + TEXT_SIZE, DATA_SIZE, TEXT_SIZE, DATA_SIZE);
  const linkeditSize = end - LINKEDIT_AT;
  segment(
    AT.linkedit,
    '__LINKEDIT',
    base + LINKEDIT_AT,
    Math.ceil(linkeditSize / 4096) * 4096,
    LINKEDIT_AT,
    linkeditSize,
  );
  bytes.writeUInt32LE(0x2, AT.symtab); // LC_SYMTAB: no symbols, the strings only
  bytes.writeUInt32LE(24, AT.symtab + 4);
  bytes.writeUInt32LE(LINKEDIT_AT, AT.symtab + 16);
  bytes.writeUInt32LE(STRINGS, AT.symtab + 20);
  bytes.writeUInt32LE(0x32, AT.symtab + 24); // LC_BUILD_VERSION, macOS 13.0
  bytes.writeUInt32LE(24, AT.symtab + 28);
  bytes.writeUInt32LE(1, AT.symtab + 32);
  bytes.writeUInt32LE(0x000d0000, AT.symtab + 36);
  let ncmds = 6;
  if (old !== null) {
    bytes.writeUInt32LE(0x1d, SIGNATURE_COMMAND_AT);
    bytes.writeUInt32LE(16, SIGNATURE_COMMAND_AT + 4);
    bytes.writeUInt32LE(SIGNATURE_AT, SIGNATURE_COMMAND_AT + 8);
    bytes.writeUInt32LE(old.length, SIGNATURE_COMMAND_AT + 12);
    old.copy(bytes, SIGNATURE_AT);
    ncmds = 7;
  }
  bytes.writeUInt32LE(0xfeedfacf, 0);
  bytes.writeUInt32LE(cpu, 4);
  bytes.writeUInt32LE(2, 12); // MH_EXECUTE
  bytes.writeUInt32LE(ncmds, 16);
  bytes.writeUInt32LE(ncmds === 7 ? SIGNATURE_COMMAND_AT + 16 - 32 : SIGNATURE_COMMAND_AT - 32, 20);
  bytes.writeUInt32LE(0x00200085, 24);
  return bytes;
}

/**
 * A certificate signature as Oven's: a version 0x20500 CodeDirectory with the hardened runtime
 * (0x10000), seven special slots and a team id, requirements, entitlements, and a CMS blob,
 * padded with zeros after the SuperBlob as codesign_allocate leaves it.
 */
function staleSignature(cms: number, identifier: string): Buffer {
  const ident = Buffer.from(`${identifier}\0TEAMID\0`, 'latin1');
  const pages = Math.ceil(SIGNATURE_AT / 4096);
  const hashOffset = 96 + ident.length + 7 * 32;
  const directory = Buffer.alloc(hashOffset + pages * 32);
  directory.writeUInt32BE(0xfade0c02, 0);
  directory.writeUInt32BE(directory.length, 4);
  directory.writeUInt32BE(0x20500, 8);
  directory.writeUInt32BE(0x10000, 12);
  directory.writeUInt32BE(hashOffset, 16);
  directory.writeUInt32BE(96, 20);
  directory.writeUInt32BE(7, 24);
  directory.writeUInt32BE(pages, 28);
  directory.writeUInt32BE(SIGNATURE_AT, 32);
  directory.set([32, 2, 0, 12], 36);
  directory.writeUInt32BE(96 + identifier.length + 1, 48);
  ident.copy(directory, 96);
  const blobs = [
    [0, directory],
    [2, Buffer.from('fade0c010000000c00000000', 'hex')],
    [5, Buffer.concat([Buffer.from('fade71710000000c', 'hex'), Buffer.from('<a/>')])],
    [0x10000, Buffer.concat([Buffer.from('fade0b01', 'hex'), Buffer.alloc(4), Buffer.alloc(cms, 0x30)])],
  ] as const;
  blobs[3][1].writeUInt32BE(8 + cms, 4);
  const index = Buffer.alloc(12 + blobs.length * 8);
  let offset = index.length;
  blobs.forEach(([type, blob], slot) => {
    index.writeUInt32BE(type, 12 + slot * 8);
    index.writeUInt32BE(offset, 16 + slot * 8);
    offset += blob.length;
  });
  index.writeUInt32BE(0xfade0cc0, 0);
  index.writeUInt32BE(offset, 4);
  index.writeUInt32BE(blobs.length, 8);
  return Buffer.concat([index, ...blobs.map(([, blob]) => blob), Buffer.alloc(48)]);
}

async function signedFields(path: string) {
  const found = await inspectExecutable(path);
  assert.ok(found.format === 'macho' && 'signed' in found);
  return found;
}

describe('adhocSign: a Mach-O executable signed again, ad hoc, in place', () => {
  it('a stale certificate signature replaced: every page matches, ad hoc, no CMS, the header to match', async () => {
    const original = macho();
    const path = file(original);
    assert.equal((await signedFields(path)).adhocSigned, false);
    assert.equal((await verifyCodeSignature(path)).valid, false, 'the test file must start out stale');

    const result = await adhocSign(path, { identifier: 'queenctl' });
    const size = adhocSignatureSize(SIGNATURE_AT, 'queenctl');
    assert.equal(size, 20 + 88 + 9 + 5 * 32);
    assert.deepEqual(result, {
      identifier: 'queenctl',
      codeLimit: SIGNATURE_AT,
      pages: 5,
      signatureOffset: SIGNATURE_AT,
      signatureSize: size,
      fileSize: SIGNATURE_AT + size,
      previous: { offset: SIGNATURE_AT, size: original.length - SIGNATURE_AT },
    });
    const signed = readFileSync(path);
    assert.equal(signed.length, SIGNATURE_AT + size, 'the file ends where the new signature ends');
    // The header changed (the sizes below) before the pages were hashed: page 0 matches too.
    assert.deepEqual(await verifyCodeSignature(path), { valid: true, pages: 5, mismatched: 0, firstMismatch: -1 });
    const found = await signedFields(path);
    assert.deepEqual(
      [found.signed, found.adhocSigned, found.codeSignature?.cms, found.codeSignature?.linkerSigned],
      [true, true, false, true],
    );
    assert.equal(found.codeSignature?.identifier, 'queenctl');

    const fields = await readSignature(path);
    const { identifier, ...directory } = fields.codeDirectory;
    assert.equal(identifier, 'queenctl');
    assert.deepEqual(directory, {
      length: size - 20,
      version: 0x20400,
      flags: 0x20002,
      hashOffset: 88 + 9,
      identOffset: 88,
      nSpecialSlots: 0,
      nCodeSlots: 5,
      codeLimit: SIGNATURE_AT,
      hashSize: 32,
      hashType: 2,
      platform: 0,
      pageSize: 4096,
      spare2: 0,
      scatterOffset: 0,
      teamOffset: 0,
      spare3: 0,
      codeLimit64: 0,
      execSegBase: 0,
      execSegLimit: TEXT_SIZE,
      execSegFlags: 1,
    });
    assert.deepEqual(fields.superBlob, {
      length: size,
      count: 1,
      blobs: [{ type: 0, offset: 20, magic: 0xfade0c02, length: size - 20 }],
    });
    assert.deepEqual(fields.linkedit, {
      fileoff: LINKEDIT_AT,
      filesize: SIGNATURE_AT + size - LINKEDIT_AT,
      vmsize: 4096, // x86_64's segment alignment
    });
    // The last page is hashed short: its 112 bytes, not a zero-padded 4096.
    assert.equal(SIGNATURE_AT - 4 * 4096, 112);
    const hashes = fields.bytes.subarray(20 + 97);
    const last = createHash('sha256')
      .update(signed.subarray(4 * 4096, SIGNATURE_AT))
      .digest();
    assert.ok(hashes.subarray(4 * 32, 5 * 32).equals(last));
    // Nothing but the sizes changed before the signature: the commands' bytes, code and data.
    const unchanged = Buffer.from(original.subarray(0, SIGNATURE_AT));
    unchanged.writeUInt32LE(size, SIGNATURE_COMMAND_AT + 12);
    unchanged.writeBigUInt64LE(BigInt(4096), AT.linkedit + 32);
    unchanged.writeBigUInt64LE(BigInt(SIGNATURE_AT + size - LINKEDIT_AT), AT.linkedit + 48);
    assert.ok(signed.subarray(0, SIGNATURE_AT).equals(unchanged));
  });

  it('a byte changed after signing is caught, in any page, the header and the last short page included', async () => {
    const path = file(macho());
    await adhocSign(path, { identifier: 'queenctl' });
    const signed = readFileSync(path);
    for (const [offset, page] of [
      [20, 0], // the header's sizeofcmds
      [9000, 2],
      [SIGNATURE_AT - 1, 4],
    ] as const) {
      const changed = Buffer.from(signed);
      changed[offset] = (changed[offset] ?? 0) ^ 0x01;
      const check = await verifyCodeSignature(file(changed));
      assert.ok('pages' in check);
      assert.deepEqual([check.valid, check.mismatched, check.firstMismatch], [false, 1, page], `offset ${offset}`);
    }
  });

  it('one input and identifier, the same bytes; a longer identifier grows the file, a shorter shrinks it', async () => {
    const path = file(macho({ cpu: CPU_ARM64 }));
    await adhocSign(path, { identifier: 'q' });
    const first = readFileSync(path);
    await adhocSign(path, { identifier: 'q' });
    assert.ok(readFileSync(path).equals(first), 'signing again changed the bytes');
    const long = 'com.example.queenctl.'.padEnd(300, 'x');
    const grown = await adhocSign(path, { identifier: long });
    assert.equal(grown.fileSize, first.length + 299);
    assert.equal((await verifyCodeSignature(path)).valid, true);
    assert.equal((await readSignature(path)).linkedit.vmsize, 16384, "arm64's segment alignment");
    await adhocSign(path, { identifier: 'q' });
    assert.ok(readFileSync(path).equals(first), 'back to the short identifier, not back to the same bytes');
  });

  it('an unsigned executable gets an LC_CODE_SIGNATURE, where the header has room for one', async () => {
    const original = macho({ oldSignature: null });
    const path = file(original);
    const result = await adhocSign(path, { identifier: 'queenctl' });
    assert.deepEqual([result.previous, result.signatureOffset], [null, SIGNATURE_AT]);
    const signed = readFileSync(path);
    assert.deepEqual([signed.readUInt32LE(16), signed.readUInt32LE(20)], [7, original.readUInt32LE(20) + 16]);
    assert.deepEqual(await verifyCodeSignature(path), { valid: true, pages: 5, mismatched: 0, firstMismatch: -1 });
    assert.equal((await signedFields(path)).adhocSigned, true);
  });
});

describe('adhocSign: hostile or unsupported files are refused with the reason, untouched', () => {
  async function refused(bytes: Buffer, pattern: RegExp, identifier = 'queenctl'): Promise<void> {
    const path = file(bytes);
    await assert.rejects(adhocSign(path, { identifier }), (error: unknown) => {
      assert.ok(error instanceof BinaryFormatError, `not a BinaryFormatError: ${String(error)}`);
      assert.match(error.message, pattern);
      assert.ok(error.message.startsWith(`${path}: `), error.message);
      return true;
    });
    assert.ok(readFileSync(path).equals(bytes), 'a refused file was changed');
  }
  const edit = (change: (bytes: Buffer) => void, bytes = macho()): Buffer => {
    const copy = Buffer.from(bytes);
    change(copy);
    return copy;
  };

  it('not a thin 64-bit little-endian x86_64 or arm64 executable', async () => {
    const fat = Buffer.alloc(4096);
    fat.writeUInt32BE(0xcafebabe, 0);
    fat.writeUInt32BE(2, 4);
    await refused(fat, /a universal \(fat\) Mach-O: sign each thin slice/);
    await refused(
      edit((bytes) => bytes.writeUInt32LE(0xfeedface, 0)),
      /a 32-bit Mach-O/,
    );
    await refused(
      edit((bytes) => bytes.writeUInt32LE(0xcffaedfe, 0)),
      /a big-endian Mach-O/,
    );
    await refused(Buffer.from('#!/bin/sh\necho not a Mach-O at all\n'), /not a Mach-O file: it starts with 0x2321/);
    await refused(Buffer.alloc(16), /16 bytes: too short/);
    await refused(
      edit((bytes) => bytes.writeUInt32LE(0x12, 4)),
      /CPU type 0x12: only x86_64 and arm64/,
    );
    await refused(
      edit((bytes) => bytes.writeUInt32LE(6, 12)),
      /file type 6, not an executable/,
    );
  });

  it('load commands that lie about their size or count, or a command that would stall the walk', async () => {
    await refused(
      edit((bytes) => bytes.writeUInt32LE(0xffff_fff0, 20)),
      /load commands of 4294967280 bytes/,
    );
    await refused(
      edit((bytes) => bytes.writeUInt32LE(0xffff_ffff, 16)),
      /4294967295 load commands cannot fit/,
    );
    await refused(
      edit((bytes) => bytes.writeUInt32LE(0, 32 + 4)),
      /load command 0 \(0x19\) has size 0/,
    );
    await refused(
      edit((bytes) => bytes.writeUInt32LE(76, 32 + 4)),
      /has size 76: not a multiple of 8/,
    );
    await refused(
      edit((bytes) => bytes.writeUInt32LE(5, AT.text + 64)),
      /lists 5 sections in a 152-byte command/,
    );
    await refused(macho().subarray(0, 200), /load commands of 432 bytes do not fit in the file \(200 bytes/);
  });

  it('segments out of place: past the end, missing, twice, or after __LINKEDIT', async () => {
    await refused(macho().subarray(0, SIGNATURE_AT + 10), /segment __LINKEDIT .* lies past the end of the file/);
    await refused(
      edit((bytes) => bytes.write('__LINKEDIX', AT.linkedit + 8, 'latin1')),
      /no __LINKEDIT segment\(s\): one expected/,
    );
    await refused(
      edit((bytes) => bytes.write('__TEXT\0', 32 + 8, 'latin1')),
      /2 __TEXT segment\(s\)/,
    );
    await refused(
      edit((bytes) => bytes.writeBigUInt64LE(0x2_0000_0000n, AT.text + 152 + 24)),
      /segment __DATA lies after __LINKEDIT in memory/,
    );
    await refused(
      edit((bytes) => bytes.writeBigUInt64LE(BigInt(LINKEDIT_AT + 4096), AT.text + 152 + 40)),
      /segment __DATA lies after __LINKEDIT in the file/,
    );
  });

  it('a signature outside __LINKEDIT, or data of __LINKEDIT running into it', async () => {
    await refused(
      edit((bytes) => bytes.writeUInt32LE(TEXT_SIZE, SIGNATURE_COMMAND_AT + 8)),
      /the code signature .* lies outside __LINKEDIT/,
    );
    await refused(
      edit((bytes) => bytes.writeUInt32LE(0x7fff_0000, SIGNATURE_COMMAND_AT + 12)),
      /the code signature \(2147418112 bytes .* lies outside __LINKEDIT/,
    );
    await refused(
      edit((bytes) => bytes.writeUInt32LE(200, AT.symtab + 20)),
      /__LINKEDIT's data runs to \d+, into the signature/,
    );
    await refused(
      edit((bytes) => bytes.writeUInt32LE(0xffff_0000, AT.symtab + 20)),
      /__LINKEDIT's data runs to \d+, past the segment/,
    );
    // The build-version command (24 bytes) becomes an LC_CODE_SIGNATURE of 16 and one of 8.
    const twice = edit((bytes) => {
      bytes.writeUInt32LE(0x1d, AT.symtab + 24);
      bytes.writeUInt32LE(16, AT.symtab + 28);
      bytes.writeUInt32LE(0x2a, AT.symtab + 40);
      bytes.writeUInt32LE(8, AT.symtab + 44);
      bytes.writeUInt32LE(8, 16);
    });
    await refused(twice, /two LC_CODE_SIGNATURE commands/);
    const long = edit((bytes) => bytes.writeUInt32LE(0x1d, AT.symtab + 24));
    await refused(long, /an LC_CODE_SIGNATURE of 24 bytes \(16\)/);
  });

  it('unsigned, with no free room for the command the signature needs', async () => {
    const full = edit(
      (bytes) => bytes.fill(0x90, SIGNATURE_COMMAND_AT, SIGNATURE_COMMAND_AT + 16),
      macho({ oldSignature: null }),
    );
    await refused(full, /no room after the load commands|are not free/);
    const noRoom = edit(
      (bytes) => bytes.writeUInt32LE(SIGNATURE_COMMAND_AT + 8, AT.text + 72 + 48),
      macho({ oldSignature: null }),
    );
    await refused(noRoom, /no room after the load commands for an LC_CODE_SIGNATURE/);
  });

  it('an identifier that is empty, has spaces or control characters, is not ASCII or is too long', async () => {
    for (const identifier of ['', 'a b', 'a\0b', 'quéenctl', 'x'.repeat(1025)])
      await refused(macho(), /identifier .*: 1 to 1024 printable ASCII characters/, identifier);
  });
});
