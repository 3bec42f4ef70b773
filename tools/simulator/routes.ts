/**
 * The broker API the simulator serves (docs/broker.md): which route a request is for, and its
 * answer. Everything under `/_sim/` is the control interface instead (control.ts).
 */
import { authorize, READING_ROLES, RENEWING_ROLES, type Tokens } from './auth.js';
import type { ConsumerGroups } from './consumer-groups.js';
import type { ExtendRoute, Shape } from './extend-route.js';
import { type DatabaseState, healthReply } from './health.js';
import type { PopAckRoute } from './pop-ack-route.js';
import { parsePopQuery, type PopRequest } from './queues.js';
import { jsonReply, jsonTextReply, type Reply } from './wire.js';

/** uWebSockets' own 404, recorded for a GET on the extend route and on a per-queue group path. */
const HTML_NOT_FOUND = '<html><body><h1>File Not Found</h1><hr><i>uWebSockets/20 Server</i></body></html>';

export type BrokerRoute =
  | { kind: 'extend'; leaseId: string }
  | { kind: 'extend-other-method'; leaseId: string }
  | { kind: 'consumer-groups' }
  | { kind: 'consumer-group'; group: string }
  | { kind: 'pop'; request: PopRequest & { waitMs: number | null } }
  | { kind: 'ack'; batch: boolean }
  | { kind: 'html-not-found' }
  | { kind: 'health' }
  | { kind: 'not-found' };

/** What the routes read of the simulator's state, as it is when the request is answered. */
export interface BrokerState {
  readonly shape: Shape;
  readonly tokens: Tokens;
  readonly extend: ExtendRoute;
  readonly consumerGroups: ConsumerGroups;
  readonly popAck: PopAckRoute;
  /** What GET /health reports (health.ts). */
  readonly database: DatabaseState;
  brokerNow(): number;
}

/**
 * Only POST is routed on the extend path and only GET on the consumer-group paths; any other
 * method there, and any path below `/api/v1/consumer-groups/:group` (recorded: `…/queues/:queue`),
 * meets the server's HTML 404.
 */
export function matchBrokerRoute(
  method: string,
  segments: readonly string[],
  query: URLSearchParams = new URLSearchParams(),
  /** The same segments as sent (wire.ts `rawPathSegments`); the decoded ones when left out. */
  rawSegments: readonly string[] = segments,
): BrokerRoute {
  const [root, api, version, resource, name, action] = segments;
  const isApi = root === '' && api === 'api' && version === 'v1';
  // GET /api/v1/pop/queue/:queue[/partition/:partition]; POST /api/v1/ack[/batch].
  if (isApi && resource === 'pop' && name === 'queue' && action !== undefined && action !== '') {
    // Observed (docs/broker.md, "One batch, several outcomes"): the partition segment is not
    // decoded, so `…/partition/a%20b` looks for a partition named `a%20b`.
    const partition = segments.length === 8 && segments[6] === 'partition' ? rawSegments[7] : undefined;
    const shaped = segments.length === 6 || (partition !== undefined && partition !== '');
    if (method !== 'GET' || !shaped) return { kind: 'html-not-found' };
    return { kind: 'pop', request: parsePopQuery(action, partition, query) };
  }
  if (isApi && resource === 'ack' && method === 'POST') {
    if (segments.length === 4) return { kind: 'ack', batch: false };
    if (segments.length === 5 && name === 'batch') return { kind: 'ack', batch: true };
  }
  const isExtend =
    isApi && segments.length === 6 && resource === 'lease' && action === 'extend' && name !== undefined && name !== '';
  if (isExtend) return { kind: method === 'POST' ? 'extend' : 'extend-other-method', leaseId: name };
  if (isApi && resource === 'consumer-groups') {
    if (method !== 'GET') return { kind: 'html-not-found' };
    if (segments.length === 4) return { kind: 'consumer-groups' };
    if (segments.length === 5 && name !== undefined && name !== '') return { kind: 'consumer-group', group: name };
    return { kind: 'html-not-found' };
  }
  if (method === 'GET' && segments.length === 2 && segments[1] === 'health') return { kind: 'health' };
  return { kind: 'not-found' };
}

/** The answer to `route`; null when the simulator closed before it was ready. */
export function answerBroker(
  route: BrokerRoute,
  state: BrokerState,
  authorization: string | undefined,
  body: string,
  /** Aborted when the client goes away: what ends a long poll or a batch that is never answered. */
  gone: AbortSignal = new AbortController().signal,
): Reply | Promise<Reply | null> {
  switch (route.kind) {
    case 'health':
      // Recorded: no token needed, even with authentication on.
      return healthReply(state.database);
    case 'not-found':
      return jsonReply(404, { error: 'Not found' });
    case 'extend-other-method':
    case 'html-not-found':
      return { status: 404, statusMessage: 'File Not Found', headers: {}, body: HTML_NOT_FOUND };
    case 'extend': {
      // Recorded: auth is checked before the body is looked at.
      const auth = authorize(state.tokens, authorization, RENEWING_ROLES);
      if ('reply' in auth) return auth.reply;
      return state.extend.answer(state.shape, route.leaseId, auth.scope, body);
    }
    case 'pop': {
      const auth = authorize(state.tokens, authorization, RENEWING_ROLES);
      if ('reply' in auth) return auth.reply;
      return state.popAck.pop(route.request, auth.scope, gone);
    }
    case 'ack': {
      const auth = authorize(state.tokens, authorization, RENEWING_ROLES);
      if ('reply' in auth) return auth.reply;
      return state.popAck.ack(body, route.batch, gone);
    }
    case 'consumer-groups': {
      const auth = authorize(state.tokens, authorization, READING_ROLES);
      if ('reply' in auth) return auth.reply;
      return jsonReply(200, state.consumerGroups.summaries(auth.scope, state.brokerNow()));
    }
    case 'consumer-group': {
      const auth = authorize(state.tokens, authorization, READING_ROLES);
      if ('reply' in auth) return auth.reply;
      const group = state.consumerGroups.group(route.group, auth.scope, state.brokerNow());
      // Recorded: an unknown group is 200 with an empty body (Content-Length 0), not `{}`.
      return group === undefined ? jsonTextReply(200, '') : jsonReply(200, group);
    }
  }
}
