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

const HINT = 'set it to a proxy URL such as http://proxy.internal:3128, or unset it';

/**
 * HTTPS_PROXY, HTTP_PROXY and NO_PROXY (lower case first, as curl and undici read them);
 * undefined when neither proxy is set: connect directly.
 */
export function proxySettings(env: NodeJS.ProcessEnv): ProxySettings | undefined {
  const pick = (name: string): string | undefined => {
    const value = env[name.toLowerCase()] || env[name.toUpperCase()];
    if (!value) return undefined;
    try {
      new URL(value);
    } catch {
      throw new UsageError(`${name.toUpperCase()} is not a URL`, HINT);
    }
    return value;
  };
  const httpProxy = pick('http_proxy');
  const httpsProxy = pick('https_proxy');
  if (!httpProxy && !httpsProxy) return undefined;
  return { httpProxy, httpsProxy, noProxy: env.no_proxy ?? env.NO_PROXY ?? '' };
}
