// undici ships types for its index only; this module is what the index re-exports. Imported by
// broker/undici-transport.ts alone, which keeps undici's index off the start-up path.
declare module 'undici/lib/dispatcher/agent.js' {
  import { Agent } from 'undici';
  export default Agent;
}
