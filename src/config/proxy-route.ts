/**
 * Which proxy a request to a broker goes through, by the rules of Go's httpproxy (the Go
 * queenctl's ProxyFromEnvironment; docs/config.md#proxies). Loaded only by a run with proxy
 * settings (commands/globals.ts), where node:net is about to be loaded anyway.
 */
import { BlockList, isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import type { ProxySettings } from './proxy.js';

/** A NO_PROXY entry, as Go's httpproxy parses one. */
type Exemption =
  | { kind: 'all' }
  | { kind: 'cidr'; list: BlockList }
  | { kind: 'ip'; list: BlockList; port: string }
  | { kind: 'domain'; suffix: string; matchHost: boolean; port: string };

const DEFAULT_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443' };

/**
 * The proxy a request to `server` goes through, or undefined when it goes direct: https through
 * HTTPS_PROXY only, http through HTTP_PROXY only (neither stands in for the other), and never for
 * `localhost`, a loopback address (127.0.0.0/8, ::1) or a host NO_PROXY exempts.
 */
export function proxyFor(settings: ProxySettings, server: string | URL): string | undefined {
  const url = typeof server === 'string' ? new URL(server) : server;
  const proxy =
    url.protocol === 'https:' ? settings.httpsProxy : url.protocol === 'http:' ? settings.httpProxy : undefined;
  if (proxy === undefined) return undefined;
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = url.port || DEFAULT_PORTS[url.protocol] || '';
  return isExempt(host, port, exemptionsOf(settings.noProxy)) ? undefined : proxy;
}

function isExempt(host: string, port: string, exemptions: Exemption[]): boolean {
  if (host === 'localhost') return true;
  const family = isIP(host);
  const type = family === 6 ? 'ipv6' : 'ipv4';
  if (family !== 0 && LOOPBACK.check(host, type)) return true;
  for (const exemption of exemptions) {
    switch (exemption.kind) {
      case 'all':
        return true;
      case 'cidr':
        if (family !== 0 && exemption.list.check(host, type)) return true;
        break;
      case 'ip':
        if (family !== 0 && exemption.list.check(host, type) && (exemption.port === '' || exemption.port === port))
          return true;
        break;
      case 'domain':
        if (
          (host.endsWith(exemption.suffix) || (exemption.matchHost && host === exemption.suffix.slice(1))) &&
          (exemption.port === '' || exemption.port === port)
        )
          return true;
        break;
    }
  }
  return false;
}

/** 127.0.0.0/8 and ::1, IPv4-mapped forms included (Go's IP.IsLoopback). */
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

const parsed = new Map<string, Exemption[]>();

/** NO_PROXY's entries; a malformed one is skipped, as Go skips it. */
export function exemptionsOf(noProxy: string): Exemption[] {
  const known = parsed.get(noProxy);
  if (known) return known;
  const exemptions: Exemption[] = [];
  for (const raw of noProxy.split(',')) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    if (entry === '*') {
      exemptions.splice(0, exemptions.length, { kind: 'all' });
      break;
    }
    const cidr = parseCidr(entry);
    if (cidr) {
      exemptions.push({ kind: 'cidr', list: cidr });
      continue;
    }
    let [host, port] = splitHostPort(entry) ?? [entry, ''];
    if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
    if (host === '') continue;
    const family = isIP(host);
    if (family !== 0) {
      const list = new BlockList();
      list.addAddress(host, family === 6 ? 'ipv6' : 'ipv4');
      exemptions.push({ kind: 'ip', list, port });
      continue;
    }
    // foo.com matches foo.com and its subdomains; .foo.com and *.foo.com its subdomains only.
    if (host.startsWith('*.')) host = host.slice(1);
    const matchHost = !host.startsWith('.');
    const suffix = domainToASCII(matchHost ? `.${host}` : host) || (matchHost ? `.${host}` : host);
    exemptions.push({ kind: 'domain', suffix, matchHost, port });
  }
  parsed.set(noProxy, exemptions);
  return exemptions;
}

/** `10.0.0.0/8`, `fd00::/8` (Go's net.ParseCIDR); undefined for anything else. */
function parseCidr(entry: string): BlockList | undefined {
  const match = /^([^/]+)\/(\d{1,3})$/.exec(entry);
  if (!match) return undefined;
  const [, address = '', bits = ''] = match;
  const family = isIP(address);
  const prefix = Number(bits);
  if (family === 0 || prefix > (family === 6 ? 128 : 32)) return undefined;
  const list = new BlockList();
  list.addSubnet(address, prefix, family === 6 ? 'ipv6' : 'ipv4');
  return list;
}

/** `host:port` or `[v6]:port` as Go's net.SplitHostPort splits them; undefined without a port. */
function splitHostPort(entry: string): [string, string] | undefined {
  const bracketed = /^\[([^\]]*)\]:(\d*)$/.exec(entry);
  if (bracketed) return [bracketed[1] ?? '', bracketed[2] ?? ''];
  const colon = entry.lastIndexOf(':');
  // More than one colon without brackets is a bare IPv6 address (Go: "too many colons").
  if (colon < 0 || entry.indexOf(':') !== colon) return undefined;
  return [entry.slice(0, colon), entry.slice(colon + 1)];
}
