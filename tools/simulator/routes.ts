/**
 * The broker API the simulator serves (docs/broker.md): which route a request is for, and its
 * answer. Everything under `/_sim/` is the control interface instead (control.ts).
 */
import { authorize, RENEWING_ROLES, type Tokens } from './auth.js';
import type { ExtendRoute, Shape } from './extend-route.js';
import { jsonReply, type Reply } from './wire.js';

/** The recorded answer to a GET on the extend route (uWebSockets' own 404). */
const HTML_NOT_FOUND = '<html><body><h1>File Not Found</h1><hr><i>uWebSockets/20 Server</i></body></html>';

export type BrokerRoute =
  | { kind: 'extend'; leaseId: string }
  | { kind: 'extend-other-method'; leaseId: string }
  | { kind: 'health' }
  | { kind: 'not-found' };

/** What the routes read of the simulator's state, as it is when the request is answered. */
export interface BrokerState {
  readonly shape: Shape;
  readonly tokens: Tokens;
  readonly extend: ExtendRoute;
}

/** Only POST is routed on the extend path; any other method meets the server's HTML 404 (recorded for GET). */
export function matchBrokerRoute(method: string, segments: readonly string[]): BrokerRoute {
  const [root, api, version, lease, leaseId, action] = segments;
  const isExtend =
    segments.length === 6 &&
    root === '' &&
    api === 'api' &&
    version === 'v1' &&
    lease === 'lease' &&
    action === 'extend' &&
    leaseId !== undefined &&
    leaseId !== '';
  if (isExtend) return { kind: method === 'POST' ? 'extend' : 'extend-other-method', leaseId };
  if (method === 'GET' && segments.length === 2 && segments[1] === 'health') return { kind: 'health' };
  return { kind: 'not-found' };
}

/** The answer to `route`; null when the simulator closed before it was ready. */
export function answerBroker(
  route: BrokerRoute,
  state: BrokerState,
  authorization: string | undefined,
  body: string,
): Reply | Promise<Reply | null> {
  switch (route.kind) {
    case 'health':
      return jsonReply(200, { status: 'healthy' });
    case 'not-found':
      return jsonReply(404, { error: 'Not found' });
    case 'extend-other-method':
      return { status: 404, statusMessage: 'File Not Found', headers: {}, body: HTML_NOT_FOUND };
    case 'extend': {
      // Recorded: auth is checked before the body is looked at.
      const auth = authorize(state.tokens, authorization, RENEWING_ROLES);
      if ('reply' in auth) return auth.reply;
      return state.extend.answer(state.shape, route.leaseId, auth.scope, body);
    }
  }
}
