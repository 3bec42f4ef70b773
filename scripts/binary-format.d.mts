// The types of scripts/binary-format.mjs, for the tests written in TypeScript.

export class BinaryFormatError extends Error {
  readonly path: string;
}

export interface CodeSignature {
  /** CS_ADHOC: signed without a certificate. */
  adhoc: boolean;
  /** CS_LINKER_SIGNED: the linker's signature, made before anything was added to the file. */
  linkerSigned: boolean;
  flags: number;
  identifier: string | null;
  hashType: string;
  /** A CMS signature blob (a certificate's) is present. */
  cms: boolean;
  codeDirectory: {
    offset: number;
    length: number;
    hashOffset: number;
    codeSlots: number;
    codeLimit: number;
    hashSize: number;
    pageSize: number;
  };
}

interface Common {
  arch: string;
  bits: 32 | 64 | null;
  endian: 'le' | 'be' | null;
  type: string;
}
export interface ElfInfo extends Common {
  format: 'elf';
  interpreter: string | null;
}
export interface MachOInfo extends Common {
  format: 'macho';
  base: number;
  minOS: string | null;
  signed: boolean;
  adhocSigned: boolean;
  codeSignature: CodeSignature | null;
}
export interface UniversalInfo extends Common {
  format: 'macho';
  arch: 'universal';
  slices: MachOInfo[];
}
export interface PeInfo extends Common {
  format: 'pe';
  subsystem: string;
  console: boolean;
  dll: boolean;
}
export type ExecutableInfo = ElfInfo | MachOInfo | UniversalInfo | PeInfo;

export interface PageCheck {
  valid: boolean;
  pages: number;
  mismatched: number;
  firstMismatch: number;
}

export function inspectExecutable(path: string): Promise<ExecutableInfo>;
export function verifyCodeSignature(path: string): Promise<PageCheck | { valid: boolean; slices: PageCheck[] }>;
export function findBytes(path: string, needle: string | Uint8Array): Promise<number>;
export function embeds(path: string, needle: string | Uint8Array): Promise<boolean>;
export function reader(
  handle: import('node:fs/promises').FileHandle,
  path: string,
  size: number,
): (offset: number, length: number, what: string) => Promise<Buffer>;
