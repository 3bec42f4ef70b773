/**
 * The pop answer's scan (src/broker/pop-scan.ts) and the texts it gives (src/broker/batch.ts:
 * messageLine, batchRecordText, jsonText): limits refused before any parse, message texts exact,
 * deep data never a RangeError (docs/security.md#a-pops-answer-is-checked-as-it-is-read).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  batchRecordText,
  jsonDepth,
  jsonText,
  messageLine,
  parseBatchRecord,
  type BatchRecord,
} from '../../src/broker/batch.js';
import type { RawAnswer } from '../../src/broker/contract.js';
import { parsePop, popBodyInspector } from '../../src/broker/pop.js';
import { compact, MAX_ANSWER_DEPTH, PopAnswerScanner, ScanRefusal } from '../../src/broker/pop-scan.js';
import { BrokerError } from '../../src/exit.js';

const LEASE = '01a2361c-b52f-7000-a40b-921128688ca0';
const SERVER = 'http://broker.test:6632';

function scan(text: string, maxMessages = 10_000, limits: { maxValues?: number; maxContainers?: number } = {}) {
  return new PopAnswerScanner({ maxMessages, ...limits }).scanText(text);
}

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof ScanRefusal, String(error));
    return error.what;
  }
  assert.fail('not refused');
}

function nested(levels: number): string {
  return `${'['.repeat(levels)}${']'.repeat(levels)}`;
}

function answer(body: string): RawAnswer {
  return { status: 200, headers: {}, body };
}

function message(transactionId: string, data: string, partition = 'p1'): string {
  return (
    `{"transactionId":${JSON.stringify(transactionId)},"partitionId":"pid-1",` +
    `"partition":${JSON.stringify(partition)},"leaseId":"${LEASE}","data":${data}}`
  );
}

function popBody(messages: string[]): string {
  return `{"success":true,"leaseId":"${LEASE}","queue":"q","messages":[${messages.join(',')}]}`;
}

describe('PopAnswerScanner', () => {
  it('gives each message its own text, strings holding brackets, quotes and escapes included', () => {
    const first = '{"a":"]}[{\\"\\\\","b":[1,{"c":null}]}';
    const second = '{"x":"\\u005d"}';
    const result = scan(`{"messages":[${first},${second}],"leaseId":"l"}`);
    assert.deepEqual(result.messageTexts, [first, second]);
  });

  it('removes whitespace outside strings only, so a message is one line', () => {
    const result = scan('{ "messages" : [ {\n "a" : "x y\\n" ,\r\n\t"b" : [ 1 , 2 ] } ] }');
    assert.deepEqual(result.messageTexts, ['{"a":"x y\\n","b":[1,2]}']);
    assert.equal(compact(' [ "a b" , { } ] '), '["a b",{}]');
  });

  it('a non-object element is no message text; a nested `messages` key is not the answer', () => {
    assert.deepEqual(scan('{"messages":[1,"s",{}]}').messageTexts, [null, null, '{}']);
    assert.deepEqual(scan('{"x":{"messages":[{},{}]},"messages":[]}').messageTexts, []);
  });

  it('refuses more messages than the pop asked for, as the bytes come', () => {
    const text = `{"messages":[{},{},{}]}`;
    assert.equal(scan(text, 3).messageTexts.length, 3);
    assert.match(
      refusal(() => scan(text, 2)),
      /more messages than the 2 the pop asked for/,
    );
    const bytes = new PopAnswerScanner({ maxMessages: 2 });
    bytes.pushBytes(Buffer.from('{"messages":[{},{'));
    assert.match(
      refusal(() => bytes.pushBytes(Buffer.from('},{}]}'))),
      /more messages/,
    );
  });

  it('refuses nesting past jsonb depth under a message: 10,000 levels of data pass, 10,001 do not', () => {
    const at = (levels: number) => `{"messages":[{"data":${nested(levels)}}]}`;
    assert.equal(MAX_ANSWER_DEPTH, 10_003);
    assert.equal(scan(at(10_000)).messageTexts.length, 1);
    assert.match(
      refusal(() => scan(at(10_001))),
      /nests deeper than 10,003 levels/,
    );
  });

  it('refuses more values, or more objects and arrays, than any batch holds', () => {
    // Values: the answer, messages, the message, data and its elements; keys are none.
    assert.equal(scan('{"messages":[{"data":[1,2,3]}]}', 10, { maxValues: 7 }).messageTexts.length, 1);
    assert.match(
      refusal(() => scan('{"messages":[{"data":[1,2,3,4]}]}', 10, { maxValues: 7 })),
      /more than 7 JSON values/,
    );
    assert.equal(scan('{"messages":[{"data":[{}]}]}', 10, { maxContainers: 5 }).messageTexts.length, 1);
    assert.match(
      refusal(() => scan('{"messages":[{"data":[{},{}]}]}', 10, { maxContainers: 5 })),
      /more than 5 objects and arrays/,
    );
    // A key or a string's content counts nothing, whatever it looks like: 4 values here.
    assert.equal(scan('{"messages":[{"1,2,[]":"{},{},[1]"}]}', 10, { maxValues: 4 }).messageTexts.length, 1);
  });

  it('refuses a repeated key of the answer or of a message, escaped or not', () => {
    assert.match(
      refusal(() => scan('{"messages":[],"messages":[{}]}')),
      /repeats the key "messages"/,
    );
    assert.match(
      refusal(() => scan('{"messages":[{"transactionId":"a","transacti\\u006fnId":"b"}]}')),
      /message 1 repeats the key "transactionId"/,
    );
    // Inside data, keys are the producer's: the same key in two objects is fine.
    assert.equal(scan('{"messages":[{"data":{"a":{"k":1},"b":{"k":2}}}]}').messageTexts.length, 1);
  });
});

describe('parsePop and the inspector', () => {
  it('takes ids with control characters as the broker stores them', () => {
    const id = 'tx\u001b]0;x\u0007\r\n\u202e';
    const outcome = parsePop({ queue: 'q' }, answer(popBody([message(id, '{}', 'p\u0000\t')])), SERVER);
    assert.equal(outcome.kind, 'lease');
    if (outcome.kind !== 'lease') return;
    assert.equal(outcome.batch.messages[0]?.transactionId, id);
    assert.deepEqual(outcome.batch.partitions, ['p\u0000\t']);
  });

  it('refuses an id longer than 1,024 characters', () => {
    assert.equal(parsePop({ queue: 'q' }, answer(popBody([message('x'.repeat(1024), '{}')])), SERVER).kind, 'lease');
    assert.throws(
      () => parsePop({ queue: 'q' }, answer(popBody([message('x'.repeat(1025), '{}')])), SERVER),
      /message 1 has no transactionId/,
    );
  });

  it('refuses more messages than --batch, or than the most a pop may ask without it: BrokerError, exit 2', () => {
    const two = popBody([message('a', '1'), message('b', '2')]);
    assert.throws(
      () => parsePop({ queue: 'q', batch: 1 }, answer(two), SERVER),
      (error: unknown) =>
        error instanceof BrokerError &&
        error.exitCode === 2 &&
        /more messages than the 1 the pop asked for; it was not read further/.test(error.message) &&
        /queue's lease time/.test(error.hint ?? ''),
    );
    const many = popBody(Array.from({ length: 10_001 }, (_, n) => message(`t${n}`, '0')));
    assert.throws(() => parsePop({ queue: 'q' }, answer(many), SERVER), /more messages than the 10,000/);
    const inspect = popBodyInspector({ queue: 'q', batch: 1 });
    assert.throws(() => inspect(Buffer.from(two)), BrokerError);
  });

  it('keeps each message text: messageLine gives it, deep data included, one line', () => {
    const deep = nested(6_000);
    const loose = `{ "success" : true , "leaseId" : "${LEASE}" , "messages" : [ ${message('a', deep).replace(
      '"data":',
      '"data" :\n ',
    )} ] }`;
    const outcome = parsePop({ queue: 'q' }, answer(loose), SERVER);
    assert.equal(outcome.kind, 'lease');
    if (outcome.kind !== 'lease') return;
    const line = messageLine(outcome.batch.messages[0]!);
    // (Deeper than JSON.stringify reaches on Node 20 to 24; Node 26's does not throw, and the
    // line must be the broker's text either way.)
    assert.equal(line, message('a', deep));
  });
});

describe('messageLine, batchRecordText, jsonText', () => {
  function deepValue(levels: number): unknown {
    let value: unknown = 1;
    for (let i = 0; i < levels; i++) value = i % 2 ? [value] : { a: value };
    return value;
  }

  it('jsonText is JSON.stringify for JSON values, and goes on where it throws', () => {
    const samples: unknown[] = [
      null,
      'x\u0000"',
      1.5e300,
      -0,
      [],
      {},
      [1, 'a', null, true, { b: [{}], c: undefined }],
      { 'k"\\': [[], [[]]], n: { m: null } },
    ];
    for (const sample of samples) {
      assert.equal(jsonText(sample), JSON.stringify(sample));
      assert.equal(jsonText(sample, 1e9), JSON.stringify(sample), 'without recursion too');
    }
    const deep = deepValue(9_000);
    // JSON.stringify throws RangeError at this depth on Node 20 to 24 (jsonText goes on without
    // recursion), not on Node 26: the way without recursion is taken for any finite maxChars, so
    // both ways are checked on every Node.
    const text = jsonText(deep) ?? '';
    assert.equal(jsonText(deep, 1e9), text, 'the way without recursion gives the same text');
    assert.ok(text.startsWith('[{"a":[{"a":[') && text.endsWith('}]}]'), text.slice(0, 40));
    // (assert.deepEqual recurses: compared through the text instead.)
    assert.equal(jsonText(JSON.parse(text)), text);
    assert.equal(text.length, 4_500 * '{"a":[]}'.length + 1);
    assert.equal(jsonDepth(deep), 9_000);
    assert.ok((jsonText(deep, 10) ?? '').length < 20, 'a shortened text stops early');
  });

  it('a message without a text of the pop is stringified, deep or not, never throwing', () => {
    const deep = { transactionId: 't', partitionId: 'p', partition: 'p1', data: deepValue(9_000) };
    const line = messageLine(deep);
    assert.ok(line.startsWith('{"transactionId":"t","partitionId":"p","partition":"p1","data":[{"a":['));
    assert.equal(jsonText(JSON.parse(line)), line);
  });

  it('batchRecordText is what JSON.stringify would print, and lease ack reads it back', () => {
    const body = popBody([message('t\u001b1', nested(4_500)), message('t2', '{"n":2}')]);
    const outcome = parsePop({ queue: 'q' }, answer(body), SERVER);
    assert.equal(outcome.kind, 'lease');
    if (outcome.kind !== 'lease') return;
    const record: BatchRecord = { ...outcome.batch, expiresAt: null };
    const text = batchRecordText(record);
    assert.ok(!text.includes('\n'));
    assert.ok(text.includes(message('t\u001b1', nested(4_500))), 'the text as the pop gave it');
    const shallow: BatchRecord = { ...record, messages: [record.messages[1]!] };
    assert.equal(batchRecordText(shallow), JSON.stringify(shallow));
    const read = parseBatchRecord(text, 'batch.json');
    assert.equal(read.messages[0]?.transactionId, 't\u001b1');
    assert.equal(read.messages.length, 2);
  });
});
