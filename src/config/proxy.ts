/**
 * Proxy settings from the environment, read as the Go queenctl reads them (Go's
 * ProxyFromEnvironment, golang.org/x/net/http/httpproxy; docs/config.md#proxies): a proxy
 * variable that is not a proxy address is a usage error, said before anything is sent.
 * proxy-route.ts says which broker goes through which proxy (loaded only when one is set).
 */
import { UsageError } from '../exit.js';

export interface ProxySettings {
  httpProxy: string | undefined;
  httpsProxy: string | undefined;
  noProxy: string;
}

/** The schemes of proxy undici can use (Go takes http, https and socks5). */
const PROXY_PROTOCOLS = new Set(['http:', 'https:', 'socks5:', 'socks:']);

const HINT = 'set it to a proxy URL such as http://proxy.internal:3128, or unset it';

/**
 * HTTP_PROXY, HTTPS_PROXY and NO_PROXY, each the upper-case name first and then the lower-case
 * one, an empty value counting as unset (Go's getEnvAny); undefined when neither proxy is set:
 * connect directly. In a CGI program (REQUEST_METHOD set) HTTP_PROXY may come from a client's
 * `Proxy:` header (httpoxy), so only `http_proxy` is read there; Go fails the request instead.
 */
export function proxySettings(env: NodeJS.ProcessEnv): ProxySettings | undefined {
  const pick = (names: string[]): string | undefined => {
    const name = names.find((candidate) => env[candidate]);
    return name === undefined ? undefined : proxyAddress(name, env[name] as string);
  };
  const cgi = Boolean(env.REQUEST_METHOD);
  const httpProxy = pick(cgi ? ['http_proxy'] : ['HTTP_PROXY', 'http_proxy']);
  const httpsProxy = pick(['HTTPS_PROXY', 'https_proxy']);
  if (!httpProxy && !httpsProxy) return undefined;
  return { httpProxy, httpsProxy, noProxy: env.NO_PROXY || env.no_proxy || '' };
}

/**
 * A proxy variable's value as a URL. `host:port` without a scheme is `http://host:port`, as Go
 * reads it; a scheme no proxy agent speaks is refused now rather than failing every request
 * later as a bad broker address. The value may hold a password: never quoted.
 */
function proxyAddress(name: string, value: string): string {
  // Messages name the variable that was read: http_proxy=ftp://x is not HTTP_PROXY's fault.
  const url = value.includes('://') ? value : `http://${value}`;
  let protocol: string;
  try {
    protocol = new URL(url).protocol;
  } catch {
    throw new UsageError(`${name} is not a URL`, HINT);
  }
  if (!PROXY_PROTOCOLS.has(protocol)) {
    throw new UsageError(`${name} does not start with http://, https:// or socks5://`, HINT);
  }
  return url;
}
