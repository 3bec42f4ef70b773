/**
 * What a run of extend or inspect tells people on stderr after its results: leases that are
 * not held and what that means, broker errors, and why it stopped early. Keeps only a few
 * examples of each, so a run over thousands of ids stays small in memory.
 */
import type { LeaseOutcome, RenewAllSummary } from '../renewal/renew-all.js';
import { escapeText } from './sanitise.js';
import { wrapMessage, type TerminalText } from './width.js';
import { errorMessage, listSome, LOST_LEASE_ACTION, lostLeaseMeaning, warningMessage } from './words.js';

const EXAMPLES = 5;

/** What a run that stopped early left unsent (renew-all.ts), in words; none: nothing to say. */
const UNSENT: Record<RenewAllSummary['unsent'], string> = {
  none: '',
  some: 'the remaining lease ids were not sent',
  unknown: 'no further lease id was read or sent',
};

interface Group {
  count: number;
  examples: string[];
}

function addTo(groups: Map<string, Group>, key: string, example: string): void {
  const group = groups.get(key) ?? { count: 0, examples: [] };
  group.count++;
  if (group.examples.length < EXAMPLES) group.examples.push(example);
  groups.set(key, group);
}

/** The examples of a group, escaped: ids from standard input, said by the broker to be lost. */
function some(group: Group): string {
  const examples = group.examples.map(escapeText);
  const more = group.count - examples.length;
  return more > 0 ? `${examples.join(', ')} and ${more} more` : listSome(examples);
}

export class RunReport {
  /** Not-held leases, grouped by the broker's reason ('' when it gave none). */
  private readonly notHeld = new Map<string, Group>();
  private readonly errors = new Map<string, Group>();
  private readonly firstError = new Map<string, Error>();
  private readonly warnings = new Set<string>();
  /** What was done, for a run that stops early: held, not held, unknown (no answer or an error). */
  private readonly counts = { held: 0, notHeld: 0, failed: 0 };

  constructor(private readonly failure: 'was not renewed' | 'is not held') {}

  add(outcome: LeaseOutcome): void {
    if ('error' in outcome) {
      this.counts.failed++;
      const key = outcome.error.message;
      addTo(this.errors, key, outcome.leaseId);
      if (!this.firstError.has(key)) this.firstError.set(key, outcome.error);
    } else if (outcome.renewal.result.renewed === 0) {
      this.counts.notHeld++;
      addTo(this.notHeld, outcome.renewal.reason ?? '', outcome.leaseId);
    } else {
      this.counts.held++;
    }
  }

  /** `after 98 lease ids: 80 renewed, 2 not renewed, 16 unknown` (inspect: live, not held). */
  private done(): string {
    const { held, notHeld, failed } = this.counts;
    const [yes, no] = this.failure === 'was not renewed' ? ['renewed', 'not renewed'] : ['live', 'not held'];
    const tried = held + notHeld + failed;
    return `after ${tried} lease ${tried === 1 ? 'id' : 'ids'}: ${held} ${yes}, ${notHeld} ${no}, ${failed} unknown`;
  }

  warn(text: string): void {
    this.warnings.add(text);
  }

  /**
   * The stderr text; empty when every lease was fine. On a terminal (`terminal`: stderr's width
   * and the libraries that measure text) its lines are wrapped to fit, the meaning of a lost
   * lease flowed as one paragraph; elsewhere its lines are as they always were.
   */
  render(summary: RenewAllSummary, single: boolean, terminal?: { width: number; text: TerminalText }): string {
    const lines: string[] = [];
    for (const text of this.warnings) lines.push(warningMessage(text));
    for (const [message, group] of this.errors) {
      const error = this.firstError.get(message) as Error;
      // The lease is named either way: at 3 a.m. "HTTP 503" alone does not say what is at stake.
      lines.push(
        errorMessage(error).replace(
          /\n/,
          single ? `; lease ${some(group)} may or may not be held\n` : ` (lease ${some(group)})\n`,
        ),
      );
    }
    let notHeldCount = 0;
    for (const [reason, group] of this.notHeld) {
      notHeldCount += group.count;
      const said = reason ? ` (broker said: ${escapeText(reason)})` : '';
      const plural = this.failure.replace(/^was/, 'were').replace(/^is/, 'are');
      lines.push(
        group.count === 1
          ? `queenctl: lease ${some(group)} ${this.failure}${said}.\n`
          : `queenctl: ${group.count} leases ${plural}${said}: ${some(group)}.\n`,
      );
    }
    if (notHeldCount > 0) {
      const meaning = lostLeaseMeaning(notHeldCount > 1);
      lines.push(`  ${terminal ? meaning.replace(/\n +/g, ' ') : meaning}\n  ${LOST_LEASE_ACTION}\n`);
    }
    if (summary.inputError) {
      const { held, notHeld, failed } = this.counts;
      const sent = held + notHeld + failed > 0 ? '; no lease id after it was sent' : '; nothing was sent';
      lines.push(errorMessage(summary.inputError).replace(/\n/, `${sent}\n`));
    }
    // Said only of ids that were left: with --concurrency above 1 the last ones may all have
    // been in flight already when the run stopped issuing.
    const rest = UNSENT[summary.unsent];
    if (!single && summary.stoppedBy === 'auth' && rest)
      lines.push(`queenctl: stopped at the first refusal ${this.done()}: ${rest}\n`);
    if (!single && summary.stoppedBy === 'broker' && rest) {
      lines.push(`queenctl: stopped ${this.done()}: the broker kept failing; ${rest} (rerun them once it answers)\n`);
    }
    if (summary.stoppedBy === 'signal') lines.push(`queenctl: interrupted ${this.done()}${rest ? `; ${rest}` : ''}\n`);
    const text = lines.join('');
    return terminal ? wrapMessage(text, terminal.width, terminal.text) : text;
  }
}
