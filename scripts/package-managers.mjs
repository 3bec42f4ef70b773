// What `brew install` and `scoop install` read, made from a release's archives: a Homebrew
// formula (queenctl.rb, for a tap) over the macOS arm64/x64 and Linux x64/arm64 archives, and a
// Scoop manifest (queenctl.json, for a bucket) over the Windows x64 zip, each archive named with
// its sha256 from the release's SHA256SUMS, so both work the day the files are published at the
// download base URL (docs/install.md). Nothing here reads the network or the archives themselves:
// the release passes its version, its SHA256SUMS text and where the files will be. Plain JS,
// like the other build scripts.
//
// The layout both install from is the archive's (scripts/build-exe.mjs, docs/standalone.md): one
// directory `queenctl-<v>-<platform>/` holding `queenctl` (`queenctl.exe` on Windows), LICENSE,
// THIRD-PARTY-LICENSES, README.md, sbom.cdx.json, `completions/` (queenctl.bash, _queenctl,
// queenctl.fish) and `man/man1/*.1`. Homebrew enters an archive's only directory by itself;
// Scoop is told to (extract_dir).
//
// Conventions followed: Homebrew's Formula Cookbook and Formula API (`on_macos`/`on_linux` with
// `on_arm`/`on_intel` choosing the url and sha256, `bin.install`, `man1.install`,
// `bash_completion.install`, `zsh_completion.install`, `fish_completion.install`, a `test do`
// block); Scoop's App Manifests and App Manifest Autoupdate pages and its schema.json
// (`architecture.64bit.url/hash/extract_dir`, `bin`, `checkver.github`, `autoupdate` with the
// hash read from SHA256SUMS).

/** Each platform the package managers install, its archive's suffix, and who installs it. */
export const PLATFORMS = {
  'darwin-arm64': { extension: 'tar.gz', manager: 'homebrew' },
  'darwin-x64': { extension: 'tar.gz', manager: 'homebrew' },
  'linux-arm64': { extension: 'tar.gz', manager: 'homebrew' },
  'linux-x64': { extension: 'tar.gz', manager: 'homebrew' },
  'windows-x64': { extension: 'zip', manager: 'scoop' },
};

/** `queenctl-<v>-<platform>`: the archive's name without its suffix, and its only directory. */
export const archiveStem = (version, platform) => `queenctl-${version}-${platform}`;
/** The archive's file name, as SHA256SUMS lists it. */
export function archiveName(version, platform) {
  const known = PLATFORMS[platform];
  if (!known) throw new Error(`no archive for ${platform} (${Object.keys(PLATFORMS).join(', ')})`);
  return `${archiveStem(version, platform)}.${known.extension}`;
}

const SEMVER = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;

/**
 * Where the release's files are downloaded from, without a trailing slash: `setting` when given
 * (the release's explicit setting, e.g. QUEENCTL_DOWNLOAD_BASE or packaging/release.json's
 * `downloadBase`; `{version}` in it is replaced), else GitHub's release download URL of the
 * repository package.json names (`repository`, else a `homepage` on github.com):
 * `https://github.com/<owner>/<repo>/releases/download/v<version>`. Neither: an Error saying
 * what to set, never a guess. `{ url, repository, from }`: `repository` is the GitHub URL when
 * there is one (Scoop's checkver), `from` says which setting gave it.
 */
export function downloadBase({ version, pkg = {}, setting } = {}) {
  if (!SEMVER.test(String(version))) throw new Error(`version ${JSON.stringify(version)} is not x.y.z`);
  if (setting !== undefined && setting !== '') {
    const url = String(setting).replaceAll('{version}', version).replace(/\/+$/, '');
    if (!/^https:\/\/[^/\s]+\/\S*$/.test(url))
      throw new Error(`the download base ${JSON.stringify(setting)} is not an https:// URL`);
    return { url, repository: githubRepository(url), from: 'setting' };
  }
  for (const [from, value] of [
    ['package.json repository', typeof pkg.repository === 'object' ? pkg.repository?.url : pkg.repository],
    ['package.json homepage', pkg.homepage],
  ]) {
    const repository = githubRepository(value);
    if (repository) return { url: `${repository}/releases/download/v${version}`, repository, from };
  }
  throw new Error(
    'no download base URL: package.json names no GitHub repository (repository, or a homepage on github.com);' +
      ' set one explicitly (e.g. https://github.com/<owner>/<repo>/releases/download/v{version})',
  );
}

/** `https://github.com/<owner>/<repo>` from the forms package.json and URLs take, or undefined. */
function githubRepository(value) {
  if (typeof value !== 'string') return undefined;
  const name = '([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)';
  const match =
    new RegExp(`^(?:github:)?${name}$`).exec(value) ??
    new RegExp(`^(?:git\\+)?(?:https?|git|ssh)://(?:git@)?github\\.com/${name}(?:\\.git)?(?:[/#?].*)?$`).exec(value);
  if (!match || match[1] === '.' || match[2] === '.') return undefined;
  return `https://github.com/${match[1]}/${match[2]}`;
}

/**
 * SHA256SUMS (`sha256sum` output: `<64 hex>  <name>`, or ` *<name>` in binary mode) as a Map of
 * name to lowercase hex. A line of any other shape, or a name listed twice, is an Error: a
 * checksum file that does not say one thing clearly is not published.
 */
export function parseSha256Sums(text) {
  const sums = new Map();
  for (const [index, line] of String(text).split('\n').entries()) {
    if (line === '') continue;
    const match = /^([0-9a-fA-F]{64}) [ *](\S(?:.*\S)?)$/.exec(line);
    if (!match) throw new Error(`SHA256SUMS line ${index + 1} is not "<sha256>  <file>": ${JSON.stringify(line)}`);
    const [, hash, name] = match;
    if (sums.has(name)) throw new Error(`SHA256SUMS lists ${name} twice`);
    sums.set(name, hash.toLowerCase());
  }
  return sums;
}

/** Each platform of `manager`: its archive's name, URL and sha256 (an Error when SHA256SUMS lacks one). */
function archives({ version, baseUrl, sums }, manager) {
  return Object.entries(PLATFORMS)
    .filter(([, known]) => known.manager === manager)
    .map(([platform]) => {
      const name = archiveName(version, platform);
      const sha256 = sums.get(name);
      if (!sha256) throw new Error(`SHA256SUMS has no ${name}: the ${manager} file needs it`);
      return { platform, name, url: `${baseUrl}/${name}`, sha256 };
    });
}

function checkInput(input) {
  const { version, baseUrl, sums, description, homepage, license } = input;
  if (!SEMVER.test(String(version))) throw new Error(`version ${JSON.stringify(version)} is not x.y.z`);
  if (!(sums instanceof Map)) throw new Error('sums: the Map parseSha256Sums returns');
  for (const [key, value] of Object.entries({ baseUrl, homepage }))
    if (!/^https:\/\/\S+$/.test(String(value))) throw new Error(`${key} ${JSON.stringify(value)} is not an https URL`);
  for (const [key, value] of Object.entries({ description, license }))
    if (typeof value !== 'string' || value.trim() === '' || /[\r\n]/.test(value))
      throw new Error(`${key} must be one line of text`);
}

/** A Ruby string literal: double-quoted, with what Ruby would interpolate or end escaped. */
const ruby = (text) => `"${String(text).replace(/[\\"#]/g, (char) => `\\${char}`)}"`;

/**
 * The Homebrew formula (Formula/queenctl.rb in a tap). `input`: `{ version, baseUrl, sums,
 * description, homepage, license }`; `description` is Homebrew's `desc` (one line, at most 80
 * characters, no article first and no final period, as `brew audit` wants).
 */
export function homebrewFormula(input) {
  checkInput(input);
  const { version, description, homepage, license } = input;
  if (description.length > 80 || /^(a|an|the)\s/i.test(description) || description.endsWith('.'))
    throw new Error(`desc ${JSON.stringify(description)}: at most 80 characters, no article first, no final period`);
  const byPlatform = new Map(archives(input, 'homebrew').map((archive) => [archive.platform, archive]));
  const block = (cpu, platform) => {
    const { url, sha256 } = byPlatform.get(platform);
    return [`    ${cpu} do`, `      url ${ruby(url)}`, `      sha256 ${ruby(sha256)}`, '    end'];
  };
  return [
    `# queenctl ${version}, generated by scripts/package-managers.mjs from the release's SHA256SUMS:`,
    '# change the generator, not this file.',
    'class Queenctl < Formula',
    `  desc ${ruby(description)}`,
    `  homepage ${ruby(homepage)}`,
    `  version ${ruby(version)}`,
    `  license ${ruby(license)}`,
    '',
    '  on_macos do',
    ...block('on_arm', 'darwin-arm64'),
    ...block('on_intel', 'darwin-x64'),
    '  end',
    '',
    '  on_linux do',
    ...block('on_arm', 'linux-arm64'),
    ...block('on_intel', 'linux-x64'),
    '  end',
    '',
    '  def install',
    '    bin.install "queenctl"',
    '    man1.install Dir["man/man1/*.1"]',
    '    bash_completion.install "completions/queenctl.bash" => "queenctl"',
    '    zsh_completion.install "completions/_queenctl"',
    '    fish_completion.install "completions/queenctl.fish"',
    '  end',
    '',
    '  test do',
    '    assert_equal version.to_s, shell_output("#{bin}/queenctl --version").strip',
    '  end',
    'end',
    '',
  ].join('\n');
}

/**
 * The Scoop manifest (bucket/queenctl.json), as an object; scoopManifestText gives the file.
 * `input` as homebrewFormula's, plus `repository` (https://github.com/<owner>/<repo>, from
 * downloadBase) for checkver; without one the manifest has no checkver and no autoupdate, which
 * need a place to look for new versions.
 */
export function scoopManifest(input) {
  checkInput(input);
  const { version, baseUrl, description, homepage, license, repository } = input;
  const [windows] = archives(input, 'scoop');
  const manifest = {
    version,
    description,
    homepage,
    license,
    notes: [
      'lease watch -- <command> and lease run need POSIX process groups and signals: on Windows they',
      'are refused; run them in WSL. Every other verb works here.',
    ],
    architecture: {
      '64bit': { url: windows.url, hash: windows.sha256, extract_dir: archiveStem(version, 'windows-x64') },
    },
    bin: 'queenctl.exe',
  };
  if (repository) {
    // The next version's URL is this one's with the version replaced: only when the base URL
    // names the version (GitHub's .../download/v<version>), else autoupdate would fetch this one.
    const template = baseUrl.includes(version) ? baseUrl.replaceAll(version, '$version') : null;
    manifest.checkver = { github: repository };
    if (template)
      manifest.autoupdate = {
        architecture: {
          '64bit': {
            url: `${template}/${archiveName('$version', 'windows-x64')}`,
            extract_dir: archiveStem('$version', 'windows-x64'),
            hash: { url: '$baseurl/SHA256SUMS', regex: '([a-fA-F0-9]{64})\\s+\\*?$basename' },
          },
        },
      };
  }
  return manifest;
}

/** The manifest's file: JSON with four-space indents, as Scoop's buckets keep them. */
export const scoopManifestText = (input) => `${JSON.stringify(scoopManifest(input), null, 4)}\n`;

/**
 * Both files for a release: `{ 'queenctl.rb': text, 'queenctl.json': text }`. `release`:
 * `{ version, sha256sums (the file's text), pkg (package.json), meta (packaging/release.json),
 * downloadBase (the explicit setting, optional) }`.
 */
export function packageManagerFiles({ version, sha256sums, pkg = {}, meta = {}, downloadBase: setting }) {
  const base = downloadBase({ version, pkg, setting });
  const homepage = pkg.homepage ?? meta.homepage ?? base.repository;
  const summary = String(meta.summary ?? '');
  const input = {
    version,
    baseUrl: base.url,
    repository: base.repository,
    sums: parseSha256Sums(sha256sums),
    homepage,
    license: pkg.license,
  };
  return {
    'queenctl.rb': homebrewFormula({ ...input, description: summary.charAt(0).toUpperCase() + summary.slice(1) }),
    'queenctl.json': scoopManifestText({ ...input, description: pkg.description ?? summary }),
  };
}
