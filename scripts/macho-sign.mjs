// Signs a macOS executable again, ad hoc, in place, on any OS: what `codesign --force --sign -`
// does on a Mac, in the form a linker writes (ld64's and Go's, and Bun's own darwin-arm64 output):
// one SuperBlob holding one CodeDirectory (version 0x20400, flags CS_ADHOC | CS_LINKER_SIGNED,
// SHA-256 over 4096-byte pages up to the signature, the last short page hashed as it is, the
// executable segment taken from __TEXT), no requirements, no entitlements, no CMS. The Mach-O
// header is made to match before the pages are hashed: LC_CODE_SIGNATURE's size, __LINKEDIT's
// file and memory sizes; the file is cut (or grown) to end where the new signature ends.
//
// Why the release needs it (docs/install.md): Bun 1.4.5 writes its darwin-x64 output into a copy
// of its own executable and leaves that copy's signature (Oven's certificate, hardened runtime),
// whose hashes no longer match; macOS refuses such a file. Nothing here ran on macOS: the format
// was checked against the signature Bun writes for darwin-arm64 (test/release/binary-format.test.ts).
//
// The file is treated as hostile, as in binary-format.mjs: every read bounded, every size, count
// and offset checked against the file and against each other before anything is written, and a
// file that is not a thin 64-bit Mach-O executable laid out as a linker lays one out (__LINKEDIT
// the last segment, the signature the last thing in it) is a BinaryFormatError saying why, with
// the file untouched. Universal (fat) files are refused: Bun makes thin ones.
//
//   node scripts/macho-sign.mjs <file> --identifier <id>    signs it again, ad hoc
//   node scripts/macho-sign.mjs <file> --show               prints its signature's fields, as JSON
//
// Sources: Apple's <mach-o/loader.h> (mach_header_64, segment_command_64, linkedit_data_command,
// symtab_command) and <kern/cs_blobs.h> (CS_SuperBlob, CS_CodeDirectory up to the execSeg fields,
// CS_EXECSEG_MAIN_BINARY = 0x1); the layout and sizes Go's cmd/internal/codesign writes.
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { BinaryFormatError, reader } from './binary-format.mjs';

const MH_MAGIC_64 = 0xfeedfacf;
const MH_EXECUTE = 2;
const CPU_X86_64 = 0x01000007;
const CPU_ARM64 = 0x0100000c;
/** The segment alignment each CPU's linker uses (codesign_allocate rounds __LINKEDIT's vmsize to it). */
const SEGMENT_ALIGN = new Map([
  [CPU_X86_64, 0x1000],
  [CPU_ARM64, 0x4000],
]);
const LC_SEGMENT_64 = 0x19;
const LC_SYMTAB = 0x2;
const LC_DYSYMTAB = 0xb;
/** LC_DYLD_INFO and LC_DYLD_INFO_ONLY: five (offset, size) pairs into __LINKEDIT. */
const LC_DYLD_INFO = new Set([0x22, 0x80000022]);
/** LC_DYSYMTAB's tables: where each one's (offset, count) pair is, and its entries' size. */
const DYSYMTAB_TABLES = [
  [32, 8], // toc
  [40, 56], // modtab
  [48, 4], // extrefsyms
  [56, 4], // indirectsyms
  [64, 8], // extrel
  [72, 8], // locrel
];
const LC_CODE_SIGNATURE = 0x1d;
/** linkedit_data_commands other than the signature: their data lies in __LINKEDIT before it. */
const LINKEDIT_DATA = new Set([0x1e, 0x26, 0x29, 0x2b, 0x2e, 0x33, 0x34, 0x80000033, 0x80000034]);

const CSMAGIC_EMBEDDED_SIGNATURE = 0xfade0cc0;
const CSMAGIC_CODEDIRECTORY = 0xfade0c02;
const CSSLOT_CODEDIRECTORY = 0;
/** The version with execSeg* and no later fields: what ld64 and codesign write without a runtime. */
const CD_VERSION = 0x20400;
const CS_ADHOC = 0x2;
const CS_LINKER_SIGNED = 0x20000;
const CS_HASHTYPE_SHA256 = 2;
const CS_EXECSEG_MAIN_BINARY = 0x1;
const PAGE_SHIFT = 12;
const PAGE = 1 << PAGE_SHIFT;
const HASH_SIZE = 32;
/** sizeof(CS_CodeDirectory) at version 0x20400; the identifier follows, then the page hashes. */
const CD_HEADER = 88;
/** sizeof(CS_SuperBlob) + one CS_BlobIndex. */
const SUPERBLOB_HEADER = 12 + 8;

const LIMITS = {
  /** Load commands (sizeofcmds): Bun's have 2.5 KiB. */
  loadCommands: 1024 * 1024,
  /** The signature's offset and codeLimit are 32-bit fields. */
  fileSize: 2 ** 32 - 1,
  /** A signature read back by readSignature: Bun's are under 1 MiB. */
  signature: 64 * 1024 * 1024,
  identifier: 1024,
  /** Pages hashed per read. */
  chunkPages: 256,
};

/** A 64-bit field as a Number, refused past 2^53. */
function u64(path, buffer, at, what) {
  const value = buffer.readBigUInt64LE(at);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new BinaryFormatError(path, `${what} ${value} is out of range`);
  return Number(value);
}

function roundUp(value, to) {
  return Math.ceil(value / to) * to;
}

/**
 * The header and load commands of the thin 64-bit Mach-O executable at `path`, checked: where
 * __TEXT, __LINKEDIT and the signature are, and where each of their fields lies in `commands`.
 */
async function layout(read, path, size) {
  if (size < 32) throw new BinaryFormatError(path, `${size} bytes: too short to be a Mach-O executable`);
  if (size > LIMITS.fileSize)
    throw new BinaryFormatError(path, `${size} bytes: a signature can cover at most ${LIMITS.fileSize}`);
  const header = await read(0, 32, 'the Mach-O header');
  const magic = header.readUInt32LE(0);
  const big = header.readUInt32BE(0);
  if (big === 0xcafebabe || big === 0xcafebabf || magic === 0xcafebabe)
    throw new BinaryFormatError(
      path,
      'a universal (fat) Mach-O: sign each thin slice before joining them (Bun makes thin executables)',
    );
  if (magic === 0xfeedface || magic === 0xcefaedfe)
    throw new BinaryFormatError(path, 'a 32-bit Mach-O: only 64-bit executables are signed here');
  if (magic === 0xcffaedfe) throw new BinaryFormatError(path, 'a big-endian Mach-O: not an x86_64 or arm64 one');
  if (magic !== MH_MAGIC_64)
    throw new BinaryFormatError(path, `not a Mach-O file: it starts with 0x${big.toString(16).padStart(8, '0')}`);
  const cputype = header.readUInt32LE(4);
  const segmentAlign = SEGMENT_ALIGN.get(cputype);
  if (segmentAlign === undefined)
    throw new BinaryFormatError(path, `a Mach-O for CPU type 0x${cputype.toString(16)}: only x86_64 and arm64`);
  const filetype = header.readUInt32LE(12);
  if (filetype !== MH_EXECUTE)
    throw new BinaryFormatError(path, `a Mach-O of file type ${filetype}, not an executable (MH_EXECUTE, 2)`);
  const ncmds = header.readUInt32LE(16);
  const sizeofcmds = header.readUInt32LE(20);
  if (sizeofcmds > LIMITS.loadCommands || 32 + sizeofcmds > size)
    throw new BinaryFormatError(
      path,
      `load commands of ${sizeofcmds} bytes do not fit in the file (${size} bytes, at most ${LIMITS.loadCommands})`,
    );
  if (ncmds * 8 > sizeofcmds)
    throw new BinaryFormatError(path, `${ncmds} load commands cannot fit in ${sizeofcmds} bytes`);
  const commands = await read(32, sizeofcmds, 'the load commands');
  const segments = [];
  let signature = null;
  /** Where the contents of the file start (the first section's data): load commands must end before. */
  let firstContent = size;
  /** Where the last of __LINKEDIT's data other than the signature ends. */
  let linkeditDataEnd = 0;
  let at = 0;
  for (let index = 0; index < ncmds; index++) {
    if (at + 8 > sizeofcmds) throw new BinaryFormatError(path, `load command ${index} starts past the commands' end`);
    const cmd = commands.readUInt32LE(at);
    const cmdsize = commands.readUInt32LE(at + 4);
    if (cmdsize < 8 || cmdsize % 8 !== 0 || at + cmdsize > sizeofcmds)
      throw new BinaryFormatError(
        path,
        `load command ${index} (0x${cmd.toString(16)}) has size ${cmdsize}: not a multiple of 8 of at least 8 within` +
          ` the ${sizeofcmds} bytes of load commands`,
      );
    if (cmd === LC_SEGMENT_64) {
      if (cmdsize < 72) throw new BinaryFormatError(path, `a segment command of ${cmdsize} bytes (at least 72)`);
      const name = commands.toString('latin1', at + 8, at + 24).replace(/\0[\s\S]*$/, '');
      const segment = {
        name,
        at,
        vmaddr: u64(path, commands, at + 24, `${name} vmaddr`),
        vmsize: u64(path, commands, at + 32, `${name} vmsize`),
        fileoff: u64(path, commands, at + 40, `${name} fileoff`),
        filesize: u64(path, commands, at + 48, `${name} filesize`),
      };
      const nsects = commands.readUInt32LE(at + 64);
      if (72 + nsects * 80 !== cmdsize)
        throw new BinaryFormatError(path, `segment ${name} lists ${nsects} sections in a ${cmdsize}-byte command`);
      for (let section = 0; section < nsects; section++) {
        const offset = commands.readUInt32LE(at + 72 + section * 80 + 48);
        // Zero-fill sections (__bss) have no data in the file, and offset 0.
        if (offset > 0) firstContent = Math.min(firstContent, offset);
      }
      if (segment.fileoff + segment.filesize > size)
        throw new BinaryFormatError(
          path,
          `segment ${name} (${segment.filesize} bytes at ${segment.fileoff}) lies past the end of the file`,
        );
      if (segment.filesize > 0 && segment.fileoff > 0) firstContent = Math.min(firstContent, segment.fileoff);
      segments.push(segment);
    } else if (cmd === LC_CODE_SIGNATURE) {
      if (signature !== null) throw new BinaryFormatError(path, 'two LC_CODE_SIGNATURE commands');
      if (cmdsize !== 16) throw new BinaryFormatError(path, `an LC_CODE_SIGNATURE of ${cmdsize} bytes (16)`);
      signature = { at, dataoff: commands.readUInt32LE(at + 8), datasize: commands.readUInt32LE(at + 12) };
    } else if (LINKEDIT_DATA.has(cmd) && cmdsize >= 16) {
      const dataoff = commands.readUInt32LE(at + 8);
      const datasize = commands.readUInt32LE(at + 12);
      if (datasize > 0) linkeditDataEnd = Math.max(linkeditDataEnd, dataoff + datasize);
    } else if (cmd === LC_SYMTAB && cmdsize >= 24) {
      const symoff = commands.readUInt32LE(at + 8);
      const nsyms = commands.readUInt32LE(at + 12);
      const stroff = commands.readUInt32LE(at + 16);
      const strsize = commands.readUInt32LE(at + 20);
      if (nsyms > 0) linkeditDataEnd = Math.max(linkeditDataEnd, symoff + nsyms * 16);
      if (strsize > 0) linkeditDataEnd = Math.max(linkeditDataEnd, stroff + strsize);
    } else if (cmd === LC_DYSYMTAB && cmdsize >= 80) {
      for (const [field, entry] of DYSYMTAB_TABLES) {
        const count = commands.readUInt32LE(at + field + 4);
        if (count > 0) linkeditDataEnd = Math.max(linkeditDataEnd, commands.readUInt32LE(at + field) + count * entry);
      }
    } else if (LC_DYLD_INFO.has(cmd) && cmdsize >= 48) {
      for (let field = 8; field < 48; field += 8) {
        const length = commands.readUInt32LE(at + field + 4);
        if (length > 0) linkeditDataEnd = Math.max(linkeditDataEnd, commands.readUInt32LE(at + field) + length);
      }
    }
    at += cmdsize;
  }
  const named = (name) => {
    const found = segments.filter((segment) => segment.name === name);
    if (found.length !== 1)
      throw new BinaryFormatError(path, `${found.length === 0 ? 'no' : found.length} ${name} segment(s): one expected`);
    return found[0];
  };
  const text = named('__TEXT');
  const linkedit = named('__LINKEDIT');
  for (const segment of segments) {
    if (segment === linkedit) continue;
    // __LINKEDIT grows or shrinks with the signature: nothing may follow it, in the file or in memory.
    if (segment.filesize > 0 && segment.fileoff + segment.filesize > linkedit.fileoff)
      throw new BinaryFormatError(path, `segment ${segment.name} lies after __LINKEDIT in the file`);
    if (segment.vmsize > 0 && segment.vmaddr + segment.vmsize > linkedit.vmaddr)
      throw new BinaryFormatError(path, `segment ${segment.name} lies after __LINKEDIT in memory`);
  }
  const linkeditEnd = linkedit.fileoff + linkedit.filesize;
  if (linkeditDataEnd > linkeditEnd)
    throw new BinaryFormatError(
      path,
      `__LINKEDIT's data runs to ${linkeditDataEnd}, past the segment (${linkeditEnd})`,
    );
  let dataoff;
  if (signature !== null) {
    ({ dataoff } = signature);
    if (dataoff < linkedit.fileoff || dataoff + signature.datasize > linkeditEnd)
      throw new BinaryFormatError(
        path,
        `the code signature (${signature.datasize} bytes at ${dataoff}) lies outside __LINKEDIT` +
          ` (${linkedit.filesize} bytes at ${linkedit.fileoff})`,
      );
    if (linkeditDataEnd > dataoff)
      throw new BinaryFormatError(
        path,
        `__LINKEDIT's data runs to ${linkeditDataEnd}, into the signature at ${dataoff}`,
      );
  } else {
    // No signature yet: a command is added after the others, where the header has room for it,
    // and the signature goes at the end of __LINKEDIT, 16-byte aligned as ld64 puts it.
    if (32 + sizeofcmds + 16 > firstContent)
      throw new BinaryFormatError(path, 'unsigned, and no room after the load commands for an LC_CODE_SIGNATURE');
    const room = await read(32 + sizeofcmds, 16, 'the room after the load commands');
    if (room.some((byte) => byte !== 0))
      throw new BinaryFormatError(path, 'unsigned, and the bytes after the load commands are not free (not zero)');
    dataoff = roundUp(linkeditEnd, 16);
  }
  if (dataoff > size) throw new BinaryFormatError(path, `the signature would start at ${dataoff}, past the file's end`);
  if (text.fileoff + text.filesize > dataoff)
    throw new BinaryFormatError(path, `__TEXT (${text.filesize} bytes at ${text.fileoff}) runs past the signature`);
  return { cputype, segmentAlign, ncmds, sizeofcmds, commands, text, linkedit, signature, dataoff };
}

/** The identifier: what codesign shows as Identifier=, text a verifier can print. */
function checkIdentifier(path, identifier) {
  if (typeof identifier !== 'string' || !/^[\x21-\x7e]+$/.test(identifier) || identifier.length > LIMITS.identifier)
    throw new BinaryFormatError(
      path,
      `identifier ${JSON.stringify(identifier)}: 1 to ${LIMITS.identifier} printable ASCII characters, no spaces`,
    );
  return Buffer.from(`${identifier}\0`, 'latin1');
}

/** The size of the signature for `codeLimit` bytes of code: header, index, CodeDirectory, hashes. */
export function adhocSignatureSize(codeLimit, identifier) {
  return SUPERBLOB_HEADER + CD_HEADER + Buffer.byteLength(identifier, 'latin1') + 1 + Math.ceil(codeLimit / PAGE) * 32;
}

/**
 * Signs the thin 64-bit Mach-O executable at `path` again, ad hoc, in place (module comment).
 * Returns what it wrote: `{ identifier, codeLimit, pages, signatureOffset, signatureSize,
 * fileSize, previous }` (previous: the old signature's `{ offset, size }`, or null). A file it
 * cannot sign is a BinaryFormatError, and is left as it was.
 */
export async function adhocSign(path, { identifier } = {}) {
  const ident = checkIdentifier(path, identifier);
  const handle = await open(path, 'r+');
  try {
    const { size } = await handle.stat();
    const read = reader(handle, path, size);
    const { segmentAlign, ncmds, sizeofcmds, commands, text, linkedit, signature, dataoff } = await layout(
      read,
      path,
      size,
    );
    const pages = Math.ceil(dataoff / PAGE);
    const directoryLength = CD_HEADER + ident.length + pages * HASH_SIZE;
    const signatureSize = SUPERBLOB_HEADER + directoryLength;
    const end = dataoff + signatureSize;
    if (end > LIMITS.fileSize) throw new BinaryFormatError(path, `the signed file would be ${end} bytes: too large`);

    // The header as it will be: the hashes cover it, so it is written first.
    const header = await read(0, 32, 'the Mach-O header');
    let loadCommands = commands;
    let signatureAt = signature?.at;
    if (signature === null) {
      signatureAt = sizeofcmds;
      loadCommands = Buffer.concat([commands, Buffer.alloc(16)]);
      loadCommands.writeUInt32LE(LC_CODE_SIGNATURE, signatureAt);
      loadCommands.writeUInt32LE(16, signatureAt + 4);
      header.writeUInt32LE(ncmds + 1, 16);
      header.writeUInt32LE(sizeofcmds + 16, 20);
    }
    loadCommands.writeUInt32LE(dataoff, signatureAt + 8);
    loadCommands.writeUInt32LE(signatureSize, signatureAt + 12);
    const linkeditSize = end - linkedit.fileoff;
    loadCommands.writeBigUInt64LE(BigInt(roundUp(linkeditSize, segmentAlign)), linkedit.at + 32);
    loadCommands.writeBigUInt64LE(BigInt(linkeditSize), linkedit.at + 48);
    await write(handle, Buffer.concat([header, loadCommands]), 0);

    // The CodeDirectory (big-endian, as every code-signing structure is).
    const blob = Buffer.alloc(signatureSize);
    blob.writeUInt32BE(CSMAGIC_EMBEDDED_SIGNATURE, 0);
    blob.writeUInt32BE(signatureSize, 4);
    blob.writeUInt32BE(1, 8); // count
    blob.writeUInt32BE(CSSLOT_CODEDIRECTORY, 12);
    blob.writeUInt32BE(SUPERBLOB_HEADER, 16);
    const directory = blob.subarray(SUPERBLOB_HEADER);
    const hashOffset = CD_HEADER + ident.length;
    directory.writeUInt32BE(CSMAGIC_CODEDIRECTORY, 0);
    directory.writeUInt32BE(directoryLength, 4);
    directory.writeUInt32BE(CD_VERSION, 8);
    directory.writeUInt32BE(CS_ADHOC | CS_LINKER_SIGNED, 12);
    directory.writeUInt32BE(hashOffset, 16);
    directory.writeUInt32BE(CD_HEADER, 20); // identOffset
    directory.writeUInt32BE(0, 24); // nSpecialSlots
    directory.writeUInt32BE(pages, 28); // nCodeSlots
    directory.writeUInt32BE(dataoff, 32); // codeLimit
    directory[36] = HASH_SIZE;
    directory[37] = CS_HASHTYPE_SHA256;
    directory[38] = 0; // platform
    directory[39] = PAGE_SHIFT;
    // spare2, scatterOffset, teamOffset, spare3, codeLimit64: 0 (bytes 40 to 63).
    directory.writeBigUInt64BE(BigInt(text.fileoff), 64); // execSegBase
    directory.writeBigUInt64BE(BigInt(text.filesize), 72); // execSegLimit
    directory.writeBigUInt64BE(BigInt(CS_EXECSEG_MAIN_BINARY), 80); // execSegFlags
    ident.copy(directory, CD_HEADER);

    // The pages, read back from the file as written (the header included), the last one short.
    const chunk = LIMITS.chunkPages * PAGE;
    for (let start = 0; start < dataoff; start += chunk) {
      const data = await read(start, Math.min(chunk, dataoff - start), 'the code to hash');
      for (let page = 0; page * PAGE < data.length; page++) {
        createHash('sha256')
          .update(data.subarray(page * PAGE, Math.min((page + 1) * PAGE, data.length)))
          .digest()
          .copy(directory, hashOffset + (start / PAGE + page) * HASH_SIZE);
      }
    }
    await write(handle, blob, dataoff);
    await handle.truncate(end);
    return {
      identifier,
      codeLimit: dataoff,
      pages,
      signatureOffset: dataoff,
      signatureSize,
      fileSize: end,
      previous: signature === null ? null : { offset: signature.dataoff, size: signature.datasize },
    };
  } finally {
    await handle.close();
  }
}

async function write(handle, buffer, offset) {
  let done = 0;
  while (done < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, done, buffer.length - done, offset + done);
    done += bytesWritten;
  }
}

/**
 * The code signature of the thin 64-bit Mach-O at `path`, every field of its SuperBlob and of
 * its first CodeDirectory as stored (to compare one signer's output with another's), the raw
 * signature bytes, and the __LINKEDIT and LC_CODE_SIGNATURE sizes around it. Reads only the
 * header and the signature (at most 64 MiB).
 */
export async function readSignature(path) {
  const handle = await open(path, 'r');
  try {
    const { size } = await handle.stat();
    const read = reader(handle, path, size);
    const { signature, linkedit, text } = await layout(read, path, size);
    if (signature === null) throw new BinaryFormatError(path, 'not signed: no LC_CODE_SIGNATURE');
    if (signature.datasize < 12 || signature.datasize > LIMITS.signature)
      throw new BinaryFormatError(path, `a code signature of ${signature.datasize} bytes (12 to ${LIMITS.signature})`);
    const bytes = await read(signature.dataoff, signature.datasize, 'the code signature');
    if (bytes.readUInt32BE(0) !== CSMAGIC_EMBEDDED_SIGNATURE)
      throw new BinaryFormatError(path, `the code signature's magic is 0x${bytes.readUInt32BE(0).toString(16)}`);
    const length = bytes.readUInt32BE(4);
    const count = bytes.readUInt32BE(8);
    if (length < 12 || length > bytes.length || 12 + count * 8 > length)
      throw new BinaryFormatError(path, `a SuperBlob of ${length} bytes listing ${count} blobs`);
    const blobs = [];
    for (let index = 0; index < count; index++) {
      const type = bytes.readUInt32BE(12 + index * 8);
      const offset = bytes.readUInt32BE(16 + index * 8);
      if (offset + 8 > length) throw new BinaryFormatError(path, `blob ${index} lies past the SuperBlob`);
      const blobLength = bytes.readUInt32BE(offset + 4);
      if (blobLength < 8 || offset + blobLength > length)
        throw new BinaryFormatError(path, `blob ${index} of ${blobLength} bytes lies past the SuperBlob`);
      blobs.push({ type, offset, magic: bytes.readUInt32BE(offset), length: blobLength });
    }
    const cd = blobs.find((blob) => blob.type === CSSLOT_CODEDIRECTORY);
    if (!cd || cd.magic !== CSMAGIC_CODEDIRECTORY || cd.length < CD_HEADER)
      throw new BinaryFormatError(path, 'no CodeDirectory of at least 88 bytes in slot 0');
    const d = bytes.subarray(cd.offset, cd.offset + cd.length);
    const identOffset = d.readUInt32BE(20);
    const identEnd = identOffset < d.length ? d.indexOf(0, identOffset) : -1;
    if (identEnd === -1) throw new BinaryFormatError(path, 'the identifier has no end within the CodeDirectory');
    const big = (at) => Number(d.readBigUInt64BE(at));
    return {
      offset: signature.dataoff,
      size: signature.datasize,
      fileSize: size,
      text: { fileoff: text.fileoff, filesize: text.filesize },
      linkedit: { fileoff: linkedit.fileoff, filesize: linkedit.filesize, vmsize: linkedit.vmsize },
      superBlob: { length, count, blobs },
      codeDirectory: {
        length: cd.length,
        version: d.readUInt32BE(8),
        flags: d.readUInt32BE(12),
        hashOffset: d.readUInt32BE(16),
        identOffset,
        nSpecialSlots: d.readUInt32BE(24),
        nCodeSlots: d.readUInt32BE(28),
        codeLimit: d.readUInt32BE(32),
        hashSize: d[36],
        hashType: d[37],
        platform: d[38],
        pageSize: 2 ** d[39],
        spare2: d.readUInt32BE(40),
        scatterOffset: d.readUInt32BE(44),
        teamOffset: d.readUInt32BE(48),
        spare3: d.readUInt32BE(52),
        codeLimit64: big(56),
        execSegBase: big(64),
        execSegLimit: big(72),
        execSegFlags: big(80),
        identifier: d.toString('latin1', identOffset, identEnd),
      },
      bytes: bytes.subarray(0, length),
    };
  } finally {
    await handle.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [file, flag, value] = process.argv.slice(2);
  const usage = 'usage: node scripts/macho-sign.mjs <file> (--identifier <id> | --show)\n';
  if (!file || !((flag === '--identifier' && value) || (flag === '--show' && value === undefined))) {
    process.stderr.write(usage);
    process.exit(1);
  }
  try {
    if (flag === '--show') {
      const { bytes, ...fields } = await readSignature(file);
      process.stdout.write(`${JSON.stringify(fields, null, 2)}\n`);
    } else {
      process.stdout.write(`${JSON.stringify(await adhocSign(file, { identifier: value }), null, 2)}\n`);
    }
  } catch (error) {
    process.stderr.write(`macho-sign: ${error.message}\n`);
    process.exit(1);
  }
}
