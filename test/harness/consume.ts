// Reading topics from tests: wait for topics to exist, and collect records until a condition
// holds. Records come back in the project's file-source shape (projector/decode/decode.ts).
import { setTimeout as sleep } from 'node:timers/promises'
import { kafkaClient } from './kafka.ts'
import { HarnessError, waitFor } from './process.ts'

/** One Kafka record as the NDJSON file source carries it: parsed JSON key and value. */
export interface CapturedRecord {
  topic: string
  partition: number
  offset: string
  key: unknown
  value: unknown
  /**
   * The exact bytes as text. JSON.parse rounds int64 values beyond 2^53 (source.ts_ns,
   * a large bigint column), so fixtures are written from these, not from key/value.
   */
  keyText: string | null
  valueText: string | null
}

/** Waits until every topic exists with a leader (Debezium creates them on first write). */
export async function waitForTopics(
  brokers: string[],
  topics: string[],
  timeoutMs = 60_000,
): Promise<void> {
  const admin = kafkaClient(brokers).admin()
  await admin.connect()
  try {
    await waitFor(
      `topics ${topics.join(', ')}`,
      async () => {
        const existing = new Set(await admin.listTopics())
        return topics.every((t) => existing.has(t)) ? true : undefined
      },
      { timeoutMs, intervalMs: 500 },
    )
  } finally {
    await admin.disconnect()
  }
}

function parse(text: string | null): unknown {
  if (text === null) return null
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

/**
 * Reads `topics` from the beginning (a throwaway consumer group) until `until(records)` is true,
 * then returns everything read, in arrival order. Fails after timeoutMs with what it saw.
 */
export async function collectRecords(
  brokers: string[],
  topics: string[],
  until: (records: CapturedRecord[]) => boolean,
  timeoutMs = 60_000,
): Promise<CapturedRecord[]> {
  await waitForTopics(brokers, topics, timeoutMs)
  const consumer = kafkaClient(brokers).consumer({
    groupId: `replica-test-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`,
    // A single test consumer: no need to wait for other members.
    rebalanceTimeout: 10_000,
    sessionTimeout: 10_000,
  })
  const records: CapturedRecord[] = []
  let done = false
  await consumer.connect()
  try {
    await consumer.subscribe({ topics, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ topic, partition, message }) => {
        const keyText = message.key?.toString('utf8') ?? null
        const valueText = message.value?.toString('utf8') ?? null
        records.push({
          topic,
          partition,
          offset: message.offset,
          key: parse(keyText),
          value: parse(valueText),
          keyText,
          valueText,
        })
        if (!done && until(records)) done = true
        return Promise.resolve()
      },
    })
    const deadline = Date.now() + timeoutMs
    while (!done && Date.now() < deadline) await sleep(100)
    if (!done) {
      const seen = records.map((r) => `${r.topic}@${r.offset}`).join(', ')
      throw new HarnessError(
        `timed out after ${timeoutMs} ms reading ${topics.join(', ')}; saw ${records.length} records: ${seen}`,
      )
    }
    return records
  } finally {
    await consumer.disconnect()
  }
}
