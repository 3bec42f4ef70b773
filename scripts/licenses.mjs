// The licences of the npm packages a build bundles, shared by the two builds of queenctl: the npm
// package (scripts/bundle.mjs: dist/THIRD-PARTY-LICENSES, since the packages it bundles are not
// installed beside it) and the standalone executable (scripts/build-exe.mjs, which adds
// Bun's). The release's copyright file reads the same list, and so does the SBOM each build
// ships (sbomText, docs/security.md): what is bundled is declared. Plain JS: it runs before
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

/** The file name of the SBOM beside what it declares: CycloneDX's recommended suffix. */
export const SBOM_FILE = 'sbom.cdx.json';

/** A package URL (purl) of an npm package: the scope's `@` encoded, as the purl spec says. */
export const npmPurl = (name, version) => `pkg:npm/${name.replace(/^@/, '%40')}@${version}`;

/** CycloneDX's licence choice: an SPDX id alone, else an expression (`MIT OR Apache-2.0`). */
const licenceOf = (license) =>
  typeof license !== 'string' || license === ''
    ? []
    : /^[A-Za-z0-9.+-]+$/.test(license)
      ? [{ license: { id: license } }]
      : [{ expression: license }];

/**
 * The SBOM of a build, CycloneDX 1.5 JSON: queenctl itself (`subject`: name, version, licence)
 * and each npm package the build bundled (bundledPackages, from esbuild's metafile), by name,
 * version, package URL and licence; `platform`, when given, is what the build carries besides
 * (the standalone executable's Bun); `properties`, name-value pairs of the build's own (its
 * bytecode, its bundle's checksum). No timestamp or serial number: the same build gives the same file.
 */
export function sbomText({ subject, packages, platform, properties = [], root }) {
  const esbuild = JSON.parse(readFileSync(join(root, 'node_modules', 'esbuild', 'package.json'), 'utf8')).version;
  const subjectRef = npmPurl(subject.name, subject.version);
  const component = ({ name, version, license }, type = 'library', purl = npmPurl(name, version)) => {
    const scope = /^(@[^/]+)\/(.+)$/.exec(name);
    return {
      type,
      'bom-ref': purl,
      ...(scope ? { group: scope[1], name: scope[2] } : { name }),
      version,
      purl,
      licenses: licenceOf(license),
    };
  };
  const components = [
    ...(platform ? [component(platform, 'platform', platform.purl)] : []),
    ...packages.map((pkg) => component(pkg)),
  ];
  const bom = {
    bomFormat: 'CycloneDX',
    specVersion: '1.5',
    version: 1,
    metadata: {
      tools: { components: [{ type: 'application', name: 'esbuild', version: esbuild }] },
      component: { ...component(subject, 'application'), description: subject.description, properties },
    },
    components,
    dependencies: [
      { ref: subjectRef, dependsOn: components.map((entry) => entry['bom-ref']) },
      ...components.map((entry) => ({ ref: entry['bom-ref'], dependsOn: [] })),
    ],
  };
  return `${JSON.stringify(bom, null, 2)}\n`;
}
