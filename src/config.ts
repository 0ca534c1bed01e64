// Configuration: read once from the environment, validated, and passed down. Nothing else in the
// project reads process.env.
import { z } from 'zod'

export class ConfigError extends Error {
  override name = 'ConfigError'
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
})

export type ProjectorConfig = {
  dataDir: string
  kafka: { brokers: string[]; clientId: string; groupId: string }
  topicPrefix: string
  deadLetterTopic: string
  admin: { host: string; port: number }
  logLevel: z.infer<typeof logLevel>
  walCheckpointBytes: number
}

const apiEnv = z.object({
  DATA_DIR: z.string().min(1).default('./data'),
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
  /** Most organization files kept open at once (least recently used are closed). */
  OPEN_FILES_MAX: positiveInt.default(256),
  LOG_LEVEL: logLevel.default('info'),
  /**
   * Signs paging cursors, so that a cursor altered or made for another list is refused. Every
   * api process behind one load balancer must share it; the default suits a single node.
   */
  CURSOR_SECRET: z.string().min(16, 'at least 16 characters').optional(),
})

export type ApiConfig = {
  dataDir: string
  host: string
  port: number
  admin: { host: string; port: number }
  redisUrl: string | undefined
  rateLimit: { perKey: number; perOrganization: number; windowSeconds: number }
  openFilesMax: number
  logLevel: z.infer<typeof logLevel>
  cursorSecret: string
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
      const name = issue.path.join('.')
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
    openFilesMax: e.OPEN_FILES_MAX,
    logLevel: e.LOG_LEVEL,
    cursorSecret: e.CURSOR_SECRET ?? DEFAULT_CURSOR_SECRET,
  }
}
