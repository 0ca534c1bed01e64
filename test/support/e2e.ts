// The whole pipeline for end-to-end tests, as users run it: PostgreSQL 15 (logical WAL, the source
// schema) -> Kafka Connect + Debezium -> Kafka (KRaft) -> `node --import tsx projector/main.ts`
// -> SQLite files -> `node --import tsx api/main.ts`, checked over real HTTP. Every component is a
// separate process on free ports; a component that cannot start fails the test file loudly.
import Database from 'better-sqlite3'
import type { Admin } from 'kafkajs'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { existsSync, mkdirSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { changeTopics } from '../../projector/sources/kafka.ts'
import { changeTopicConfigEntries } from '../../projector/sources/topic-config.ts'
import { currentGeneration, parseFileName } from '../../src/layout.ts'
import { readOrganizationFiles } from '../../projector/storage/control-file.ts'
import { startConnect, type StartedConnect } from '../harness/connect.ts'
import {
  createTopics,
  kafkaClient,
  startRestartableKafka,
  type JvmCompilation,
  type RestartableKafka,
} from '../harness/kafka.ts'
import { startPostgres, type StartedPostgres } from '../harness/postgres.ts'
import {
  freePort,
  makeTempDir,
  startProcess,
  waitFor,
  type ManagedProcess,
} from '../harness/process.ts'
import type { Sql } from './e2e-sql.ts'
import { repoRoot } from './processes.ts'
import { scriptNodeFlags } from '../harness/paths.ts'

/** Debezium's topic.prefix, and the projector's TOPIC_PREFIX default. */
export const TOPIC_PREFIX = 'product'
export const DEAD_LETTER_TOPIC = `${TOPIC_PREFIX}.dlq`
/** Where Debezium writes its heartbeats (heartbeat.interval.ms in the connector definition). */
export const HEARTBEAT_TOPIC = `__debezium-heartbeat.${TOPIC_PREFIX}`

// ---- The two processes of this project -------------------------------------------------------

export interface ReplicaProcess {
  readonly proc: ManagedProcess
  /** http://127.0.0.1:<port> of its operations server (/healthz, /readyz, /metrics). */
  readonly adminUrl: string
  metrics(): Promise<string>
  /** SIGTERM, as an orchestrator stops it; waits for the exit. */
  stop(): Promise<void>
  /** SIGKILL: no goodbye, no flush, no commit. */
  kill(): Promise<void>
}

export interface ProjectorProcess extends ReplicaProcess {
  readonly dataDir: string
  readonly groupId: string
}

export interface ApiProcess extends ReplicaProcess {
  /** http://127.0.0.1:<port>/api/v1 */
  readonly baseUrl: string
}

/**
 * Only what the processes need, not the test runner's environment (vitest sets NODE_ENV and
 * friends, which a user's shell would not).
 */
function childEnv(own: Record<string, string>): NodeJS.ProcessEnv {
  const inherited: Record<string, string> = {}
  for (const name of ['PATH', 'HOME', 'TMPDIR', 'LANG']) {
    const value = process.env[name]
    if (value !== undefined) inherited[name] = value
  }
  return { ...inherited, ...own }
}

async function startEntry(
  label: string,
  entry: string,
  env: Record<string, string>,
  logDir: string,
  args: string[] = [],
  nodeArgs: string[] = [],
): Promise<{ proc: ManagedProcess; adminUrl: string }> {
  const adminPort = await freePort()
  const adminUrl = `http://127.0.0.1:${adminPort}`
  // Started as `npm run <entry>` starts it (package.json's node flags), then the caller's own.
  const script = entry.startsWith('projector/') ? 'projector' : 'api'
  const argv = [...scriptNodeFlags(script), ...nodeArgs, '--import', 'tsx', entry, ...args]
  const proc = startProcess(label, process.execPath, argv, {
    cwd: repoRoot,
    env: childEnv({ ...env, ADMIN_HOST: '127.0.0.1', ADMIN_PORT: String(adminPort) }),
    logFile: join(logDir, `${label}.log`),
  })
  // The operations server listens before the projector reaches Kafka: it answers even while the
  // broker is down, so this says "the process is up", not "it consumes".
  await waitFor(
    `${label} to answer ${adminUrl}/healthz`,
    async () => ((await fetch(`${adminUrl}/healthz`)).status === 200 ? true : undefined),
    { timeoutMs: 60_000, intervalMs: 100, process: proc },
  ).catch(async (error: unknown) => {
    await proc.stop()
    throw error
  })
  return { proc, adminUrl }
}

function replicaProcess(proc: ManagedProcess, adminUrl: string): ReplicaProcess {
  return {
    proc,
    adminUrl,
    async metrics() {
      const response = await fetch(`${adminUrl}/metrics`)
      if (response.status !== 200) throw new Error(`${proc.name} /metrics: ${response.status}`)
      return response.text()
    },
    stop: () => proc.stop(30_000),
    async kill() {
      const pid = proc.child.pid
      if (pid === undefined || proc.exitCode() !== null) return
      const exited = once(proc.child, 'exit')
      // The whole process group, as the kernel's OOM killer or a node failure would.
      process.kill(-pid, 'SIGKILL')
      await exited
    },
  }
}

export interface ProjectorOptions {
  brokers: string[]
  dataDir: string
  groupId: string
  logDir: string
  label: string
  /** Command-line arguments, e.g. ['--rebuild']. */
  args?: string[]
  /** More environment. */
  env?: Record<string, string>
  /** Node's own options, e.g. --cpu-prof (not allowed in NODE_OPTIONS). */
  nodeArgs?: string[]
}

export async function startProjector(options: ProjectorOptions): Promise<ProjectorProcess> {
  const { proc, adminUrl } = await startEntry(
    options.label,
    'projector/main.ts',
    {
      DATA_DIR: options.dataDir,
      KAFKA_BROKERS: options.brokers.join(','),
      KAFKA_GROUP_ID: options.groupId,
      TOPIC_PREFIX,
      LOG_LEVEL: 'info',
      ...options.env,
    },
    options.logDir,
    options.args,
    options.nodeArgs,
  )
  return {
    ...replicaProcess(proc, adminUrl),
    dataDir: options.dataDir,
    groupId: options.groupId,
  }
}

export async function startApi(options: {
  dataDir: string
  logDir: string
  /** More environment (OPEN_FILES_MAX, PAGE_CACHE_MB, ...). */
  env?: Record<string, string>
}): Promise<ApiProcess> {
  const port = await freePort()
  const { proc, adminUrl } = await startEntry(
    'api',
    'api/main.ts',
    {
      DATA_DIR: options.dataDir,
      HOST: '127.0.0.1',
      PORT: String(port),
      // Tests poll every 50 ms: the default 120 requests a minute per key would turn polling
      // into 429s. Rate limits have their own tests (test/integration/api/rate-limit.test.ts).
      RATE_LIMIT_PER_KEY: '1000000',
      RATE_LIMIT_PER_ORGANIZATION: '1000000',
      // info logs every request; at 20 polls a second that buries the lines that matter.
      LOG_LEVEL: 'warn',
      // Tests assert that no poll fails, on machines where other test files take the CPU: an
      // event loop starved for 50 ms is the machine, not the api's load, and shedding then would
      // fail a test for nothing. Load shedding has its own test (api/overload.test.ts).
      API_SHED_EVENT_LOOP_DELAY_MS: '0',
      API_SHED_QUEUE_DELAY_MS: '0',
      ...options.env,
    },
    options.logDir,
  )
  return { ...replicaProcess(proc, adminUrl), baseUrl: `http://127.0.0.1:${port}/api/v1` }
}

// ---- HTTP ------------------------------------------------------------------------------------

export interface ApiResponse<T = unknown> {
  status: number
  body: T
  /** The raw body, for "this value appears nowhere" checks. */
  text: string
}

export interface ErrorBody {
  error: { code: string; message: string }
}

/** A client of the public API holding one raw key. */
export class ApiClient {
  constructor(
    readonly baseUrl: string,
    readonly key: string,
  ) {}

  async get<T = unknown>(path: string): Promise<ApiResponse<T>> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      headers: { authorization: `Bearer ${this.key}` },
      signal: AbortSignal.timeout(10_000),
    })
    const text = await response.text()
    let body: unknown = text
    try {
      body = JSON.parse(text)
    } catch {
      // not JSON: the assertion that reads it will say so
    }
    return { status: response.status, body: body as T, text }
  }

  /** The `data` of a detail response; undefined on 404; anything else is an error. */
  async detail<T>(path: string): Promise<T | undefined> {
    const response = await this.get<{ data: T }>(path)
    if (response.status === 404) return undefined
    if (response.status !== 200) throw new Error(`GET ${path}: ${response.status} ${response.text}`)
    return response.body.data
  }

  /** Every item of a list, following nextCursor to the end. */
  async list<T>(path: string): Promise<T[]> {
    const items: T[] = []
    let cursor: string | null = null
    const separator = path.includes('?') ? '&' : '?'
    do {
      const page: string =
        cursor === null
          ? `${path}${separator}limit=200`
          : `${path}${separator}limit=200&cursor=${encodeURIComponent(cursor)}`
      const response = await this.get<{ data: T[]; nextCursor: string | null }>(page)
      if (response.status !== 200) {
        throw new Error(`GET ${page}: ${response.status} ${response.text}`)
      }
      items.push(...response.body.data)
      cursor = response.body.nextCursor
    } while (cursor !== null)
    return items
  }
}

// ---- Waiting and measuring -------------------------------------------------------------------

export interface EventuallyOptions {
  timeoutMs?: number
  /** 50 ms by default: the delay measurements are only as fine as this. */
  intervalMs?: number
}

/** Ids of whatever appears more than once. */
export function duplicates(ids: readonly string[]): string[] {
  const seen = new Set<string>()
  return ids.filter((id) => (seen.has(id) ? true : (seen.add(id), false)))
}

/** Percentiles of the commit-to-visible delays, printed at the end of a file. */
export class DelayStats {
  readonly samples: { what: string; ms: number }[] = []

  add(what: string, ms: number): void {
    this.samples.push({ what, ms })
  }

  line(): string {
    const sorted = this.samples.map((s) => s.ms).sort((a, b) => a - b)
    if (sorted.length === 0) return 'e2e delay ms: no samples'
    const at = (p: number): number =>
      Math.round(sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN)
    const each = this.samples.map((s) => `${s.what}=${Math.round(s.ms)}`).join(' ')
    return `e2e delay ms: p50=${at(0.5)} max=${at(1)} n=${sorted.length} (${each})`
  }
}

/**
 * The value of a Prometheus counter or gauge in a /metrics text, summed over the series whose
 * labels include `labels` (0 when there is none).
 */
export function metricValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number {
  let sum = 0
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue
    const wanted = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))
    if (wanted) sum += Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return sum
}

// ---- The replica's files ---------------------------------------------------------------------

/** `,"updatedAt":"..."}` closes every stored response (projector/documents/json.ts). */
function withoutStamp(body: unknown): unknown {
  return typeof body === 'string' ? body.replace(/,"updatedAt":"[^"]*"\}$/, '}') : body
}

/**
 * Everything the api serves from a data directory, keyed `<file>/<table>/<id>`: every doc_* row
 * of every organization file, with the stamps removed (the visibility stamps are wall-clock
 * instants and legitimately differ between two runs), plus the organizations and keys of
 * control.db. Two runs over the same topics must give equal maps, text for text.
 */
export function servedState(dataDir: string): Map<string, string> {
  const generation = currentGeneration(dataDir)
  if (generation === undefined) throw new Error(`${dataDir} has no current generation`)
  const state = new Map<string, string>()
  /** A row under `<label>/<table>/<id>`, without its stamps (nor a shared file's key for it). */
  const record = (label: string, table: string, row: Record<string, unknown>) => {
    const { updated_at: _u, sensitive_updated_at: _s, organization_key: _k, ...rest } = row
    rest.body = withoutStamp(rest.body)
    if ('sensitive_body' in rest) rest.sensitive_body = withoutStamp(rest.sensitive_body)
    state.set(`${label}/${table}/${String(row.id)}`, JSON.stringify(rest))
  }
  const read = (file: string, label: string, tables: (db: Database.Database) => string[]) => {
    const db = new Database(file, { readonly: true, fileMustExist: true })
    try {
      for (const table of tables(db)) {
        const rows = db.prepare(`SELECT * FROM "${table}" ORDER BY id`).all()
        for (const row of rows as Record<string, unknown>[]) record(label, table, row)
      }
    } finally {
      db.close()
    }
  }
  read(generation.controlPath, 'control', () => ['organizations', 'api_keys'])
  if (existsSync(generation.organizationsDir)) {
    // The file each key is served from (a per-organization rebuild gives it a new one).
    const files = readOrganizationFiles(generation.controlPath)
    const keys = new Set(
      readdirSync(generation.organizationsDir).flatMap(
        (name) => parseFileName(name)?.fileKey ?? [],
      ),
    )
    for (const key of [...keys].sort())
      readFileOrganizations(generation.filePath(key, files.get(key)))
  }
  return state

  /**
   * Each organization's documents in the file, labelled by the organization whichever file holds
   * it (its own, or one shared by organizations), without the key a shared file numbers it by:
   * a replica whose organizations share files compares with one where each has its own.
   */
  function readFileOrganizations(path: string): void {
    const db = new Database(path, { readonly: true, fileMustExist: true })
    try {
      const tables = db
        .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'doc_*'`)
        .pluck()
        .all() as string[]
      const organizations = db
        .prepare('SELECT key, organization_id AS id FROM file_organizations ORDER BY key')
        .all() as Array<{ key: number; id: string }>
      for (const table of tables) {
        const rowsOf = db.prepare(`SELECT * FROM "${table}" WHERE organization_key = ? ORDER BY id`)
        for (const { key, id } of organizations) {
          for (const row of rowsOf.all(key) as Record<string, unknown>[]) {
            record(`${id}.db`, table, row)
          }
        }
      }
    } finally {
      db.close()
    }
  }
}

/** A readable account of how two served states differ (at most `limit` entries). */
export function stateDifferences(
  expected: Map<string, string>,
  actual: Map<string, string>,
  limit = 10,
): string[] {
  const out: string[] = []
  for (const [key, value] of expected) {
    const other = actual.get(key)
    if (other === undefined) out.push(`missing ${key}`)
    else if (other !== value) out.push(`differs ${key}:\n  clean: ${value}\n  run:   ${other}`)
  }
  for (const key of actual.keys()) if (!expected.has(key)) out.push(`extra ${key}`)
  return out.slice(0, limit)
}

// ---- Kafka -----------------------------------------------------------------------------------

/**
 * How many records of the change topics the group has not committed yet. Offsets are committed
 * only after the files are (DESIGN.md, 5), so 0 means every produced change is in the files.
 */
export async function consumerLag(brokers: string[], groupId: string): Promise<number> {
  const admin = kafkaClient(brokers).admin()
  await admin.connect()
  try {
    return await consumerLagBy(admin, groupId)
  } finally {
    await admin.disconnect()
  }
}

/**
 * The same through a connected admin client: a caller that samples the lag every second (bench:
 * freshness) does not connect anew each time.
 */
export async function consumerLagBy(admin: Admin, groupId: string): Promise<number> {
  const topics = changeTopics(TOPIC_PREFIX)
  const committed = await admin.fetchOffsets({ groupId, topics })
  let lag = 0
  for (const topic of topics) {
    const mine = committed.find((c) => c.topic === topic)?.partitions ?? []
    for (const end of await admin.fetchTopicOffsets(topic)) {
      const at = mine.find((p) => p.partition === end.partition)?.offset ?? '-1'
      lag += Number(BigInt(end.high) - BigInt(at === '-1' ? end.low : at))
    }
  }
  return lag
}

/** The end offset of a topic's partitions summed: how many records it ever received. */
export async function topicEnd(brokers: string[], topic: string): Promise<number> {
  const admin = kafkaClient(brokers).admin()
  await admin.connect()
  try {
    if (!(await admin.listTopics()).includes(topic)) return 0
    const offsets = await admin.fetchTopicOffsets(topic)
    return offsets.reduce((sum, p) => sum + Number(p.high), 0)
  } finally {
    await admin.disconnect()
  }
}

export async function listTopics(brokers: string[]): Promise<string[]> {
  const admin = kafkaClient(brokers).admin()
  await admin.connect()
  try {
    return await admin.listTopics()
  } finally {
    await admin.disconnect()
  }
}

// ---- The pipeline ----------------------------------------------------------------------------

export interface PipelineOptions {
  /** SQL run before the connector starts: these rows arrive as snapshot reads (op r). */
  beforeConnector?: (sql: Sql) => Promise<void>
  /** Start the projector too (default true); fault tests start it themselves. */
  startProjector?: boolean
  /** More environment for the main projector (not the clean ones it is compared with). */
  projectorEnv?: Record<string, string>
  /**
   * How the broker's and Connect's JVMs compile (harness/kafka.ts): `startup` for tests, `steady`
   * for a bench of the pipeline's steady state.
   */
  jvmCompilation?: JvmCompilation
}

/** The projector feeding the served data directory: one consumer group across restarts. */
function mainProjector(
  brokers: string[],
  dataDir: string,
  logDir: string,
  env: Record<string, string> = {},
): ProjectorOptions {
  return { brokers, dataDir, logDir, env, groupId: 'e2e-replica', label: `projector-${Date.now()}` }
}

export class Pipeline {
  /** The projector the api reads from; replaced when a test restarts it. */
  projector: ProjectorProcess | undefined
  readonly #others = new Set<ReplicaProcess>()
  /** Ends the watch over Connect's tasks that `startBroker` begins. */
  #taskWatch: AbortController | undefined

  private constructor(
    readonly postgres: StartedPostgres,
    readonly kafka: RestartableKafka,
    public connect: StartedConnect,
    readonly api: ApiProcess,
    /** The data directory the api serves. */
    readonly dataDir: string,
    /** Where every process logs, and where extra data directories go. */
    readonly workDir: string,
    readonly removeWorkDir: () => void,
    readonly projectorEnv: Record<string, string>,
    readonly jvmCompilation: JvmCompilation,
  ) {}

  static async start(options: PipelineOptions = {}): Promise<Pipeline> {
    const work = makeTempDir('e2e')
    const logDir = work.path
    const dataDir = join(work.path, 'data')
    mkdirSync(dataDir)
    // Started so far, stopped in reverse if a later start fails: nothing outlives a failed file.
    const started: { stop(): Promise<void> }[] = []
    try {
      const [postgres, kafka] = await Promise.all([
        startPostgres().then((p) => (started.push(p), p)),
        startRestartableKafka(options.jvmCompilation).then((k) => (started.push(k), k)),
      ])
      await options.beforeConnector?.(postgres)
      // Connect (snapshot included) is the slow part; the api and the projector start meanwhile,
      // as they may in a real deployment: the projector creates the change topics it misses.
      const track = <T extends { stop(): Promise<void> }>(component: T): T => {
        started.push(component)
        return component
      }
      const api = startApi({ dataDir, logDir }).then(track)
      const projector =
        (options.startProjector ?? true)
          ? startProjector(
              mainProjector(kafka.brokers, dataDir, logDir, options.projectorEnv),
            ).then(track)
          : Promise.resolve(undefined)
      const connect = startConnect({
        brokers: kafka.brokers,
        postgres,
        topicPrefix: TOPIC_PREFIX,
        compilation: options.jvmCompilation,
      }).then(track)
      // allSettled first: a failure must not return before the others have started (and been
      // tracked for the cleanup below); then every promise is known to be fulfilled.
      const failed = (await Promise.allSettled([api, projector, connect])).find(
        (result) => result.status === 'rejected',
      )
      if (failed !== undefined) throw failed.reason
      const pipeline = new Pipeline(
        postgres,
        kafka,
        await connect,
        await api,
        dataDir,
        logDir,
        () => work.remove(),
        options.projectorEnv ?? {},
        options.jvmCompilation ?? 'startup',
      )
      pipeline.projector = await projector
      return pipeline
    } catch (error) {
      for (const component of started.reverse()) await component.stop().catch(() => undefined)
      work.remove()
      throw error
    }
  }

  get sql(): Sql {
    return this.postgres
  }

  /**
   * Kafka Connect started again with these connector settings over deploy/'s (e.g.
   * `snapshot.mode: no_data`). Its offsets went with the stopped worker: with no snapshot, the
   * connector streams from a new slot, as one whose slot was dropped does.
   */
  async restartConnect(overrides: Record<string, string>): Promise<void> {
    await this.connect.stop()
    this.connect = await startConnect({
      brokers: this.kafka.brokers,
      postgres: this.postgres,
      topicPrefix: TOPIC_PREFIX,
      overrides,
      compilation: this.jvmCompilation,
    })
  }

  /** The projector feeding the served data directory, with the first generation's group. */
  async startMainProjector(): Promise<ProjectorProcess> {
    if (this.projector !== undefined && this.projector.proc.exitCode() === null) {
      throw new Error('the main projector is already running')
    }
    this.projector = await startProjector(
      mainProjector(this.kafka.brokers, this.dataDir, this.workDir, this.projectorEnv),
    )
    return this.projector
  }

  /**
   * A projector of its own: a fresh data directory and consumer group, so it replays every topic
   * from the beginning, as a clean run (or an operator's rebuild) would.
   */
  async startCleanProjector(): Promise<ProjectorProcess> {
    const id = randomUUID().slice(0, 8)
    const dataDir = join(this.workDir, `clean-${id}`)
    const projector = await startProjector({
      brokers: this.kafka.brokers,
      dataDir,
      groupId: `e2e-clean-${id}`,
      logDir: this.workDir,
      label: `clean-projector-${id}`,
    })
    this.#others.add(projector)
    return projector
  }

  /**
   * Creates every topic the pipeline writes that does not exist yet, as an operator provisions
   * them (compacted, as the projector and the connector create them): the change topics
   * and Debezium's heartbeat topic. Needed before the broker goes away: a Debezium task that has
   * to create a topic while the broker restarts fails for good ("All brokers are currently
   * fenced", InvalidReplicationFactorException) until someone restarts the task.
   */
  async provisionTopics(): Promise<void> {
    // Only the missing ones: kafkajs logs an error for each topic that already exists.
    const existing = new Set(await listTopics(this.kafka.brokers))
    const missing = [...changeTopics(TOPIC_PREFIX), HEARTBEAT_TOPIC].filter((t) => !existing.has(t))
    if (missing.length === 0) return
    await createTopics(
      this.kafka.brokers,
      missing.map((topic) => ({
        topic,
        numPartitions: 1,
        replicationFactor: 1,
        configEntries: changeTopicConfigEntries(),
      })),
    )
  }

  /**
   * The broker started again, then Connect's tasks watched for a minute: a task that wrote while
   * the restarted KRaft broker was still fenced fails for good ("All brokers are currently
   * fenced", from Connect's own TopicAdmin, even for a provisioned topic), and the fix, in
   * production as here, is Connect's restart of failed tasks. That is Connect's recovery, not
   * the replica's: the tests assert what the projector and the api do once changes flow again.
   */
  async startBroker(): Promise<void> {
    await this.kafka.startBroker()
    this.#taskWatch?.abort()
    const watch = new AbortController()
    this.#taskWatch = watch
    const until = Date.now() + 60_000
    void (async () => {
      while (!watch.signal.aborted && Date.now() < until) {
        try {
          for (const failed of await this.connect.restartFailedTasks())
            console.warn(`e2e harness: restarted Connect's failed ${failed}`)
        } catch {
          // Connect's REST busy or restarting: the next round asks again.
        }
        await sleep(1_000, undefined, { signal: watch.signal }).catch(() => undefined)
      }
    })()
  }

  client(key: string): ApiClient {
    return new ApiClient(this.api.baseUrl, key)
  }

  /**
   * Polls `probe` until it returns something other than undefined. On timeout the error carries
   * the last thing the probe saw and the tails of the processes' logs: the failure explains itself.
   */
  async eventually<T>(
    what: string,
    probe: () => Promise<T | undefined>,
    options: EventuallyOptions = {},
  ): Promise<T> {
    const deadline = Date.now() + (options.timeoutMs ?? 60_000)
    let last: unknown
    for (;;) {
      try {
        const value = await probe()
        if (value !== undefined) return value
        last = 'undefined'
      } catch (error) {
        last = error
      }
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${what}\n${await this.diagnose(last)}`)
      await sleep(options.intervalMs ?? 50)
    }
  }

  /** Runs a change, then polls until it is visible; returns milliseconds from commit to visible. */
  async timeToVisible(
    what: string,
    change: () => Promise<unknown>,
    visible: () => Promise<boolean>,
  ): Promise<number> {
    await change()
    const committed = performance.now()
    await this.eventually(what, async () => ((await visible()) ? true : undefined))
    return performance.now() - committed
  }

  /**
   * Waits until a projector has committed every record of the change topics and serves them: a
   * fresh one builds its documents only once it has caught up, and is ready after that.
   */
  async caughtUp(projector: ProjectorProcess, timeoutMs = 120_000): Promise<void> {
    await this.eventually(
      `${projector.proc.name} to commit every change (group ${projector.groupId}) and be ready`,
      async () =>
        (await consumerLag(this.kafka.brokers, projector.groupId)) === 0 &&
        (await fetch(`${projector.adminUrl}/readyz`)).status === 200
          ? true
          : undefined,
      { timeoutMs, intervalMs: 250 },
    )
  }

  /** What a timed-out wait saw, the connector's state and the processes' log tails. */
  async diagnose(last?: unknown): Promise<string> {
    const tails = [this.projector?.proc, this.api.proc, ...[...this.#others].map((p) => p.proc)]
      .filter((p): p is ManagedProcess => p !== undefined)
      .map((p) => `--- ${p.name} (${p.logFile}, exit ${p.exitCode()}):\n${p.logTail(25)}`)
    const lastText =
      last instanceof Error ? last.message : last === undefined ? '' : JSON.stringify(last)
    const connector = await this.connect.status().then(
      (status) => JSON.stringify(status).slice(0, 2_000),
      (error: unknown) => String(error),
    )
    return [
      `last: ${lastText}`,
      `connector: ${connector} (log ${this.connect.logFile})`,
      ...tails,
    ].join('\n')
  }

  /** Stops everything, each step on its own: one failure must not leave the rest running. */
  async stop(): Promise<void> {
    this.#taskWatch?.abort()
    const steps: (() => Promise<void>)[] = [
      ...[...this.#others].map((p) => () => p.stop()),
      () => this.projector?.stop() ?? Promise.resolve(),
      () => this.api.stop(),
      () => this.connect.stop(),
      () => this.kafka.stop(),
      () => this.postgres.stop(),
    ]
    const errors: unknown[] = []
    for (const step of steps) await step().catch((error: unknown) => errors.push(error))
    this.removeWorkDir()
    if (errors.length > 0) throw new AggregateError(errors, 'stopping the e2e pipeline failed')
  }
}
