/**
 * Proxy settings from the environment (config/proxy.ts) and how -v shows them
 * (broker/transport.ts): a bad proxy variable is a usage error before anything is sent, and a
 * proxy's credentials never reach a trace line.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeProxy } from '../../src/broker/transport.js';
import { proxySettings } from '../../src/config/proxy.js';
import { UsageError } from '../../src/exit.js';

describe('proxySettings', () => {
  it('is undefined without HTTP_PROXY or HTTPS_PROXY: connect directly, whatever NO_PROXY says', () => {
    assert.equal(proxySettings({}), undefined);
    assert.equal(proxySettings({ NO_PROXY: 'broker.internal', HTTP_PROXY: '' }), undefined);
  });

  it('reads both proxies and NO_PROXY, the lower-case names first, as curl and undici do', () => {
    assert.deepEqual(
      proxySettings({
        http_proxy: 'http://lower:3128',
        HTTP_PROXY: 'http://upper:3128',
        HTTPS_PROXY: 'http://secure:3128',
        no_proxy: 'localhost',
        NO_PROXY: 'ignored',
      }),
      { httpProxy: 'http://lower:3128', httpsProxy: 'http://secure:3128', noProxy: 'localhost' },
    );
    assert.deepEqual(proxySettings({ HTTPS_PROXY: 'http://secure:3128', NO_PROXY: '.internal' }), {
      httpProxy: undefined,
      httpsProxy: 'http://secure:3128',
      noProxy: '.internal',
    });
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

  it('a proxy without a scheme is a usage error now, not a "bad broker address" on every request', () => {
    // new URL() takes `proxy.internal:3128` for a URL of scheme `proxy.internal:`.
    for (const value of ['proxy.internal:3128', 'ops:hunter2@proxy.internal:3128', 'ftp://proxy.internal']) {
      assert.throws(
        () => proxySettings({ https_proxy: value }),
        (error) =>
          error instanceof UsageError &&
          error.message === 'https_proxy does not start with http://, https:// or socks5://' &&
          !error.message.includes('hunter2'),
      );
    }
    for (const value of ['https://proxy.internal:3128', 'socks5://proxy.internal:1080']) {
      assert.equal(proxySettings({ HTTPS_PROXY: value })?.httpsProxy, value);
    }
  });
});

describe('describeProxy (-v)', () => {
  it('shows each proxy by origin only: user and password in a proxy URL are never traced', () => {
    const line = describeProxy({
      httpProxy: 'http://ops:hunter2@proxy.internal:3128/',
      httpsProxy: undefined,
      noProxy: '',
    });
    assert.equal(line, 'through the proxy http://proxy.internal:3128');
    assert.doesNotMatch(line, /hunter2|ops/);
  });

  it('says which proxy carries which scheme, and what NO_PROXY exempts', () => {
    assert.equal(
      describeProxy({ httpProxy: 'http://a:1', httpsProxy: 'http://b:2', noProxy: 'localhost,.internal' }),
      'through the proxy http://a:1 for http, http://b:2 for https, except NO_PROXY localhost,.internal',
    );
    assert.equal(
      describeProxy({ httpProxy: undefined, httpsProxy: 'http://b:2', noProxy: '' }),
      'through the proxy http://b:2 for https (http goes direct)',
    );
  });
});
