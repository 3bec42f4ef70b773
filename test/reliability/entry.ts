/**
 * queenctl for the reliability suite: main() from the compiled sources, exactly what the
 * suite fixes and proves. (The published bin may load a bundle made by a separate build step,
 * which can lag behind the sources; this never does.)
 */
import { main } from '../../src/cli.js';

await main(process.argv.slice(2));
