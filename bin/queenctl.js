#!/usr/bin/env node
import { setFlagsFromString } from 'node:v8';

// undici parses HTTP with llhttp compiled to WebAssembly. V8's optimising tier compiles it again
// in the background and process exit waits for that (~100 ms measured): for a CLI that makes a
// handful of requests the baseline compiler is plenty. Set before undici is loaded.
setFlagsFromString('--liftoff-only');

const { main } = await import('../dist/src/cli.js');
await main(process.argv.slice(2));
