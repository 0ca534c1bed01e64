// The environment loaders: defaults, and a refusal naming the variable for each bad value.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  defaultOpenFilesMax,
  defaultPageCacheBytes,
  memoryLimit,
  openFileLimit,
} from '../../src/descriptors.ts'
import {
  ConfigError,
  isolatedChildEnv,
  loadApiConfig,
  loadBenchConfig,
  loadDemoConfig,
  loadProjectorConfig,
  loadVerifyConfig,
} from '../../src/config.ts'

/** The ConfigError a loader throws for `env`. */
function refusal(load: () => unknown): ConfigError {
  try {
    load()
  } catch (error) {
    if (error instanceof ConfigError) return error
    throw error
  }
  throw new Error('the configuration was accepted')
}

describe('loadApiConfig', () => {
  let dataDir: string

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'config-test-'))
  })
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

  it('loads the defaults', () => {
    expect(loadApiConfig({ DATA_DIR: dataDir })).toEqual({
      dataDir,
      host: '0.0.0.0',
      port: 8080,
      admin: { host: '127.0.0.1', port: 9465 },
      redisUrl: undefined,
      rateLimit: { perKey: 120, perOrganization: 600, windowSeconds: 60 },
      openFilesMax: defaultOpenFilesMax(openFileLimit()),
      pageCacheBytes: defaultPageCacheBytes(memoryLimit()),
      logLevel: 'info',
      cursorSecret: expect.any(String) as string,
      shedding: {
        maxEventLoopDelayMs: 50,
        sampleIntervalMs: 100,
        maxQueueDelayMs: 20,
        maxInFlight: 512,
        retryAfterSeconds: 1,
      },
      maxStalenessMs: 30_000,
    })
  })

  it('reads the load-shedding thresholds, 0 turning a check off, and refuses others', () => {
    expect(
      loadApiConfig({
        DATA_DIR: dataDir,
        API_SHED_EVENT_LOOP_DELAY_MS: '0',
        API_SHED_QUEUE_DELAY_MS: '0',
        API_SHED_MAX_IN_FLIGHT: '0',
        API_SHED_RETRY_AFTER_SECONDS: '5',
        API_SHED_SAMPLE_INTERVAL_MS: '20',
      }).shedding,
    ).toEqual({
      maxEventLoopDelayMs: 0,
      sampleIntervalMs: 20,
      maxQueueDelayMs: 0,
      maxInFlight: 0,
      retryAfterSeconds: 5,
    })
    for (const [name, value] of [
      ['API_SHED_EVENT_LOOP_DELAY_MS', '-1'],
      ['API_SHED_QUEUE_DELAY_MS', '1.5'],
      ['API_SHED_MAX_IN_FLIGHT', 'many'],
      ['API_SHED_RETRY_AFTER_SECONDS', '0'],
      ['API_SHED_SAMPLE_INTERVAL_MS', '5'],
    ] as const) {
      const error = refusal(() => loadApiConfig({ DATA_DIR: dataDir, [name]: value }))
      expect(error.message).toMatch(new RegExp(`^\\s*${name}: .*\\(got "${value}"\\)$`, 'm'))
    }
  })

  it('reads PAGE_CACHE_MB as megabytes, 0 turning the cache off, and refuses others, naming it', () => {
    expect(loadApiConfig({ DATA_DIR: dataDir, PAGE_CACHE_MB: '0' }).pageCacheBytes).toBe(0)
    expect(loadApiConfig({ DATA_DIR: dataDir, PAGE_CACHE_MB: '2' }).pageCacheBytes).toBe(2097152)
    for (const value of ['-1', '1.5', 'lots', '65537']) {
      const error = refusal(() => loadApiConfig({ DATA_DIR: dataDir, PAGE_CACHE_MB: value }))
      expect(error.message).toMatch(new RegExp(`^\\s*PAGE_CACHE_MB: .*\\(got "${value}"\\)$`, 'm'))
    }
  })

  it('reads an empty variable as unset', () => {
    expect(loadApiConfig({ DATA_DIR: dataDir, PORT: '', REDIS_URL: '' })).toMatchObject({
      port: 8080,
      redisUrl: undefined,
    })
  })

  it('refuses a bad PORT, naming it and the value', () => {
    for (const value of ['http', '-1', '65536', '80.5']) {
      const error = refusal(() => loadApiConfig({ DATA_DIR: dataDir, PORT: value }))
      expect(error.message).toMatch(new RegExp(`^\\s*PORT: .*\\(got "${value}"\\)$`, 'm'))
    }
  })

  it('refuses a bad RATE_LIMIT_PER_KEY, naming it', () => {
    for (const value of ['0', 'many', '1.5']) {
      const error = refusal(() => loadApiConfig({ DATA_DIR: dataDir, RATE_LIMIT_PER_KEY: value }))
      expect(error.message).toMatch(/^\s*RATE_LIMIT_PER_KEY: /m)
      expect(error.message).not.toMatch(/^\s*(PORT|DATA_DIR):/m)
    }
  })

  it('refuses a DATA_DIR that does not exist or is not a directory', () => {
    const missing = join(dataDir, 'missing')
    expect(refusal(() => loadApiConfig({ DATA_DIR: missing })).message).toMatch(
      new RegExp(`^\\s*DATA_DIR: must be an existing directory: ${missing}`, 'm'),
    )
    const file = join(dataDir, 'a-file')
    writeFileSync(file, '')
    expect(refusal(() => loadApiConfig({ DATA_DIR: file })).message).toMatch(
      /^\s*DATA_DIR: must be a directory: /m,
    )
  })

  it('lists every bad variable at once, never echoing a secret', () => {
    const { message } = refusal(() =>
      loadApiConfig({
        DATA_DIR: dataDir,
        ADMIN_PORT: 'x',
        CURSOR_SECRET: 'short-secret',
        REDIS_URL: 'http://user:hunter2@redis',
      }),
    )
    expect(message).toMatch(/^\s*ADMIN_PORT: /m)
    expect(message).toMatch(/^\s*CURSOR_SECRET: /m)
    expect(message).toMatch(/^\s*REDIS_URL: /m)
    expect(message).not.toContain('short-secret')
    expect(message).not.toContain('hunter2')
  })
})

describe('the scripts loaders', () => {
  it('loads the demo and bench defaults', () => {
    expect(loadDemoConfig({})).toEqual({
      dataDir: './data/demo',
      organizations: 3,
      providersPerOrganization: 1500,
      seed: 1,
      host: '127.0.0.1',
      port: 8080,
    })
    expect(loadBenchConfig({})).toEqual({
      durationSeconds: 8,
      connections: 16,
      overloadConnections: 512,
    })
  })

  it('refuses bad values, naming the variable', () => {
    expect(refusal(() => loadDemoConfig({ DEMO_ORGANIZATIONS: '0' })).message).toMatch(
      /^\s*DEMO_ORGANIZATIONS: /m,
    )
    expect(refusal(() => loadBenchConfig({ BENCH_CONNECTIONS: 'lots' })).message).toMatch(
      /^\s*BENCH_CONNECTIONS: .*\(got "lots"\)$/m,
    )
  })

  it('gives a child process PATH and its own variables only', () => {
    expect(isolatedChildEnv({ PATH: '/bin', PORT: '1' }, { DATA_DIR: '/d' })).toEqual({
      PATH: '/bin',
      DATA_DIR: '/d',
    })
  })
})

describe('loadProjectorConfig', () => {
  it('names the variable, not a path into it, for a bad broker', () => {
    expect(() => loadProjectorConfig({ KAFKA_BROKERS: '127.0.0.1:9092,nohostport' })).toThrow(
      /^invalid configuration:\n {2}KAFKA_BROKERS: .*\(got "127\.0\.0\.1:9092,nohostport"\)$/,
    )
  })

  it('keeps open by default as many organization files as the descriptors allow, configurable, and refuses 0', () => {
    expect(loadProjectorConfig({}).openFilesMax).toBe(defaultOpenFilesMax(openFileLimit()))
    expect(loadProjectorConfig({ OPEN_FILES_MAX: '1024' }).openFilesMax).toBe(1024)
    expect(() => loadProjectorConfig({ OPEN_FILES_MAX: '0' })).toThrow(/OPEN_FILES_MAX: /)
  })

  it('chooses the shared files from the organizations by default; ORGANIZATION_FILES sets them', () => {
    expect(loadProjectorConfig({}).organizationFiles).toBe('auto')
    expect(loadProjectorConfig({ ORGANIZATION_FILES: 'auto' }).organizationFiles).toBe('auto')
    expect(loadProjectorConfig({ ORGANIZATION_FILES: '0' }).organizationFiles).toBe(0)
    expect(loadProjectorConfig({ ORGANIZATION_FILES: '100' }).organizationFiles).toBe(100)
    expect(() => loadProjectorConfig({ ORGANIZATION_FILES: '-1' })).toThrow(/ORGANIZATION_FILES: /)
    expect(() => loadProjectorConfig({ ORGANIZATION_FILES: 'many' })).toThrow(
      /ORGANIZATION_FILES: must be 'auto' or a whole number from 0 to 10000/,
    )
    expect(() => loadProjectorConfig({ ORGANIZATION_FILES: '10001' })).toThrow(
      /ORGANIZATION_FILES: must be at most 10000/,
    )
  })

  it('shares 32 MB of SQLite page cache by default, configurable, and refuses 0', () => {
    expect(loadProjectorConfig({}).sqliteCacheBytes).toBe(32 * 1024 * 1024)
    expect(loadProjectorConfig({ SQLITE_CACHE_MB: '48' }).sqliteCacheBytes).toBe(48 * 1024 * 1024)
    expect(() => loadProjectorConfig({ SQLITE_CACHE_MB: '0' })).toThrow(/SQLITE_CACHE_MB: /)
  })

  it('builds documents on 1 worker thread by default, 0 for none, and refuses a fraction', () => {
    expect(loadProjectorConfig({}).documentBuildWorkers).toBe(1)
    expect(loadProjectorConfig({ DOCUMENT_BUILD_WORKERS: '0' }).documentBuildWorkers).toBe(0)
    expect(() => loadProjectorConfig({ DOCUMENT_BUILD_WORKERS: '1.5' })).toThrow(
      /DOCUMENT_BUILD_WORKERS: /,
    )
  })

  it('runs one lane per core by default, configurable, and refuses 0 and a fraction', () => {
    expect(loadProjectorConfig({}).lanes).toBe(availableParallelism())
    expect(loadProjectorConfig({ LANES: '3' }).lanes).toBe(3)
    expect(() => loadProjectorConfig({ LANES: '0' })).toThrow(/LANES: /)
    expect(() => loadProjectorConfig({ LANES: '1.5' })).toThrow(/LANES: /)
  })

  it('logs progress every 5 s by default, configurable, and refuses 0', () => {
    expect(loadProjectorConfig({}).progressIntervalMs).toBe(5_000)
    expect(loadProjectorConfig({ PROGRESS_INTERVAL_MS: '250' }).progressIntervalMs).toBe(250)
  })

  it('freshness: the heartbeat table topic under the prefix, a settle time, one warning', () => {
    expect(loadProjectorConfig({ TOPIC_PREFIX: 'p' }).freshness).toEqual({
      heartbeatTopic: 'p.public.replica_heartbeat',
      settleMs: 250,
      missingWarnMs: 30_000,
    })
    expect(() => loadProjectorConfig({ FRESHNESS_SETTLE_MS: '-1' })).toThrow(/FRESHNESS_SETTLE_MS/)
    expect(() => loadProjectorConfig({ PROGRESS_INTERVAL_MS: '0' })).toThrow(
      /PROGRESS_INTERVAL_MS: /,
    )
  })

  it('applies live batches unpaced by default, paced if set; refuses a fraction or past 1 s', () => {
    expect(loadProjectorConfig({}).liveApplyIntervalMs).toBe(0)
    expect(loadProjectorConfig({ LIVE_APPLY_INTERVAL_MS: '25' }).liveApplyIntervalMs).toBe(25)
    for (const bad of ['-1', '2.5', '1001', 'fast']) {
      expect(() => loadProjectorConfig({ LIVE_APPLY_INTERVAL_MS: bad })).toThrow(
        /LIVE_APPLY_INTERVAL_MS: /,
      )
    }
  })

  it('waits 5 minutes for a hand-over by default, configurable, and refuses 0 and a fraction', () => {
    expect(loadProjectorConfig({}).handoverTimeoutMs).toBe(300_000)
    expect(loadProjectorConfig({ HANDOVER_TIMEOUT_MS: '2000' }).handoverTimeoutMs).toBe(2_000)
    for (const bad of ['0', '1.5', 'soon']) {
      expect(() => loadProjectorConfig({ HANDOVER_TIMEOUT_MS: bad })).toThrow(
        /HANDOVER_TIMEOUT_MS: /,
      )
    }
  })
})

describe('loadVerifyConfig', () => {
  it('requires DATABASE_URL and never echoes it; the rest has defaults', () => {
    expect(refusal(() => loadVerifyConfig({})).message).toMatch(/DATABASE_URL: is required/)
    const bad = refusal(() => loadVerifyConfig({ DATABASE_URL: 'mysql://u:hunter2@h/db' }))
    expect(bad.message).toMatch(/DATABASE_URL: must start with postgres:\/\//)
    expect(bad.message).not.toContain('hunter2')
    const config = loadVerifyConfig({ DATABASE_URL: 'postgres://v@db/product', TOPIC_PREFIX: 'p' })
    expect(config).toMatchObject({
      databaseUrl: 'postgres://v@db/product',
      slotName: 'credentialing_replica',
      heartbeatTopic: '__debezium-heartbeat.p',
      pageRows: 5_000,
      catchUpTimeoutMs: 120_000,
      snapshot: {
        signalTable: 'public.debezium_signal',
        notificationTopic: '__debezium-notification.p',
        timeoutMs: 600_000,
      },
      projector: { dataDir: './data', topicPrefix: 'p' },
    })
    expect(() =>
      loadVerifyConfig({ DATABASE_URL: 'postgres://db/p', VERIFY_PAGE_ROWS: '0' }),
    ).toThrow(/VERIFY_PAGE_ROWS: /)
    // Written into SQL as an identifier: nothing but schema.table passes.
    expect(() =>
      loadVerifyConfig({
        DATABASE_URL: 'postgres://db/p',
        VERIFY_SIGNAL_TABLE: 'public.s; DROP TABLE providers',
      }),
    ).toThrow(/VERIFY_SIGNAL_TABLE: must be schema\.table/)
  })
})
