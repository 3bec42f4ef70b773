/**
 * scripts/binary-format.mjs on headers built here, a few hundred bytes each: what it says of ELF,
 * Mach-O (thin, universal, signed ad hoc or not, its pages matching their hashes or not) and PE
 * files, and that a hostile file (truncated, or with headers that lie about sizes, counts and
 * offsets) is a BinaryFormatError naming what is wrong, never a crash, a hang or a huge read.
 * findBytes finds a string across the chunks it streams. The real executables Bun makes:
 * test/release/binary-format.test.ts.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type * as BinaryFormat from '../../scripts/binary-format.mjs';

// The script is plain JS at the root's scripts/, not compiled into dist/.
const { BinaryFormatError, embeds, findBytes, inspectExecutable, verifyCodeSignature }: typeof BinaryFormat =
  await import(new URL('../../../scripts/binary-format.mjs', import.meta.url).href);

const dir = mkdtempSync(join(tmpdir(), 'binary-format-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
function file(bytes: Uint8Array): string {
  const path = join(dir, `f${files++}`);
  writeFileSync(path, bytes);
  return path;
}
async function refused(bytes: Uint8Array, pattern: RegExp): Promise<void> {
  const path = file(bytes);
  await assert.rejects(inspectExecutable(path), (error: unknown) => {
    assert.ok(error instanceof BinaryFormatError, `not a BinaryFormatError: ${String(error)}`);
    assert.match(error.message, pattern);
    assert.ok(error.message.startsWith(`${path}: `), error.message);
    return true;
  });
}

/** An ELF64 little-endian file: the header, one PT_INTERP program header, the interpreter. */
function elf64(machine: number, interpreter = '/lib64/ld-linux-x86-64.so.2', type = 2): Buffer {
  const header = Buffer.alloc(64);
  header.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
  header.writeUInt16LE(type, 16);
  header.writeUInt16LE(machine, 18);
  header.writeBigUInt64LE(64n, 32); // e_phoff
  header.writeUInt16LE(56, 54); // e_phentsize
  header.writeUInt16LE(1, 56); // e_phnum
  const ph = Buffer.alloc(56);
  const text = Buffer.from(`${interpreter}\0`, 'latin1');
  ph.writeUInt32LE(3, 0); // PT_INTERP
  ph.writeBigUInt64LE(120n, 8);
  ph.writeBigUInt64LE(BigInt(text.length), 32);
  return Buffer.concat([header, ph, text]);
}

/** An ELF32 little-endian file with no program headers. */
function elf32(machine: number): Buffer {
  const header = Buffer.alloc(52);
  header.set([0x7f, 0x45, 0x4c, 0x46, 1, 1, 1]);
  header.writeUInt16LE(2, 16);
  header.writeUInt16LE(machine, 18);
  return header;
}

const CPU_X64 = 0x01000007;
const CPU_ARM64 = 0x0100000c;
interface MachOptions {
  cpu: number;
  /** Sign ad hoc (flags 0x20002) or with flags given, over everything before the signature. */
  sign?: { flags: number; identifier?: string; cms?: boolean };
  /** Size of the code before the signature (several pages, so that one can be changed). */
  codeSize?: number;
  minOS?: number;
}
/**
 * A thin 64-bit Mach-O executable: header, LC_BUILD_VERSION, optionally LC_CODE_SIGNATURE with a
 * SuperBlob holding a CodeDirectory whose page hashes (SHA-256, 4096-byte pages, the last one
 * short) are those of the bytes before it, and a CMS wrapper when asked.
 */
function macho({ cpu, sign, codeSize = 3 * 4096 + 100, minOS = 0x000d0000 }: MachOptions): Buffer {
  const commands: Buffer[] = [];
  const build = Buffer.alloc(24);
  build.writeUInt32LE(0x32, 0);
  build.writeUInt32LE(24, 4);
  build.writeUInt32LE(1, 8); // PLATFORM_MACOS
  build.writeUInt32LE(minOS, 12);
  commands.push(build);
  const signatureCommand = Buffer.alloc(16);
  if (sign) commands.push(signatureCommand);
  const sizeofcmds = commands.reduce((sum, command) => sum + command.length, 0);
  const header = Buffer.alloc(32);
  header.writeUInt32LE(0xfeedfacf, 0);
  header.writeUInt32LE(cpu, 4);
  header.writeUInt32LE(2, 12); // MH_EXECUTE
  header.writeUInt32LE(commands.length, 16);
  header.writeUInt32LE(sizeofcmds, 20);
  const code = Buffer.alloc(codeSize);
  if (!sign) {
    Buffer.concat([header, ...commands]).copy(code);
    return code;
  }
  signatureCommand.writeUInt32LE(0x1d, 0);
  signatureCommand.writeUInt32LE(16, 4);
  signatureCommand.writeUInt32LE(codeSize, 8); // dataoff: the signature follows the code
  const identifier = Buffer.from(`${sign.identifier ?? 'a.out'}\0`);
  const pages = Math.ceil(codeSize / 4096);
  const hashOffset = 88 + identifier.length;
  const directoryLength = hashOffset + pages * 32;
  const cms = sign.cms ? Buffer.alloc(64, 0x30) : null;
  const blobs = cms ? 2 : 1;
  const superLength = 12 + blobs * 8 + directoryLength + (cms ? 8 + cms.length : 0);
  signatureCommand.writeUInt32LE(superLength, 12);
  Buffer.concat([header, ...commands]).copy(code);
  const directory = Buffer.alloc(directoryLength);
  directory.writeUInt32BE(0xfade0c02, 0);
  directory.writeUInt32BE(directoryLength, 4);
  directory.writeUInt32BE(0x20400, 8);
  directory.writeUInt32BE(sign.flags, 12);
  directory.writeUInt32BE(hashOffset, 16);
  directory.writeUInt32BE(88, 20); // identOffset
  directory.writeUInt32BE(pages, 28);
  directory.writeUInt32BE(codeSize, 32);
  directory[36] = 32; // hashSize
  directory[37] = 2; // SHA-256
  directory[39] = 12; // 4096-byte pages
  identifier.copy(directory, 88);
  for (let page = 0; page < pages; page++)
    createHash('sha256')
      .update(code.subarray(page * 4096, Math.min((page + 1) * 4096, codeSize)))
      .digest()
      .copy(directory, hashOffset + page * 32);
  const superBlob = Buffer.alloc(12 + blobs * 8);
  superBlob.writeUInt32BE(0xfade0cc0, 0);
  superBlob.writeUInt32BE(superLength, 4);
  superBlob.writeUInt32BE(blobs, 8);
  superBlob.writeUInt32BE(0, 12); // CSSLOT_CODEDIRECTORY
  superBlob.writeUInt32BE(superBlob.length, 16);
  const parts = [code, superBlob, directory];
  if (cms) {
    superBlob.writeUInt32BE(0x10000, 20); // CSSLOT_SIGNATURESLOT
    superBlob.writeUInt32BE(superBlob.length + directoryLength, 24);
    const wrapper = Buffer.alloc(8);
    wrapper.writeUInt32BE(0xfade0b01, 0);
    wrapper.writeUInt32BE(8 + cms.length, 4);
    parts.push(wrapper, cms);
  }
  return Buffer.concat(parts);
}

/** A universal file of the thin images given, each at a 4096-aligned offset. */
function universal(slices: Buffer[]): Buffer {
  const table = Buffer.alloc(8 + slices.length * 20);
  table.writeUInt32BE(0xcafebabe, 0);
  table.writeUInt32BE(slices.length, 4);
  const parts: Buffer[] = [table];
  let at = 4096;
  parts.push(Buffer.alloc(at - table.length));
  slices.forEach((slice, index) => {
    table.writeUInt32BE(slice.readUInt32LE(4), 8 + index * 20);
    table.writeUInt32BE(at, 8 + index * 20 + 8);
    table.writeUInt32BE(slice.length, 8 + index * 20 + 12);
    const padded = Buffer.alloc(Math.ceil(slice.length / 4096) * 4096);
    slice.copy(padded);
    parts.push(padded);
    at += padded.length;
  });
  return Buffer.concat(parts);
}

/** A PE file: DOS header pointing at `PE\0\0` at 0x80, COFF header, optional header to Subsystem. */
function pe({ machine = 0x8664, subsystem = 3, magic = 0x20b, characteristics = 0x22 } = {}): Buffer {
  const bytes = Buffer.alloc(0x80 + 24 + 240);
  bytes.write('MZ', 0, 'latin1');
  bytes.writeUInt32LE(0x80, 0x3c);
  bytes.writeUInt32LE(0x00004550, 0x80);
  bytes.writeUInt16LE(machine, 0x84);
  bytes.writeUInt16LE(240, 0x80 + 20); // SizeOfOptionalHeader (PE32+)
  bytes.writeUInt16LE(characteristics, 0x80 + 22);
  bytes.writeUInt16LE(magic, 0x80 + 24);
  bytes.writeUInt16LE(subsystem, 0x80 + 24 + 68);
  return bytes;
}

describe('inspectExecutable: what an executable is', () => {
  it('ELF: the CPU, class, type and interpreter', async () => {
    assert.deepEqual(await inspectExecutable(file(elf64(0x3e))), {
      format: 'elf',
      arch: 'x64',
      bits: 64,
      endian: 'le',
      type: 'executable',
      interpreter: '/lib64/ld-linux-x86-64.so.2',
    });
    const arm = await inspectExecutable(file(elf64(0xb7, '/lib/ld-linux-aarch64.so.1', 3)));
    assert.deepEqual(
      [arm.arch, arm.type, arm.format === 'elf' && arm.interpreter],
      ['arm64', 'shared', '/lib/ld-linux-aarch64.so.1'],
    );
    const old = await inspectExecutable(file(elf32(0x03)));
    assert.deepEqual([old.arch, old.bits, old.format === 'elf' && old.interpreter], ['ia32', 32, null]);
    assert.equal((await inspectExecutable(file(elf64(0x1234)))).arch, 'elf-machine-0x1234');
  });

  it('Mach-O: the CPU, the minimum macOS, and no signature', async () => {
    const found = await inspectExecutable(file(macho({ cpu: CPU_X64, minOS: 0x000b0001 })));
    assert.equal(found.format, 'macho');
    assert.deepEqual(
      { ...found },
      {
        format: 'macho',
        arch: 'x64',
        bits: 64,
        endian: 'le',
        type: 'executable',
        base: 0,
        minOS: '11.0.1',
        signed: false,
        adhocSigned: false,
        codeSignature: null,
      },
    );
  });

  it('Mach-O: an ad-hoc signature (CS_ADHOC), its identifier, and its pages checked', async () => {
    const bytes = macho({ cpu: CPU_ARM64, sign: { flags: 0x20002, identifier: 'queenctl' } });
    const path = file(bytes);
    const found = await inspectExecutable(path);
    assert.ok(found.format === 'macho' && 'signed' in found);
    assert.deepEqual([found.arch, found.minOS, found.signed, found.adhocSigned], ['arm64', '13.0', true, true]);
    const { codeDirectory, ...signature } = found.codeSignature ?? assert.fail('no signature');
    assert.deepEqual(signature, {
      adhoc: true,
      linkerSigned: true,
      flags: 0x20002,
      identifier: 'queenctl',
      hashType: 'sha256',
      cms: false,
    });
    assert.deepEqual([codeDirectory.codeSlots, codeDirectory.pageSize, codeDirectory.codeLimit], [4, 4096, 12388]);
    assert.deepEqual(await verifyCodeSignature(path), { valid: true, pages: 4, mismatched: 0, firstMismatch: -1 });

    // A byte changed after signing (what appending a bundle without signing again does): its
    // page no longer matches, the last, short one included.
    for (const [offset, page] of [
      [5000, 1],
      [12387, 3],
    ] as const) {
      const changed = Buffer.from(bytes);
      changed[offset] = (changed[offset] ?? 0) ^ 0xff;
      assert.deepEqual(await verifyCodeSignature(file(changed)), {
        valid: false,
        pages: 4,
        mismatched: 1,
        firstMismatch: page,
      });
    }
  });

  it('Mach-O: a certificate signature is not ad hoc', async () => {
    const found = await inspectExecutable(file(macho({ cpu: CPU_X64, sign: { flags: 0x10000, cms: true } })));
    assert.ok(found.format === 'macho' && 'signed' in found);
    assert.deepEqual([found.signed, found.adhocSigned, found.codeSignature?.cms], [true, false, true]);
  });

  it('Mach-O: a universal file lists its slices, each inspected', async () => {
    const path = file(
      universal([macho({ cpu: CPU_X64 }), macho({ cpu: CPU_ARM64, sign: { flags: 0x2 }, codeSize: 5000 })]),
    );
    const found = await inspectExecutable(path);
    assert.ok(found.format === 'macho' && 'slices' in found);
    assert.equal(found.arch, 'universal');
    assert.deepEqual(
      found.slices.map((slice) => [slice.arch, slice.base, slice.adhocSigned]),
      [
        ['x64', 4096, false],
        ['arm64', 4096 + 16384, true],
      ],
    );
    await assert.rejects(verifyCodeSignature(path), /image 0 \(x64\) is not signed/);
  });

  it('PE: the CPU, and whether it is a console program', async () => {
    assert.deepEqual(await inspectExecutable(file(pe())), {
      format: 'pe',
      arch: 'x64',
      bits: 64,
      endian: 'le',
      type: 'executable',
      subsystem: 'console',
      console: true,
      dll: false,
    });
    const gui = await inspectExecutable(file(pe({ machine: 0xaa64, subsystem: 2 })));
    assert.ok(gui.format === 'pe');
    assert.deepEqual([gui.arch, gui.subsystem, gui.console], ['arm64', 'gui', false]);
    const dll = await inspectExecutable(file(pe({ characteristics: 0x2022 })));
    assert.ok(dll.format === 'pe');
    assert.deepEqual([dll.type, dll.console], ['dll', false]);
    const pe32 = await inspectExecutable(file(pe({ machine: 0x14c, magic: 0x10b })));
    assert.deepEqual([pe32.arch, pe32.bits], ['ia32', 32]);
  });

  it('verifyCodeSignature refuses what has no Mach-O signature', async () => {
    await assert.rejects(verifyCodeSignature(file(pe())), /a pe file has no Mach-O signature/);
    await assert.rejects(verifyCodeSignature(file(macho({ cpu: CPU_X64 }))), /image 0 \(x64\) is not signed/);
  });
});

describe('inspectExecutable: hostile files are refused with the reason', () => {
  it('not an executable, or too short to be one', async () => {
    await refused(Buffer.alloc(0), /0 bytes: too short/);
    await refused(Buffer.from('#!/bin/sh\n'), /not an ELF, Mach-O or PE executable: it starts with 23 21 2f 62/);
  });

  it('ELF: truncated, a bad class, program headers past the end or of absurd size', async () => {
    await refused(elf64(0x3e).subarray(0, 20), /the ELF identification|the ELF header .* lies past the end/);
    const badClass = elf64(0x3e);
    badClass[4] = 9;
    await refused(badClass, /ELF class 9/);
    const farTable = elf64(0x3e);
    farTable.writeBigUInt64LE(0xffff_ffff_ffffn, 32);
    await refused(farTable, /the ELF program headers .* lies past the end of the file/);
    const hugeEntries = elf64(0x3e);
    hugeEntries.writeUInt16LE(0xffff, 54);
    hugeEntries.writeUInt16LE(0xffff, 56);
    await refused(hugeEntries, /program header entries of 65535 bytes/);
    const farInterp = elf64(0x3e);
    farInterp.writeBigUInt64LE(1n << 60n, 64 + 8);
    await refused(farInterp, /p_offset \d+ is out of range/);
    const longInterp = elf64(0x3e);
    longInterp.writeBigUInt64LE(1n << 20n, 64 + 32);
    await refused(longInterp, /PT_INTERP of 1048576 bytes/);
  });

  it('Mach-O: load commands that lie about their size or count', async () => {
    const base = macho({ cpu: CPU_ARM64, sign: { flags: 0x2 } });
    const bigCmds = Buffer.from(base);
    bigCmds.writeUInt32LE(0xffff_fff0, 20);
    await refused(bigCmds, /load commands of 4294967280 bytes do not fit/);
    const manyCmds = Buffer.from(base);
    manyCmds.writeUInt32LE(0xffff_ffff, 16);
    await refused(manyCmds, /4294967295 Mach-O load commands cannot fit in 40 bytes/);
    // A command of size 0 would have the walk stand still for ever.
    const zeroSize = Buffer.from(base);
    zeroSize.writeUInt32LE(0, 32 + 4);
    await refused(zeroSize, /load command 0 \(0x32\) has size 0/);
    const overrun = Buffer.from(base);
    overrun.writeUInt32LE(4096, 32 + 4);
    await refused(overrun, /load command 0 \(0x32\) has size 4096/);
    await refused(base.subarray(0, 40), /load commands of 40 bytes do not fit in the image \(40 bytes/);
  });

  it('Mach-O: a code signature that points outside the file or holds nonsense', async () => {
    const base = macho({ cpu: CPU_ARM64, sign: { flags: 0x2 } });
    const signatureAt = 32 + 24; // LC_CODE_SIGNATURE follows LC_BUILD_VERSION
    const past = Buffer.from(base);
    past.writeUInt32LE(base.length, signatureAt + 8);
    await refused(past, /LC_CODE_SIGNATURE points past the end of the image/);
    const dataoff = base.readUInt32LE(signatureAt + 8);
    const badMagic = Buffer.from(base);
    badMagic.writeUInt32BE(0x12345678, dataoff);
    await refused(badMagic, /the code signature's magic is 0x12345678/);
    const manyBlobs = Buffer.from(base);
    manyBlobs.writeUInt32BE(0x7fff_ffff, dataoff + 8);
    await refused(manyBlobs, /lists 2147483647 blobs/);
    const farBlob = Buffer.from(base);
    farBlob.writeUInt32BE(0x7fff_0000, dataoff + 16);
    await refused(farBlob, /code signature blob 0 \(type 0x0\) lies past its end/);
    const longBlob = Buffer.from(base);
    longBlob.writeUInt32BE(0x7fff_0000, dataoff + 20 + 4);
    await refused(longBlob, /code signature blob 0 says 2147418112 bytes/);
    const noDirectory = Buffer.from(base);
    noDirectory.writeUInt32BE(0x2, dataoff + 12); // the only blob is now "requirements"
    await refused(noDirectory, /holds no CodeDirectory/);
    const endless = Buffer.from(base);
    // The identifier's NUL and everything after it, up to the end of the CodeDirectory: no end.
    endless.fill(0x41, dataoff + 20 + 88, dataoff + 20 + endless.readUInt32BE(dataoff + 20 + 4));
    await refused(endless, /the signing identifier has no end/);
    const lyingSlots = Buffer.from(base);
    lyingSlots.writeUInt32BE(99, dataoff + 20 + 28);
    await assert.rejects(verifyCodeSignature(file(lyingSlots)), /99 code slots for 12388 bytes of 4096-byte pages/);
  });

  it('universal: a Java class file, or slices past the end', async () => {
    const java = Buffer.alloc(64);
    java.writeUInt32BE(0xcafebabe, 0);
    java.writeUInt32BE(52, 4); // a class file's major version where a slice count would be
    await refused(java, /universal Mach-O with 52 slices .*Java class file/);
    const past = universal([macho({ cpu: CPU_X64 })]);
    past.writeUInt32BE(0x7fff_ffff, 8 + 12);
    await refused(past, /universal slice 0 .* lies past the end/);
  });

  it('PE: e_lfanew out of range, no PE signature, no Subsystem, an unknown optional header', async () => {
    const far = pe();
    far.writeUInt32LE(0xffff_ffff, 0x3c);
    await refused(far, /e_lfanew\) is 4294967295/);
    const pastEnd = pe();
    pastEnd.writeUInt32LE(100_000, 0x3c);
    await refused(pastEnd, /the PE and COFF headers .* lies past the end/);
    const dos = pe();
    dos.writeUInt32LE(0, 0x80);
    await refused(dos, /no PE signature at offset 128/);
    const short = pe();
    short.writeUInt16LE(20, 0x80 + 20);
    await refused(short, /optional header of 20 bytes has no Subsystem/);
    const rom = pe({ magic: 0x107 });
    await refused(rom, /PE optional header magic 0x107/);
    await refused(pe().subarray(0, 0x90), /the PE and COFF headers .* lies past the end/);
  });
});

describe('findBytes: a byte string in a file, streamed', () => {
  it('finds it at the start, across the 1 MiB chunks, or not at all', async () => {
    const size = 3 * 1024 * 1024;
    const bytes = Buffer.alloc(size, 0x2e);
    const mark = 'queenctl-build:0123456789abcdef';
    const straddling = 1024 * 1024 - 7; // begins in the first chunk, ends in the second
    bytes.write(mark, straddling, 'latin1');
    const path = file(bytes);
    assert.equal(await findBytes(path, mark), straddling);
    assert.equal(await findBytes(path, Buffer.from('..q')), straddling - 2);
    assert.equal(await embeds(path, 'queenctl-build:fedcba'), false);
    assert.equal(await findBytes(path, '.'), 0);
    const end = Buffer.alloc(2 * 1024 * 1024, 0x2e);
    end.write('END', end.length - 3, 'latin1');
    assert.equal(await findBytes(file(end), 'END'), end.length - 3);
    await assert.rejects(findBytes(path, ''), /empty needle/);
  });
});
