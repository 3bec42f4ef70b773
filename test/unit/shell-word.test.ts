/**
 * What a person pastes stays one word (issue 33: `config set-context "my ctx"` suggested
 * `queenctl config use-context my ctx`, two words when pasted). Each quoted word is read back by
 * a real shell (bash: it reads $'…' too) and must come out as the word itself.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { shellWord } from '../../src/output/words.js';

describe('shellWord', () => {
  it('leaves plain words bare', () => {
    for (const word of ['prod', 'eu-west-1', 'a.b_c:d@e', '/tmp/x']) assert.equal(shellWord(word), word);
  });

  it('quotes what a shell would split or expand, and never prints a control character', () => {
    assert.equal(shellWord('my ctx'), "'my ctx'");
    assert.equal(shellWord("it's"), "'it'\\''s'");
    assert.equal(shellWord('a\u001b[31mb'), "$'a\\x1b[31mb'");
    assert.doesNotMatch(shellWord('x\ny\u0007\u009b'), /[\u0000-\u001f\u007f-\u009f]/);
  });

  it('reads back as the same one word in bash', () => {
    const words = [
      'my ctx',
      "it's",
      '$(touch /tmp/pwned)',
      '`id`',
      'a;b|c&d',
      '*',
      '~',
      'tab\there',
      'nl\nx',
      "q'\u001b\\",
    ];
    for (const word of words) {
      const printed = execFileSync('bash', ['-c', `printf '%s' ${shellWord(word)}`], { encoding: 'utf8' });
      assert.equal(printed, word, `${JSON.stringify(word)} quoted as ${shellWord(word)}`);
    }
  });
});
