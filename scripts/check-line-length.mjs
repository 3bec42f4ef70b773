// No source line over 120 characters (issue 10): the formatter wraps code, but not the long
// strings and comments that it leaves alone. Plain JS: it runs before anything is compiled.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const LIMIT = 120;
const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { encoding: 'utf8' })
  .split('\n')
  .filter((file) => /^(src|test|scripts|tools|bin)\/.*\.(ts|mjs|cjs|js)$/.test(file));
const long = [];
for (const file of files) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    continue; // listed by git but deleted in the working tree
  }
  text.split('\n').forEach((line, index) => {
    if (line.length > LIMIT) long.push(`${file}:${index + 1}: ${line.length} characters`);
  });
}
if (long.length > 0) {
  process.stderr.write(`${long.join('\n')}\n${long.length} lines over ${LIMIT} characters: split them\n`);
  process.exit(1);
}
