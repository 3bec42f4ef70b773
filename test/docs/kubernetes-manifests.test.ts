/**
 * docs/kubernetes.md and its manifests in docs/examples/: each parses, and each container that
 * runs queenctl has a command line queenctl's own parser takes. The command line is run
 * in-process (`run` of src/cli.ts) as the kubelet would start it, `$(VAR)` expanded from the
 * container's env, with the broker unreachable: a line the parser takes reaches the broker and
 * exits 2 saying it cannot reach it; one it refuses exits 1 (docs/cli-contract.md, Exit codes)
 * before sending anything. Also: the metrics port, the probes, the PodMonitor and the scrape
 * config point at one another; the consumer's ScaledObject scales its Deployment on the series
 * the queue-depth exporter serves, at --parallel partitions a pod; the Dockerfile copies the
 * executable from the image of this version; kubernetes.md links to every example.
 *
 * A `lease run --follow` line does not end on an unreachable broker (it rides outages out): it is
 * started, given until it says it cannot reach the broker (or 5 s), and stopped with SIGTERM, as
 * the kubelet stops it; its flags passed the parser when it served metrics and exited other than 1.
 * The alert rules (prometheus-alerts*.yml) are tested with promtool where they are written, not here.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { Clock } from '../../src/clock.js';
import { parseDuration } from '../../src/args.js';
import { parseMetricsAddress } from '../../src/metrics/address.js';
import { VERSION } from '../../src/version.js';
import { runInProcess, startInProcess } from '../support/in-process.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const EXAMPLES = join(ROOT, 'docs', 'examples');
/** Written and tested by the metrics work (docs/metrics.md), linked from kubernetes.md. */
const ALERTS = /^prometheus-alerts.*\.ya?ml$/;
/** Nothing listens there: a run that reaches the broker fails to connect at once. */
const UNREACHABLE = 'http://127.0.0.1:1';
/** What a `lease run --follow` gets to try the broker before it is stopped: a limit, not a wait. */
const FOLLOW_TRIES_MS = 5_000;

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: unknown;
}
interface Probe {
  httpGet?: { path: string; port: string | number };
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
}
interface PodTemplate {
  metadata: { labels: Record<string, string> };
  spec: {
    containers: Container[];
    terminationGracePeriodSeconds?: number;
    restartPolicy?: string;
    hostNetwork?: boolean;
  };
}
interface Manifest {
  file: string;
  apiVersion: string;
  kind: string;
  metadata: { name?: string; generateName?: string; labels?: Record<string, string> };
  spec: Record<string, unknown>;
}

const exampleFiles = readdirSync(EXAMPLES).sort();
const yamlFiles = exampleFiles.filter((file) => /\.ya?ml$/.test(file) && !ALERTS.test(file));

/**
 * A file's YAML documents. The Job is a template its dispatcher fills with envsubst: `${NAME}`
 * becomes `test-name` here, as envsubst would put a value there.
 */
function documents(file: string): unknown[] {
  const text = readFileSync(join(EXAMPLES, file), 'utf8').replace(/\$\{(\w+)\}/g, (_, name) => `test-${name}`);
  return parseAllDocuments(text).map((document) => {
    assert.deepEqual(document.errors, [], `${file}: ${document.errors.join('; ')}`);
    return document.toJS();
  });
}

const manifests: Manifest[] = yamlFiles
  .filter((file) => file !== 'prometheus.yml')
  .flatMap((file) => documents(file).map((document) => ({ file, ...(document as Omit<Manifest, 'file'>) })));

function podTemplate(manifest: Manifest): PodTemplate | undefined {
  if (manifest.kind === 'Deployment' || manifest.kind === 'Job') return manifest.spec.template as PodTemplate;
  if (manifest.kind === 'CronJob')
    return (manifest.spec.jobTemplate as { spec: { template: PodTemplate } }).spec.template;
  return undefined;
}

const queenctlContainers = manifests.flatMap((manifest) =>
  (podTemplate(manifest)?.spec.containers ?? [])
    .filter((container) => container.command?.[0] !== undefined && basename(container.command[0]) === 'queenctl')
    .map((container) => ({ manifest, pod: podTemplate(manifest) as PodTemplate, container })),
);

/**
 * The kubelet's expansion of `$(VAR)` in command and args: the container's env, in order; a
 * reference to a variable it does not define stays as written, which is a mistake here.
 * valueFrom (a Secret, a ConfigMap) stands for a value of the cluster's: `from-<name>`.
 */
function expand(container: Container): { argv: string[]; env: Record<string, string> } {
  const env: Record<string, string> = {};
  for (const variable of container.env ?? []) env[variable.name] = variable.value ?? `from-${variable.name}`;
  const argv = [...(container.command ?? []).slice(1), ...(container.args ?? [])].map((arg) =>
    arg.replace(/\$\$|\$\((\w+)\)/g, (whole, name) => {
      if (whole === '$$') return '$';
      assert.ok(name in env, `$(${name}) in ${container.name}'s command line is not in its env`);
      return env[name] as string;
    }),
  );
  return { argv, env };
}

/**
 * A clock that skips every wait at once: a watch of an unreachable broker gives up after
 * --seconds of its own time, without the test waiting for them.
 */
function skippingClock(): Clock {
  let skipped = 0;
  return {
    now: () => Date.now() + skipped,
    sleep: async (ms, signal) => {
      if (signal?.aborted) throw signal.reason;
      skipped += Math.max(0, ms);
      await new Promise((resolve) => setImmediate(resolve));
      if (signal?.aborted) throw signal.reason;
    },
  };
}

/** A queenctl command line's own words: what comes before `--` (after it, the worker's). */
function optionsOf(argv: readonly string[]): string[] {
  const separator = argv.indexOf('--');
  return separator < 0 ? [...argv] : argv.slice(0, separator);
}

/**
 * A `lease run --follow` line against the unreachable broker: it must get past the parser (bind
 * its listener and try the broker), then end on SIGTERM with its batches settled; a flag the
 * parser refuses ends it at once with 1 and nothing served.
 */
async function followParses(argv: readonly string[], local: string[], env: Record<string, string>): Promise<void> {
  const run = startInProcess(local, { env: { ...env, QUEEN_SERVER: UNREACHABLE }, timeoutMs: 30_000 });
  const tried = run.waitForStderr(/cannot reach the broker/, FOLLOW_TRIES_MS).then(
    () => true,
    () => false,
  );
  const ended = await Promise.race([run.exited.then(() => true), tried.then(() => false)]);
  if (!ended) run.kill('SIGTERM');
  const result = await run.exited;
  const said = `${argv.join(' ')}\nexit ${result.code}\n${result.stderr}`;
  assert.equal(result.killed, false, said);
  assert.doesNotMatch(result.stderr, /unknown option|usage/i, said);
  assert.notEqual(result.code, 1, said);
  if (optionsOf(argv).includes('--metrics-address')) assert.match(result.stderr, /serving metrics on http:\/\//, said);
}

describe('docs/examples: the manifests', () => {
  it('every file parses, and each manifest has an apiVersion, a kind and a name', () => {
    assert.ok(yamlFiles.includes('worker-deployment.yaml') && yamlFiles.includes('batch-job.yaml'), yamlFiles.join());
    for (const manifest of manifests) {
      assert.match(manifest.apiVersion ?? '', /^[\w.]+(\/v\w+)?$|^v1$/, `${manifest.file}: apiVersion`);
      assert.match(manifest.kind ?? '', /^[A-Z]\w+$/, `${manifest.file}: kind`);
      assert.ok(manifest.metadata?.name ?? manifest.metadata?.generateName, `${manifest.file}: a name`);
    }
  });

  it('a Deployment and a Job run lease watch, a Deployment lease run, each wrapping the worker', () => {
    const kinds = queenctlContainers.map(({ manifest, container }) => {
      const { argv } = expand(container);
      assert.equal(argv[0], 'lease', `${manifest.file}: ${argv.join(' ')}`);
      assert.ok(argv[1] === 'watch' || argv[1] === 'run', `${manifest.file}: ${argv.join(' ')}`);
      const separator = argv.indexOf('--');
      assert.ok(separator > 2 && argv.length > separator + 1, `${manifest.file}: -- <worker> after the lease id`);
      return `${argv[1]} in a ${manifest.kind}`;
    });
    assert.deepEqual([...new Set(kinds)].sort(), ['run in a Deployment', 'watch in a Deployment', 'watch in a Job']);
  });

  for (const file of new Set(queenctlContainers.map(({ manifest }) => manifest.file))) {
    it(`${file}: its queenctl command lines parse (they reach the broker, not exit 1: usage)`, async () => {
      const runs = queenctlContainers.filter(({ manifest }) => manifest.file === file);
      for (const { container } of runs) {
        const { argv, env } = expand(container);
        // The manifest's port is the pod's; here any free port on loopback will do.
        const local = argv.map((arg, i) => (argv[i - 1] === '--metrics-address' ? '127.0.0.1:0' : arg));
        if (optionsOf(argv).includes('--follow')) {
          await followParses(argv, local, env);
          continue;
        }
        const result = await runInProcess(local, {
          env: { ...env, QUEEN_SERVER: UNREACHABLE },
          clock: skippingClock(),
          timeoutMs: 30_000,
        });
        const said = `${argv.join(' ')}\nexit ${result.code}\n${result.stderr}`;
        assert.equal(result.killed, false, said);
        assert.equal(result.code, 2, said);
        assert.match(result.stderr, /cannot reach the broker at http:\/\/127\.0\.0\.1:1/, said);
        assert.doesNotMatch(result.stderr, /unknown option|usage/i, said);
        assert.equal(result.stdout, '', said);
      }
    });
  }

  it('queenctl serves metrics on the port named metrics, which the probes and scrapers use', () => {
    assert.ok(queenctlContainers.length > 0);
    for (const { manifest, pod, container } of queenctlContainers) {
      // The pod's address from the downward API, or every interface of the pod's own network
      // namespace: what the kubelet's probes and Prometheus reach, by IP, which the listener's
      // Host check lets through (docs/metrics.md, "Who may connect"). Never every interface of a
      // node (hostNetwork).
      const args = container.args ?? [];
      assert.ok(args.includes('--metrics-address'), `${manifest.file}: --metrics-address`);
      const address = args[args.indexOf('--metrics-address') + 1] as string;
      assert.match(address, /^(\$\(POD_IP\))?:\d+$/, `${manifest.file}: --metrics-address`);
      const parsed = parseMetricsAddress(address.replace('$(POD_IP)', '10.1.2.3'));
      if (address.startsWith('$(POD_IP)')) {
        const podIp = container.env?.find((variable) => variable.name === 'POD_IP');
        assert.deepEqual(podIp?.valueFrom, { fieldRef: { fieldPath: 'status.podIP' } }, `${manifest.file}: POD_IP`);
        assert.equal(parsed.host, '10.1.2.3');
      } else {
        assert.notEqual(pod.spec.hostNetwork, true, `${manifest.file}: every interface of the node`);
      }
      const port = container.ports?.find((candidate) => candidate.name === 'metrics');
      assert.equal(port?.containerPort, parsed.port, `${manifest.file}: the port named metrics`);
      assert.deepEqual(container.livenessProbe?.httpGet, { path: '/livez', port: 'metrics' }, manifest.file);
      if (manifest.kind === 'Deployment')
        assert.deepEqual(container.readinessProbe?.httpGet, { path: '/readyz', port: 'metrics' }, manifest.file);
      // The kubelet's SIGKILL comes after queenctl's own: --drain, then --kill-after (10s unless given).
      const options = optionsOf(expand(container).argv);
      const flag = (name: string, otherwise: number): number =>
        options.includes(name) ? parseDuration(options[options.indexOf(name) + 1] as string, name) : otherwise;
      const stopsWithinMs = flag('--drain', 0) + flag('--kill-after', 10_000);
      assert.ok(
        (pod.spec.terminationGracePeriodSeconds ?? 30) * 1000 > stopsWithinMs,
        `${manifest.file}: terminationGracePeriodSeconds over ${stopsWithinMs} ms`,
      );
      assert.equal(pod.metadata.labels['app.kubernetes.io/component'], 'queen-worker', manifest.file);
    }

    const podMonitor = manifests.find((manifest) => manifest.kind === 'PodMonitor');
    assert.ok(podMonitor, 'a PodMonitor');
    const selector = (podMonitor.spec.selector as { matchLabels: Record<string, string> }).matchLabels;
    for (const { pod } of queenctlContainers)
      for (const [label, value] of Object.entries(selector)) assert.equal(pod.metadata.labels[label], value);
    const endpoints = podMonitor.spec.podMetricsEndpoints as { port: string; path: string }[];
    assert.deepEqual(
      endpoints.map(({ port, path }) => ({ port, path })),
      [{ port: 'metrics', path: '/metrics' }],
    );
  });

  it('the consumer: lease run in a Deployment that KEDA scales on the backlog the exporter serves', () => {
    const consumers = queenctlContainers.filter(({ container }) => expand(container).argv[1] === 'run');
    assert.equal(consumers.length, 1, 'one lease run Deployment');
    const { manifest, container } = consumers[0] as (typeof consumers)[number];
    const options = optionsOf(expand(container).argv);
    const queue = options[2] as string;
    const parallel = options[options.indexOf('--parallel') + 1];
    assert.ok(options.includes('--follow') && options.includes('--drain'), options.join(' '));
    assert.equal(manifest.spec.replicas, undefined, `${manifest.file}: the ScaledObject owns the count`);
    assert.deepEqual(container.readinessProbe?.httpGet, { path: '/readyz', port: 'metrics' });

    const scaled = manifests.find((candidate) => candidate.kind === 'ScaledObject');
    assert.ok(scaled, 'a ScaledObject');
    assert.match(scaled.apiVersion, /^keda\.sh\//);
    assert.deepEqual(scaled.spec.scaleTargetRef, { name: manifest.metadata.name });
    const [trigger, ...others] = scaled.spec.triggers as { type: string; metadata: Record<string, string> }[];
    assert.equal(others.length, 0);
    assert.equal(trigger?.type, 'prometheus');
    const { query = '', threshold, serverAddress = '', ignoreNullValues } = trigger?.metadata ?? {};
    assert.match(serverAddress, /^http:\/\//);
    // A pod works on --parallel partitions at once: the threshold per pod, over partitions with a backlog.
    assert.equal(threshold, parallel);
    assert.equal(ignoreNullValues, 'false', 'no series is an error (the fallback), not 0 pods');
    assert.ok((scaled.spec.minReplicaCount as number) >= 1);

    // The series the query reads is the one the exporter is configured to serve, for this queue.
    const exporterConfig = manifests.find(
      (candidate) => candidate.kind === 'ConfigMap' && candidate.metadata.name === 'queen-json-exporter',
    );
    assert.ok(exporterConfig, 'the exporter ConfigMap');
    const config = parseAllDocuments(
      (exporterConfig as unknown as { data: Record<string, string> }).data['config.yml'] ?? '',
    )[0]?.toJS() as {
      modules: Record<
        string,
        { metrics: { name: string; path: string; labels: Record<string, string>; values: Record<string, string> }[] }
      >;
    };
    const [moduleName, module] = Object.entries(config.modules)[0] ?? [];
    const metric = module?.metrics[0];
    assert.ok(moduleName && metric, 'a module with a metric');
    const series = `${metric.name}_${Object.keys(metric.values)[0]}`;
    const selector = new RegExp(`\\b${series}\\{([^}]*)\\}`).exec(query);
    assert.ok(selector, `${query} reads ${series}`);
    assert.ok((selector[1] as string).includes(`queue="${queue}"`), query);
    assert.ok((selector[1] as string).includes(`consumer_group="${metric.labels.consumer_group}"`), query);
    assert.equal(metric.labels.queue, queue);
    assert.equal(metric.path, `{ .${queue}.partitions[*] }`);
    assert.equal(metric.values.offset_lag, '{ .offsetLag }');

    const probe = manifests.find((candidate) => candidate.kind === 'Probe');
    assert.ok(probe, 'a Probe of the broker through the exporter');
    assert.equal(probe.spec.module, moduleName);
    const targets = (probe.spec.targets as { staticConfig: { static: string[] } }).staticConfig.static;
    assert.deepEqual(
      targets.map((target) => new URL(target).pathname),
      [`/api/v1/consumer-groups/${metric.labels.consumer_group}`],
    );
  });

  it('prometheus.yml keeps the queen workers and their port named metrics, with the alert rules', () => {
    const [config] = documents('prometheus.yml') as {
      rule_files: string[];
      scrape_configs: {
        job_name: string;
        relabel_configs: { source_labels: string[]; regex: string; action: string }[];
      }[];
    }[];
    assert.deepEqual(config?.rule_files, ['prometheus-alerts.yml', 'prometheus-alerts-run.yml']);
    const job = config?.scrape_configs.find((scrape) => scrape.job_name === 'queenctl');
    assert.ok(job, 'a queenctl scrape job');
    const keep = (label: string): RegExp => {
      const rule = job.relabel_configs.find((r) => r.action === 'keep' && r.source_labels.join() === label);
      assert.ok(rule, `a keep rule on ${label}`);
      return new RegExp(`^(?:${rule.regex})$`);
    };
    for (const { pod } of queenctlContainers)
      assert.match(
        pod.metadata.labels['app.kubernetes.io/component'] ?? '',
        keep('__meta_kubernetes_pod_label_app_kubernetes_io_component'),
      );
    assert.match('metrics', keep('__meta_kubernetes_pod_container_port_name'));
  });

  it('worker.Dockerfile copies queenctl from the image of this version onto the PATH the manifests use', () => {
    const dockerfile = readFileSync(join(EXAMPLES, 'worker.Dockerfile'), 'utf8');
    const image = /^FROM (\S+) AS queenctl$/m.exec(dockerfile)?.[1];
    assert.ok(image?.endsWith(`/queenctl:${VERSION}`), `FROM <registry>/queenctl:${VERSION} AS queenctl: ${image}`);
    assert.match(dockerfile, /^COPY --from=queenctl \/usr\/bin\/queenctl \/usr\/local\/bin\/$/m);
    assert.match(dockerfile, /^USER 65532$/m);
    assert.doesNotMatch(dockerfile, /^FROM .*alpine/im, 'the executable needs glibc');
  });
});

describe('docs/kubernetes.md', () => {
  const page = readFileSync(join(ROOT, 'docs', 'kubernetes.md'), 'utf8');

  it('links to every example, and to the alert rules', () => {
    for (const file of exampleFiles.filter((name) => !ALERTS.test(name)))
      assert.ok(page.includes(`](examples/${file})`), `no link to examples/${file}`);
    assert.ok(page.includes('](examples/prometheus-alerts.yml)'), 'no link to the alert rules');
  });

  it('names the metrics queenctl serves as they are', () => {
    const named = new Set(page.match(/\bqueenctl_[a-z_]+/g) ?? []);
    const known = [
      'queenctl_renewals_total',
      'queenctl_leases',
      'queenctl_lease_min_remaining_seconds',
      'queenctl_broker_up',
      'queenctl_command_running',
      'queenctl_run_batches_total',
      'queenctl_run_messages_total',
      'queenctl_run_leases_lost_total',
      'queenctl_run_in_flight',
      'queenctl_run_command_seconds',
      'queenctl_run_pops_total',
      'queenctl_run_broker_up',
      'queenctl_run_parallel',
    ];
    for (const metric of named) assert.ok(known.includes(metric), `${metric} is not a metric queenctl serves`);
    assert.ok(named.size > 0, 'kubernetes.md names the metrics');
  });
});
