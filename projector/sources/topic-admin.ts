// What the Kafka source asks of the cluster's admin API, apart from consuming: the topics it
// needs created, their ends, the group's committed offsets and lag. Stateless: each takes the
// connected admin client.
import type { Admin } from 'kafkajs'
import type { Logger } from 'pino'
import type { PartitionEnds } from './freshness.ts'
import { CHANGE_TOPIC_CONFIG, changeTopicConfigEntries } from './topic-config.ts'

/** The key maps of partitions are kept under. */
export function partitionKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`
}

/**
 * Creates the topics missing: the change topics compacted, as deploy/debezium/connector.json
 * creates them (topic-config.ts), and the dead-letter topic. A consumer only subscribes to topics
 * that exist, and Debezium creates a table's topic only at its first row.
 */
export async function ensureTopics(
  admin: Admin,
  topics: readonly string[],
  deadLetterTopic: string | undefined,
  logger: Logger,
): Promise<void> {
  const existing = new Set(await admin.listTopics())
  const missing = topics.filter((t) => !existing.has(t))
  if (missing.length > 0) {
    await admin.createTopics({
      waitForLeaders: true,
      topics: missing.map((topic) => ({ topic, configEntries: changeTopicConfigEntries() })),
    })
    logger.info({ topics: missing, config: CHANGE_TOPIC_CONFIG }, 'created missing change topics')
  }
  if (deadLetterTopic !== undefined && !existing.has(deadLetterTopic)) {
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: deadLetterTopic }] })
  }
}

/**
 * Each topic's partitions with their first and next offsets, asked for all topics at once
 * (kafkajs asks one topic a call; one after another, the fifteen took a round trip each, and
 * the check that ends an initial load waits for them).
 */
export async function topicOffsets(admin: Admin, topics: readonly string[]) {
  return Promise.all(
    topics.map(async (topic) => ({ topic, partitions: await admin.fetchTopicOffsets(topic) })),
  )
}

/** Events between the topics' start and end offsets now. */
export async function eventsInTopics(admin: Admin, topics: readonly string[]): Promise<number> {
  let events = 0
  for (const { partitions } of await topicOffsets(admin, topics)) {
    for (const end of partitions) events += Number(BigInt(end.high) - BigInt(end.low))
  }
  return events
}

/** The first and next offsets of every partition of `topics`, for a freshness candidate. */
export async function partitionEnds(
  admin: Admin,
  topics: readonly string[],
): Promise<Map<string, PartitionEnds>> {
  const ends = new Map<string, PartitionEnds>()
  for (const { topic, partitions } of await topicOffsets(admin, topics)) {
    for (const p of partitions) {
      ends.set(partitionKey(topic, p.partition), { low: BigInt(p.low), high: BigInt(p.high) })
    }
  }
  return ends
}

/** The group's committed offsets (partitions it has committed none of are left out). */
export async function committedOffsets(
  admin: Admin,
  groupId: string,
  topics: readonly string[],
): Promise<Map<string, bigint>> {
  const committed = new Map<string, bigint>()
  for (const { topic, partitions } of await admin.fetchOffsets({ groupId, topics: [...topics] })) {
    for (const { partition, offset } of partitions) {
      if (offset !== '-1') committed.set(partitionKey(topic, partition), BigInt(offset))
    }
  }
  return committed
}

/** Records the group has not committed, by partition (from a partition's start if none). */
export async function groupLag(
  admin: Admin,
  groupId: string,
  topics: readonly string[],
  /** Where each partition is read from instead (default: the committed offsets). */
  next: (committed: ReadonlyMap<string, bigint>) => ReadonlyMap<string, bigint> = (c) => c,
): Promise<{ topic: string; partition: number; lag: number }[]> {
  const [committed, offsets] = await Promise.all([
    committedOffsets(admin, groupId, topics),
    topicOffsets(admin, topics),
  ])
  const from = next(committed)
  const lags = []
  for (const { topic, partitions } of offsets) {
    for (const end of partitions) {
      const start = from.get(partitionKey(topic, end.partition)) ?? BigInt(end.low)
      const lag = Math.max(0, Number(BigInt(end.high) - start))
      lags.push({ topic, partition: end.partition, lag })
    }
  }
  return lags
}
