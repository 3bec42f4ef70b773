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
  /** True in the standalone executable (built with Bun: scripts/build-exe.mjs); false in the npm package. */
  standalone: boolean;
  /**
   * `<os>-<arch>` as Node.js names them: in the standalone executable, the platform it was built
   * for (linux-arm64, linux-x64); in the npm package, which runs wherever Node.js does, the one it
   * runs on.
   */
  platform: string;
}

declare const QUEENCTL_BUILD_INFO: (Omit<BuildInfo, 'platform'> & { platform?: string }) | undefined;

const given = typeof QUEENCTL_BUILD_INFO === 'undefined' ? undefined : QUEENCTL_BUILD_INFO;
export const BUILD_INFO: BuildInfo = {
  commit: given?.commit ?? null,
  date: given?.date ?? null,
  standalone: given?.standalone ?? false,
  // The npm package's build (scripts/bundle.mjs) names no platform: it is where it runs.
  platform: given?.platform ?? `${process.platform}-${process.arch}`,
};
