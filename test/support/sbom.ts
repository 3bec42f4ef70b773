/**
 * What an SBOM that queenctl ships must say (scripts/licenses.mjs, docs/security.md): CycloneDX
 * JSON naming queenctl at this version, and each package bundled into the files it describes by
 * name, version (the one installed here, which the build bundled) and package URL.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { VERSION } from '../../src/version.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The libraries every build bundles (docs/architecture.md): each must be named. */
export const BUNDLED = ['chalk', 'commander', 'json-p3', 'ora', 'prom-client', 'yaml', 'undici'];

interface Component {
  type: string;
  group?: string;
  name: string;
  version: string;
  purl: string;
}

/** The SBOM's components by full name (`@scope/name`), after checking its form and subject. */
export function checkSbom(text: string, packages: string[] = BUNDLED): Map<string, Component> {
  const bom = JSON.parse(text) as {
    bomFormat: string;
    specVersion: string;
    metadata: { component: Component };
    components: Component[];
  };
  assert.equal(bom.bomFormat, 'CycloneDX');
  assert.equal(bom.specVersion, '1.5');
  assert.equal(bom.metadata.component.name, 'queenctl');
  assert.equal(bom.metadata.component.version, VERSION);
  const byName = new Map(
    bom.components.map((entry) => [entry.group ? `${entry.group}/${entry.name}` : entry.name, entry]),
  );
  for (const name of packages) {
    const entry = byName.get(name);
    assert.ok(entry, `the SBOM names ${name}`);
    const installed = JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')).version;
    assert.equal(entry.version, installed, `${name}'s version`);
    assert.equal(entry.purl, `pkg:npm/${name.replace(/^@/, '%40')}@${installed}`);
  }
  for (const entry of bom.components) assert.match(entry.version, /^\d+\.\d+\.\d+/, `${entry.name} has a version`);
  return byName;
}
