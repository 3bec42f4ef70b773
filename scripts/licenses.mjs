// The licences of the npm packages a build bundles, shared by the two builds of queenctl: the npm
// package (scripts/bundle.mjs: dist/THIRD-PARTY-LICENSES, since the packages it bundles are not
// installed beside it) and the standalone executable (scripts/build-exe.mjs, which adds
// Node.js's). The release's copyright file reads the same list. Plain JS: it runs before
// anything is compiled.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Each npm package that a file of `inputs` (esbuild's metafile inputs, relative to `root`)
 * belongs to: its name, version, licence and licence file.
 */
export function bundledPackages(inputs, root) {
  const packages = new Set();
  for (const input of inputs) {
    const match = /^(.*node_modules[\\/](?:@[^\\/]+[\\/])?[^\\/]+)[\\/]/.exec(input);
    if (match) packages.add(match[1]);
  }
  return [...packages].sort().map((dir) => {
    const { name, version, license } = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
    const file = ['LICENSE', 'LICENSE.md', 'license', 'LICENSE.txt', 'license.md'].find((candidate) =>
      existsSync(join(root, dir, candidate)),
    );
    return { name, version, license, dir, licenseFile: file ? join(root, dir, file) : null };
  });
}

/** A THIRD-PARTY-LICENSES text: each part's name and version, then its licence in full. */
export function licensesText(parts) {
  const sections = parts.map(
    ({ name, version, license, licenseFile, text }) =>
      `${name} ${version}\n\n${
        text ?? (licenseFile ? readFileSync(licenseFile, 'utf8') : `${license} (no licence file in the package)`)
      }`,
  );
  return `${sections.join(`\n${'-'.repeat(72)}\n\n`)}\n`;
}
