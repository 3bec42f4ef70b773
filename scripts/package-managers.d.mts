// The types of scripts/package-managers.mjs, for the tests written in TypeScript.

export const PLATFORMS: Record<string, { extension: 'tar.gz' | 'zip'; manager: 'homebrew' | 'scoop' }>;
export function archiveStem(version: string, platform: string): string;
export function archiveName(version: string, platform: string): string;

export interface PackageJsonFields {
  repository?: string | { type?: string; url?: string };
  homepage?: string;
  description?: string;
  license?: string;
}
export function downloadBase(options: { version: string; pkg?: PackageJsonFields; setting?: string }): {
  url: string;
  repository: string | undefined;
  from: 'setting' | 'package.json repository' | 'package.json homepage';
};

export function parseSha256Sums(text: string): Map<string, string>;

export interface ManagerInput {
  version: string;
  baseUrl: string;
  sums: Map<string, string>;
  description: string;
  homepage: string;
  license: string;
  /** https://github.com/<owner>/<repo>: Scoop's checkver (and autoupdate). */
  repository?: string | undefined;
}
export function homebrewFormula(input: ManagerInput): string;
export function scoopManifest(input: ManagerInput): Record<string, unknown>;
export function scoopManifestText(input: ManagerInput): string;
export function packageManagerFiles(release: {
  version: string;
  sha256sums: string;
  pkg?: PackageJsonFields;
  meta?: { homepage?: string; summary?: string };
  downloadBase?: string;
}): { 'queenctl.rb': string; 'queenctl.json': string };
