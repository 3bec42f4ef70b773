/**
 * queenctl's command tree for the generators, built as `run()` builds it (commands/program.ts)
 * but never parsed: no verb runs, so its globals only refuse to.
 */
import type { Command } from 'commander';
import { BUILD_INFO } from '../build-info.js';
import type { GlobalContext } from '../commands/globals.js';
import { buildProgram } from '../commands/program.js';
import { VERSION } from '../version.js';
import { describeProgram, type CommandDoc } from './model.js';

const inert: GlobalContext = {
  run: () => Promise.reject(new Error('the docs generator runs no command')),
  runLocal: () => Promise.reject(new Error('the docs generator runs no command')),
};

export function docsProgram(): Command {
  return buildProgram(inert, { version: VERSION, info: BUILD_INFO, node: process.version });
}

export function docsTree(): CommandDoc {
  return describeProgram(docsProgram());
}
