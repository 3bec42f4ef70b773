/**
 * The clock a real watch runs on: wall time at start-up plus monotonic time since. A watch
 * measures intervals and deadlines only, so a wall clock stepped by NTP in the middle of a long
 * watch must not make every deadline look passed (a false loss stops the command) or far away.
 */
import { systemClock, type Clock } from '../clock.js';

export const monotonicClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  sleep: systemClock.sleep,
};
