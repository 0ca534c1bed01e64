// A real Kafka broker for tests. Where Docker runs, testcontainers; elsewhere a single-node KRaft
// broker started from the Maven Central jars with the machine's Java (test/harness/maven.ts).
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Kafka, logLevel, type ITopicConfig } from 'kafkajs'
import { classpath, requireJava, resolveBundle } from './maven.ts'
import {
  freePort,
  HarnessError,
  makeTempDir,
  run,
  startProcess,
  waitFor,
  type ManagedProcess,
} from './process.ts'

export interface StartedKafka {
  /** host:port bootstrap addresses for kafkajs and Kafka Connect. */
  brokers: string[]
  /** Where the broker logs (a file in its temp dir; in Docker mode, none). */
  logFile: string | undefined
  stop(): Promise<void>
}

/** A broker that can go away and come back, as a real one does (fault tests). */
export interface RestartableKafka extends StartedKafka {
  logFile: string
  /** Stops the broker process (controlled shutdown), keeping its port and log dir. */
  stopBroker(): Promise<void>
  /** Starts it again on the same port and log dir; resolves once it serves. */
  startBroker(): Promise<void>
  /** Whether the broker process is up (between stopBroker and startBroker it is not). */
  brokerRunning(): boolean
}

/** The cp-kafka image whose Kafka matches the Maven path (Confluent 7.9 = Apache Kafka 3.9). */
const DOCKER_IMAGE = 'confluentinc/cp-kafka:7.9.0'

/** A kafkajs client with quiet logs, for tests and harness probes. */
export function kafkaClient(brokers: string[], clientId = 'replica-test'): Kafka {
  return new Kafka({
    clientId,
    brokers,
    logLevel: logLevel.ERROR,
    retry: { retries: 5, initialRetryTime: 100 },
  })
}

/**
 * Creates topics (1 partition, replication 1 unless given) and waits for their leaders.
 * Auto-creation is on, but tests that consume before anything is produced need the topic first.
 */
export async function createTopics(
  brokers: string[],
  topics: (string | ITopicConfig)[],
): Promise<void> {
  const admin = kafkaClient(brokers).admin()
  await admin.connect()
  try {
    await admin.createTopics({
      waitForLeaders: true,
      topics: topics.map((t) =>
        typeof t === 'string' ? { topic: t, numPartitions: 1, replicationFactor: 1 } : t,
      ),
    })
  } finally {
    await admin.disconnect()
  }
}

function dockerWorks(): boolean {
  if (process.env.REPLICA_HARNESS_DOCKER === '0') return false
  const result = spawnSync('docker', ['info'], { stdio: 'ignore', timeout: 15_000 })
  return result.status === 0
}

/** Starts a broker: testcontainers where Docker runs (REPLICA_HARNESS_DOCKER=0 opts out). */
export async function startKafka(): Promise<StartedKafka> {
  return dockerWorks() ? startKafkaInDocker() : startKafkaFromJars('startup')
}

/**
 * Starts a broker from the jars even where Docker runs: a container gets a new mapped port when it
 * restarts, and clients must find the broker again at the address they were given.
 */
export async function startRestartableKafka(
  compilation: JvmCompilation = 'startup',
): Promise<RestartableKafka> {
  return startKafkaFromJars(compilation)
}

async function startKafkaInDocker(): Promise<StartedKafka> {
  const { KafkaContainer } = await import('@testcontainers/kafka')
  const container = await new KafkaContainer(DOCKER_IMAGE).withKraft().start()
  const brokers = [`${container.getHost()}:${container.getMappedPort(9093)}`]
  await waitUntilServing(brokers, 60_000)
  return {
    brokers,
    logFile: undefined,
    async stop() {
      await container.stop()
    },
  }
}

function serverProperties(dataDir: string, port: number, controllerPort: number): string {
  return [
    // Combined broker + controller: one JVM, the smallest KRaft cluster there is.
    'process.roles=broker,controller',
    'node.id=1',
    `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
    `listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}`,
    `advertised.listeners=PLAINTEXT://127.0.0.1:${port}`,
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    'listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
    `log.dirs=${dataDir}`,
    'auto.create.topics.enable=true',
    'num.partitions=1',
    'default.replication.factor=1',
    'offsets.topic.replication.factor=1',
    'offsets.topic.num.partitions=1',
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    // Tests join groups and expect to be assigned at once, not after the 3 s default delay.
    'group.initial.rebalance.delay.ms=0',
    // Tests run rebuilds on compacted topics: let the cleaner act on small segments.
    'log.cleaner.backoff.ms=1000',
    '',
  ].join('\n')
}

export const LOG4J_PROPERTIES = [
  'log4j.rootLogger=INFO, stdout',
  'log4j.appender.stdout=org.apache.log4j.ConsoleAppender',
  'log4j.appender.stdout.layout=org.apache.log4j.PatternLayout',
  'log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n',
  // Per-request and per-segment chatter drowns the lines that explain a failure.
  'log4j.logger.kafka.request.logger=WARN',
  'log4j.logger.org.apache.kafka.storage.internals.log=WARN',
  'log4j.logger.kafka.log.LogCleaner=WARN',
  'log4j.logger.org.apache.kafka.clients=WARN',
  '',
].join('\n')

/**
 * How the harness's JVMs compile Kafka's and Debezium's code. `startup` stops at the client
 * compiler (C1): a test's broker and worker start sooner, and spend less of two cores compiling
 * code a short test barely runs. `steady` is the JVM's default tiered compilation, as Kafka's own
 * scripts start it and a deployment runs it: once warm, Connect with Debezium took a quarter to a
 * third less CPU a change at 500 and 2,000 transactions/s (docs/freshness.md), so a bench of the
 * pipeline's steady state runs with it.
 */
export type JvmCompilation = 'startup' | 'steady'

/** JVM flags for a small test process on a 2-core machine. */
export function jvmFlags(heap: string, compilation: JvmCompilation = 'startup'): string[] {
  return [
    `-Xmx${heap}`,
    '-Xms128m',
    '-XX:+UseSerialGC',
    ...(compilation === 'startup' ? ['-XX:TieredStopAtLevel=1'] : []),
    '-Djava.awt.headless=true',
  ]
}

async function startKafkaFromJars(compilation: JvmCompilation): Promise<RestartableKafka> {
  const java = requireJava()
  const jars = await resolveBundle('kafka')
  const tmp = makeTempDir('kafka')
  const logFile = join(tmp.path, 'kafka.log')
  try {
    const [port, controllerPort] = [await freePort(), await freePort()]
    const propsFile = join(tmp.path, 'server.properties')
    const log4jFile = join(tmp.path, 'log4j.properties')
    writeFileSync(propsFile, serverProperties(join(tmp.path, 'data'), port, controllerPort))
    writeFileSync(log4jFile, LOG4J_PROPERTIES)
    const cp = classpath(jars)
    const jvm = [...jvmFlags('512m', compilation), `-Dlog4j.configuration=file:${log4jFile}`]
    // KRaft refuses to start on unformatted storage; the cluster id is any random UUID. One that
    // starts with '-' reads as an option to StorageTool's argument parser (1 start in 64 failed).
    let clusterId: string
    do clusterId = randomBytes(16).toString('base64url')
    while (clusterId.startsWith('-'))
    run(java, [
      ...jvm,
      '-cp',
      cp,
      'kafka.tools.StorageTool',
      'format',
      '-t',
      clusterId,
      '-c',
      propsFile,
    ])

    const brokers = [`127.0.0.1:${port}`]
    // The same properties (port, log dir) on every start: a restart finds its data again.
    const launch = async (): Promise<ManagedProcess> => {
      const proc = startProcess('kafka', java, [...jvm, '-cp', cp, 'kafka.Kafka', propsFile], {
        logFile,
      })
      try {
        await waitUntilServing(brokers, 90_000, proc)
      } catch (error) {
        await proc.stop()
        throw error
      }
      return proc
    }
    let broker: ManagedProcess | undefined = await launch()
    return {
      brokers,
      logFile,
      async stop() {
        await broker?.stop()
        broker = undefined
        tmp.remove()
      },
      async stopBroker() {
        // A controlled shutdown can outlast the default 15 s on a busy 2-core machine.
        await broker?.stop(60_000)
        broker = undefined
      },
      async startBroker() {
        if (broker !== undefined) throw new HarnessError('the Kafka broker is already running')
        broker = await launch()
      },
      brokerRunning: () => broker !== undefined && broker.exitCode() === null,
    }
  } catch (error) {
    tmp.remove()
    throw error instanceof HarnessError
      ? error
      : new HarnessError(`Kafka failed to start: ${String(error)}`)
  }
}

/** Ready: metadata readable, a controller elected, and the group coordinator available. */
async function waitUntilServing(
  brokers: string[],
  timeoutMs: number,
  proc?: Parameters<typeof waitFor>[2]['process'],
): Promise<void> {
  const client = new Kafka({
    clientId: 'replica-harness-probe',
    brokers,
    logLevel: logLevel.NOTHING,
    retry: { retries: 0 },
    connectionTimeout: 1000,
  })
  await waitFor(
    `Kafka metadata on ${brokers.join(',')}`,
    async () => {
      const admin = client.admin()
      await admin.connect()
      try {
        const cluster = await admin.describeCluster()
        if (cluster.brokers.length === 0 || cluster.controller === null) return undefined
        // Looking up a group creates __consumer_offsets: consumers then join at once instead of
        // logging "group coordinator is not available" and backing off.
        await admin.describeGroups(['replica-harness-probe'])
        return true
      } finally {
        await admin.disconnect()
      }
    },
    { timeoutMs, intervalMs: 500, ...(proc !== undefined ? { process: proc } : {}) },
  )
}
