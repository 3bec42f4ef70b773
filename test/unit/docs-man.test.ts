/**
 * The man pages (src/docs/man.ts): a page for every visible command and none for a hidden one,
 * the pages package.json ships, defaults shown, help text escaped for roff, and groff reading
 * every page without a warning.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import { manPages, roffEscape } from '../../src/docs/man.js';
import { describeProgram, everyCommand } from '../../src/docs/model.js';
import { docsTree } from '../../src/docs/tree.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const options = { version: '0.1.0', date: '2026-12-03' };
const pages = manPages(docsTree(), options);
const page = (file: string): string => {
  const found = pages.find((candidate) => candidate.file === file);
  assert.ok(found, `no page ${file}; pages: ${pages.map((candidate) => candidate.file).join(', ')}`);
  return found.text;
};

const groff = spawnSync('groff', ['--version'], { timeout: 10_000 });
const noGroff = groff.error || groff.status !== 0 ? 'groff is not installed (.ci/run installs it)' : false;
const scratch = mkdtempSync(join(tmpdir(), 'queenctl-man-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * groff's warnings (all of them: -ww) on pages, as text; '' for none: typeset as for print, and
 * as man shows them on an 80-column terminal (what lintian checks a packaged page with). One run
 * of groff reads every page (each warning names its file): a run per page cost a second of CPU.
 */
function groffWarnings(pages: { file: string; text: string }[]): string {
  const files = pages.map(({ file, text }) => {
    writeFileSync(join(scratch, file), text);
    return file;
  });
  let warnings = '';
  for (const device of [[], ['-Tutf8', '-rLL=78n']]) {
    const args = ['-man', '-ww', '-z', ...device, ...files];
    const result = spawnSync('groff', args, { cwd: scratch, encoding: 'utf8', timeout: 20_000 });
    assert.equal(result.error, undefined, `groff did not run on ${files.join(', ')}: ${result.error}`);
    assert.equal(result.status, 0, `groff ${args.join(' ')} exited ${result.status}: ${result.stderr}`);
    warnings += result.stderr;
  }
  return warnings;
}

describe('man pages', () => {
  it('has a page for queenctl, each group and each verb, and none for __complete or a group help', () => {
    const files = pages.map((candidate) => candidate.file).sort();
    for (const file of [
      'queenctl.1',
      'queenctl-lease.1',
      'queenctl-lease-extend.1',
      'queenctl-lease-inspect.1',
      'queenctl-lease-list.1',
      'queenctl-lease-watch.1',
      'queenctl-config.1',
      'queenctl-config-view.1',
      'queenctl-config-get-contexts.1',
      'queenctl-config-current-context.1',
      'queenctl-config-use-context.1',
      'queenctl-config-set-context.1',
      'queenctl-config-delete-context.1',
      'queenctl-ping.1',
      'queenctl-version.1',
      'queenctl-completion.1',
      'queenctl-help.1',
    ]) {
      assert.ok(files.includes(file), `${file} is missing from ${files.join(', ')}`);
    }
    assert.equal(files.length, 21, files.join(', '));
    assert.ok(!files.some((file) => file.includes('complete-') || file.includes('__')), files.join(', '));
    assert.ok(!files.includes('queenctl-lease-help.1'));
    assert.doesNotMatch(page('queenctl.1'), /__complete/);
  });

  it('package.json ships and lists every page (npm links them into man1 on install -g)', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { man: string[]; files: string[] };
    const listed = manifest.man.map((path) => path.replace(/^\.\/dist\/man\//, '')).sort();
    assert.deepEqual(listed, pages.map((candidate) => candidate.file).sort());
    assert.ok(manifest.files.includes('dist/man/'), manifest.files.join(', '));
  });

  it('has the sections of a man page, with defaults, exit codes and examples from the help', () => {
    const extend = page('queenctl-lease-extend.1');
    for (const section of [
      'NAME',
      'SYNOPSIS',
      'DESCRIPTION',
      'OPTIONS',
      'EXIT STATUS',
      'ENVIRONMENT',
      'FILES',
      'EXAMPLES',
      'SEE ALSO',
    ]) {
      assert.match(extend, new RegExp(`^\\.SH ${section}$`, 'm'), section);
    }
    assert.match(extend, /^\.TH "QUEENCTL\\-LEASE\\-EXTEND" 1 "2026\\-12\\-03" "queenctl 0\.1\.0"/m);
    assert.match(extend, /^queenctl\\-lease\\-extend \\- renew leases; exit 4 when/m);
    // Own flags with their defaults, then the global ones.
    assert.match(extend, /^\\fB\\-\\-seconds\\fR \\fIn\\fR\n.*\(default: 60\)$/m);
    assert.match(extend, /^\\fB\\-\\-timeout\\fR \\fIduration\\fR\n.*\(default: 10s\)$/m);
    assert.match(extend, /^\\fB\\-o\\fR, \\fB\\-\\-output\\fR \\fIformat\\fR$/m);
    assert.match(extend, /^\.TP\n\\fB4\\fR\na lease was not renewed \(renewed: 0\)/m);
    assert.match(extend, /^With several ids the status is the first that applies of 3, 2, 4, 0\.$/m);
    const example = '\nqueenctl lease extend \\(dq$LEASE\\(dq \\-o json | jq \\-r .lease_expires_at\n';
    assert.ok(extend.includes(example), example);
    for (const variable of ['QUEEN_CONFIG', 'QUEENCTL_DEBUG', 'NO_COLOR', 'HTTPS_PROXY', 'NODE_EXTRA_CA_CERTS']) {
      assert.match(extend, new RegExp(`^\\\\fB${variable}`, 'm'), variable);
    }
    assert.ok(extend.includes('\n\\fB\\(ti/.queen/config.yaml\\fR\n'), 'the config file under FILES');
    assert.match(page('queenctl-completion.1'), /\(choices: bash, zsh, fish\)/);
    assert.match(page('queenctl-lease.1'), /^\.SH COMMANDS$/m);
    assert.match(page('queenctl-lease.1'), /See \\fBqueenctl\\-lease\\-watch\\fR\(1\)\./);
    assert.match(page('queenctl-lease-watch.1'), /^\.BR queenctl\\-lease \(1\),$/m);
  });

  it('escapes what roff would read as requests, escapes or other glyphs', () => {
    assert.equal(roffEscape('.key'), '\\&.key');
    assert.equal(roffEscape("a\n.b\n'c"), 'a\n\\&.b\n\\(aqc');
    assert.equal(roffEscape('C:\\dir --flag "x" `y` ~ ^'), 'C:\\edir \\-\\-flag \\(dqx\\(dq \\(gay\\(ga \\(ti \\(ha');
  });

  it('renders hostile help text so that groff sees text, not requests', { skip: noGroff }, () => {
    const hostile = new Command('queenctl')
      .description('.TH oops')
      .addOption(new Option('--path <dir>', "'br a\\fBbold \\n[.T] path").default('C:\\x', 'C:\\x'));
    hostile.addCommand(
      new Command('verb')
        .description("'sp 5")
        .addHelpText('after', "\n.so /etc/passwd\n\\\" not a comment\n\nExamples:\n  .hidden --x\n  'quoted'"),
    );
    const rendered = manPages(describeProgram(hostile), options);
    assert.equal(groffWarnings(rendered), '');
    for (const { file, text } of rendered) {
      assert.doesNotMatch(text, /^\.(TH oops|so|hidden)|^'/m, file);
      const shown = spawnSync('groff', ['-man', '-Tascii', '-P-c', join(scratch, file)], {
        encoding: 'utf8',
        timeout: 20_000,
      });
      assert.equal(shown.status, 0, shown.stderr);
      if (file === 'queenctl-verb.1') {
        assert.match(shown.stdout, /\.so \/etc\/passwd \\" not a comment/);
        assert.match(shown.stdout, /\.hidden --x/);
      } else {
        assert.match(shown.stdout, /'br a\\fBbold \\n\[\.T\] path \(default: C:\\x\)/);
      }
    }
  });

  it('gives groff pages it reads without a warning', { skip: noGroff }, () => {
    assert.equal(groffWarnings(pages), '');
  });

  it('stays out of what queenctl runs: no file of the bundle holds a generator', (t) => {
    const dist = join(ROOT, 'dist');
    const files = readdirSync(dist).filter((name) => /^queenctl.*\.cjs$/.test(name));
    if (files.length === 0) return t.skip('no bundle: npm run build makes it');
    for (const name of files) {
      const text = readFileSync(join(dist, name), 'utf8');
      for (const marker of ['roffEscape', 'markdownEscape', 'describeProgram']) {
        assert.ok(!text.includes(marker), `dist/${name} holds ${marker} of src/docs/: a run would load it`);
      }
    }
  });

  it('covers every command of the tree once', () => {
    const names = everyCommand(docsTree()).map((command) => command.fullName);
    assert.equal(new Set(names).size, names.length, names.join(', '));
    assert.equal(names.length, pages.length);
  });
});
