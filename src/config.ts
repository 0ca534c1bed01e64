// Configuration: read once from the environment, validated, and passed down. Nothing else in the
// project reads process.env: entry points hand it whole to a loader here.
import { statSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { resolve } from 'node:path'
import { z } from 'zod'
import { MAX_SHARED_FILES } from './organization-files.ts'
import {
  defaultOpenFilesMax,
  defaultPageCacheBytes,
  memoryLimit,
  openFileLimit,
} from './descriptors.ts'

export class ConfigError extends Error {
  override name = 'ConfigError'
}

/**
 * A command's configuration; on a bad value, undefined after one line on stderr naming the
 * variable (`<command>: ...`), and the command exits 2.
 */
export function loadCommandConfig<T>(
  command: string,
  load: (env: Record<string, string | undefined>) => T,
  env: Record<string, string | undefined>,
): T | undefined {
  try {
    return load(env)
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    process.stderr.write(`${command}: ${error.message}\n`)
    return undefined
  }
}

const logLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
const port = z.coerce.number().int().min(0).max(65535)
const positiveInt = z.coerce.number().int().positive()

const brokers = z
  .string()
  .transform((s) =>
    s
      .split(',')
      .map((b) => b.trim())
      .filter((b) => b !== ''),
  )
  .pipe(
    z
      .array(z.string().regex(/^[^:\s]+:\d{1,5}$/, 'each broker must be host:port'))
      .min(1, 'at least one broker'),
  )

const projectorEnv = z.object({
  DATA_DIR: z.string().min(1).default('./data'),
  KAFKA_BROKERS: brokers.default(['127.0.0.1:9092']),
  KAFKA_CLIENT_ID: z.string().min(1).default('credentialing-replica-projector'),
  KAFKA_GROUP_ID: z.string().min(1).default('credentialing-replica'),
  TOPIC_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, dot, underscore and dash only')
    .default('product'),
  DEAD_LETTER_TOPIC: z.string().min(1).optional(),
  ADMIN_HOST: z.string().min(1).default('127.0.0.1'),
  ADMIN_PORT: port.default(9464),
  LOG_LEVEL: logLevel.default('info'),
  /** Checkpoint (TRUNCATE) a file's WAL once it passes this many bytes. */
  WAL_CHECKPOINT_BYTES: positiveInt.default(16 * 1024 * 1024),
  // Organization files kept open; a batch touching more reopens them (1-3 ms each). Default: from
  // the process's limit on open files (src/descriptors.ts).
  OPEN_FILES_MAX: positiveInt.optional(),
  /**
   * Megabytes of SQLite page cache the projector's files share
   * (projector/storage/cache-budget.ts). With SQLite's default 2 MB per file, random-key inserts
   * read most pages back from the OS: a 1M-event load made 1.9M page reads. 32 MB holds the
   * default lanes and build worker under the 500 MB budget with two file batches in flight (a
   * schemaless million on two lanes: 453 MB at 32 MB, 487-496 MB at 48 MB; 96 MB: 549-585 MB), at
   * a cost within the runs' noise.
   */
  SQLITE_CACHE_MB: positiveInt.max(65_536, 'must be at most 65536 (64 GB)').default(32),
  /**
   * Files a new generation's organizations share (src/organization-files.ts); 0: a file of its own
   * for each; `auto`: chosen from the organizations the source holds when the generation is made
   * (`autoOrganizationFiles`). Recorded with the generation: changing it takes a `--rebuild`.
   */
  ORGANIZATION_FILES: z
    .union(
      [
        z.literal('auto'),
        z.coerce
          .number()
          .int()
          .min(0, `must be 'auto' or a whole number from 0 to ${MAX_SHARED_FILES}`)
          .max(MAX_SHARED_FILES, `must be at most ${MAX_SHARED_FILES}`),
      ],
      { error: `must be 'auto' or a whole number from 0 to ${MAX_SHARED_FILES}` },
    )
    .default('auto'),
  // Worker threads that build an initial load's documents beside the projector's own thread, one
  // organization each; 0: none. Each costs about 55 MB (its own V8 heap and modules).
  DOCUMENT_BUILD_WORKERS: z.coerce.number().int().min(0).max(64).default(1),
  // Worker threads that apply organization files in parallel, each owning the organizations whose
  // id hashes to it (projector/lanes/lanes.ts). Each costs its own V8 heap and modules (~40 MB).
  LANES: positiveInt.max(64, 'must be at most 64').default(availableParallelism()),
  // Between two progress log lines of a long command when stderr is not a terminal (src/progress.ts).
  PROGRESS_INTERVAL_MS: positiveInt.default(5_000),
  // How long `--rebuild --org` and `verify --repair` wait for the live projector to take what they
  // hand over before they withdraw it (exit 2, nothing swapped): 5 minutes.
  HANDOVER_TIMEOUT_MS: positiveInt.default(300_000),
  /**
   * Debezium's heartbeat table's topic (docs/freshness.md); default `<prefix>.public.replica_heartbeat`.
   */
  HEARTBEAT_TOPIC: z.string().min(1).optional(),
  /**
   * How long after a heartbeat is read the change topics' ends are fetched for it: what Kafka
   * Connect sent before the beat, on other partitions, is appended by then (docs/freshness.md).
   */
  FRESHNESS_SETTLE_MS: z.coerce.number().int().min(0).max(60_000).default(250),
  /** Caught up and no heartbeat read for this long: one warning (table missing, not published). */
  HEARTBEAT_MISSING_WARN_MS: positiveInt.default(30_000),
  /**
   * Live, the least time between the starts of two applied batches: what arrives meanwhile waits
   * and is applied with the next (projector/sources/kafka.ts `#paced`). 0, the default: each batch
   * as soon as the one before is applied (docs/freshness.md has what pacing saves and costs).
   */
  LIVE_APPLY_INTERVAL_MS: z.coerce.number().int().min(0).max(1_000).default(0),
})

export type ProjectorConfig = {
  dataDir: string
  kafka: { brokers: string[]; clientId: string; groupId: string }
  topicPrefix: string
  deadLetterTopic: string
  admin: { host: string; port: number }
  logLevel: z.infer<typeof logLevel>
  walCheckpointBytes: number
  openFilesMax: number
  sqliteCacheBytes: number
  /** A number of shared files, or `auto` (chosen when a generation is made: projector.ts). */
  organizationFiles: number | 'auto'
  documentBuildWorkers: number
  lanes: number
  progressIntervalMs: number
  handoverTimeoutMs: number
  liveApplyIntervalMs: number
  freshness: { heartbeatTopic: string; settleMs: number; missingWarnMs: number }
}

/**
 * A directory that must already exist. The api only reads what the projector writes: pointed at
 * a wrong path it would start and answer 503 forever, so it refuses to start instead.
 */
const existingDirectory = z
  .string()
  .min(1)
  .superRefine((path, ctx) => {
    const absolute = resolve(path)
    let isDirectory: boolean | undefined
    try {
      isDirectory = statSync(absolute, { throwIfNoEntry: false })?.isDirectory()
    } catch {
      ctx.addIssue({ code: 'custom', message: `must be a readable directory: ${absolute}` })
      return
    }
    if (isDirectory === undefined) {
      ctx.addIssue({ code: 'custom', message: `must be an existing directory: ${absolute}` })
    } else if (!isDirectory) {
      ctx.addIssue({ code: 'custom', message: `must be a directory: ${absolute} is not one` })
    }
  })

const apiEnv = z.object({
  // prefault: the default is checked like a given value.
  DATA_DIR: existingDirectory.prefault('./data'),
  HOST: z.string().min(1).default('0.0.0.0'),
  PORT: port.default(8080),
  ADMIN_HOST: z.string().min(1).default('127.0.0.1'),
  ADMIN_PORT: port.default(9465),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
    .optional(),
  RATE_LIMIT_PER_KEY: positiveInt.default(120),
  RATE_LIMIT_PER_ORGANIZATION: positiveInt.default(600),
  RATE_LIMIT_WINDOW_SECONDS: positiveInt.default(60),
  /**
   * Most organization files kept open at once (least recently used are closed). Default: from the
   * process's limit on open files (src/descriptors.ts).
   */
  OPEN_FILES_MAX: positiveInt.optional(),
  /**
   * Megabytes of list-page response bodies cached, shared by every open organization file
   * (api/page-cache.ts); 0 turns the cache off. Default: a thirty-second of the memory, 64 MB to
   * 1 GB (src/descriptors.ts).
   */
  PAGE_CACHE_MB: z.coerce
    .number()
    .int('must be a whole number of megabytes')
    .min(0, 'must be 0 (off) or more')
    .max(65_536, 'must be at most 65536 (64 GB)')
    .optional(),
  LOG_LEVEL: logLevel.default('info'),
  /**
   * Signs paging cursors, so that a cursor altered or made for another list is refused. Every
   * api process behind one load balancer must share it; the default suits a single node.
   */
  CURSOR_SECRET: z.string().min(16, 'at least 16 characters').optional(),
  /**
   * Load shedding (api/overload.ts): refuse requests (503 with Retry-After) while the event loop's
   * mean delay over the last sample interval is above this many ms; 0: never on this signal.
   */
  API_SHED_EVENT_LOOP_DELAY_MS: z.coerce.number().int().min(0).max(10_000).default(50),
  /** How often the event-loop delay is averaged and compared (ms). */
  API_SHED_SAMPLE_INTERVAL_MS: z.coerce.number().int().min(10).max(10_000).default(100),
  /**
   * Refuse a request that can have waited more than this many ms to be read: its turn of the event
   * loop so far, and the turn before when the two ran back to back (api/overload.ts LoopTurn);
   * 0: never on this signal.
   */
  API_SHED_QUEUE_DELAY_MS: z.coerce.number().int().min(0).max(10_000).default(20),
  /** Refuse requests while this many are begun and not answered; 0: no limit. */
  API_SHED_MAX_IN_FLIGHT: z.coerce.number().int().min(0).default(512),
  /** The Retry-After of a refused request, in seconds. */
  API_SHED_RETRY_AFTER_SECONDS: positiveInt.max(3600).default(1),
  /**
   * /readyz fails while the data's freshness (docs/freshness.md) is known and older than this, so
   * a load balancer drains a lagging node; it passes again by itself once the node catches up.
   */
  MAX_STALENESS_MS: positiveInt.default(30_000),
})

export type ApiConfig = {
  dataDir: string
  host: string
  port: number
  admin: { host: string; port: number }
  redisUrl: string | undefined
  rateLimit: { perKey: number; perOrganization: number; windowSeconds: number }
  openFilesMax: number
  /** Bytes of list pages the api caches across all open files; 0: no cache. */
  pageCacheBytes: number
  logLevel: z.infer<typeof logLevel>
  cursorSecret: string
  /** When the api refuses requests instead of queueing them (api/overload.ts); 0 turns a check off. */
  shedding: {
    maxEventLoopDelayMs: number
    sampleIntervalMs: number
    maxQueueDelayMs: number
    maxInFlight: number
    retryAfterSeconds: number
  }
  maxStalenessMs: number
}

/** Cursor secret of a deployment that sets none: cursors stay valid across restarts. */
const DEFAULT_CURSOR_SECRET = 'credentialing-replica-api-v1-cursors'

type Env = Record<string, string | undefined>

function parseEnv<T extends z.ZodType>(schema: T, env: Env): z.infer<T> {
  // An empty variable counts as unset, as in most shells' `${VAR:-default}`.
  const present = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v !== ''),
  )
  const result = schema.safeParse(present)
  if (!result.success) {
    const lines = result.error.issues.map((issue) => {
      // The variable, not the path into its parsed value (KAFKA_BROKERS, not KAFKA_BROKERS.0).
      const name = String(issue.path[0] ?? '')
      const value = env[name]
      // Echo the value only for variables that cannot hold a secret.
      const shown =
        value === undefined || /URL|PASSWORD|SECRET|KEY/.test(name)
          ? ''
          : ` (got ${JSON.stringify(value)})`
      return `${name}: ${issue.message}${shown}`
    })
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`)
  }
  return result.data
}

const demoEnv = z.object({
  DEMO_DATA_DIR: z.string().min(1).default('./data/demo'),
  DEMO_ORGANIZATIONS: z.coerce.number().int().min(1).max(50).default(3),
  DEMO_PROVIDERS: z.coerce.number().int().min(1).max(100_000).default(1500),
  DEMO_SEED: z.coerce.number().int().min(0).default(1),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: port.default(8080),
})

/** `npm run demo` (scripts/demo.ts). */
export type DemoConfig = {
  /** Emptied at start, but only when the demo made it (scripts/demo.ts). */
  dataDir: string
  organizations: number
  providersPerOrganization: number
  seed: number
  host: string
  port: number
}

const benchEnv = z.object({
  BENCH_DURATION_SECONDS: positiveInt.default(8),
  BENCH_CONNECTIONS: positiveInt.default(16),
  // The overload run offers twice the saturation rate; it needs more connections than the others
  // for that rate to be offered at all (each connection waits for its response before the next),
  // and enough that the requests waiting on them are more than 50 ms of the api's work: with 128,
  // an api that does not shed at all met the overload target (about 13 ms of detail reads).
  BENCH_OVERLOAD_CONNECTIONS: positiveInt.default(512),
})

/** `npm run bench:api` (bench/api.ts): the shape of each autocannon run. */
export type BenchConfig = {
  durationSeconds: number
  connections: number
  overloadConnections: number
}

export function loadProjectorConfig(env: Env): ProjectorConfig {
  const e = parseEnv(projectorEnv, env)
  return {
    dataDir: e.DATA_DIR,
    kafka: { brokers: e.KAFKA_BROKERS, clientId: e.KAFKA_CLIENT_ID, groupId: e.KAFKA_GROUP_ID },
    topicPrefix: e.TOPIC_PREFIX,
    deadLetterTopic: e.DEAD_LETTER_TOPIC ?? `${e.TOPIC_PREFIX}.dlq`,
    admin: { host: e.ADMIN_HOST, port: e.ADMIN_PORT },
    logLevel: e.LOG_LEVEL,
    walCheckpointBytes: e.WAL_CHECKPOINT_BYTES,
    openFilesMax: e.OPEN_FILES_MAX ?? defaultOpenFilesMax(openFileLimit(), memoryLimit()),
    sqliteCacheBytes: e.SQLITE_CACHE_MB * 1024 * 1024,
    organizationFiles: e.ORGANIZATION_FILES,
    documentBuildWorkers: e.DOCUMENT_BUILD_WORKERS,
    lanes: e.LANES,
    progressIntervalMs: e.PROGRESS_INTERVAL_MS,
    handoverTimeoutMs: e.HANDOVER_TIMEOUT_MS,
    liveApplyIntervalMs: e.LIVE_APPLY_INTERVAL_MS,
    freshness: {
      heartbeatTopic: e.HEARTBEAT_TOPIC ?? `${e.TOPIC_PREFIX}.public.replica_heartbeat`,
      settleMs: e.FRESHNESS_SETTLE_MS,
      missingWarnMs: e.HEARTBEAT_MISSING_WARN_MS,
    },
  }
}

export function loadApiConfig(env: Env): ApiConfig {
  const e = parseEnv(apiEnv, env)
  return {
    dataDir: e.DATA_DIR,
    host: e.HOST,
    port: e.PORT,
    admin: { host: e.ADMIN_HOST, port: e.ADMIN_PORT },
    redisUrl: e.REDIS_URL,
    rateLimit: {
      perKey: e.RATE_LIMIT_PER_KEY,
      perOrganization: e.RATE_LIMIT_PER_ORGANIZATION,
      windowSeconds: e.RATE_LIMIT_WINDOW_SECONDS,
    },
    openFilesMax: e.OPEN_FILES_MAX ?? defaultOpenFilesMax(openFileLimit(), memoryLimit()),
    pageCacheBytes:
      e.PAGE_CACHE_MB === undefined
        ? defaultPageCacheBytes(memoryLimit())
        : e.PAGE_CACHE_MB * 1024 * 1024,
    logLevel: e.LOG_LEVEL,
    cursorSecret: e.CURSOR_SECRET ?? DEFAULT_CURSOR_SECRET,
    shedding: {
      maxEventLoopDelayMs: e.API_SHED_EVENT_LOOP_DELAY_MS,
      sampleIntervalMs: e.API_SHED_SAMPLE_INTERVAL_MS,
      maxQueueDelayMs: e.API_SHED_QUEUE_DELAY_MS,
      maxInFlight: e.API_SHED_MAX_IN_FLIGHT,
      retryAfterSeconds: e.API_SHED_RETRY_AFTER_SECONDS,
    },
    maxStalenessMs: e.MAX_STALENESS_MS,
  }
}

export function loadDemoConfig(env: Env): DemoConfig {
  const e = parseEnv(demoEnv, env)
  return {
    dataDir: e.DEMO_DATA_DIR,
    organizations: e.DEMO_ORGANIZATIONS,
    providersPerOrganization: e.DEMO_PROVIDERS,
    seed: e.DEMO_SEED,
    host: e.HOST,
    port: e.PORT,
  }
}

export function loadBenchConfig(env: Env): BenchConfig {
  const e = parseEnv(benchEnv, env)
  return {
    durationSeconds: e.BENCH_DURATION_SECONDS,
    connections: e.BENCH_CONNECTIONS,
    overloadConnections: e.BENCH_OVERLOAD_CONNECTIONS,
  }
}

const verifyEnv = projectorEnv.extend({
  DATABASE_URL: z
    .string({ error: 'is required: the product database to check the replica against' })
    .regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://'),
  /** Debezium's replication slot (connector.json `slot.name`): how far it has read the WAL. */
  VERIFY_SLOT_NAME: z.string().min(1).default('credentialing_replica'),
  /** Where Debezium writes its heartbeats (topic.heartbeat.prefix + '.' + topic.prefix). */
  VERIFY_HEARTBEAT_TOPIC: z.string().min(1).optional(),
  /** Rows read from PostgreSQL per query (keyset pages by primary key). */
  VERIFY_PAGE_ROWS: positiveInt.max(100_000).default(5_000),
  /** How long to wait for the replica to apply what PostgreSQL had committed at the snapshot. */
  VERIFY_CATCH_UP_TIMEOUT_MS: positiveInt.default(120_000),
  /**
   * Debezium's signalling table (connector.json `signal.data.collection`), `schema.table`: where
   * --repair asks for an incremental snapshot. An identifier, checked strictly: it is written into
   * SQL (as an identifier cannot be a parameter).
   */
  VERIFY_SIGNAL_TABLE: z
    .string()
    .regex(/^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$/, 'must be schema.table in lowercase')
    .default('public.debezium_signal'),
  /** Debezium's notification topic (connector.json `notification.sink.topic.name`). */
  VERIFY_NOTIFICATION_TOPIC: z.string().min(1).optional(),
  /** How long --repair waits for the incremental snapshot it signalled to complete. */
  VERIFY_SNAPSHOT_TIMEOUT_MS: positiveInt.default(600_000),
})

/**
 * The variables each command reads, as their schemas validate them. README's configuration tables
 * are held to these (test/integration/readme.test.ts): every variable named exists, every one read
 * is named, with its default.
 */
export const environmentSchemas = {
  projector: projectorEnv,
  api: apiEnv,
  verify: verifyEnv,
  demo: demoEnv,
} as const

/** `npm run verify` (projector/verify/): the projector's settings (for --repair) and the source. */
export type VerifyConfig = {
  projector: ProjectorConfig
  databaseUrl: string
  slotName: string
  heartbeatTopic: string
  pageRows: number
  catchUpTimeoutMs: number
  /** --repair's fallback to Debezium's incremental snapshot (verify/source-repair.ts). */
  snapshot: { signalTable: string; notificationTopic: string; timeoutMs: number }
}

export function loadVerifyConfig(env: Env): VerifyConfig {
  const e = parseEnv(verifyEnv, env)
  return {
    projector: loadProjectorConfig(env),
    databaseUrl: e.DATABASE_URL,
    slotName: e.VERIFY_SLOT_NAME,
    heartbeatTopic: e.VERIFY_HEARTBEAT_TOPIC ?? `__debezium-heartbeat.${e.TOPIC_PREFIX}`,
    pageRows: e.VERIFY_PAGE_ROWS,
    catchUpTimeoutMs: e.VERIFY_CATCH_UP_TIMEOUT_MS,
    snapshot: {
      signalTable: e.VERIFY_SIGNAL_TABLE,
      notificationTopic: e.VERIFY_NOTIFICATION_TOPIC ?? `__debezium-notification.${e.TOPIC_PREFIX}`,
      timeoutMs: e.VERIFY_SNAPSHOT_TIMEOUT_MS,
    },
  }
}

/**
 * The environment of a child process that must not inherit this one's configuration: only
 * `PATH`, so that it finds the same programs, then `vars`.
 */
export function isolatedChildEnv(env: Env, vars: Record<string, string>): Record<string, string> {
  return { PATH: env.PATH ?? '', ...vars }
}
