/**
 * Proxy settings from the environment, read where the connection is resolved: a proxy variable
 * that is not a URL is a usage error, said before anything is sent. The transport
 * (broker/transport.ts) routes requests by them.
 */
import { UsageError } from '../exit.js';

export interface ProxySettings {
  httpProxy: string | undefined;
  httpsProxy: string | undefined;
  noProxy: string;
}

/** The schemes of proxy undici can use. */
const PROXY_PROTOCOLS = new Set(['http:', 'https:', 'socks5:', 'socks:']);

const HINT = 'set it to a proxy URL such as http://proxy.internal:3128, or unset it';

/**
 * HTTPS_PROXY, HTTP_PROXY and NO_PROXY (lower case first, as curl and undici read them);
 * undefined when neither proxy is set: connect directly.
 */
export function proxySettings(env: NodeJS.ProcessEnv): ProxySettings | undefined {
  const pick = (name: string): string | undefined => {
    // Messages name the variable that was read: http_proxy=ftp://x is not HTTP_PROXY's fault.
    const variable = env[name.toLowerCase()] ? name.toLowerCase() : name.toUpperCase();
    const value = env[variable];
    if (!value) return undefined;
    let protocol: string;
    try {
      protocol = new URL(value).protocol;
    } catch {
      throw new UsageError(`${variable} is not a URL`, HINT);
    }
    // `proxy.internal:3128` parses as a URL of scheme `proxy.internal:`, and would fail every
    // request later as a bad broker address. The value may hold a password: never quoted.
    if (!PROXY_PROTOCOLS.has(protocol)) {
      throw new UsageError(`${variable} does not start with http://, https:// or socks5://`, HINT);
    }
    return value;
  };
  const httpProxy = pick('http_proxy');
  const httpsProxy = pick('https_proxy');
  if (!httpProxy && !httpsProxy) return undefined;
  return { httpProxy, httpsProxy, noProxy: env.no_proxy ?? env.NO_PROXY ?? '' };
}
