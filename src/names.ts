/**
 * Queue, consumer group and partition names as users type them and batch records carry them.
 * They travel in a URL path (a pop's queue and partition) or a query (the group), percent-encoded;
 * some no encoding makes safe, and some hide what is being asked for in a terminal. Every
 * rejection is a UsageError (exit 1), raised before anything is sent.
 *
 * A local rule for `lease acquire` and `lease ack`, in the spirit of checkLeaseId (args.ts); one
 * rule for every verb's names belongs in args.ts.
 */
import { UsageError } from './exit.js';

/** Longer names are no broker's (its columns are far shorter) and would not fit a URL. */
export const MAX_NAME_LENGTH = 512;

// C0, DEL and C1 controls: in a terminal they can rewrite what the line says.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * `what` names the value in the message: `queue`, `--group`, `--partition`. A `/` would be a new
 * path segment to any proxy that decodes `%2F`, and `.`/`..` are dot segments however encoded
 * (RFC 3986 5.2.4): the request would reach another route.
 */
export function checkName(name: string, what: string): string {
  const shown = JSON.stringify(name.slice(0, 80));
  if (name.trim() === '') throw new UsageError(`${what} is empty`);
  if (CONTROL.test(name)) throw new UsageError(`${what} ${shown} holds control characters`);
  if (LONE_SURROGATE.test(name)) throw new UsageError(`${what} ${shown} is not valid Unicode text`);
  if (name.includes('/') || name.includes('\\')) {
    throw new UsageError(`${what} ${shown} holds a slash: no queue, group or partition name does`);
  }
  if (name === '.' || name === '..' || name.includes('..')) {
    throw new UsageError(`${what} ${shown} holds "..": in a URL path it would name another route`);
  }
  if (name.length > MAX_NAME_LENGTH) {
    throw new UsageError(`${what} is ${name.length} characters long; names are at most ${MAX_NAME_LENGTH}`);
  }
  return name;
}
