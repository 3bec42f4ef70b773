// The types of scripts/macho-sign.mjs, for the tests written in TypeScript.

export interface AdhocSignResult {
  identifier: string;
  /** The bytes the signature covers: everything before it. */
  codeLimit: number;
  /** 4096-byte pages hashed (the last one short). */
  pages: number;
  signatureOffset: number;
  signatureSize: number;
  /** The file's size after signing: it ends where the signature ends. */
  fileSize: number;
  /** The signature replaced, or null when the file had none. */
  previous: { offset: number; size: number } | null;
}

export interface SignatureFields {
  offset: number;
  size: number;
  fileSize: number;
  text: { fileoff: number; filesize: number };
  linkedit: { fileoff: number; filesize: number; vmsize: number };
  superBlob: {
    length: number;
    count: number;
    blobs: { type: number; offset: number; magic: number; length: number }[];
  };
  /** Every field of CS_CodeDirectory up to execSegFlags, as stored; pageSize in bytes. */
  codeDirectory: {
    length: number;
    version: number;
    flags: number;
    hashOffset: number;
    identOffset: number;
    nSpecialSlots: number;
    nCodeSlots: number;
    codeLimit: number;
    hashSize: number;
    hashType: number;
    platform: number;
    pageSize: number;
    spare2: number;
    scatterOffset: number;
    teamOffset: number;
    spare3: number;
    codeLimit64: number;
    execSegBase: number;
    execSegLimit: number;
    execSegFlags: number;
    identifier: string;
  };
  /** The SuperBlob's bytes (its stated length, without the padding after it). */
  bytes: Buffer;
}

export function adhocSign(path: string, options: { identifier: string }): Promise<AdhocSignResult>;
export function adhocSignatureSize(codeLimit: number, identifier: string): number;
export function readSignature(path: string): Promise<SignatureFields>;
