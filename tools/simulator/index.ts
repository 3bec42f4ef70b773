/**
 * The lease broker simulator: what the tests, the demo and the benchmark import. One file per
 * concern:
 *
 *   server.ts           the HTTP(S) server, its settings, log and stats; `startSimulator`
 *   routes.ts           which broker route a request is for, and who answers it
 *   extend-route.ts     the extend route in both shapes (documented object, older array)
 *   auth.ts             bearer tokens, roles and tenants
 *   leases.ts           the lease store: leases as (queue, partition, group) rows with expiries
 *   consumer-groups.ts  each (group, queue, partition)'s holder, and the routes that list them
 *   queues.ts           queues, partitions and messages: what a pop hands out and an ack does
 *                       (one cursor per group and partition, a high-water mark), message states
 *   json-text.ts        JSON text of any depth: data deeper than V8's JSON.stringify reaches
 *   pop-ack-route.ts    the pop and ack routes: the long poll, the empty batch never answered
 *   health.ts           GET /health: healthy, or 503 unhealthy with the database disconnected
 *   faults.ts           injected faults (latency, drops, resets, statuses, bodies, hangs, holds)
 *   control.ts          the `/_sim/` control interface and its client, `SimulatorControl`
 *   request-log.ts      the log of broker requests
 *   wire.ts             bodies, paths, timestamps and answers as they travel
 *   input.ts            validation of what callers hand the simulator
 *   scene.ts            the leases of README.md's tour, for the demo and the doc tests
 *   main.ts             the simulator as its own process
 */
export type { TokenGrant } from './auth.js';
export type { WireGroup, WireGroupSummary, WirePartition } from './consumer-groups.js';
export { SimulatorControl, SimulatorControlError, type ControlConfig } from './control.js';
export { arraySeconds, documentedSeconds, type Shape } from './extend-route.js';
export { BROKER_VERSION, type DatabaseState } from './health.js';
export {
  FAULT_ROUTES,
  parseFault,
  type Fault,
  type FaultAction,
  type FaultRoute,
  type HeldCount,
  type WireFault,
} from './faults.js';
export type {
  DeadLetter,
  Delivery,
  MessageState,
  MessageStatesView,
  PushItem,
  QueueSpec,
  QueueView,
} from './queues.js';
export { stringifyAnyDepth } from './json-text.js';
export { SimulatorInputError } from './input.js';
export type { LeaseRow, LeaseSpec, LeaseView, PartitionSpec } from './leases.js';
export type { LogEntry } from './request-log.js';
export {
  startSimulator,
  type Simulator,
  type SimulatorConfig,
  type SimulatorOptions,
  type SimulatorStats,
} from './server.js';
export { mintTourScene, TOUR_QUEUE, type TourScene } from './scene.js';
export { isoMicros, isoMillis } from './wire.js';
export { startTcpFront, type TcpFront } from './tcp-front.js';
