/**
 * Waiting on real time for something a test cannot be told of (a file another process writes, a
 * process ending, a count inside a server): asked every 20 ms. The limit only turns a hang into a
 * failure that says what was awaited; it is never a verdict on the machine's speed.
 */
import { setTimeout as delay } from 'node:timers/promises';

/** What `check` returned once it was neither undefined nor false. */
export async function until<T>(check: () => T | undefined | false, what: string, patienceMs = 30_000): Promise<T> {
  const deadline = Date.now() + patienceMs;
  for (;;) {
    const found = check();
    if (found !== undefined && found !== false) return found;
    if (Date.now() > deadline) throw new Error(`timed out after ${patienceMs} ms waiting for ${what}`);
    await delay(20);
  }
}
