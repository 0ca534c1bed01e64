// Kafka Connect standalone with Debezium's PostgreSQL connector, from the Maven Central jars.
// The connector configuration is deploy/debezium/connector.json, the same file docker-compose
// registers; the harness only points it at the test database, broker and topic prefix.
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { LOG4J_PROPERTIES, jvmFlags, type JvmCompilation } from './kafka.ts'
import { classpath, requireJava, resolveBundle } from './maven.ts'
import { connectorConfigFile } from './paths.ts'
import type { StartedPostgres } from './postgres.ts'
import { freePort, GiveUp, HarnessError, makeTempDir, startProcess, waitFor } from './process.ts'

/** Logged by PostgresStreamingChangeEventSource once the replication stream is open. */
const STREAMING_MARKER = 'Processing messages (io.debezium.connector.postgresql'

export interface ConnectorDefinition {
  name: string
  config: Record<string, string>
}

export interface ConnectOptions {
  brokers: string[]
  postgres: Pick<StartedPostgres, 'host' | 'port' | 'user' | 'password' | 'database'>
  /** Debezium's topic.prefix: topics are `<prefix>.public.<table>`. */
  topicPrefix: string
  /** Connector settings on top of deploy/debezium/connector.json (e.g. snapshot.mode). */
  overrides?: Record<string, string>
  /** How the worker's JVM compiles (kafka.ts `JvmCompilation`); `startup` unless given. */
  compilation?: JvmCompilation
}

export interface StartedConnect {
  /** http://127.0.0.1:<port> of the worker's REST API. */
  restUrl: string
  connector: ConnectorDefinition
  logFile: string
  /** GET /connectors/<name>/status. */
  status(): Promise<ConnectorStatus>
  /**
   * Restarts the connector's FAILED tasks, as an operator would (KIP-745's
   * `restart?includeTasks=true&onlyFailed=true`); resolves to the traces' first lines of those
   * that had failed, empty when none had.
   */
  restartFailedTasks(): Promise<string[]>
  stop(): Promise<void>
}

export interface ConnectorStatus {
  connector: { state: string; trace?: string }
  tasks: { id: number; state: string; trace?: string }[]
}

/** The shared connector definition from deploy/, as docker-compose registers it. */
export function loadConnectorDefinition(): ConnectorDefinition {
  return JSON.parse(readFileSync(connectorConfigFile, 'utf8')) as ConnectorDefinition
}

/** The shared definition pointed at a test database, broker and prefix. */
export function connectorFor(options: ConnectOptions): ConnectorDefinition {
  const base = loadConnectorDefinition()
  const { postgres } = options
  return {
    name: base.name,
    config: {
      ...base.config,
      'database.hostname': postgres.host,
      'database.port': String(postgres.port),
      'database.user': postgres.user,
      'database.password': postgres.password,
      'database.dbname': postgres.database,
      'topic.prefix': options.topicPrefix,
      // Named after the prefix as the heartbeat topic is (verify's VERIFY_NOTIFICATION_TOPIC).
      'notification.sink.topic.name': `__debezium-notification.${options.topicPrefix}`,
      ...options.overrides,
    },
  }
}

function workerProperties(brokers: string[], dir: string, pluginDir: string, port: number): string {
  return [
    `bootstrap.servers=${brokers.join(',')}`,
    // Worker defaults; the connector definition sets the same converters explicitly.
    'key.converter=org.apache.kafka.connect.json.JsonConverter',
    'value.converter=org.apache.kafka.connect.json.JsonConverter',
    'key.converter.schemas.enable=false',
    'value.converter.schemas.enable=false',
    `offset.storage.file.filename=${join(dir, 'connect.offsets')}`,
    'offset.flush.interval.ms=1000',
    `plugin.path=${pluginDir}`,
    // Find plugins through their ServiceLoader manifests instead of scanning every class: seconds
    // faster. Only Debezium's unused SMTs (OpenLineage, VectorToJson...) lack manifests.
    'plugin.discovery=service_load',
    `listeners=http://127.0.0.1:${port}`,
    'rest.advertised.host.name=127.0.0.1',
    `rest.advertised.port=${port}`,
    '',
  ].join('\n')
}

async function rest(url: string, init?: RequestInit): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url, {
    ...init,
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    signal: AbortSignal.timeout(10_000),
  })
  const text = await response.text()
  let body: unknown = text
  try {
    body = JSON.parse(text)
  } catch {
    // not JSON: keep the text for the error message
  }
  return { status: response.status, body }
}

/** Starts a standalone worker, registers the connector, resolves once connector and task run. */
export async function startConnect(options: ConnectOptions): Promise<StartedConnect> {
  const java = requireJava()
  const [runtime, debezium] = [await resolveBundle('connect'), await resolveBundle('debezium')]
  const tmp = makeTempDir('connect')
  const logFile = join(tmp.path, 'connect.log')
  // plugin.path entries are directories of plugins, each a directory of jars.
  const pluginDir = join(tmp.path, 'plugins')
  mkdirSync(pluginDir)
  symlinkSync(debezium, join(pluginDir, 'debezium-connector-postgres'))
  const port = await freePort()
  const workerFile = join(tmp.path, 'worker.properties')
  const log4jFile = join(tmp.path, 'log4j.properties')
  writeFileSync(workerFile, workerProperties(options.brokers, tmp.path, pluginDir, port))
  writeFileSync(log4jFile, LOG4J_PROPERTIES)

  const proc = startProcess(
    'kafka-connect',
    java,
    [
      ...jvmFlags('768m', options.compilation),
      `-Dlog4j.configuration=file:${log4jFile}`,
      '-cp',
      classpath(runtime),
      'org.apache.kafka.connect.cli.ConnectStandalone',
      workerFile,
    ],
    { logFile },
  )
  const restUrl = `http://127.0.0.1:${port}`
  const connector = connectorFor(options)
  const stop = async (): Promise<void> => {
    await proc.stop()
    tmp.remove()
  }
  const statusOf = async (): Promise<ConnectorStatus> => {
    const { status, body } = await rest(`${restUrl}/connectors/${connector.name}/status`)
    if (status !== 200)
      throw new HarnessError(`connector status ${status}: ${JSON.stringify(body)}`)
    return body as ConnectorStatus
  }

  const restartFailedTasks = async (): Promise<string[]> => {
    const failed = (await statusOf()).tasks.filter((task) => task.state === 'FAILED')
    if (failed.length === 0) return []
    const { status, body } = await rest(
      `${restUrl}/connectors/${connector.name}/restart?includeTasks=true&onlyFailed=true`,
      { method: 'POST' },
    )
    if (status !== 202 && status !== 204)
      throw new HarnessError(`connector restart ${status}: ${JSON.stringify(body)}`)
    return failed.map((task) => `task ${task.id}: ${task.trace?.split('\n')[0] ?? 'no trace'}`)
  }

  try {
    // Jetty answers 404 until the REST resources are registered: wait for a real 200.
    const restReady = async (): Promise<true | undefined> =>
      (await rest(`${restUrl}/connectors`)).status === 200 ? true : undefined
    await waitFor('the Kafka Connect REST API', restReady, {
      timeoutMs: 120_000,
      intervalMs: 500,
      process: proc,
    })
    const created = await rest(`${restUrl}/connectors`, {
      method: 'POST',
      body: JSON.stringify(connector),
    })
    if (created.status !== 201) {
      throw new HarnessError(
        `registering connector ${connector.name} failed (${created.status}): ${JSON.stringify(created.body)}\nlog ${logFile}:\n${proc.logTail()}`,
      )
    }
    // REST says RUNNING before the snapshot has begun: also wait until Debezium streams from
    // the slot, so rows written before startConnect() are snapshot reads and rows written after
    // are changes. Debezium reports that only in its log (or JMX), so the log line it is.
    await waitFor(
      `connector ${connector.name} to run, finish its snapshot and stream`,
      async () => {
        const s = await statusOf()
        const failed = [s.connector, ...s.tasks].find((x) => x.state === 'FAILED')
        if (failed !== undefined) {
          // FAILED is final: stop waiting, and show Debezium's stack trace.
          throw new GiveUp(
            `connector ${connector.name} FAILED: ${failed.trace ?? ''}\nlog ${logFile}`,
          )
        }
        const running =
          s.connector.state === 'RUNNING' &&
          s.tasks.length > 0 &&
          s.tasks.every((t) => t.state === 'RUNNING')
        return running && readFileSync(logFile, 'utf8').includes(STREAMING_MARKER)
          ? true
          : undefined
      },
      { timeoutMs: 180_000, intervalMs: 250, process: proc },
    )
  } catch (error) {
    await stop()
    throw error
  }
  return { restUrl, connector, logFile, status: statusOf, restartFailedTasks, stop }
}
