/**
 * A pop's answer checked as it is read (docs/security.md#a-pops-answer-is-checked-as-it-is-read):
 * one pass over its text, byte by byte while it arrives and again over the whole string, that
 * builds no objects. It refuses an answer with more messages than the pop asked for, more JSON
 * values or containers than any real batch holds, or nesting deeper than PostgreSQL's jsonb
 * allows, before `JSON.parse` turns millions of `{}` into gigabytes; and over the whole text it
 * gives each message's own JSON text (its span in the top-level `messages`), so a message is
 * handed on as the broker sent it whatever its depth, never re-stringified.
 *
 * It is no validator: JSON.parse reads the answer after it. For valid JSON it follows the
 * structure exactly (strings and their escapes, keys against values); for anything else what it
 * counts is only ever used to refuse sooner.
 */

/** PostgreSQL's jsonb nests at most this deep; a producer's `data` can be no deeper. */
export const MAX_DATA_DEPTH = 10_000;
/** The answer object, its `messages` array and a message object hold a message's `data`. */
export const MAX_ANSWER_DEPTH = MAX_DATA_DEPTH + 3;
/**
 * Every JSON value of one answer (keys are not counted). A full batch of 10,000 messages carries
 * about 110,000 in its envelopes; two million leave room for a message of 10 MB of ordinary
 * records, and bound what JSON.parse builds (the costliest value, `{}`, takes about 110 bytes
 * parsed: 1,000,000 of them ~110 MB; a number or short string 18 to 48 bytes).
 */
export const MAX_ANSWER_VALUES = 2_000_000;
/** Objects and arrays among them, the values that cost most once parsed. */
export const MAX_ANSWER_CONTAINERS = 500_000;

export interface ScanLimits {
  /** The most elements the top-level `messages` may hold (the pop's `batch`). */
  maxMessages: number;
  maxDepth?: number;
  maxValues?: number;
  maxContainers?: number;
}

/** A limit the answer passed, or a key it repeats: `what` says which, in words for a message. */
export class ScanRefusal extends Error {
  constructor(readonly what: string) {
    super(what);
    this.name = 'ScanRefusal';
  }
}

/** What a whole answer's text holds, for the parser after it. */
export interface ScanResult {
  /**
   * Each object element of the top-level `messages`, in order: its compact JSON text (whitespace
   * outside strings removed), or null for an element that is not an object.
   */
  messageTexts: Array<string | null>;
}

// Character codes: every structural character of JSON is ASCII, and no byte of a multi-byte
// UTF-8 sequence is below 0x80, so bytes and UTF-16 units are scanned alike.
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COLON = 0x3a;
const COMMA = 0x2c;

function isWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

/** Container kinds on the stack. */
const OBJECT = 1;
const ARRAY = 2;

/** Keys longer than this are not compared (none of those queenctl reads is). */
const MAX_COMPARED_KEY = 256;

/**
 * The scanner. `push` takes the answer's bytes as they arrive (or its text, in one piece or
 * more); `finish` the spans, when it was given text. A limit passed throws ScanRefusal at once.
 */
export class PopAnswerScanner {
  private readonly maxMessages: number;
  private readonly maxDepth: number;
  private readonly maxValues: number;
  private readonly maxContainers: number;
  /** The kind of each open container, by depth (1: the answer itself). */
  private readonly stack: Uint8Array;
  private depth = 0;
  private values = 0;
  private containers = 0;
  private inString = false;
  private escaped = false;
  private inScalar = false;
  /** Inside an object, the next string is a key (after `{` or `,`). */
  private expectKey = false;
  private stringIsKey = false;
  /** The key being read, when it is one of the answer's or a message's own; null otherwise. */
  private key: string | null = null;
  private keyComparable = true;
  private keyHasEscape = false;
  /** The last key of the answer object itself. */
  private topKey: string | null = null;
  private readonly topKeys = new Set<string>();
  /** Reading the value of the answer's `messages`: its array's elements are messages. */
  private inMessages = false;
  private messagesSeen = false;
  private messages = 0;
  private messageKeys = new Set<string>();
  /** Text mode: where the current message began, and whether whitespace lies inside it. */
  private messageStart = -1;
  private messageLoose = false;
  private readonly texts: Array<string | null> = [];
  private text: string | null = null;
  /** Position of the next unit, across pushes. */
  private offset = 0;

  constructor(limits: ScanLimits) {
    this.maxMessages = limits.maxMessages;
    this.maxDepth = limits.maxDepth ?? MAX_ANSWER_DEPTH;
    this.maxValues = limits.maxValues ?? MAX_ANSWER_VALUES;
    this.maxContainers = limits.maxContainers ?? MAX_ANSWER_CONTAINERS;
    this.stack = new Uint8Array(this.maxDepth + 2);
  }

  /** The answer's bytes as they come: counts and limits only. */
  pushBytes(chunk: Uint8Array): void {
    const { length } = chunk;
    for (let index = 0; index < length; index++) {
      // Most of an answer is the inside of strings: skipped to the next quote or backslash.
      if (this.inString && !this.escaped && this.key === null) {
        let code = chunk[index]!;
        while (code !== QUOTE && code !== BACKSLASH && ++index < length) code = chunk[index]!;
        if (index >= length) break;
      }
      this.step(chunk[index]!, -1);
    }
    this.offset += length;
  }

  /** The whole answer's text: counts, limits, and the message texts that `finish` gives. */
  scanText(text: string): ScanResult {
    this.text = text;
    const { length } = text;
    for (let index = 0; index < length; index++) {
      if (this.inString && !this.escaped && this.key === null) {
        let code = text.charCodeAt(index);
        while (code !== QUOTE && code !== BACKSLASH && ++index < length) code = text.charCodeAt(index);
        if (index >= length) break;
      }
      this.step(text.charCodeAt(index), index);
    }
    this.offset += text.length;
    return { messageTexts: this.texts };
  }

  private refuse(what: string): never {
    throw new ScanRefusal(what);
  }

  /** A value begins: counted, and when it is an element of `messages`, a message. */
  private value(position: number, container: boolean): void {
    if (++this.values > this.maxValues) {
      this.refuse(`it holds more than ${this.maxValues.toLocaleString('en-US')} JSON values, more than any batch`);
    }
    if (container && ++this.containers > this.maxContainers) {
      this.refuse(
        `it holds more than ${this.maxContainers.toLocaleString('en-US')} objects and arrays, more than any batch`,
      );
    }
    if (this.inMessages && this.depth === 2) {
      if (++this.messages > this.maxMessages) {
        this.refuse(`it holds more messages than the ${this.maxMessages.toLocaleString('en-US')} the pop asked for`);
      }
      this.messageKeys = new Set();
      if (container && position >= 0 && this.text !== null) {
        this.messageStart = position;
        this.messageLoose = false;
      } else {
        this.texts.push(null);
        this.messageStart = -1;
      }
    }
  }

  private step(code: number, position: number): void {
    if (this.inString) {
      if (this.escaped) {
        this.escaped = false;
      } else if (code === BACKSLASH) {
        this.escaped = true;
        this.keyHasEscape = true;
      } else if (code === QUOTE) {
        this.inString = false;
        if (this.stringIsKey) this.endKey();
        return;
      }
      if (this.key !== null && this.stringIsKey) {
        if (code >= 0x80 || this.key.length >= MAX_COMPARED_KEY * 6) this.keyComparable = false;
        else this.key += String.fromCharCode(code);
      }
      return;
    }
    if (isWhitespace(code)) {
      this.inScalar = false;
      if (this.messageStart >= 0) this.messageLoose = true;
      return;
    }
    switch (code) {
      case QUOTE: {
        this.inScalar = false;
        this.inString = true;
        this.escaped = false;
        const top = this.stack[this.depth];
        this.stringIsKey = top === OBJECT && this.expectKey;
        if (this.stringIsKey) {
          this.expectKey = false;
          // Only the answer's own keys and a message's are compared; a message's only over the
          // whole text (as the bytes come, the answer's keys find `messages`, to count them).
          const wanted = this.depth === 1 || (this.text !== null && this.depth === 3 && this.inMessages);
          this.key = wanted ? '' : null;
          this.keyComparable = true;
          this.keyHasEscape = false;
        } else {
          this.value(position, false);
        }
        return;
      }
      case OPEN_BRACE:
      case OPEN_BRACKET: {
        this.inScalar = false;
        this.value(position, true);
        if (this.depth + 1 > this.maxDepth) {
          this.refuse(`it nests deeper than ${this.maxDepth.toLocaleString('en-US')} levels, deeper than jsonb allows`);
        }
        this.depth++;
        this.stack[this.depth] = code === OPEN_BRACE ? OBJECT : ARRAY;
        this.expectKey = code === OPEN_BRACE;
        if (this.depth === 2 && this.topKey === 'messages' && code === OPEN_BRACKET && !this.messagesSeen) {
          this.inMessages = true;
          this.messagesSeen = true;
        }
        return;
      }
      case CLOSE_BRACE:
      case CLOSE_BRACKET: {
        this.inScalar = false;
        if (this.depth === 0) return;
        this.depth--;
        this.expectKey = false;
        if (this.inMessages && this.depth === 2 && this.messageStart >= 0) this.endMessage(position + 1);
        else if (this.inMessages && this.depth === 1) this.inMessages = false;
        return;
      }
      case COLON:
        this.inScalar = false;
        return;
      case COMMA:
        this.inScalar = false;
        this.expectKey = this.stack[this.depth] === OBJECT;
        return;
      default:
        // A number or a literal: counted once, at its first character.
        if (!this.inScalar) {
          this.inScalar = true;
          this.value(position, false);
        }
    }
  }

  private endKey(): void {
    const raw = this.key;
    this.key = null;
    if (raw === null) return;
    let name: string | null = raw;
    if (!this.keyComparable) name = null;
    else if (this.keyHasEscape) {
      try {
        name = JSON.parse(`"${raw}"`) as string;
      } catch {
        name = null;
      }
    }
    if (this.depth === 1) {
      this.topKey = name;
      if (name === null) return;
      if (this.topKeys.has(name)) this.refuse(`it repeats the key ${JSON.stringify(name)}`);
      this.topKeys.add(name);
      return;
    }
    if (name === null) return;
    if (this.messageKeys.has(name)) this.refuse(`message ${this.messages} repeats the key ${JSON.stringify(name)}`);
    this.messageKeys.add(name);
  }

  private endMessage(end: number): void {
    const text = this.text as string;
    const raw = text.slice(this.messageStart, end);
    this.texts.push(this.messageLoose ? compact(raw) : raw);
    this.messageStart = -1;
  }
}

/** JSON text without the whitespace outside its strings: one line, the same value. */
export function compact(json: string): string {
  const parts: string[] = [];
  let from = 0;
  let inString = false;
  let escaped = false;
  for (let index = 0; index < json.length; index++) {
    const code = json.charCodeAt(index);
    if (inString) {
      if (escaped) escaped = false;
      else if (code === BACKSLASH) escaped = true;
      else if (code === QUOTE) inString = false;
    } else if (code === QUOTE) {
      inString = true;
    } else if (isWhitespace(code)) {
      if (index > from) parts.push(json.slice(from, index));
      from = index + 1;
    }
  }
  if (from < json.length) parts.push(json.slice(from));
  return parts.join('');
}
