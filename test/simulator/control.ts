/**
 * A typed client of the simulator's control interface (`/_sim/…`), for a demo or a benchmark that
 * runs the simulator in another process (main.ts). It mirrors the in-process `Simulator` methods
 * of the same names; every method is async because each is one HTTP call.
 */
import type { LeaseSpec, LeaseView, LogEntry, Shape, SimulatorStats, TokenGrant, WireFault } from './simulator.js';

export interface ControlConfig {
  shape?: Shape;
  clockOffsetMs?: number;
  /** null turns auth off; leave out to keep the current tokens. */
  tokens?: Record<string, TokenGrant> | null;
}

/** A non-2xx answer from the control interface. */
export class SimulatorControlError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'SimulatorControlError';
  }
}

interface WireLease {
  leaseId: string;
  tenant?: string;
  rows: Array<{ partition: string; group: string; expiresAt: string }>;
}

/** The wire carries ISO expiries; give callers the broker epoch ms that `Simulator.lease` does. */
function fromWire(lease: WireLease): LeaseView {
  return {
    leaseId: lease.leaseId,
    tenant: lease.tenant,
    rows: lease.rows.map((row) => ({ ...row, expiresAt: Date.parse(row.expiresAt) })),
  };
}

export class SimulatorControl {
  private readonly base: string;

  /** `url`: the simulator's base URL, as main.ts prints it. */
  constructor(url: string) {
    this.base = url.replace(/\/+$/, '');
  }

  /** Mints a lease; resolves to its id. */
  async mint(spec: LeaseSpec = {}): Promise<string> {
    const lease = (await this.call('POST', '/_sim/leases', spec)) as WireLease;
    return lease.leaseId;
  }

  /** The lease with its rows, or undefined once released (or never minted). */
  async lease(leaseId: string): Promise<LeaseView | undefined> {
    const lease = await this.call('GET', this.leasePath(leaseId), undefined, [404]);
    return lease === undefined ? undefined : fromWire(lease as WireLease);
  }

  /** An ack/nack. Resolves false when there was no such lease. */
  async release(leaseId: string): Promise<boolean> {
    return (await this.call('DELETE', this.leasePath(leaseId), undefined, [404])) !== undefined;
  }

  /** Moves every row's expiry into the past. Resolves false when there was no such lease. */
  async expire(leaseId: string): Promise<boolean> {
    return (await this.call('POST', `${this.leasePath(leaseId)}/expire`, {}, [404])) !== undefined;
  }

  async inject(fault: WireFault): Promise<void> {
    await this.call('POST', '/_sim/faults', fault);
  }

  async clearFaults(): Promise<void> {
    await this.call('DELETE', '/_sim/faults');
  }

  async configure(config: ControlConfig): Promise<void> {
    await this.call('POST', '/_sim/config', config);
  }

  async log(): Promise<LogEntry[]> {
    return (await this.call('GET', '/_sim/log')) as LogEntry[];
  }

  async resetLog(): Promise<void> {
    await this.call('DELETE', '/_sim/log');
  }

  async stats(): Promise<SimulatorStats> {
    return (await this.call('GET', '/_sim/stats')) as SimulatorStats;
  }

  private leasePath(leaseId: string): string {
    return `/_sim/leases/${encodeURIComponent(leaseId)}`;
  }

  /**
   * One control call. Resolves to the parsed JSON body (null for 204), or to undefined when the
   * status is one of `absentOn` (e.g. 404 for "no such lease"); any other non-2xx throws.
   */
  private async call(method: string, path: string, body?: unknown, absentOn: number[] = []): Promise<unknown> {
    const res = await fetch(`${this.base}${path}`, {
      method,
      ...(body !== undefined && {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }),
    });
    const text = await res.text();
    if (absentOn.includes(res.status)) return undefined;
    if (!res.ok) throw new SimulatorControlError(res.status, `${method} ${path}: ${res.status} ${text}`);
    return text.length === 0 ? null : (JSON.parse(text) as unknown);
  }
}
