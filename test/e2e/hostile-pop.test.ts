/**
 * A pop's answer is hostile input (docs/security.md#a-pops-answer-is-checked-as-it-is-read): ids
 * with control characters are taken, shown escaped and acked exactly as given; data of any depth
 * is printed and read back unchanged; an answer beyond any real batch is refused with exit 2,
 * before it fills memory. Against a small broker of the test's own on 127.0.0.1, which answers
 * what the simulator never would and keeps the bytes of every ack it receives.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { needsNode, runCli } from '../support/cli.js';
import { runInProcess, type InProcessOptions } from '../support/in-process.js';

const LEASE = '01a2361c-b52f-7000-a40b-921128688ca0';
const PARTITION_ID = '0192f7a0-0000-7000-8000-000000000001';
const dir = mkdtempSync(join(tmpdir(), 'queenctl-hostile-'));

interface FakeBroker {
  url: string;
  /** The body of every ack batch request, byte for byte. */
  acks: Buffer[];
  pops: number;
}

const servers: Server[] = [];
after(async () => {
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A broker whose pop answers `popBody`; extends renew; acks succeed for what they name. */
async function fakeBroker(popBody: Buffer | string): Promise<FakeBroker> {
  const broker: FakeBroker = { url: '', acks: [], pops: 0 };
  const json = (res: ServerResponse, body: Buffer | string): void => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = req.url ?? '';
      if (url.startsWith('/api/v1/pop/')) {
        broker.pops++;
        json(res, popBody);
      } else if (url.endsWith('/extend')) {
        const expiresAt = new Date(Date.now() + 60_000).toISOString();
        json(res, JSON.stringify([{ error: null, expiresAt, index: 0, leaseId: LEASE, success: true }]));
      } else if (url === '/api/v1/ack/batch') {
        const body = Buffer.concat(chunks);
        broker.acks.push(body);
        const { acknowledgments } = JSON.parse(body.toString('utf8')) as {
          acknowledgments: Array<{ transactionId: string }>;
        };
        const results = acknowledgments.map((ack, index) => ({
          dlq: false,
          error: null,
          index,
          leaseReleased: index === acknowledgments.length - 1,
          partitionName: 'p',
          queueName: 'q',
          success: true,
          transactionId: ack.transactionId,
        }));
        json(res, JSON.stringify(results));
      } else {
        res.writeHead(404).end();
      }
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  broker.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return broker;
}

/** A pop's answer around these message texts, as the broker writes it. */
function popAnswer(messageTexts: string[]): string {
  return (
    `{"consumerGroup":"__QUEUE_MODE__","leaseId":"${LEASE}","messages":[${messageTexts.join(',')}],` +
    `"partition":"p","partitionId":"${PARTITION_ID}","partitionsClaimed":1,"queue":"q","success":true}`
  );
}

function messageText(transactionId: string, partition: string, dataText: string): string {
  return (
    `{"consumerGroup":"__QUEUE_MODE__","createdAt":"2026-12-01T10:00:00.000Z","data":${dataText},` +
    `"id":"0192f7a0-0000-7000-8000-00000000000a","leaseId":"${LEASE}","partition":${JSON.stringify(partition)},` +
    `"partitionId":"${PARTITION_ID}","producerSub":null,"traceId":null,` +
    `"transactionId":${JSON.stringify(transactionId)}}`
  );
}

function deepData(levels: number): string {
  return `${'{"a":['.repeat(levels / 2)}1${']}'.repeat(levels / 2)}`;
}

const run = (broker: FakeBroker, args: string[], options: InProcessOptions = {}) =>
  runInProcess(['lease', ...args, '--server', broker.url], { timeoutMs: 30_000, ...options });

function saved(text: string): string {
  const path = join(dir, `batch-${Math.random().toString(16).slice(2)}.json`);
  writeFileSync(path, text);
  return path;
}

const RAW_CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/;

describe('ids as the broker stores them', () => {
  const transactionId = 'tx\u001b[31m\u0000\r\nforged\u202e\u0085';
  const partition = 'p\u0007\t1\u202e';

  it('acquire takes the batch (exit 0), prints the ids exact in JSON and escaped for people', async () => {
    const broker = await fakeBroker(popAnswer([messageText(transactionId, partition, '{"n":1}')]));
    const result = await run(broker, ['acquire', 'q', '-o', 'json']);
    assert.equal(result.code, 0, result.stderr);
    const record = JSON.parse(result.stdout) as { partitions: string[]; messages: Array<Record<string, unknown>> };
    assert.equal(record.messages[0]?.transactionId, transactionId);
    assert.equal(record.messages[0]?.partition, partition);
    assert.deepEqual(record.partitions, [partition]);

    const table = await run(broker, ['acquire', 'q', '-o', 'wide'], { stdoutIsTTY: true, columns: 200 });
    assert.equal(table.code, 0, table.stderr);
    assert.doesNotMatch(table.stdout, RAW_CONTROLS);
    assert.match(table.stdout, /tx\\x1b\[31m\\x00\\r\\nforged\\u202e\\x85/);
    assert.match(table.stdout, /p\\x07\\t1\\u202e/);
    assert.doesNotMatch(table.stderr, RAW_CONTROLS);
  });

  it('lease ack acks them exactly as given: the bytes the broker received', async () => {
    const broker = await fakeBroker(popAnswer([messageText(transactionId, partition, '{"n":1}')]));
    const acquired = await run(broker, ['acquire', 'q', '-o', 'json']);
    assert.equal(acquired.code, 0, acquired.stderr);
    const result = await run(broker, ['ack', saved(acquired.stdout), '-o', 'json']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(broker.acks.length, 1);
    const sent = broker.acks[0]!;
    // JSON on the wire: every control character escaped, the id the same string once parsed.
    assert.doesNotMatch(sent.toString('latin1'), /[\u0000-\u001f]/);
    const body = JSON.parse(sent.toString('utf8')) as { acknowledgments: Array<Record<string, unknown>> };
    assert.deepEqual(
      body.acknowledgments.map((ack) => [ack.transactionId, ack.partitionId, ack.leaseId]),
      [[transactionId, PARTITION_ID, LEASE]],
    );
    assert.ok(sent.includes(Buffer.from(JSON.stringify(transactionId))), 'the id as JSON writes it');
  });
});

describe('data of any depth', () => {
  const data = deepData(4_500);
  const message = messageText('tx-1', 'p', data);

  it('acquire -o json and -o ndjson print it unchanged, and lease ack reads it back', async () => {
    const broker = await fakeBroker(popAnswer([message]));
    for (const format of ['json', 'ndjson']) {
      const result = await run(broker, ['acquire', 'q', '-o', format]);
      assert.equal(result.code, 0, result.stderr);
      assert.ok(result.stdout.includes(message), `${format}: the message's text as the broker sent it`);
      assert.equal(result.stdout.split('\n').length, 2, `${format}: one line`);
    }
    const acquired = await run(broker, ['acquire', 'q', '-o', 'json']);
    const result = await run(broker, ['ack', saved(acquired.stdout), '-o', 'json']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(broker.acks.length, 1);
  });

  it('a pretty-printed answer: each message compact on one line, the same value', async () => {
    const loose = message.replace('"data":{', '"data": {\n  ');
    const pretty = `{\n  "leaseId": "${LEASE}",\n  "messages": [\n    ${loose}\n  ],\n  "success": true\n}`;
    const broker = await fakeBroker(pretty);
    const result = await run(broker, ['acquire', 'q', '-o', 'json']);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(result.stdout.includes(message));
  });

  it('-o yaml shows it as its JSON text with a warning; the table shortened; never an internal error', async () => {
    const broker = await fakeBroker(popAnswer([message]));
    const yaml = await run(broker, ['acquire', 'q', '-o', 'yaml']);
    assert.equal(yaml.code, 0, yaml.stderr);
    assert.match(yaml.stderr, /warning: the data of message 1 nests deeper than 500 levels/);
    assert.ok(yaml.stdout.includes('data: \'{"a":[{"a":['), yaml.stdout.slice(0, 400));
    const table = await run(broker, ['acquire', 'q', '-o', 'wide'], { stdoutIsTTY: true, columns: 200 });
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /tx-1 +p +\S+ +\{"a":\[\{"a":\[.*…/);
  });
});

describe('an answer beyond any batch is refused before it is parsed', () => {
  it('more messages than --batch asked for: exit 2, saying so and what the lease it took does', async () => {
    const texts = [1, 2, 3].map((n) => messageText(`tx-${n}`, 'p', '{}'));
    const broker = await fakeBroker(popAnswer(texts));
    const result = await run(broker, ['acquire', 'q', '--batch', '2']);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /more messages than the 2 the pop asked for/);
    assert.match(result.stderr, /lease the pop may have taken holds its messages for the queue's lease time/);
    assert.equal(result.stdout, '');
    assert.equal((await run(broker, ['acquire', 'q', '--batch', '3'])).code, 0);
  });

  it('a legitimate large batch still works: 10,000 messages, and one message of 10 MB of data', async () => {
    const many = Array.from({ length: 10_000 }, (_, n) => messageText(`tx-${n}`, `p${n % 7}`, `{"n":${n}}`));
    const broker = await fakeBroker(popAnswer(many));
    const result = await run(broker, ['acquire', 'q', '--batch', '10000', '-o', 'json']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal((JSON.parse(result.stdout) as { messages: unknown[] }).messages.length, 10_000);

    const record = '{"id":123456,"name":"a customer name","tags":["x","y"],"total":1234.5},';
    const big = `[${record.repeat(Math.ceil(10_000_000 / record.length)).slice(0, -1)}]`;
    const large = await fakeBroker(popAnswer([messageText('tx-big', 'p', big)]));
    const one = await run(large, ['acquire', 'q', '-o', 'json']);
    assert.equal(one.code, 0, one.stderr);
    assert.ok(one.stdout.includes(big));
  });

  // A preload that reports the process's peak memory (KiB) into a file as it exits: VmHWM, the
  // peak of its own memory since exec. Not resourceUsage().maxRSS on Linux: that survives exec,
  // and a child forked from this test (which holds the 60 MB answer) would start with its peak.
  const preload = join(dir, 'max-rss.cjs');
  writeFileSync(
    preload,
    [
      "const fs = require('node:fs');",
      "process.on('exit', () => {",
      '  let kib = process.resourceUsage().maxRSS;',
      '  try {',
      "    kib = Number(/VmHWM:\\s+(\\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]);",
      '  } catch {}',
      '  fs.writeFileSync(process.env.MAX_RSS_FILE, String(kib));',
      '});',
      '',
    ].join('\n'),
  );
  const MIB = 1024 * 1024;
  const LIMIT_KIB = 160 * 1024;
  const answers: Array<[string, () => Buffer]> = [
    [
      'millions of empty messages',
      () => Buffer.from(`{"success":true,"leaseId":"${LEASE}","messages":[${'{},'.repeat((60 * MIB) / 3)}{}]}`),
    ],
    [
      'one message whose data is millions of {}',
      () => Buffer.from(popAnswer([messageText('tx', 'p', `[${'{},'.repeat((60 * MIB) / 3)}{}]`)])),
    ],
  ];
  for (const [name, body] of answers) {
    it(`60 MB of ${name}: exit 2, peak memory under 160 MiB`, { skip: needsNode('it preloads a probe') }, async () => {
      const broker = await fakeBroker(body());
      const rssFile = join(dir, `rss-${Math.random().toString(16).slice(2)}`);
      const result = await runCli(['lease', 'acquire', 'q', '--server', broker.url, '-o', 'json'], {
        exit: 2,
        timeoutMs: 30_000,
        nodeArgs: ['--require', preload],
        env: { MAX_RSS_FILE: rssFile },
      });
      assert.match(result.stderr, /outside the contract: it holds more (messages|than 500,000 objects)/);
      const maxRssKiB = Number(readFileSync(rssFile, 'utf8'));
      assert.ok(maxRssKiB > 0 && maxRssKiB < LIMIT_KIB, `peak memory ${Math.round(maxRssKiB / 1024)} MiB`);
    });
  }
});
