// The Kafka source across a lost broker, on a broker of its own (it goes away and comes back).
// kafkajs retries a lost broker for a while, then gives its consumer up; the source must build the
// next one itself, without losing what it held and without breaking the new member (a CI run saw
// the e2e fault test's projector dropped from its group every 30 s, for good, after kafkajs had
// restarted a consumer it gave up).
import { Kafka, type Admin, type Producer } from 'kafkajs'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SourceRecord } from '../../../projector/decode/decode.ts'
import { emptyOutcome } from '../../../projector/lanes/pack.ts'
import { committedOffsets, partitionKey } from '../../../projector/sources/topic-admin.ts'
import {
  createTopics,
  kafkaClient,
  startRestartableKafka,
  type RestartableKafka,
} from '../../harness/kafka.ts'
import { waitFor } from '../../harness/process.ts'
import { testKafkaSource } from '../../support/kafka-source.ts'

let kafka: RestartableKafka

beforeAll(async () => {
  kafka = await startRestartableKafka()
})

afterAll(async () => {
  await kafka?.stop()
})

/** `waitFor` with this file's patience; a probe of a broker coming back may fail: it is asked again. */
function eventually<T>(what: string, probe: () => T | undefined | Promise<T | undefined>) {
  return waitFor(what, async () => probe(), { timeoutMs: 90_000, intervalMs: 200 })
}

/** A client of its own for each use: a lost broker leaves a connected one failing for a while. */
async function withClient<T>(use: (admin: Admin, producer: Producer) => Promise<T>): Promise<T> {
  const client: Kafka = kafkaClient(kafka.brokers)
  const admin = client.admin()
  const producer = client.producer()
  await Promise.all([admin.connect(), producer.connect()])
  try {
    return await use(admin, producer)
  } finally {
    await Promise.allSettled([admin.disconnect(), producer.disconnect()])
  }
}

function send(topic: string, from: number, to: number): Promise<unknown> {
  return withClient((_, producer) =>
    producer.send({
      topic,
      messages: Array.from({ length: to - from + 1 }, (_, i) => ({
        key: `k${from + i}`,
        value: `{"n":${from + i}}`,
      })),
    }),
  )
}

describe('Kafka source, the broker lost', { timeout: 240_000 }, () => {
  it('follows a consumer kafkajs gave up with a new one: nothing lost, no stop, a stable member', async () => {
    const topic = 'outage.public.a'
    await createTopics(kafka.brokers, [topic])
    const applied: SourceRecord[] = []
    let hold: Promise<void> | undefined
    let holding = false
    const fatal: Error[] = []
    const warnings: string[] = []
    const { source, ready, groupId } = testKafkaSource({
      brokers: kafka.brokers,
      topicPrefix: 'outage',
      topics: [topic],
      logger: pino(
        { level: 'warn' },
        { write: (line: string) => warnings.push((JSON.parse(line) as { msg: string }).msg) },
      ),
      applier: {
        applyBatch: async (records) => {
          applied.push(...records)
          if (hold !== undefined) {
            holding = true
            await hold
          }
          return emptyOutcome()
        },
        commit: () => ({}),
        buildInProgress: () => undefined,
      },
      onFatal: (error) => {
        fatal.push(error)
        return true
      },
      // A lost broker gives the consumer up at once, not after minutes of retries.
      consumerRetries: 0,
    })
    const offsetsApplied = () => new Set(applied.map((r) => Number(r.offset)))
    const committed = () =>
      withClient(async (admin) =>
        (await committedOffsets(admin, groupId, [topic])).get(partitionKey(topic, 0)),
      )
    await source.start()
    try {
      await ready
      await send(topic, 0, 2)
      await eventually('the first records committed', async () =>
        (await committed()) === 3n ? true : undefined,
      )

      // A group in hand as the broker goes: it is applied, its offset waits for the next consumer.
      let release!: () => void
      hold = new Promise((resolve) => (release = resolve))
      await send(topic, 3, 3)
      await eventually('the held group', () => (holding ? true : undefined))
      await kafka.stopBroker()
      release()
      hold = undefined
      await eventually('kafkajs to give the consumer up', () =>
        warnings.some((m) => m.startsWith('the Kafka consumer gave up')) ? true : undefined,
      )
      await kafka.startBroker()
      await send(topic, 4, 6)

      await eventually('every record applied', () =>
        [0, 1, 2, 3, 4, 5, 6].every((n) => offsetsApplied().has(n)) ? true : undefined,
      )
      await eventually('every offset committed', async () =>
        (await committed()) === 7n ? true : undefined,
      )
      expect(fatal).toEqual([])

      // One member, and the same one past a whole session (30 s): a member dropped every session
      // would have rejoined by then, under a new id.
      const members = () =>
        withClient(async (admin) => {
          const { groups } = await admin.describeGroups([groupId])
          return groups[0]!.members.map((m) => m.memberId)
        })
      const before = await members()
      expect(before).toHaveLength(1)
      await new Promise((r) => setTimeout(r, 35_000))
      await send(topic, 7, 7)
      await eventually('a record sent after the session', () =>
        offsetsApplied().has(7) ? true : undefined,
      )
      expect(await members()).toEqual(before)
      await eventually('its offset committed', async () =>
        (await committed()) === 8n ? true : undefined,
      )
      expect(fatal).toEqual([])
    } finally {
      hold = undefined
      await source.stop()
    }
  })
})
