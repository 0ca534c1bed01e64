// Producing a benchmark dataset (an NDJSON file of Kafka records, scripts/dataset) into a real
// broker, shared by the benchmarks that read it back over Kafka.
import { createReadStream } from 'node:fs'
import { createInterface } from 'node:readline'
import type { Kafka } from 'kafkajs'

interface RecordText {
  topic: string
  key: string | null
  value: string | null
}

/**
 * A line's topic, key and value, the key and value as the JSON text they are in the line. Lines in
 * the generator's layout (`{"topic":"…",…,"key":…,"value":…}`, value last) are cut, not parsed:
 * parsing and serializing again ~5 KB values took most of the time of producing a million.
 */
function recordText(line: string): RecordText {
  const keyAt = line.indexOf(',"key":')
  const valueAt = keyAt < 0 ? -1 : line.indexOf(',"value":', keyAt)
  if (line.startsWith('{"topic":"') && valueAt > 0 && line.endsWith('}')) {
    const key = line.slice(keyAt + 7, valueAt)
    const value = line.slice(valueAt + 9, -1)
    return {
      topic: line.slice(10, line.indexOf('"', 10)),
      key: key === 'null' ? null : key,
      value: value === 'null' ? null : value,
    }
  }
  const r = JSON.parse(line) as { topic: string; key: unknown; value: unknown }
  return {
    topic: r.topic,
    key: r.key === null ? null : JSON.stringify(r.key),
    value: r.value === null ? null : JSON.stringify(r.value),
  }
}

/** Produce requests in flight at once: the broker writes one while the next is read and cut. */
const IN_FLIGHT = 4

/**
 * Produces the file's first `limit` records to their topics. Returns how many went to `topics`
 * (the change topics both consumers read: payer_portal_logins is produced, never consumed).
 * `topicPrefix` replaces the dataset's prefix (`product`), so that two encodings of one dataset
 * can live on one broker.
 */
export async function produceFile(
  kafka: Kafka,
  path: string,
  limit: number,
  topics: readonly string[],
  topicPrefix?: string,
  options: {
    /** Rewrites each value's JSON text (bench/rebuild-compacted.ts: a snapshot read as an update). */
    transform?: (value: string) => string
    /** The records' timestamp (CreateTime); absent: the producer's clock. */
    timestampMs?: number
  } = {},
): Promise<number> {
  const timestamp = options.timestampMs === undefined ? undefined : String(options.timestampMs)
  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  const byTopic = new Map<
    string,
    Array<{ key: string | null; value: string | null; timestamp: string | undefined }>
  >()
  const consumed = new Set(topics)
  let count = 0
  let onConsumedTopics = 0
  let pendingBytes = 0
  // One connection to the broker, which handles its requests in order: records stay in order.
  const inFlight = new Set<Promise<void>>()
  let failure: { error: unknown } | undefined
  const flush = async () => {
    const topicMessages = [...byTopic].map(([topic, messages]) => ({ topic, messages }))
    byTopic.clear()
    pendingBytes = 0
    if (topicMessages.length === 0) return
    const sent: Promise<void> = producer.sendBatch({ topicMessages, acks: 1 }).then(
      () => void inFlight.delete(sent),
      (error: unknown) => {
        inFlight.delete(sent)
        failure ??= { error }
      },
    )
    inFlight.add(sent)
    if (inFlight.size >= IN_FLIGHT) await Promise.race(inFlight)
    if (failure !== undefined) throw failure.error
  }
  // Leaving the loop closes the readline interface but not its input, which went on reading and
  // splitting the rest of the file (up to 5 GB) on this thread while the consumers were timed.
  const input = createReadStream(path)
  try {
    for await (const line of createInterface({ input, crlfDelay: Infinity })) {
      if (line === '') continue
      const r = recordText(line)
      if (topicPrefix !== undefined)
        r.topic = `${topicPrefix}${r.topic.slice(r.topic.indexOf('.'))}`
      const value =
        r.value !== null && options.transform !== undefined ? options.transform(r.value) : r.value
      const message = { key: r.key, value, timestamp }
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
  } finally {
    input.destroy()
  }
  await flush()
  await Promise.all(inFlight)
  if (failure !== undefined) throw failure.error
  await producer.disconnect()
  return onConsumedTopics
}
