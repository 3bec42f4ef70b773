/**
 * The guardian of a supervised command: a small process that stops the command's process group
 * when queenctl dies without stopping it, SIGKILL and the OOM killer included (docs/security.md,
 * "A crash of queenctl"). No signal handler runs in a process killed so, and nothing is renewed
 * after it: a command left running would go on without its lease while another worker takes the
 * batch.
 *
 * queenctl starts it before the command, in a session of its own (so a SIGKILL of queenctl's
 * process group, or Ctrl+C, does not reach it), with a socket from queenctl as its standard input
 * and /dev/null as its output: it holds none of the command's streams, so a reader of them sees
 * their end when the command ends. Over that socket queenctl sends one line a message:
 *
 *   group <pgid> <killAfterMs>   the command's process group, and --kill-after
 *   release                      the group ended, or is stopped by queenctl itself: exit now
 *   forget                       the group ended; stay, for the group of the next command
 *                                (`lease run` runs one command per batch: one guardian for all)
 *
 * The end of input without `release` is queenctl's death (the kernel closes its end of the
 * socket): the group gets SIGTERM at once, and SIGKILL once `killAfterMs` has passed with any of
 * it still there. The end is an event, not a poll: the guardian sleeps in the kernel until it.
 *
 * The same code runs under the npm package's Node.js (`node -e`, the function's own source: no
 * file of the package is read, so an upgrade in the middle of a watch changes nothing) and in the
 * standalone executable, which runs itself again in guardian mode (src/standalone.ts). It must
 * therefore stay self-contained: only globals (process, timers, performance), no import.
 */

/** The argument that names a guardian in `ps` (and, for the standalone executable, asks for one). */
export const GUARDIAN_ARG = '--queenctl-guardian';
/** Set in the environment of a standalone executable started as a guardian (src/standalone.ts). */
export const GUARDIAN_ENV = 'QUEENCTL_GUARDIAN';

/** The message that names the group to guard. */
export function groupMessage(pgid: number, killAfterMs: number): string {
  return `group ${pgid} ${Math.max(0, Math.round(killAfterMs))}\n`;
}
export const RELEASE_MESSAGE = 'release\n';
export const FORGET_MESSAGE = 'forget\n';

/** The guardian itself. Self-contained: it also runs from its source text (`node -e`). */
export function guardCommandGroup(): void {
  let group = 0;
  let killAfterMs = 0;
  let input = '';
  let ending = false;
  // In a session of its own it gets neither; should one be sent to it anyway, it is not queenctl's
  // death, and the guardian stays.
  process.on('SIGINT', () => {});
  process.on('SIGHUP', () => {});
  /** Signals the group; false once none of it is left. */
  const signalGroup = (signal: NodeJS.Signals | 0): boolean => {
    try {
      process.kill(-group, signal);
      return true;
    } catch (error) {
      // EPERM: a member we may not signal (it changed user) is still there.
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  };
  const stop = (): void => {
    if (ending) return;
    ending = true;
    // No group named (queenctl died before starting the command): nothing to stop.
    if (group === 0 || !signalGroup('SIGTERM')) return process.exit(0);
    const killAt = performance.now() + killAfterMs;
    const look = (): void => {
      if (!signalGroup(0)) return process.exit(0);
      const left = killAt - performance.now();
      if (left <= 0) {
        signalGroup('SIGKILL');
        return process.exit(0);
      }
      setTimeout(look, Math.min(50, left));
    };
    setTimeout(look, Math.min(50, killAfterMs));
  };
  const onLine = (line: string): void => {
    if (line === 'release') process.exit(0);
    if (line === 'forget') {
      group = 0;
      return;
    }
    const named = /^group ([1-9][0-9]{0,9}) ([0-9]{1,10})$/.exec(line);
    // A pgid of 1 would be init's group; kill(-1) would be every process: never.
    if (named && group === 0 && Number(named[1]) > 1) {
      group = Number(named[1]);
      killAfterMs = Number(named[2]);
    }
  };
  const stdin = process.stdin;
  stdin.setEncoding('latin1');
  stdin.on('data', (chunk: string) => {
    input += chunk;
    for (let end = input.indexOf('\n'); end >= 0; end = input.indexOf('\n')) {
      onLine(input.slice(0, end));
      input = input.slice(end + 1);
    }
    if (input.length > 100) input = ''; // not a message of queenctl's
  });
  stdin.on('end', stop);
  stdin.on('close', stop);
  stdin.on('error', stop);
}
