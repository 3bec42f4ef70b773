/**
 * A whole `lease watch` called as a function on fake time: a fake broker that keeps expiries
 * on the fake clock, fake commands standing in for process groups, and the signals cli.ts
 * would relay. Shared by watch-command.test.ts and watch-supervisor.test.ts.
 */
import type { RequestOptions } from '../../src/broker/client.js';
import type { Renewal } from '../../src/broker/contract.js';
import { runWatch, type WatchOptions } from '../../src/commands/lease/watch.js';
import { exitStatus } from '../../src/watch/process-group.js';
import type { ChildExit, LaunchedCommand, LaunchSpec } from '../../src/watch/supervisor.js';
import { bufferIO, FakeClock, fakeRenewal } from '../support/fakes.js';

export const S = 1000;

export function fakeBroker(clock: FakeClock) {
  const expiries = new Map<string, number>();
  const broker = {
    expiries,
    /** Thrown by every request while set. */
    failure: null as Error | null,
    /** Thrown by the next requests for one lease, then forgotten. */
    failOnce: new Map<string, Error>(),
    requests: 0,
    /** Every request in order: when, for which lease, and what came of it. */
    calls: [] as Array<{ leaseId: string; at: number; outcome: 'renewed' | 'not-held' | 'failed' }>,
    mint(leaseId: string, seconds = 3): string {
      expiries.set(leaseId, clock.now() + seconds * S);
      return leaseId;
    },
    client: {
      server: 'http://broker.test',
      extend: async (leaseId: string, seconds: number, _options?: RequestOptions): Promise<Renewal> => {
        broker.requests++;
        const now = clock.now();
        const failure = broker.failure ?? broker.failOnce.get(leaseId);
        if (failure) {
          broker.failOnce.delete(leaseId);
          broker.calls.push({ leaseId, at: now, outcome: 'failed' });
          throw failure;
        }
        const current = expiries.get(leaseId);
        const live = current !== undefined && current > now;
        broker.calls.push({ leaseId, at: now, outcome: live ? 'renewed' : 'not-held' });
        const expiresAtMs = live ? Math.max(current, now + seconds * S) : null;
        if (live) expiries.set(leaseId, expiresAtMs as number);
        return fakeRenewal(leaseId, expiresAtMs, now);
      },
    },
  };
  return broker;
}

/** What one process of a fake group does with a signal it receives (SIGKILL always ends it). */
export type Reaction = 'die' | 'ignore' | { exit: number };

export interface FakeProcessSpec {
  /** Default: every signal ends it, as it would a shell without traps. */
  onSignal?: (signal: NodeJS.Signals, received: number) => Reaction;
}

/**
 * A command's process group: its leader (the command itself) and what it started. Every signal
 * sent to the group is recorded with the fake time it was sent at.
 */
export class FakeCommand implements LaunchedCommand {
  readonly exited: Promise<ChildExit>;
  readonly signals: Array<{ signal: NodeJS.Signals; at: number }> = [];
  released = false;
  private resolveExit!: (exit: ChildExit) => void;
  private leaderAlive = true;
  private readonly members: Array<{ alive: boolean; spec: FakeProcessSpec; received: number }> = [];
  private readonly leader: { spec: FakeProcessSpec; received: number };

  constructor(
    readonly pid: number,
    readonly spec: LaunchSpec,
    private readonly clock: FakeClock,
    leader: FakeProcessSpec = {},
  ) {
    this.leader = { spec: leader, received: 0 };
    this.exited = new Promise((resolve) => (this.resolveExit = resolve));
  }

  /** Runs `action` after `ms` of fake time. */
  after(ms: number, action: () => void): void {
    void this.clock.sleep(ms).then(action);
  }

  /** How the command's own process takes signals from now on (a `trap`). */
  leaderReacts(spec: FakeProcessSpec): void {
    this.leader.spec = spec;
  }

  /** The command starts another process in its group (`sleep 120 &`). */
  spawnMember(spec: FakeProcessSpec = {}): void {
    this.members.push({ alive: true, spec, received: 0 });
  }

  /** The command's own process ends by itself. */
  exit(code: number | null, signal: NodeJS.Signals | null = null): void {
    if (!this.leaderAlive) return;
    this.leaderAlive = false;
    this.resolveExit({ status: exitStatus(code, signal), code, signal });
  }

  get running(): boolean {
    return this.leaderAlive;
  }

  livingMembers(): number {
    return this.members.filter((member) => member.alive).length;
  }

  signalGroup(signal: NodeJS.Signals): void {
    this.signals.push({ signal, at: this.clock.now() });
    if (this.leaderAlive) {
      const reaction = react(this.leader, signal);
      if (reaction === 'die') this.exit(null, signal);
      else if (reaction !== 'ignore') this.exit(reaction.exit);
    }
    for (const member of this.members) if (member.alive && react(member, signal) !== 'ignore') member.alive = false;
  }

  groupAlive(): boolean {
    return this.leaderAlive || this.livingMembers() > 0;
  }

  release(): void {
    this.released = true;
  }
}

function react(member: { spec: FakeProcessSpec; received: number }, signal: NodeJS.Signals): Reaction {
  member.received++;
  if (signal === 'SIGKILL') return 'die';
  return member.spec.onSignal?.(signal, member.received) ?? 'die';
}

/** Ignores SIGINT, SIGTERM and SIGHUP, as `trap "" INT TERM HUP` does. */
export const ignoresSignals: FakeProcessSpec = { onSignal: () => 'ignore' };

export interface WatchHarnessOptions {
  leaseIds: string[];
  options?: Partial<WatchOptions>;
  env?: NodeJS.ProcessEnv;
  /** How the launched command behaves; runs when it starts. */
  command?: (command: FakeCommand) => void;
  /** The launch fails instead, as the launcher reports a missing or unusable file. */
  launchFails?: ChildExit;
  /** Launching takes until this promise settles (a slow spawn). */
  launchDelay?: Promise<void>;
  setup?: (broker: ReturnType<typeof fakeBroker>) => void;
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Starts a watch on fake time; nothing happens until `advance`. */
export function startWatch(harness: WatchHarnessOptions) {
  const clock = new FakeClock();
  const broker = fakeBroker(clock);
  for (const leaseId of harness.leaseIds) if (leaseId !== 'unknown') broker.mint(leaseId);
  harness.setup?.(broker);
  const io = bufferIO();
  const controller = new AbortController();
  const launched: FakeCommand[] = [];
  /** The broker's calls before each launch. */
  const callsBeforeLaunch: Array<typeof broker.calls> = [];
  /** The broker's calls before each `launch.prepare()`. */
  const callsBeforePrepare: Array<typeof broker.calls> = [];
  let relay: ((signal: NodeJS.Signals) => void) | null = null;
  let code: number | null = null;
  let crashed: { error: unknown } | null = null;
  /** The event stream on stdout (with `output: 'events'`). */
  const events = () =>
    io.stdout.text
      .trimEnd()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { event: string; leaseId: string; reason?: string; [key: string]: unknown });
  const done = runWatch(
    {
      leaseIds: harness.leaseIds,
      seconds: 3,
      everyMs: S,
      forMs: undefined,
      killAfterMs: 10 * S,
      requestTimeoutMs: 10 * S,
      concurrency: 4,
      command: null,
      output: 'events',
      tokenOnCommandLine: false,
      ...harness.options,
    },
    { io, client: broker.client, clock, signal: controller.signal },
    {
      env: harness.env ?? {},
      argvAfterDashDash: null,
      relaySignals: (listener) => {
        relay = listener;
        return () => {
          if (relay === listener) relay = null;
        };
      },
      launch: Object.assign(
        async (spec: LaunchSpec) => {
          callsBeforeLaunch.push([...broker.calls]);
          await harness.launchDelay;
          if (harness.launchFails) return harness.launchFails;
          const command = new FakeCommand(4242 + launched.length, spec, clock);
          launched.push(command);
          harness.command?.(command);
          return command;
        },
        { prepare: () => callsBeforePrepare.push([...broker.calls]) },
      ),
    },
  ).then(
    (result) => (code = result),
    (error: unknown) => (crashed = { error }),
  );
  return {
    clock,
    broker,
    io,
    done,
    launched,
    callsBeforeLaunch,
    callsBeforePrepare,
    code: () => code,
    /** The watch's exit status; fails the test when the watch has not ended (or crashed). */
    status(): number {
      if (crashed) throw crashed.error;
      if (code === null) throw new Error(`the watch has not ended\nstderr: ${io.stderr.text}`);
      return code;
    },
    events,
    /** The command as launched; fails the test when none was. */
    get command(): FakeCommand {
      const command = launched[0];
      if (!command) throw new Error(`no command was launched\nstderr: ${io.stderr.text}`);
      return command;
    },
    /** A signal to queenctl, as cli.ts handles it: relayed to the command while one runs. */
    signal(signal: NodeJS.Signals): void {
      if (relay) relay(signal);
      else controller.abort(signal);
    },
    get relaying(): boolean {
      return relay !== null;
    },
    /** Moves fake time on in steps, letting every reaction run, until the watch ends. */
    async advance(ms: number, stepMs = 10) {
      await flush();
      for (let moved = 0; moved < ms && code === null && !crashed; moved += stepMs) {
        clock.advance(stepMs);
        await flush();
      }
    },
  };
}
