/**
 * Bearer tokens as the broker checks them (docs/broker.md): who is asking, whether their role
 * may use the route, and which tenant's leases they see. Decided before a body is looked at.
 */
import { fail, isString, optional } from './input.js';
import { isRecord, jsonReply, type Reply } from './wire.js';

/**
 * What a bearer token grants. Roles `read-write` and `admin` may renew; `read-only` may also list
 * the consumer groups; any other role is 403 everywhere.
 */
export interface TokenGrant {
  role: string;
  tenant?: string;
}

/** Tokens by value; null when authentication is off. */
export type Tokens = Map<string, TokenGrant> | null;

/** Who is asking: null when auth is off (every lease visible), else the token's tenant. */
export type Scope = { tenant: string | undefined } | null;

/** The roles that may renew a lease. */
export const RENEWING_ROLES: ReadonlySet<string> = new Set(['read-write', 'admin']);

/** The roles that may read the consumer groups (docs/broker.md: the read-only role is enough). */
export const READING_ROLES: ReadonlySet<string> = new Set(['read-only', ...RENEWING_ROLES]);

/** To a Map: a plain object would find `constructor` or `__proto__` as "tokens". */
export function parseTokens(value: unknown): Tokens {
  if (value === null || value === undefined) return null;
  if (!isRecord(value)) fail('tokens must be an object or null');
  const tokens = new Map<string, TokenGrant>();
  for (const [token, grant] of Object.entries(value)) {
    if (!isRecord(grant) || !isString(grant.role)) fail(`tokens.${token}.role must be a string`);
    const tenant = optional(grant, 'tenant', isString, 'a string');
    tokens.set(token, { role: grant.role, ...(tenant !== undefined && { tenant }) });
  }
  return tokens;
}

/** The recorded answers: 401 without a token or with an unknown one, 403 for a role not in `roles`. */
export function authorize(
  tokens: Tokens,
  authorization: string | undefined,
  roles: ReadonlySet<string>,
): { scope: Scope } | { reply: Reply } {
  if (tokens === null) return { scope: null };
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  const token = match?.[1];
  if (token === undefined) return { reply: jsonReply(401, { error: 'Authentication required' }) };
  const grant = tokens.get(token);
  if (!grant) return { reply: jsonReply(401, { error: 'HS256 validation error: invalid signature' }) };
  if (!roles.has(grant.role)) return { reply: jsonReply(403, { error: 'Insufficient permissions' }) };
  return { scope: { tenant: grant.tenant } };
}
