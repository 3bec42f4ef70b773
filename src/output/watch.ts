/**
 * What `lease watch` shows, decided once:
 *
 * - `events`: `-o json`/`-o ndjson`, one event object per line on stdout, as the contract fixes.
 *   Only errors (a lost lease, a refusal) and warnings go to stderr.
 * - `yaml`: `-o yaml`, the same events as YAML documents, `---` between them; stderr as above.
 * - `spinner`: a terminal and no command to share it with: one ora line on stderr with the
 *   lease, renewals so far, time to expiry, time to the next renewal and the last error;
 *   retries, losses and notes are printed above it. More leases than the screen holds get a
 *   live summary instead (held, lost, in outage, least time left, renewals per second), and a
 *   line above it only for a lease's change of state (docs/cli-contract.md#live-views).
 * - `log`: otherwise (not a terminal, or a command writing to the same terminal, where a
 *   spinner would garble its output): one plain line per event on stderr.
 * - `quiet` (-q): errors only.
 *
 * Lines are written without waiting for a slow reader: renewals must never wait on stdout.
 * The words printed to people live here; the scheduler and the command decide what happened.
 */
import type { Clock } from '../clock.js';
import type { OutputStream } from '../io.js';
import type { ChildExit } from '../watch/supervisor.js';
import type {
  LostEvent,
  OutageEvent,
  RecoveredEvent,
  RetryEvent,
  StoppedEvent,
  WatchEvent,
} from '../renewal/events.js';
import type { CannotKeepUp } from '../renewal/concurrency.js';
import type { WatchFailure, WatchStatus } from '../renewal/scheduler.js';
import { formatCountdown, formatDuration } from './duration.js';
import { isJsonPath, type OutputFormat } from './format.js';
import type { JsonPathTemplate } from './jsonpath.js';
import { canRedraw, openLiveScreen, terminalSize } from './live.js';
import { escapeText } from './sanitise.js';
import { loadTerminalText, terminalWidth, truncateToWidth, wrapMessage } from './width.js';
import { LOST_LEASE_ACTION, lostLeaseMeaning } from './words.js';
import { yamlStringify } from './yaml.js';

/** ora's default export: the function that makes a spinner. */
type OraFactory = typeof import('ora').default;

export type WatchOutputMode = 'events' | 'yaml' | 'spinner' | 'log' | 'quiet';

/** The modes that print the event stream on stdout, which a command must then leave alone. */
export function printsEvents(mode: WatchOutputMode): boolean {
  return mode === 'events' || mode === 'yaml';
}

export interface WatchRenderer {
  event(event: WatchEvent): void;
  /** Something people should know; silenced by -q. */
  warn(text: string): void;
  /** What the watch is doing (the command started, ended); for people only, silenced by -q. */
  note(text: string): void;
  /** Always shown. `text` is complete, newline included (errorMessage's format). */
  error(text: string): void;
  close(): void;
}

export interface WatchRendererOptions {
  mode: WatchOutputMode;
  /** With `events`: each event through this template (-o jsonpath=), one line an event. */
  jsonpath?: JsonPathTemplate | undefined;
  stdout: OutputStream;
  stderr: OutputStream;
  clock: Clock;
  color: boolean;
  /** -q: with `events`, the stream still prints but warnings do not. */
  quiet: boolean;
  leaseCount: number;
  firstLeaseId: string;
  /** The spinner asks for this every time it redraws its text. */
  status: () => WatchStatus;
  /** With a command: whether it was started (a lease lost before it started stops it never ran). */
  commandStarted?: () => boolean;
  /** The environment (TERM, COLUMNS, LINES): with it, a terminal too small for the leases gets a summary. */
  env?: NodeJS.ProcessEnv | undefined;
}

/**
 * Machine events when asked for, or in a pipe without a command (contract: JSON when stdout is
 * not a terminal). With a command and no -o, stdout is the command's: events go to stderr.
 * YAML is only ever asked for (-o yaml), so it always gets the stream, -q or not.
 */
export function watchOutputMode(choice: {
  format: Exclude<OutputFormat, 'name'> | null;
  outputGiven: boolean;
  hasCommand: boolean;
  quiet: boolean;
  stderrIsTTY: boolean;
  term: string | undefined;
}): WatchOutputMode {
  const { format } = choice;
  if (format === null) return 'quiet';
  if (format === 'yaml') return 'yaml';
  // jsonpath is only ever asked for: its lines are the stream, -q or not.
  if (isJsonPath(format)) return 'events';
  if ((format === 'json' || format === 'ndjson') && (choice.outputGiven || !choice.hasCommand)) return 'events';
  if (choice.quiet) return 'quiet';
  if (choice.hasCommand || !choice.stderrIsTTY || choice.term === 'dumb') return 'log';
  return 'spinner';
}

// --- words -----------------------------------------------------------------------------------

/**
 * One line for people: every word of it escaped, since events carry the broker's words, errors and
 * ids (docs/security.md#outside-text-is-data). Colour, when any, is added after escaping.
 */
const line = (text: string, paint: (text: string) => string = (plain) => plain): string =>
  `queenctl: ${paint(escapeText(text))}\n`;
const timeOf = (at: string): string => at.slice(11, 23);
const partitions = (renewed: number): string => (renewed === 1 ? '1 partition' : `${renewed} partitions`);

export function lostWords(event: LostEvent): string {
  const what =
    event.reason === 'not-renewed'
      ? `the broker renewed nothing${event.detail ? ` (broker said: ${event.detail})` : ''}`
      : `its expiry passed with no successful renewal${event.detail ? ` (last error: ${event.detail})` : ''}`;
  return `lease ${event.leaseId} is LOST: ${what}`;
}

function retryWords(event: RetryEvent): string {
  const left =
    event.remainingMs === null ? 'not renewed yet' : `${formatDuration(event.remainingMs)} left on the lease`;
  const retry = `retry ${event.attempt} in ${formatCountdown(event.retryInMs)}`;
  return `lease ${event.leaseId}: ${event.error}; ${retry} (${left})`;
}

function stoppedWords(event: StoppedEvent, commandStarted: boolean): string {
  switch (event.reason) {
    case 'for':
      if (event.neverRenewed) return `lease ${event.leaseId}: --for has elapsed; ${event.error ?? 'never renewed'}`;
      return `lease ${event.leaseId}: --for has elapsed; no longer renewed`;
    case 'signal':
      return `lease ${event.leaseId}: interrupted; no longer renewed`;
    case 'child-exit':
      return `lease ${event.leaseId}: the command has ended; no longer renewed`;
    case 'error':
      return `lease ${event.leaseId} cannot be watched: ${event.error ?? 'error'}`;
    case 'lease-lost': {
      const command = commandStarted ? ' and the command with it' : ', so the command was not started';
      return `lease ${event.leaseId}: another lease of this watch is gone${command}; no longer renewed`;
    }
  }
}

const leasesWord = (count: number): string => (count === 1 ? '1 lease' : `${count} leases`);

function outageWords(event: OutageEvent): string {
  const left = event.remainingMs === null ? '' : `, the first expires in ${formatDuration(event.remainingMs)}`;
  return (
    `the broker is down: ${event.error}. ${leasesWord(event.leases)} wait for it${left}; ` +
    'one request at a time probes it until it answers'
  );
}

function recoveredWords(event: RecoveredEvent): string {
  return (
    `the broker answers again after ${formatDuration(event.downMs)} down; renewing the ` +
    `${leasesWord(event.leases)} that fell due meanwhile, least time left first`
  );
}

/** The outage still on, for people: said at most every OUTAGE_REFRESH_MS. */
export function outageStillWords(outage: NonNullable<WatchStatus['outage']>, status: WatchStatus, now: number): string {
  const left =
    status.earliestDeadline === null ? '' : `, the first expires in ${formatDuration(status.earliestDeadline - now)}`;
  return (
    `the broker is still down after ${formatDuration(now - outage.since)}: ` +
    `${leasesWord(outage.leases)} waiting${left}` +
    `${outage.error ? `; last error: ${outage.error}` : ''}`
  );
}

/** When even the ceiling cannot renew every lease before it expires: the numbers, and what to change. */
export function cannotKeepUpWarning(shortfall: CannotKeepUp): string {
  const perSecond = (rate: number): string => `${rate < 10 ? rate.toFixed(1) : Math.round(rate)}`;
  const gives = shortfall.givesPerSecond === null ? 'fewer' : `about ${perSecond(shortfall.givesPerSecond)}/s`;
  const latency = shortfall.latencyMs === null ? '' : ` (${Math.round(shortfall.latencyMs)}ms a renewal)`;
  const at = shortfall.concurrencyGiven
    ? `at --concurrency ${shortfall.ceiling}`
    : `at ${shortfall.ceiling} requests in flight, the most without --concurrency`;
  const change = shortfall.concurrencyGiven
    ? `raise --concurrency (now ${shortfall.ceiling})`
    : `--concurrency cannot go above ${shortfall.ceiling}`;
  return (
    `cannot keep up: ${leasesWord(shortfall.leases)} renewed every ${formatDuration(shortfall.everyMs)} need ` +
    `${perSecond(shortfall.plannedPerSecond)} renewals/s (at least ${perSecond(shortfall.neededPerSecond)}/s, or ` +
    `leases expire unrenewed), but the broker gives ${gives} ${at}${latency}. To keep them: ${change}, ` +
    'raise --seconds (longer leases need fewer renewals), or watch fewer leases per watch'
  );
}

export function eventWords(event: WatchEvent, commandStarted = true): string {
  switch (event.event) {
    case 'renewed':
      return (
        `lease ${event.leaseId} renewed (${partitions(event.renewed)}) until ${event.expiresAt}: ` +
        `${formatDuration(event.remainingMs)} left, next renewal in ${formatCountdown(event.nextRenewalInMs)}`
      );
    case 'retry':
      return retryWords(event);
    case 'lost':
      return lostWords(event);
    case 'stopped':
      return stoppedWords(event, commandStarted);
    case 'outage':
      return outageWords(event);
    case 'recovered':
      return recoveredWords(event);
  }
}

/**
 * What losing a lease means, said once per run after the first loss. A lease whose expiry passed
 * while the broker failed is not "expired, released, or another tenant's": queenctl saw why.
 */
export function lostMeaning(event?: LostEvent): string {
  if (event?.reason === 'expired' && event.detail) {
    return (
      `  It expired while the broker did not renew it (${event.detail}): the batch is no longer held,\n` +
      `  and another worker may take it once the broker answers.\n  ${LOST_LEASE_ACTION}\n`
    );
  }
  return `  ${lostLeaseMeaning(false)}\n  ${LOST_LEASE_ACTION}\n`;
}

export function watchFailureMessage(failure: WatchFailure, count: number): string {
  const which = count > 1 ? `${count} leases, first ${failure.leaseId},` : `lease ${failure.leaseId}`;
  return (
    line(`${which} could not be watched: ${failure.message}`) + (failure.hint ? `  ${escapeText(failure.hint)}\n` : '')
  );
}

export function tokenOnCommandLineHint(): string {
  return (
    '--token on the command line shows in ps to every user for as long as the watch runs; ' +
    'use QUEEN_TOKEN or --token-file'
  );
}

export function everyTooLongWarning(everyMs: number, seconds: number, marginMs: number): string {
  return (
    `--every ${formatDuration(everyMs)} is not shorter than the lease (--seconds ${seconds}): ` +
    `each renewal comes ${formatDuration(marginMs)} before the expiry instead`
  );
}

export function childStartedNote(command: string, pid: number, leaseCount: number): string {
  const which = leaseCount === 1 ? 'the lease' : `all ${leaseCount} leases`;
  return `${which} renewed; started ${command} (pid ${pid}, its own process group)`;
}

export function childNotStartedNote(command: string): string {
  return `${command} was not started: the lease was not renewed`;
}

export function childStartFailed(command: string, exit: ChildExit): string {
  const code = exit.startError?.code;
  const why =
    code === 'ENOENT'
      ? 'not found (check the name and PATH)'
      : code === 'EACCES'
        ? 'permission denied: it is not an executable file, or a directory on its way cannot be searched ' +
          '(check it with ls -l; chmod +x makes a script executable)'
        : (exit.startError?.message ?? 'cannot be run');
  return line(`cannot run ${command}: ${why}`);
}

export function childExitedNote(command: string, exit: ChildExit): string {
  const how = exit.signal ? `was ended by ${exit.signal}` : `exited with status ${exit.code}`;
  return `${command} ${how}; renewal stopped`;
}

export function forwardedNote(signal: NodeJS.Signals, command: string, killAfterMs: number): string {
  const limit = signal === 'SIGHUP' ? '' : `, SIGKILL in ${formatCountdown(killAfterMs)} if it ignores it`;
  return (
    `${signal}: passed on to ${command} and its process group; ` +
    `waiting for it to exit${limit} (renewal goes on meanwhile)`
  );
}

export function stoppingChildOnLoss(command: string, killAfterMs: number): string {
  const kill = `SIGKILL in ${formatCountdown(killAfterMs)} if it is still running`;
  return line(`stopping ${command}: SIGTERM to its process group now, ${kill}`);
}

export function stoppingChildOnRefusal(command: string, killAfterMs: number): string {
  const stop = `SIGTERM to its process group, SIGKILL in ${formatCountdown(killAfterMs)}`;
  return line(`stopping ${command}: the lease cannot be renewed any more; ${stop}`);
}

export function killedAfterNote(command: string, killAfterMs: number): string {
  return line(
    `${command}'s process group was still running ${formatDuration(killAfterMs)} after SIGTERM: sent SIGKILL to it`,
  );
}

export function leftoverNote(command: string, killAfterMs: number): string {
  return (
    `${command} exited but left processes running in its process group; they are no longer covered ` +
    `by a renewed lease: SIGTERM now, SIGKILL in ${formatCountdown(killAfterMs)}`
  );
}

function stillDownLine(status: WatchStatus, now: number): string {
  const outage = status.outage as NonNullable<WatchStatus['outage']>;
  return `${new Date(now).toISOString().slice(11, 23)} ${outageStillWords(outage, status, now)}`;
}

export function spinnerText(status: WatchStatus, now: number, leaseCount: number, leaseId: string): string {
  const parts: string[] = [];
  const expiry = status.earliestDeadline === null ? null : formatDuration(status.earliestDeadline - now);
  const next = status.nextRenewalAt === null ? null : formatCountdown(status.nextRenewalAt - now);
  if (leaseCount === 1) {
    parts.push(`lease ${leaseId}: ${status.renewals} renewal${status.renewals === 1 ? '' : 's'}`);
    parts.push(expiry === null ? 'not renewed yet' : `expires in ${expiry}`);
  } else {
    parts.push(`${leaseCount} leases: ${status.held} held, ${status.lost} lost, ${status.renewals} renewals`);
    if (expiry !== null) parts.push(`earliest expiry in ${expiry}`);
  }
  if (status.outage) {
    // The one fact that matters while it lasts, instead of the next renewal.
    const probe =
      status.outage.nextProbeAt === null ? '' : `, next probe in ${formatCountdown(status.outage.nextProbeAt - now)}`;
    parts.push(`BROKER DOWN for ${formatDuration(now - status.outage.since)}${probe}`);
  } else if (next !== null) parts.push(`next renewal in ${next}`);
  if (status.lastError) {
    const ago = status.lastErrorAt === null ? '' : ` ${formatDuration(now - status.lastErrorAt)} ago`;
    parts.push(`last error${ago}: ${status.lastError}`);
  }
  return parts.join(', ');
}

// --- renderers -------------------------------------------------------------------------------

const SPINNER_REFRESH_MS = 250;
/** While an outage lasts, a line says it is still on this often (log mode). */
export const OUTAGE_REFRESH_MS = 5_000;

/**
 * ora moves the cursor: a stream that only looks like a terminal (a wrapper) cannot carry it,
 * and a terminal of no width (a pty nobody sized) would make it clear lines without end.
 */
function canSpin(stream: OutputStream): boolean {
  const tty = stream as OutputStream & {
    clearLine?: unknown;
    cursorTo?: unknown;
    moveCursor?: unknown;
    columns?: number;
  };
  const moves =
    typeof tty.clearLine === 'function' && typeof tty.cursorTo === 'function' && typeof tty.moveCursor === 'function';
  return Boolean(stream.isTTY) && moves && (tty.columns ?? 0) > 0;
}

const ndjsonEvent = (event: WatchEvent): string => `${JSON.stringify(event)}\n`;

/**
 * Each event as one YAML document with the keys of its JSON form, `---` between documents as
 * `kubectl get -w -o yaml` prints them. yaml is loaded only here: only -o yaml pays for it.
 */
async function yamlDocuments(): Promise<(event: WatchEvent) => string> {
  const stringify = await yamlStringify();
  let first = true;
  return (event) => {
    const document = stringify(event);
    if (first) {
      first = false;
      return document;
    }
    return `---\n${document}`;
  };
}

/** Lines of the screen kept for the summary and the lines above it: more leases than the rest get a summary. */
export const SUMMARY_MARGIN = 4;

/** Renewals per second over the last WINDOW_MS, measured on the watch's clock. */
export class RenewalRate {
  static readonly WINDOW_MS = 10_000;
  private samples: Array<{ at: number; renewals: number }> = [];

  /** The count of renewals at `at`; then the rate, null until two instants were seen. */
  sample(at: number, renewals: number): number | null {
    const last = this.samples.at(-1);
    if (last && last.at === at) last.renewals = renewals;
    else this.samples.push({ at, renewals });
    while ((this.samples[0] as { at: number }).at < at - RenewalRate.WINDOW_MS) this.samples.shift();
    const first = this.samples[0] as { at: number; renewals: number };
    return at > first.at ? ((renewals - first.renewals) * 1000) / (at - first.at) : null;
  }
}

/** The summary of a watch of many leases: what a screen too small for a line each shows. */
export function summaryLines(status: WatchStatus, now: number, leaseCount: number, rate: number | null): string[] {
  const inOutage = status.outage ? status.outage.leases : 0;
  const least = status.earliestDeadline === null ? 'none renewed yet' : formatDuration(status.earliestDeadline - now);
  const perSecond = rate === null ? '-' : rate < 10 ? rate.toFixed(1) : String(Math.round(rate));
  const first =
    `${leaseCount} leases: ${status.held} held, ${status.lost} lost, ${inOutage} in outage · ` +
    `least time left ${least} · ${perSecond} renewals/s`;
  const parts: string[] = [];
  if (status.outage) {
    const probe =
      status.outage.nextProbeAt === null ? '' : `, next probe in ${formatCountdown(status.outage.nextProbeAt - now)}`;
    parts.push(`BROKER DOWN for ${formatDuration(now - status.outage.since)}${probe}`);
  } else if (status.nextRenewalAt !== null)
    parts.push(`next renewal in ${formatCountdown(status.nextRenewalAt - now)}`);
  if (status.lastError) {
    const ago = status.lastErrorAt === null ? '' : ` ${formatDuration(now - status.lastErrorAt)} ago`;
    parts.push(`last error${ago}: ${status.lastError}`);
  }
  parts.push('Ctrl+C stops');
  return [first, parts.join(' · ')];
}

export async function watchRenderer(options: WatchRendererOptions): Promise<WatchRenderer> {
  const { stdout, stderr, env } = options;
  if (
    options.mode === 'spinner' &&
    env !== undefined &&
    canRedraw(stderr, env) &&
    options.leaseCount > terminalSize(stderr, env).rows - SUMMARY_MARGIN
  ) {
    return summaryRenderer(options, env);
  }
  const mode = options.mode === 'spinner' && !canSpin(stderr) ? 'log' : options.mode;
  const words = (event: WatchEvent): string => eventWords(event, options.commandStarted?.() ?? true);
  // On a terminal, lines for people are wrapped to its width (their next lines two spaces in) and
  // the spinner's line cut to it (a wrapped spinner line cannot be redrawn); off one, unchanged
  // (docs/cli-contract.md#fitting-the-terminal).
  const width = env === undefined ? undefined : terminalWidth(stderr, env);
  const text = width === undefined ? undefined : await loadTerminalText();
  const fitted = (said: string): string => (width === undefined || !text ? said : wrapMessage(said, width, text));
  let explainedLoss = false;
  const explainLoss = (event?: LostEvent): void => {
    if (explainedLoss) return;
    explainedLoss = true;
    stderr.write(fitted(lostMeaning(event)));
  };

  if (mode === 'events' || mode === 'yaml' || mode === 'quiet') {
    const { jsonpath } = options;
    const events = jsonpath ? (event: WatchEvent) => jsonpath.renderLine(event) : ndjsonEvent;
    const serialize = mode === 'events' ? events : mode === 'yaml' ? await yamlDocuments() : null;
    return {
      event(event) {
        if (serialize) stdout.write(serialize(event));
        // A loss is the one event people must see whatever was asked for. Errors that end a
        // lease's watch are summed up once by the command instead of once per lease.
        if (event.event !== 'lost') return;
        stderr.write(fitted(line(words(event))));
        explainLoss(event);
      },
      warn: (text) => void (!options.quiet && stderr.write(line(`warning: ${text}`))),
      note: () => {},
      error: (text) => void stderr.write(text),
      close: () => {},
    };
  }

  if (mode === 'log') {
    // One line when an outage starts and ends, and one every few seconds while it lasts.
    let outageTimer: NodeJS.Timeout | undefined;
    const stillDown = (): void => {
      const status = options.status();
      if (status.outage) stderr.write(fitted(line(stillDownLine(status, options.clock.now()))));
    };
    return {
      event(event) {
        stderr.write(fitted(line(`${timeOf(event.at)} ${words(event)}`)));
        if (event.event === 'lost') explainLoss(event);
        if (event.event === 'outage') outageTimer ??= setInterval(stillDown, OUTAGE_REFRESH_MS).unref();
        if (event.event === 'recovered') outageTimer = void clearInterval(outageTimer);
      },
      warn: (warning) => void stderr.write(fitted(line(`warning: ${warning}`))),
      note: (note) => void stderr.write(fitted(line(note))),
      error: (error) => void stderr.write(fitted(error)),
      close: () => clearInterval(outageTimer),
    };
  }

  // Loaded only here: every other run of queenctl would pay for ora's start-up. ora is an ES
  // module only; bundled, it comes through a CommonJS file of its own (scripts/bundle.mjs), and
  // Node's interop rules then make its whole namespace the default export: its function is the
  // namespace's `default`. Run from source, import() gives the function itself.
  const loaded = (await import('ora')) as { default: OraFactory | { default: OraFactory } };
  const ora = typeof loaded.default === 'function' ? loaded.default : loaded.default.default;
  const { loadStyle } = await import('./style.js');
  const style = await loadStyle(options.color);
  const spinner = ora({
    stream: stderr as unknown as NodeJS.WritableStream,
    isEnabled: true,
    // ora would otherwise put the terminal in raw mode and swallow what is typed.
    discardStdin: false,
    color: options.color ? 'cyan' : false,
  });
  const refresh = (): void => {
    const said = escapeText(
      spinnerText(options.status(), options.clock.now(), options.leaseCount, options.firstLeaseId),
    );
    // The spinner's frame and a space take two columns, and the last three stay free: for the
    // `^C` a terminal echoes after the line when the operator stops the watch, and for the cursor,
    // which a line that fills the terminal leaves at its margin. Either would wrap the line, and
    // ora would then clear one line short, leaving a stale spinner line on the screen.
    spinner.text = width === undefined || !text ? said : truncateToWidth(said, width - 5, text.stringWidth);
  };
  refresh();
  spinner.start();
  const timer = setInterval(refresh, SPINNER_REFRESH_MS);
  // ora redraws itself around lines written to its stream while it spins.
  const above = (said: string): void => void stderr.write(fitted(said));
  return {
    event(event) {
      if (event.event === 'renewed') return refresh();
      const said = words(event);
      const bad =
        event.event === 'lost' ||
        event.event === 'outage' ||
        (event.event === 'stopped' && (event.reason === 'error' || event.neverRenewed === true));
      const paint = bad ? style.bad : event.event === 'retry' ? style.warn : (plain: string) => plain;
      above(line(`${timeOf(event.at)} ${said}`, paint));
      if (event.event === 'lost') explainLoss(event);
      refresh();
    },
    warn: (text) => above(line(`warning: ${text}`, style.warn)),
    note: (text) => above(line(text)),
    error: (text) => above(text),
    close() {
      clearInterval(timer);
      spinner.stop();
    },
  };
}

/**
 * More leases than the screen holds: the summary redrawn in place on stderr, and above it a line
 * only when a lease changes state (its first failed renewal, its renewal after failures, its
 * loss, a watch it could not start) or the broker does (an outage, its end). Renewals on time
 * print nothing; the leases stopped together at the end (a signal, --for) are said in one line.
 */
async function summaryRenderer(options: WatchRendererOptions, env: NodeJS.ProcessEnv): Promise<WatchRenderer> {
  const { stderr, clock } = options;
  const screen = await openLiveScreen(stderr, env);
  const { loadStyle } = await import('./style.js');
  const style = await loadStyle(options.color);
  const words = (event: WatchEvent): string => eventWords(event, options.commandStarted?.() ?? true);
  const rate = new RenewalRate();
  /** Once the leases stop together, the frame of before stays: what the operator saw last. */
  let frozen = false;
  const draw = (): void => {
    if (frozen) return;
    const now = clock.now();
    const status = options.status();
    const lines = summaryLines(status, now, options.leaseCount, rate.sample(now, status.renewals));
    screen.draw(lines.map((text) => escapeText(text)));
  };
  // Events come by the hundred in one turn: one frame for them all.
  let pending = false;
  const soon = (): void => {
    if (pending) return;
    pending = true;
    setImmediate(() => {
      pending = false;
      draw();
    }).unref();
  };
  let explainedLoss = false;
  const above = (text: string): void => screen.above(text);
  /** Leases whose last renewal failed: their next success is a change of state too. */
  const failing = new Set<string>();
  const stoppedTogether = new Map<string, number>();
  draw();
  const timer = setInterval(draw, SPINNER_REFRESH_MS);
  timer.unref();
  return {
    event(event) {
      soon();
      if (event.event === 'renewed') {
        if (!failing.delete(event.leaseId)) return;
        return above(line(`${timeOf(event.at)} ${words(event)}`, style.ok));
      }
      if (event.event === 'retry') {
        if (failing.has(event.leaseId)) return;
        failing.add(event.leaseId);
        return above(line(`${timeOf(event.at)} ${words(event)}`, style.warn));
      }
      if (event.event === 'stopped' && event.reason !== 'error' && event.neverRenewed !== true) {
        frozen = true;
        stoppedTogether.set(event.reason, (stoppedTogether.get(event.reason) ?? 0) + 1);
        return;
      }
      const bad = event.event === 'lost' || event.event === 'outage' || event.event === 'stopped';
      above(line(`${timeOf(event.at)} ${words(event)}`, bad ? style.bad : (plain: string) => plain));
      if (event.event === 'lost' && !explainedLoss) {
        explainedLoss = true;
        above(lostMeaning(event));
      }
    },
    warn: (text) => above(line(`warning: ${text}`, style.warn)),
    note: (text) => above(line(text)),
    error: (text) => above(text),
    close() {
      clearInterval(timer);
      for (const [reason, count] of stoppedTogether) {
        const why =
          reason === 'signal'
            ? 'interrupted'
            : reason === 'for'
              ? '--for has elapsed'
              : reason === 'child-exit'
                ? 'the command has ended'
                : 'another lease of this watch is gone';
        above(line(`${leasesWord(count)}: ${why}; no longer renewed`));
      }
      screen.close();
    },
  };
}

/** Where --metrics-address listens, with the port picked when :0 asked for one. */
export function metricsServedNote(address: string, probes = true): string {
  return `queenctl: serving metrics on http://${address}/metrics${probes ? ' (and /livez, /readyz)' : ''}\n`;
}
