/**
 * The Homebrew formula and the Scoop manifest against the real release in dist/release/ (run by
 * `npm run test:release` after `npm run release`): made by scripts/package-managers.mjs from the
 * release's SHA256SUMS, as scripts/release.mjs makes them when a download base is set, with the
 * base pointed at an https server on 127.0.0.1 (a throwaway certificate: a base must be https)
 * that serves dist/release/. Every address either file names
 * is fetched as brew and scoop would fetch it, and its bytes must hash to the checksum beside it:
 * the day the files are published at the real base, the formula and the manifest install them.
 * test/unit/package-managers.test.ts holds the files' shapes; this, that they fit this release.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { get } from 'node:https';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type * as PackageManagers from '../../scripts/package-managers.mjs';
import { VERSION } from '../../src/version.js';
import { makeCertificate } from '../support/tls.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
// The script itself, from the repository (dist/ holds only what is transpiled).
const { packageManagerFiles }: typeof PackageManagers = await import(
  new URL('../../../scripts/package-managers.mjs', import.meta.url).href
);
const RELEASE = join(ROOT, 'dist', 'release');
const FETCH_MS = 60_000;

const certificate = makeCertificate();
let server: Server;
let base: string;

before(async () => {
  server = createServer({ key: certificate.key, cert: certificate.cert }, (request, response) => {
    const name = decodeURIComponent(new URL(request.url ?? '/', 'https://x').pathname.replace(/^\/v[^/]+\//, ''));
    // Only the release's own files, by name: nothing outside dist/release/ is served.
    if (!/^[A-Za-z0-9._-]+$/.test(name)) return void response.writeHead(404).end();
    try {
      response.writeHead(200).end(readFileSync(join(RELEASE, name)));
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `https://127.0.0.1:${(server.address() as AddressInfo).port}/v{version}`;
});

after(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** The SHA-256 of what `url` serves, fetched as brew and scoop would (over TLS, the test's CA). */
function sha256Of(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const request = get(url, { ca: certificate.cert, timeout: FETCH_MS }, (response) => {
      if (response.statusCode !== 200) {
        response.resume();
        return reject(new Error(`${url}: HTTP ${response.statusCode}`));
      }
      const hash = createHash('sha256');
      response.on('data', (chunk: Buffer) => hash.update(chunk));
      response.on('end', () => resolve(hash.digest('hex')));
      response.on('error', reject);
    });
    request.on('timeout', () => request.destroy(new Error(`${url}: no answer within ${FETCH_MS} ms`)));
    request.on('error', reject);
  });
}

describe('the formula and the manifest fit the release', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const meta = JSON.parse(readFileSync(join(ROOT, 'packaging', 'release.json'), 'utf8'));

  function files(): { 'queenctl.rb': string; 'queenctl.json': string } {
    const sums = readFileSync(join(RELEASE, 'SHA256SUMS'), 'utf8');
    return packageManagerFiles({ version: VERSION, sha256sums: sums, pkg, meta, downloadBase: base });
  }

  it('each url of the Homebrew formula serves the archive its sha256 names (macOS and Linux, both CPUs)', async () => {
    const formula = files()['queenctl.rb'];
    const pairs = [...formula.matchAll(/url "([^"]+)"\s+sha256 "([0-9a-f]{64})"/g)].map((m) => [m[1], m[2]]);
    const names = pairs.map(([url]) => String(url).split('/').pop());
    assert.deepEqual(
      names.sort(),
      ['darwin-arm64', 'darwin-x64', 'linux-arm64', 'linux-x64'].map((p) => `queenctl-${VERSION}-${p}.tar.gz`).sort(),
    );
    for (const [url, sha256] of pairs) assert.equal(await sha256Of(String(url)), sha256, String(url));
    assert.match(formula, new RegExp(`version "${VERSION.replaceAll('.', '\\.')}"`));
  });

  it("the Scoop manifest's url serves the Windows zip its hash names", async () => {
    const manifest = JSON.parse(files()['queenctl.json']) as {
      version: string;
      architecture: { '64bit': { url: string; hash: string } };
    };
    assert.equal(manifest.version, VERSION);
    const { url, hash } = manifest.architecture['64bit'];
    assert.ok(url.endsWith(`/queenctl-${VERSION}-windows-x64.zip`), url);
    assert.equal(await sha256Of(url), hash.replace(/^sha256:/, ''));
  });
});
