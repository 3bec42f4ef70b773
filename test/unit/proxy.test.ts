/**
 * Proxy settings from the environment (config/proxy.ts) and how -v shows them
 * (broker/transport.ts): a bad proxy variable is a usage error before anything is sent, and a
 * proxy's credentials never reach a trace line.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeProxy } from '../../src/broker/transport.js';
import { proxySettings, type ProxySettings } from '../../src/config/proxy.js';
import { proxyFor } from '../../src/config/proxy-route.js';
import { UsageError } from '../../src/exit.js';

describe('proxySettings', () => {
  it('is undefined without HTTP_PROXY or HTTPS_PROXY: connect directly, whatever NO_PROXY says', () => {
    assert.equal(proxySettings({}), undefined);
    assert.equal(proxySettings({ NO_PROXY: 'broker.internal', HTTP_PROXY: '' }), undefined);
  });

  it('reads both proxies and NO_PROXY as Go does: the upper-case name first, an empty one unset', () => {
    assert.deepEqual(
      proxySettings({
        http_proxy: 'http://lower:3128',
        HTTP_PROXY: 'http://upper:3128',
        https_proxy: 'http://secure:3128',
        no_proxy: 'ignored',
        NO_PROXY: 'localhost',
      }),
      { httpProxy: 'http://upper:3128', httpsProxy: 'http://secure:3128', noProxy: 'localhost' },
    );
    assert.deepEqual(proxySettings({ HTTP_PROXY: '', http_proxy: 'http://lower:3128', NO_PROXY: '', no_proxy: 'x' }), {
      httpProxy: 'http://lower:3128',
      httpsProxy: undefined,
      noProxy: 'x',
    });
    assert.deepEqual(proxySettings({ HTTPS_PROXY: 'http://secure:3128', NO_PROXY: '.internal' }), {
      httpProxy: undefined,
      httpsProxy: 'http://secure:3128',
      noProxy: '.internal',
    });
  });

  it('in a CGI program (REQUEST_METHOD set) HTTP_PROXY is ignored: a client can set it (httpoxy)', () => {
    assert.equal(proxySettings({ REQUEST_METHOD: 'GET', HTTP_PROXY: 'http://evil:3128' }), undefined);
    assert.equal(
      proxySettings({ REQUEST_METHOD: 'GET', HTTP_PROXY: 'http://evil:3128', http_proxy: 'http://ops:3128' })
        ?.httpProxy,
      'http://ops:3128',
    );
    assert.equal(
      proxySettings({ REQUEST_METHOD: 'GET', HTTPS_PROXY: 'http://ops:3128' })?.httpsProxy,
      'http://ops:3128',
    );
  });

  it('a proxy variable that is not a URL is a usage error that names it and says what to set', () => {
    assert.throws(
      () => proxySettings({ HTTP_PROXY: 'not a url' }),
      (error) =>
        error instanceof UsageError &&
        error.message === 'HTTP_PROXY is not a URL' &&
        /http:\/\/proxy\.internal:3128, or unset it/.test(error.hint ?? ''),
    );
  });

  it('host:port without a scheme is http://host:port, as Go reads it; another scheme is a usage error', () => {
    assert.equal(proxySettings({ https_proxy: 'proxy.internal:3128' })?.httpsProxy, 'http://proxy.internal:3128');
    assert.equal(
      proxySettings({ https_proxy: 'ops:hunter2@proxy.internal:3128' })?.httpsProxy,
      'http://ops:hunter2@proxy.internal:3128',
    );
    assert.throws(
      () => proxySettings({ https_proxy: 'ftp://ops:hunter2@proxy.internal' }),
      (error) =>
        error instanceof UsageError &&
        error.message === 'https_proxy does not start with http://, https:// or socks5://' &&
        !error.message.includes('hunter2'),
    );
    for (const value of ['https://proxy.internal:3128', 'socks5://proxy.internal:1080']) {
      assert.equal(proxySettings({ HTTPS_PROXY: value })?.httpsProxy, value);
    }
  });
});

describe('proxyFor: which broker goes through which proxy (Go httpproxy rules)', () => {
  const HTTP = 'http://proxy.internal:3128';
  const HTTPS = 'http://secure.internal:3128';
  const via = (server: string, noProxy = '', settings: Partial<ProxySettings> = {}): string | undefined =>
    proxyFor({ httpProxy: HTTP, httpsProxy: HTTPS, noProxy, ...settings }, server);

  it('never proxies localhost or loopback (127.0.0.0/8, ::1), whatever NO_PROXY says', () => {
    for (const server of [
      'http://localhost:6632',
      'https://localhost',
      'http://127.0.0.1:6632',
      'http://127.8.9.10',
      'https://[::1]:6632',
      'http://[::ffff:127.0.0.1]:1',
      'http://0x7f.1:6632',
    ]) {
      assert.equal(via(server), undefined, server);
      assert.equal(via(server, 'other.example'), undefined, server);
    }
    // Not loopback: Go proxies these.
    for (const server of ['http://128.0.0.1', 'http://[::2]', 'http://sub.localhost', 'http://localhost.example']) {
      assert.equal(via(server), HTTP, server);
    }
  });

  it('https through HTTPS_PROXY only, http through HTTP_PROXY only: neither stands in for the other', () => {
    assert.equal(via('https://queen.example'), HTTPS);
    assert.equal(via('http://queen.example'), HTTP);
    assert.equal(via('https://queen.example', '', { httpsProxy: undefined }), undefined);
    assert.equal(via('http://queen.example', '', { httpProxy: undefined }), undefined);
  });

  it('NO_PROXY: *, names with their subdomains, .names for subdomains only, IPs, CIDRs, ports', () => {
    const cases: Array<[string, string, boolean]> = [
      ['*', 'https://queen.example', false],
      [' * ', 'http://10.1.2.3', false],
      ['queen.example', 'https://queen.example', false],
      ['queen.example', 'https://a.queen.example', false],
      ['queen.example', 'https://xqueen.example', true],
      ['QUEEN.Example', 'https://queen.example', false],
      ['.queen.example', 'https://queen.example', true],
      ['.queen.example', 'https://a.b.queen.example', false],
      ['*.queen.example', 'https://queen.example', true],
      ['*.queen.example', 'https://a.queen.example', false],
      ['queen.example:6632', 'https://queen.example:6632', false],
      ['queen.example:6632', 'https://queen.example:443', true],
      ['queen.example:443', 'https://queen.example', false],
      ['queen.example:80', 'http://queen.example', false],
      ['10.1.2.3', 'http://10.1.2.3:6632', false],
      ['10.1.2.3', 'http://10.1.2.4', true],
      ['10.1.2.3:6632', 'http://10.1.2.3:6632', false],
      ['10.1.2.3:6632', 'http://10.1.2.3:6633', true],
      ['10.0.0.0/8', 'http://10.200.3.4', false],
      ['10.0.0.0/8', 'http://11.0.0.1', true],
      ['10.0.0.0/8', 'http://ten.example', true],
      ['fd00::/8', 'https://[fd12::1]', false],
      ['fd00::/8', 'https://[fe80::1]', true],
      ['2001:db8::1', 'https://[2001:db8::1]:6632', false],
      ['[2001:db8::1]:6632', 'https://[2001:db8::1]:6632', false],
      ['[2001:db8::1]:6632', 'https://[2001:db8::1]:6633', true],
      ['bücher.example', 'https://xn--bcher-kva.example', false],
      ['a.example, , queen.example', 'https://queen.example', false],
      [':6632', 'https://queen.example:6632', true],
      ['', 'https://queen.example', true],
    ];
    for (const [noProxy, server, proxied] of cases) {
      assert.equal(
        via(server, noProxy),
        proxied ? (server.startsWith('https') ? HTTPS : HTTP) : undefined,
        `${noProxy} ${server}`,
      );
    }
  });
});

describe('describeProxy (-v)', () => {
  it('shows each proxy by origin only: user and password in a proxy URL are never traced', () => {
    const line = describeProxy({
      httpProxy: 'http://ops:hunter2@proxy.internal:3128/',
      httpsProxy: 'http://ops:hunter2@proxy.internal:3128/',
      noProxy: '',
    });
    assert.equal(line, 'through the proxy http://proxy.internal:3128, except localhost and loopback');
    assert.doesNotMatch(line, /hunter2|ops/);
  });

  it('says which proxy carries which scheme, and what NO_PROXY exempts', () => {
    assert.equal(
      describeProxy({ httpProxy: 'http://a:1', httpsProxy: 'http://b:2', noProxy: 'localhost,.internal' }),
      'through the proxy http://a:1 for http, http://b:2 for https, ' +
        'except localhost and loopback and NO_PROXY localhost,.internal',
    );
    assert.equal(
      describeProxy({ httpProxy: undefined, httpsProxy: 'http://b:2', noProxy: '' }),
      'through the proxy http://b:2 for https (http goes direct), except localhost and loopback',
    );
    assert.equal(
      describeProxy({ httpProxy: 'http://a:1', httpsProxy: undefined, noProxy: '' }),
      'through the proxy http://a:1 for http (https goes direct), except localhost and loopback',
    );
  });
});
