// What an executable is, read from its headers: ELF (Linux), Mach-O (macOS) or PE (Windows), its
// CPU, and what the release checks of the executables it cannot run here (docs/install.md): a
// Mach-O's code signature (LC_CODE_SIGNATURE) and whether it is ad hoc (CS_ADHOC in its
// CodeDirectory: macOS on Apple silicon runs no unsigned code, and an ad-hoc signature is what a
// compiler can make without a certificate); a PE's subsystem (a console program, not a GUI one).
// And whether a file carries a given byte string (the build id or checksum a build writes into
// its bundle), by streaming it.
//
// The file is treated as hostile: only the headers are read, each read bounded (never the whole
// file, never a size taken from the file without checking it against the file and a ceiling),
// every loop bounded by a count checked the same way, and a header that is truncated, points
// outside the file or contradicts itself is a BinaryFormatError that says which and where,
// never a crash or a hang. Plain JS, like the other build scripts.
//
//   node scripts/binary-format.mjs <file> [--embeds <text>]     prints what it found, as JSON
//
// Sources: the ELF gABI (e_ident, e_machine, PT_INTERP); Apple's <mach-o/loader.h>, <mach-o/fat.h>
// and <kern/cs_blobs.h> (mach_header_64, load_command, linkedit_data_command, CS_SuperBlob,
// CS_CodeDirectory, CS_ADHOC = 0x2, CS_LINKER_SIGNED = 0x20000); Microsoft's PE format
// (IMAGE_FILE_HEADER, the optional header's Subsystem at offset 68, IMAGE_SUBSYSTEM_WINDOWS_CUI = 3).
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';

/** A header that is not what it says it is, or not there at all; `path` names the file. */
export class BinaryFormatError extends Error {
  constructor(path, message) {
    super(`${path}: ${message}`);
    this.name = 'BinaryFormatError';
    this.path = path;
  }
}

/** Ceilings on what a header may ask to be read: far above any real executable's. */
const LIMITS = {
  /** Mach-O load commands (sizeofcmds): Bun's have ~4 KiB, Xcode's largest a few hundred KiB. */
  loadCommands: 16 * 1024 * 1024,
  /** An ELF program header entry (e_phentsize): 56 bytes in ELF64, 32 in ELF32. */
  programHeaderSize: 256,
  /** Slices of a universal Mach-O: a Java class file shares the magic, with its version there. */
  fatSlices: 32,
  /** Blobs in a code signature's SuperBlob (a few: CodeDirectory, requirements, CMS, ...). */
  signatureBlobs: 64,
  /** An ELF interpreter's or a signing identifier's text. */
  text: 4096,
  /** Where a PE header may start (e_lfanew): linkers put it within the first KiB. */
  peOffset: 16 * 1024 * 1024,
};

const ELF_MACHINES = new Map([
  [0x03, 'ia32'],
  [0x08, 'mips'],
  [0x14, 'ppc'],
  [0x15, 'ppc64'],
  [0x16, 's390x'],
  [0x28, 'arm'],
  [0x3e, 'x64'],
  [0xb7, 'arm64'],
  [0xf3, 'riscv64'],
  [0x102, 'loong64'],
]);
const ELF_TYPES = new Map([
  [1, 'relocatable'],
  [2, 'executable'],
  [3, 'shared'],
  [4, 'core'],
]);
const PT_INTERP = 3;

const CPU_ARCH_ABI64 = 0x01000000;
const MACHO_CPUS = new Map([
  [7, 'ia32'],
  [7 | CPU_ARCH_ABI64, 'x64'],
  [12, 'arm'],
  [12 | CPU_ARCH_ABI64, 'arm64'],
  [18, 'ppc'],
  [18 | CPU_ARCH_ABI64, 'ppc64'],
]);
const MACHO_TYPES = new Map([
  [1, 'object'],
  [2, 'executable'],
  [6, 'dylib'],
  [8, 'bundle'],
]);
const LC_CODE_SIGNATURE = 0x1d;
const LC_VERSION_MIN_MACOSX = 0x24;
const LC_BUILD_VERSION = 0x32;
const CSMAGIC_EMBEDDED_SIGNATURE = 0xfade0cc0;
const CSMAGIC_CODEDIRECTORY = 0xfade0c02;
const CSMAGIC_BLOBWRAPPER = 0xfade0b01;
const CSSLOT_CODEDIRECTORY = 0;
const CSSLOT_ALTERNATE_CODEDIRECTORIES = 0x1000;
const CSSLOT_SIGNATURESLOT = 0x10000;
const CS_ADHOC = 0x2;
const CS_LINKER_SIGNED = 0x20000;
const CS_HASH_TYPES = new Map([
  [1, 'sha1'],
  [2, 'sha256'],
  [3, 'sha256-truncated'],
  [4, 'sha384'],
]);

const PE_MACHINES = new Map([
  [0x14c, 'ia32'],
  [0x1c4, 'arm'],
  [0x8664, 'x64'],
  [0xaa64, 'arm64'],
]);
const PE_SUBSYSTEMS = new Map([
  [1, 'native'],
  [2, 'gui'],
  [3, 'console'],
  [10, 'efi-application'],
]);
const IMAGE_FILE_EXECUTABLE_IMAGE = 0x2;
const IMAGE_FILE_DLL = 0x2000;

/**
 * Reads `length` bytes at `offset`; a range past the end of the file is a truncated header. Shared
 * with scripts/macho-sign.mjs.
 */
export function reader(handle, path, size) {
  return async (offset, length, what) => {
    if (!Number.isSafeInteger(offset) || offset < 0 || length < 0 || offset + length > size) {
      throw new BinaryFormatError(
        path,
        `truncated or lying header: ${what} (${length} bytes at offset ${offset}) lies past the end of the file` +
          ` (${size} bytes)`,
      );
    }
    const buffer = Buffer.alloc(length);
    let done = 0;
    while (done < length) {
      const { bytesRead } = await handle.read(buffer, done, length - done, offset + done);
      // The file shrank under us: as truncated as if it had been so from the start.
      if (bytesRead === 0) throw new BinaryFormatError(path, `${what}: the file ended at offset ${offset + done}`);
      done += bytesRead;
    }
    return buffer;
  };
}

/**
 * What the executable at `path` is. Always `{ format, arch, bits, endian, type }`; for ELF also
 * `interpreter` (PT_INTERP, or null for a static one); for Mach-O `minOS` ('11.0' or null),
 * `codeSignature` (null, or `{ adhoc, linkerSigned, identifier, hashType, cms }`) and the
 * shorthands `signed` and `adhocSigned`; for a universal Mach-O `arch: 'universal'` and `slices`,
 * each one of these; for PE `subsystem` ('console', 'gui', ...), `console` and `dll`.
 * Throws a BinaryFormatError for a file that is none of them or whose headers do not hold.
 */
export async function inspectExecutable(path) {
  const handle = await open(path, 'r');
  try {
    const { size } = await handle.stat();
    const read = reader(handle, path, size);
    if (size < 4) throw new BinaryFormatError(path, `${size} bytes: too short to be an executable`);
    const magic = await read(0, 4, 'the magic number');
    if (magic.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]))) return await elf(read, path);
    const little = magic.readUInt32LE(0);
    if (little === 0xfeedfacf || little === 0xfeedface || little === 0xcffaedfe || little === 0xcefaedfe)
      return await macho(read, path, 0, size);
    if (magic.readUInt32BE(0) === 0xcafebabe) return await universal(read, path, size);
    if (magic[0] === 0x4d && magic[1] === 0x5a) return await pe(read, path);
    throw new BinaryFormatError(
      path,
      `not an ELF, Mach-O or PE executable: it starts with ${magic.toString('hex').replace(/(..)(?!$)/g, '$1 ')}`,
    );
  } finally {
    await handle.close();
  }
}

async function elf(read, path) {
  const ident = await read(0, 16, 'the ELF identification');
  const bits = ident[4] === 1 ? 32 : ident[4] === 2 ? 64 : null;
  const endian = ident[5] === 1 ? 'le' : ident[5] === 2 ? 'be' : null;
  if (bits === null) throw new BinaryFormatError(path, `ELF class ${ident[4]} is neither 32-bit (1) nor 64-bit (2)`);
  if (endian === null)
    throw new BinaryFormatError(path, `ELF data encoding ${ident[5]} is neither LSB (1) nor MSB (2)`);
  const header = await read(0, bits === 64 ? 64 : 52, 'the ELF header');
  const u16 = (at) => (endian === 'le' ? header.readUInt16LE(at) : header.readUInt16BE(at));
  const u32 = (at) => (endian === 'le' ? header.readUInt32LE(at) : header.readUInt32BE(at));
  const u64 = (at) => safe(path, endian === 'le' ? header.readBigUInt64LE(at) : header.readBigUInt64BE(at), 'e_phoff');
  const type = ELF_TYPES.get(u16(16)) ?? `type ${u16(16)}`;
  const machine = u16(18);
  const arch = ELF_MACHINES.get(machine) ?? `elf-machine-0x${machine.toString(16)}`;
  const phoff = bits === 64 ? u64(32) : u32(28);
  const phentsize = u16(bits === 64 ? 54 : 42);
  const phnum = u16(bits === 64 ? 56 : 44);
  let interpreter = null;
  if (phnum > 0) {
    const minimum = bits === 64 ? 56 : 32;
    if (phentsize < minimum || phentsize > LIMITS.programHeaderSize)
      throw new BinaryFormatError(
        path,
        `ELF program header entries of ${phentsize} bytes (${minimum} to ${LIMITS.programHeaderSize})`,
      );
    const table = await read(phoff, phnum * phentsize, 'the ELF program headers');
    for (let index = 0; index < phnum; index++) {
      const at = index * phentsize;
      const entry = (offset, wide) =>
        wide
          ? safe(
              path,
              endian === 'le' ? table.readBigUInt64LE(at + offset) : table.readBigUInt64BE(at + offset),
              'p_offset',
            )
          : endian === 'le'
            ? table.readUInt32LE(at + offset)
            : table.readUInt32BE(at + offset);
      if (entry(0, false) !== PT_INTERP) continue;
      const offset = bits === 64 ? entry(8, true) : entry(4, false);
      const length = bits === 64 ? entry(32, true) : entry(16, false);
      if (length === 0 || length > LIMITS.text)
        throw new BinaryFormatError(path, `PT_INTERP of ${length} bytes (1 to ${LIMITS.text})`);
      interpreter = (await read(offset, length, 'the ELF interpreter')).toString('latin1').replace(/\0+$/, '');
      break;
    }
  }
  return { format: 'elf', arch, bits, endian, type, interpreter };
}

/** A 64-bit field as a Number, refused past 2^53 (no file of ours is that large). */
function safe(path, value, what) {
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new BinaryFormatError(path, `${what} ${value} is out of range`);
  return Number(value);
}

async function universal(read, path, size) {
  const header = await read(0, 8, 'the universal header');
  const count = header.readUInt32BE(4);
  if (count === 0 || count > LIMITS.fatSlices)
    throw new BinaryFormatError(
      path,
      `a universal Mach-O with ${count} slices (1 to ${LIMITS.fatSlices}; 0xcafebabe with a larger count is a` +
        ' Java class file)',
    );
  const table = await read(8, count * 20, 'the universal slice table');
  const slices = [];
  for (let index = 0; index < count; index++) {
    const offset = table.readUInt32BE(index * 20 + 8);
    const length = table.readUInt32BE(index * 20 + 12);
    if (offset + length > size)
      throw new BinaryFormatError(path, `universal slice ${index} (${length} bytes at ${offset}) lies past the end`);
    slices.push(await macho(read, path, offset, length));
  }
  return { format: 'macho', arch: 'universal', bits: null, endian: null, type: 'universal', slices };
}

/** The Mach-O image of `length` bytes at `base` (the whole file, or a slice of a universal one). */
async function macho(read, path, base, length) {
  const magic = (await read(base, 4, 'the Mach-O magic')).readUInt32LE(0);
  const bits = magic === 0xfeedfacf || magic === 0xcffaedfe ? 64 : 32;
  const endian = magic === 0xfeedfacf || magic === 0xfeedface ? 'le' : 'be';
  const headerSize = bits === 64 ? 32 : 28;
  const header = await read(base, headerSize, 'the Mach-O header');
  const u32 = (buffer, at) => (endian === 'le' ? buffer.readUInt32LE(at) : buffer.readUInt32BE(at));
  const cputype = u32(header, 4);
  const arch = MACHO_CPUS.get(cputype) ?? `macho-cpu-0x${cputype.toString(16)}`;
  const type = MACHO_TYPES.get(u32(header, 12)) ?? `type ${u32(header, 12)}`;
  const ncmds = u32(header, 16);
  const sizeofcmds = u32(header, 20);
  if (sizeofcmds > LIMITS.loadCommands || headerSize + sizeofcmds > length)
    throw new BinaryFormatError(
      path,
      `Mach-O load commands of ${sizeofcmds} bytes do not fit in the image (${length} bytes, at most ` +
        `${LIMITS.loadCommands})`,
    );
  // Each command takes at least 8 bytes: more commands than that is a lie, and a bound on the loop.
  if (ncmds * 8 > sizeofcmds)
    throw new BinaryFormatError(path, `${ncmds} Mach-O load commands cannot fit in ${sizeofcmds} bytes`);
  const commands = await read(base + headerSize, sizeofcmds, 'the Mach-O load commands');
  let signatureAt = null;
  let minOS = null;
  let at = 0;
  for (let index = 0; index < ncmds; index++) {
    if (at + 8 > sizeofcmds)
      throw new BinaryFormatError(path, `Mach-O load command ${index} starts past the load commands' end`);
    const cmd = u32(commands, at);
    const cmdsize = u32(commands, at + 4);
    if (cmdsize < 8 || cmdsize % 4 !== 0 || at + cmdsize > sizeofcmds)
      throw new BinaryFormatError(
        path,
        `Mach-O load command ${index} (0x${cmd.toString(16)}) has size ${cmdsize}: not a multiple of 4 of at least ` +
          `8 within the ${sizeofcmds} bytes of load commands`,
      );
    if (cmd === LC_CODE_SIGNATURE) {
      if (cmdsize < 16) throw new BinaryFormatError(path, `LC_CODE_SIGNATURE of ${cmdsize} bytes (16)`);
      const dataoff = u32(commands, at + 8);
      const datasize = u32(commands, at + 12);
      if (dataoff + datasize > length)
        throw new BinaryFormatError(
          path,
          `LC_CODE_SIGNATURE points past the end of the image (${datasize} bytes at ${dataoff};` +
            ` the image has ${length})`,
        );
      signatureAt = { offset: base + dataoff, size: datasize };
    } else if (cmd === LC_BUILD_VERSION && cmdsize >= 16) {
      minOS = machoVersion(u32(commands, at + 12));
    } else if (cmd === LC_VERSION_MIN_MACOSX && cmdsize >= 16 && minOS === null) {
      minOS = machoVersion(u32(commands, at + 8));
    }
    at += cmdsize;
  }
  const codeSignature = signatureAt === null ? null : await signature(read, path, signatureAt);
  return {
    format: 'macho',
    arch,
    bits,
    endian,
    type,
    /** Where the image starts in the file: 0, or its slice's offset in a universal file. */
    base,
    minOS,
    signed: codeSignature !== null,
    adhocSigned: codeSignature?.adhoc === true,
    codeSignature,
  };
}

/** `xxxx.yy.zz` in nibbles, as <mach-o/loader.h> packs a version: 14.0, 11.0.1. */
function machoVersion(packed) {
  const patch = packed & 0xff;
  return `${packed >>> 16}.${(packed >>> 8) & 0xff}${patch ? `.${patch}` : ''}`;
}

/** The embedded signature (a CS_SuperBlob, big-endian) and the flags of its CodeDirectory. */
async function signature(read, path, { offset, size }) {
  if (size < 12) throw new BinaryFormatError(path, `a code signature of ${size} bytes (a SuperBlob needs 12)`);
  const head = await read(offset, 12, 'the code signature SuperBlob');
  const magic = head.readUInt32BE(0);
  if (magic !== CSMAGIC_EMBEDDED_SIGNATURE)
    throw new BinaryFormatError(path, `the code signature's magic is 0x${magic.toString(16)}, not 0xfade0cc0`);
  const length = head.readUInt32BE(4);
  const count = head.readUInt32BE(8);
  if (length > size || length < 12)
    throw new BinaryFormatError(path, `the code signature SuperBlob says ${length} bytes of the ${size} given it`);
  if (count > LIMITS.signatureBlobs || 12 + count * 8 > length)
    throw new BinaryFormatError(path, `the code signature lists ${count} blobs, which its ${length} bytes cannot hold`);
  const index = await read(offset + 12, count * 8, 'the code signature index');
  let directory = null;
  let cms = false;
  for (let slot = 0; slot < count; slot++) {
    const type = index.readUInt32BE(slot * 8);
    const blobAt = index.readUInt32BE(slot * 8 + 4);
    if (blobAt + 8 > length)
      throw new BinaryFormatError(path, `code signature blob ${slot} (type 0x${type.toString(16)}) lies past its end`);
    const blob = await read(offset + blobAt, 8, 'a code signature blob');
    const blobLength = blob.readUInt32BE(4);
    if (blobLength < 8 || blobAt + blobLength > length)
      throw new BinaryFormatError(path, `code signature blob ${slot} says ${blobLength} bytes, past the signature`);
    if (type === CSSLOT_SIGNATURESLOT) {
      // A CMS signature (a certificate's); an ad-hoc signer leaves an empty wrapper, or none.
      cms = blob.readUInt32BE(0) === CSMAGIC_BLOBWRAPPER && blobLength > 8;
    } else if (
      (type === CSSLOT_CODEDIRECTORY ||
        (type >= CSSLOT_ALTERNATE_CODEDIRECTORIES && type < CSSLOT_ALTERNATE_CODEDIRECTORIES + 5)) &&
      directory === null
    ) {
      directory = await codeDirectory(read, path, offset + blobAt, blobLength);
    }
  }
  if (directory === null) throw new BinaryFormatError(path, 'the code signature holds no CodeDirectory');
  return { ...directory, cms };
}

async function codeDirectory(read, path, offset, length) {
  // Up to hashType (byte 37) and the fields before it: every version of the structure has them.
  if (length < 44) throw new BinaryFormatError(path, `a CodeDirectory of ${length} bytes (at least 44)`);
  const head = await read(offset, 44, 'the CodeDirectory');
  const magic = head.readUInt32BE(0);
  if (magic !== CSMAGIC_CODEDIRECTORY)
    throw new BinaryFormatError(path, `the CodeDirectory's magic is 0x${magic.toString(16)}, not 0xfade0c02`);
  const flags = head.readUInt32BE(12);
  const identOffset = head.readUInt32BE(20);
  let identifier = null;
  if (identOffset >= 44 && identOffset < length) {
    const text = await read(
      offset + identOffset,
      Math.min(length - identOffset, LIMITS.text),
      'the signing identifier',
    );
    const end = text.indexOf(0);
    if (end === -1) throw new BinaryFormatError(path, 'the signing identifier has no end within the CodeDirectory');
    identifier = text.toString('utf8', 0, end);
  }
  return {
    adhoc: (flags & CS_ADHOC) !== 0,
    linkerSigned: (flags & CS_LINKER_SIGNED) !== 0,
    flags,
    identifier,
    hashType: CS_HASH_TYPES.get(head[37]) ?? `hash type ${head[37]}`,
    // What verifyCodeSignature needs: where the page hashes are and what they cover.
    codeDirectory: {
      offset,
      length,
      hashOffset: head.readUInt32BE(16),
      codeSlots: head.readUInt32BE(28),
      codeLimit: head.readUInt32BE(32),
      hashSize: head[36],
      pageSize: head[39] === 0 ? 0 : 2 ** head[39],
    },
  };
}

async function pe(read, path) {
  const dos = await read(0, 64, 'the DOS header');
  const at = dos.readUInt32LE(0x3c);
  if (at < 64 || at > LIMITS.peOffset)
    throw new BinaryFormatError(path, `the PE header offset (e_lfanew) is ${at}: not within 64 to ${LIMITS.peOffset}`);
  const coff = await read(at, 24, 'the PE and COFF headers');
  if (coff.readUInt32LE(0) !== 0x00004550)
    throw new BinaryFormatError(path, `no PE signature at offset ${at}: an MS-DOS program, or a lying e_lfanew`);
  const machine = coff.readUInt16LE(4);
  const optionalSize = coff.readUInt16LE(20);
  const characteristics = coff.readUInt16LE(22);
  // The optional header up to Subsystem (offset 68, two bytes), the same place in PE32 and PE32+.
  if (optionalSize < 70)
    throw new BinaryFormatError(path, `a PE optional header of ${optionalSize} bytes has no Subsystem (70 needed)`);
  const optional = await read(at + 24, 70, 'the PE optional header');
  const kind = optional.readUInt16LE(0);
  const bits = kind === 0x20b ? 64 : kind === 0x10b ? 32 : null;
  if (bits === null)
    throw new BinaryFormatError(path, `PE optional header magic 0x${kind.toString(16)} (0x10b or 0x20b expected)`);
  const subsystemId = optional.readUInt16LE(68);
  const subsystem = PE_SUBSYSTEMS.get(subsystemId) ?? `subsystem ${subsystemId}`;
  const dll = (characteristics & IMAGE_FILE_DLL) !== 0;
  return {
    format: 'pe',
    arch: PE_MACHINES.get(machine) ?? `pe-machine-0x${machine.toString(16)}`,
    bits,
    endian: 'le',
    type: dll ? 'dll' : (characteristics & IMAGE_FILE_EXECUTABLE_IMAGE) !== 0 ? 'executable' : 'object',
    subsystem,
    console: subsystem === 'console' && !dll,
    dll,
  };
}

/** Node's name of each code-signing hash (sha256-truncated: SHA-256 cut to 20 bytes). */
const HASH_ALGORITHMS = { sha1: 'sha1', sha256: 'sha256', 'sha256-truncated': 'sha256', sha384: 'sha384' };

/**
 * Whether a Mach-O's code signature still matches its code, as `codesign --verify` checks the
 * pages: each page of the image below the CodeDirectory's codeLimit hashed and compared with its
 * code slot. The file is streamed a page at a time. `{ valid, pages, mismatched, firstMismatch }`
 * (firstMismatch: a page index, or -1); for a universal file, `{ valid, slices: [...] }`.
 * An unsigned file, or one that is not Mach-O, is a BinaryFormatError. The CMS signature (a
 * certificate's, when there is one) and the special slots (Info.plist, requirements) are not
 * checked: an ad-hoc signature has no CMS, and an executable of ours no Info.plist.
 */
export async function verifyCodeSignature(path) {
  const found = await inspectExecutable(path);
  if (found.format !== 'macho') throw new BinaryFormatError(path, `a ${found.format} file has no Mach-O signature`);
  const images = found.slices ?? [found];
  const results = [];
  for (const [index, image] of images.entries()) {
    if (!image.codeSignature) throw new BinaryFormatError(path, `image ${index} (${image.arch}) is not signed`);
    results.push(await verifyPages(path, image.codeSignature.codeDirectory, image.codeSignature.hashType, image.base));
  }
  return found.slices
    ? { valid: results.every((result) => result.valid), slices: results }
    : (results[0] ?? { valid: false });
}

async function verifyPages(path, directory, hashType, base) {
  const { offset, length, hashOffset, codeSlots, codeLimit, hashSize, pageSize } = directory;
  const algorithm = HASH_ALGORITHMS[hashType];
  if (algorithm === undefined) throw new BinaryFormatError(path, `the CodeDirectory's ${hashType} is not known here`);
  if (pageSize === 0 || pageSize > 65536)
    throw new BinaryFormatError(path, `a CodeDirectory page size of ${pageSize} (4096 or 16384 expected)`);
  if (codeSlots !== Math.ceil(codeLimit / pageSize))
    throw new BinaryFormatError(path, `${codeSlots} code slots for ${codeLimit} bytes of ${pageSize}-byte pages`);
  if (hashSize === 0 || hashOffset + codeSlots * hashSize > length)
    throw new BinaryFormatError(path, `the CodeDirectory's page hashes lie past its ${length} bytes`);
  const handle = await open(path, 'r');
  try {
    const { size } = await handle.stat();
    const read = reader(handle, path, size);
    if (base + codeLimit > size)
      throw new BinaryFormatError(path, `the signature covers ${codeLimit} bytes; the image has fewer`);
    const hashes = await read(offset + hashOffset, codeSlots * hashSize, 'the page hashes');
    let mismatched = 0;
    let firstMismatch = -1;
    for (let page = 0; page < codeSlots; page++) {
      const start = page * pageSize;
      const data = await read(base + start, Math.min(pageSize, codeLimit - start), 'a signed page');
      const digest = createHash(algorithm).update(data).digest().subarray(0, hashSize);
      if (!digest.equals(hashes.subarray(page * hashSize, (page + 1) * hashSize))) {
        mismatched++;
        if (firstMismatch === -1) firstMismatch = page;
      }
    }
    return { valid: mismatched === 0, pages: codeSlots, mismatched, firstMismatch };
  } finally {
    await handle.close();
  }
}

/**
 * The offset of the first occurrence of `needle` (a string, as UTF-8, or bytes) in the file at
 * `path`, or -1: the file is streamed in chunks, holding one chunk and the needle's length at a
 * time, so a 100 MB executable costs no 100 MB of memory.
 */
export async function findBytes(path, needle) {
  const wanted = typeof needle === 'string' ? Buffer.from(needle, 'utf8') : Buffer.from(needle);
  if (wanted.length === 0) throw new TypeError('findBytes: an empty needle is found everywhere');
  let carry = Buffer.alloc(0);
  let consumed = 0; // bytes of the file before `carry`
  for await (const chunk of createReadStream(path, { highWaterMark: 1024 * 1024 })) {
    const window = carry.length === 0 ? chunk : Buffer.concat([carry, chunk]);
    const found = window.indexOf(wanted);
    if (found !== -1) return consumed + found;
    // Keep what could be the start of a match that the next chunk completes.
    const keep = Math.min(wanted.length - 1, window.length);
    consumed += window.length - keep;
    carry = Buffer.from(window.subarray(window.length - keep));
  }
  return -1;
}

/** Whether the file at `path` carries `needle` (findBytes). */
export async function embeds(path, needle) {
  return (await findBytes(path, needle)) !== -1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [file, flag, text] = process.argv.slice(2);
  if (!file || (flag !== undefined && (flag !== '--embeds' || text === undefined))) {
    process.stderr.write('usage: node scripts/binary-format.mjs <file> [--embeds <text>]\n');
    process.exit(1);
  }
  try {
    const found = await inspectExecutable(file);
    if (flag) found.embeds = { text, offset: await findBytes(file, text) };
    process.stdout.write(`${JSON.stringify(found, null, 2)}\n`);
  } catch (error) {
    process.stderr.write(`binary-format: ${error.message}\n`);
    process.exit(1);
  }
}
