// Producing a benchmark dataset (an NDJSON file of Kafka records, scripts/dataset) into a real
// broker, shared by the benchmarks that read it back over Kafka.
import { createReadStream } from 'node:fs'
import { createInterface } from 'node:readline'
import type { Kafka } from 'kafkajs'

/**
 * Produces the file's first `limit` records to their topics. Returns how many went to `topics`
 * (the change topics both consumers read: payer_portal_logins is produced, never consumed).
 */
export async function produceFile(
  kafka: Kafka,
  path: string,
  limit: number,
  topics: readonly string[],
): Promise<number> {
  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  const byTopic = new Map<string, Array<{ key: string | null; value: string | null }>>()
  const consumed = new Set(topics)
  let count = 0
  let onConsumedTopics = 0
  let pendingBytes = 0
  const flush = async () => {
    const topicMessages = [...byTopic].map(([topic, messages]) => ({ topic, messages }))
    byTopic.clear()
    pendingBytes = 0
    if (topicMessages.length > 0) await producer.sendBatch({ topicMessages, acks: 1 })
  }
  for await (const line of createInterface({
    input: createReadStream(path),
    crlfDelay: Infinity,
  })) {
    if (line === '') continue
    const r = JSON.parse(line) as { topic: string; key: unknown; value: unknown }
    const message = {
      key: r.key === null ? null : JSON.stringify(r.key),
      value: r.value === null ? null : JSON.stringify(r.value),
    }
    // One produce request carries one record batch per topic, and the broker refuses batches
    // over message.max.bytes (1 MB by default): ~5 KB events fill one in ~200 records.
    const bytes = (message.key?.length ?? 0) + (message.value?.length ?? 0)
    if (pendingBytes + bytes > 900_000) await flush()
    pendingBytes += bytes
    const list = byTopic.get(r.topic) ?? []
    list.push(message)
    byTopic.set(r.topic, list)
    if (consumed.has(r.topic)) onConsumedTopics++
    ++count
    if (count >= limit) break
  }
  await flush()
  await producer.disconnect()
  return onConsumedTopics
}
