// How far behind PostgreSQL the replica is, so that lag is never reported as drift.
//
// A change committed before the snapshot is in the replica once (1) Debezium has written it to
// Kafka and (2) the live projector's consumer group has committed the topics' ends as they were
// then (it commits a position only after the files that applied it). `verify` waits, bounded, for
// both before comparing. For (1), the evidence is, in order:
//   - Debezium's replication slot: `confirmed_flush_lsn` at or past the snapshot's WAL position
//     means every change before it is in the topics. Debezium confirms only positions of changes
//     it captured, so while the product tables are idle the slot stays behind any other WAL;
//   - then a Debezium heartbeat written after the snapshot (heartbeat.interval.ms, its own topic):
//     the connector's loop was alive after the snapshot, having processed what PostgreSQL had sent
//     it, which is everything before the snapshot unless the server itself lagged in decoding;
//   - no slot of that name (a connector gone, or its slot dropped): lag cannot be told from drift,
//     and the report says so.
//
// The opposite case, a replica ahead of the snapshot (changes committed after it, applied before
// the comparison), is told by each organization file's applied offsets: a file that applied
// nothing past those ends is exactly as of the snapshot; one that did is checked again, with a new
// snapshot (run.ts).
import Database from 'better-sqlite3'
import { Kafka, logLevel as kafkaLogLevel } from 'kafkajs'
import { setTimeout as sleep } from 'node:timers/promises'
import { changeTopics } from '../sources/kafka.ts'
import { VerifyRefused, type ProductDatabase } from './source.ts'

/** The next offset of every partition of the change topics. */
export type TopicEnds = Map<string, bigint>

const key = (topic: string, partition: number) => `${topic}\u0000${partition}`

/** What showed that Debezium had written every change before the snapshot to Kafka. */
export type DebeziumEvidence = 'slot' | 'heartbeat' | 'no-slot'

export interface KafkaView {
  ends(): Promise<TopicEnds>
  /** Events of `ends` the group has not committed yet. */
  behind(groupId: string, ends: TopicEnds): Promise<number>
  /** Whether `topic` exists and holds a record written at or after `sinceMs`. */
  recordSince(topic: string, sinceMs: number): Promise<boolean>
  close(): Promise<void>
}

export async function openKafkaView(options: {
  brokers: string[]
  clientId: string
  topicPrefix: string
}): Promise<KafkaView> {
  const kafka = new Kafka({
    clientId: `${options.clientId}.verify`,
    brokers: options.brokers,
    logLevel: kafkaLogLevel.NOTHING,
    connectionTimeout: 5_000,
    retry: { retries: 2 },
  })
  const admin = kafka.admin()
  try {
    await admin.connect()
  } catch (error) {
    throw new VerifyRefused(
      `cannot reach Kafka at ${options.brokers.join(',')} (KAFKA_BROKERS), needed to tell lag from drift: ${(error as Error).message}`,
    )
  }
  const topics = changeTopics(options.topicPrefix)
  return {
    async ends() {
      const existing = new Set(await admin.listTopics())
      const ends: TopicEnds = new Map()
      for (const topic of topics) {
        if (!existing.has(topic)) continue
        for (const p of await admin.fetchTopicOffsets(topic)) {
          ends.set(key(topic, p.partition), BigInt(p.high))
        }
      }
      return ends
    },
    async behind(groupId, ends) {
      const present = [...new Set([...ends.keys()].map((k) => k.split('\u0000')[0]!))]
      if (present.length === 0) return 0
      const committed = await admin.fetchOffsets({ groupId, topics: present })
      const at = new Map<string, bigint>()
      for (const { topic, partitions } of committed) {
        for (const p of partitions) at.set(key(topic, p.partition), BigInt(p.offset))
      }
      let behind = 0n
      for (const [k, end] of ends) {
        const offset = at.get(k) ?? -1n
        // -1: nothing committed; everything before the end is behind (a retained topic's start
        // is 0 here: topics are kept forever).
        const from = offset < 0n ? 0n : offset
        if (end > from) behind += end - from
      }
      return Number(behind)
    },
    async recordSince(topic, sinceMs) {
      if (!(await admin.listTopics()).includes(topic)) return false
      const ends = await admin.fetchTopicOffsets(topic)
      const from = await admin.fetchTopicOffsetsByTimestamp(topic, sinceMs)
      // No record that late: Kafka answers the end offset (or -1).
      return from.some((p) => {
        const end = ends.find((e) => e.partition === p.partition)?.high ?? '0'
        return BigInt(p.offset) >= 0n && BigInt(p.offset) < BigInt(end)
      })
    },
    async close() {
      await admin.disconnect().catch(() => undefined)
    },
  }
}

/** Change events in Kafka the live projector had not applied, read right after the snapshot. */
export async function eventsBehindNow(kafka: KafkaView, groupId: string): Promise<number> {
  return kafka.behind(groupId, await kafka.ends())
}

export interface CaughtUp {
  /** The topics' ends once Debezium had written everything before the snapshot. */
  ends: TopicEnds
  waitedSeconds: number
  debezium: DebeziumEvidence
}

/**
 * Waits until Debezium has written every change before the snapshot to Kafka and the live
 * projector has applied them; refuses (exit 2) when that does not happen in time.
 */
export async function waitForReplica(
  database: ProductDatabase,
  kafka: KafkaView,
  options: {
    groupId: string
    slotName: string
    heartbeatTopic: string
    timeoutMs: number
    signal?: AbortSignal
  },
): Promise<CaughtUp> {
  const started = performance.now()
  const deadline = started + options.timeoutMs
  const target = database.snapshot.lsnNumber
  const seconds = Math.round(options.timeoutMs / 1000)
  let debezium: DebeziumEvidence
  for (;;) {
    const slot = await database.slot(options.slotName)
    if (!slot.exists) {
      debezium = 'no-slot'
      break
    }
    if ((slot.confirmedFlushLsn ?? 0) >= target) {
      debezium = 'slot'
      break
    }
    if (
      slot.active &&
      (await kafka.recordSince(options.heartbeatTopic, database.snapshot.at.getTime()))
    ) {
      debezium = 'heartbeat'
      break
    }
    if (performance.now() > deadline || options.signal?.aborted === true) {
      throw new VerifyRefused(
        slot.active
          ? `Debezium (slot ${options.slotName}) showed no progress past the snapshot in ${seconds} s: neither its slot nor a heartbeat on ${options.heartbeatTopic} (VERIFY_CATCH_UP_TIMEOUT_MS; is heartbeat.interval.ms set?)`
          : `Debezium's slot ${options.slotName} is inactive and behind the snapshot: is the connector running?`,
      )
    }
    await sleep(250)
  }
  const ends = await kafka.ends()
  for (;;) {
    const behind = await kafka.behind(options.groupId, ends)
    if (behind === 0) break
    if (performance.now() > deadline || options.signal?.aborted === true) {
      throw new VerifyRefused(
        `the replica is still ${behind} change events behind the snapshot after ${seconds} s: is the projector running? (VERIFY_CATCH_UP_TIMEOUT_MS)`,
      )
    }
    await sleep(250)
  }
  return { ends, waitedSeconds: (performance.now() - started) / 1000, debezium }
}

/** Whether an organization file has applied a change past `ends` (a change after the snapshot). */
export function appliedPast(path: string, ends: TopicEnds): boolean {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    return pastEnds(
      db.prepare('SELECT topic, partition, offset FROM applied_offsets').all() as AppliedOffset[],
      ends,
    )
  } finally {
    db.close()
  }
}

export interface AppliedOffset {
  topic: string
  partition: number
  offset: number
}

/** Whether any of these applied offsets is at or past `ends`. */
export function pastEnds(applied: readonly AppliedOffset[], ends: TopicEnds): boolean {
  return applied.some((r) => {
    const end = ends.get(key(r.topic, r.partition))
    // A partition that did not exist then: anything applied from it came after.
    return end === undefined || BigInt(r.offset) >= end
  })
}
