/**
 * A throwaway certificate for https tests, made with the openssl command-line tool (on every
 * Debian and macOS machine, and on this project's machines): a self-signed certificate for
 * localhost, 127.0.0.1 and queen.example.test (a name only a test proxy reaches: loopback never goes
 * through a proxy), which is also its own CA.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCertificate {
  key: string;
  cert: string;
  /** The certificate as a file, for --cacert. */
  certFile: string;
}

export function makeCertificate(): TestCertificate {
  const directory = mkdtempSync(join(tmpdir(), 'queenctl-tls-'));
  const keyFile = join(directory, 'key.pem');
  const certFile = join(directory, 'cert.pem');
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        keyFile,
        '-out',
        certFile,
        '-days',
        '2',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,DNS:queen.example.test,IP:127.0.0.1',
      ],
      { stdio: 'pipe', timeout: 15_000 },
    );
  } catch (error) {
    throw new Error(`the https tests need the openssl command (apt-get install openssl): ${(error as Error).message}`);
  }
  return { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8'), certFile };
}
