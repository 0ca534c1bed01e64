// Proves the test harness: real Kafka, PostgreSQL, Kafka Connect + Debezium and Redis start on
// this machine, talk to each other, and go away on stop().
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startConnect, type StartedConnect } from '../harness/connect.ts'
import { collectRecords } from '../harness/consume.ts'
import { createTopics, kafkaClient, startKafka, type StartedKafka } from '../harness/kafka.ts'
import { requireJava } from '../harness/maven.ts'
import { startPostgres, type StartedPostgres } from '../harness/postgres.ts'
import { startRedis } from '../harness/redis.ts'

const ORG = '0000000a-0000-4000-8000-000000000001'
const PROVIDER = '0000000b-0000-4000-8000-000000000001'

interface Envelope {
  schema: { type: string; name?: string }
  payload: { op: string; after: Record<string, unknown> | null; source: { table: string } }
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
    expect(tables.rowCount).toBe(16)
  })

  describe('Kafka Connect + Debezium', () => {
    let connect: StartedConnect

    beforeAll(async () => {
      connect = await startConnect({ brokers: kafka.brokers, postgres, topicPrefix: 'product' })
    })
    afterAll(async () => {
      await connect?.stop()
    })

    it('streams inserted rows to <prefix>.public.<table> as JsonConverter envelopes', async () => {
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
      const byTopic = new Map(records.map((r) => [r.topic, r.value as Envelope]))

      const organization = byTopic.get('product.public.organizations')
      expect(organization?.schema.type).toBe('struct')
      expect(organization?.payload).toMatchObject({
        op: 'c',
        after: { id: ORG, name: 'Harness Org', api_enabled: true, billing_status: 'active' },
        source: { table: 'organizations' },
      })
      expect(byTopic.get('product.public.providers')?.payload).toMatchObject({
        op: 'c',
        after: { id: PROVIDER, organization_id: ORG, languages: ['French', 'Polish'] },
      })

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
})
