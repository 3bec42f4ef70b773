/**
 * "did you mean table?": the known word closest to one that was mistyped, as git, kubectl and
 * commander (for options and commands) suggest it. Distance is the optimal string alignment
 * distance (Levenshtein's edits, and two neighbours swapped counts one: `tabel` is one from
 * `table`), on lower case.
 */

/** Further than this many edits, a guess is more likely wrong than helpful. */
const MAX_EDITS = 2;

/** Edits from `a` to `b`: insert, delete, substitute, or swap two neighbours. */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) rows.push([i, ...Array<number>(b.length).fill(0)]);
  const first = rows[0] as number[];
  for (let j = 0; j <= b.length; j++) first[j] = j;
  for (let i = 1; i <= a.length; i++) {
    const row = rows[i] as number[];
    const above = rows[i - 1] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min((above[j] as number) + 1, (row[j - 1] as number) + 1, (above[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, (rows[i - 2]?.[j - 2] as number) + 1);
      }
      row[j] = best;
    }
  }
  return rows[a.length]?.[b.length] as number;
}

/**
 * The candidate closest to `word` (the first of equals), or undefined when none is within
 * MAX_EDITS edits and alike in more than half its letters (`xml` is two edits from `yaml`, but
 * not what was meant).
 */
export function closestWord(word: string, candidates: readonly string[]): string | undefined {
  const typed = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = MAX_EDITS + 1;
  for (const candidate of candidates) {
    const distance = editDistance(typed, candidate.toLowerCase());
    const length = Math.max(typed.length, candidate.length);
    if ((length - distance) / length > 0.5 && distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}
