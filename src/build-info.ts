/**
 * What a build knows of itself: the commit and date it was built from, and whether it is the
 * standalone executable (which carries its own Node.js) or the npm package. The build scripts set
 * QUEENCTL_BUILD_INFO through esbuild's `define`; unbundled (tests run tsc's output) nothing is
 * known, and `version` prints `-` for what is unknown (docs/cli-contract.md).
 */
export interface BuildInfo {
  /** The commit built, or null when the build could not tell (a tarball without .git). */
  commit: string | null;
  /** When it was built, ISO 8601 UTC, or null. */
  date: string | null;
  /** True in the standalone executable (node:sea); false in the npm package. */
  standalone: boolean;
}

declare const QUEENCTL_BUILD_INFO: BuildInfo | undefined;

export const BUILD_INFO: BuildInfo =
  typeof QUEENCTL_BUILD_INFO === 'undefined' ? { commit: null, date: null, standalone: false } : QUEENCTL_BUILD_INFO;
