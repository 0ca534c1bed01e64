// How far behind PostgreSQL the replica is, so that lag is never reported as drift.
//
// A change committed before the snapshot is in the replica once (1) Debezium has written it to
// Kafka, which its replication slot says: `confirmed_flush_lsn` past the snapshot's WAL position
// means every change before it is in the topics; then (2) the live projector's consumer group has
// committed the topics' ends as they were at that moment (it commits a position only after the
// files that applied it). `verify` waits, bounded, for both before comparing.
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

export interface ReplicaPosition {
  /** Change events in Kafka the live projector had not committed. */
  eventsBehind: number
  /** Bytes of WAL between Debezium's confirmed position and the snapshot; undefined: no slot. */
  walBytesBehind: number | undefined
}

export interface KafkaView {
  ends(): Promise<TopicEnds>
  /** Events of `ends` the group has not committed yet. */
  behind(groupId: string, ends: TopicEnds): Promise<number>
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
    async close() {
      await admin.disconnect().catch(() => undefined)
    },
  }
}

/** Where the replica stands against the snapshot, read right after it was taken. */
export async function positionAtSnapshot(
  database: ProductDatabase,
  kafka: KafkaView,
  groupId: string,
  slotName: string,
): Promise<ReplicaPosition> {
  const slot = await database.slot(slotName)
  const eventsBehind = await kafka.behind(groupId, await kafka.ends())
  return {
    eventsBehind,
    walBytesBehind:
      slot.confirmedFlushLsn === undefined
        ? undefined
        : Math.max(0, database.snapshot.lsnNumber - slot.confirmedFlushLsn),
  }
}

export interface CaughtUp {
  /** The topics' ends once Debezium had written everything before the snapshot. */
  ends: TopicEnds
  waitedSeconds: number
  /** Whether Debezium's slot vouched for the topics (false: no such slot, lag is unknown). */
  slotFound: boolean
}

/**
 * Waits until Debezium has written every change before the snapshot to Kafka and the live
 * projector has applied them; refuses (exit 2) when that does not happen in time.
 */
export async function waitForReplica(
  database: ProductDatabase,
  kafka: KafkaView,
  options: { groupId: string; slotName: string; timeoutMs: number; signal?: AbortSignal },
): Promise<CaughtUp> {
  const started = performance.now()
  const deadline = started + options.timeoutMs
  const target = database.snapshot.lsnNumber
  let slotFound = true
  for (;;) {
    const slot = await database.slot(options.slotName)
    if (!slot.exists) {
      slotFound = false
      break
    }
    if ((slot.confirmedFlushLsn ?? 0) >= target) break
    if (performance.now() > deadline || options.signal?.aborted === true) {
      throw new VerifyRefused(
        `Debezium's slot ${options.slotName} is ${target - (slot.confirmedFlushLsn ?? 0)} bytes of WAL behind the snapshot after ${Math.round(options.timeoutMs / 1000)} s${slot.active ? '' : ' and inactive: is the connector running?'} (VERIFY_CATCH_UP_TIMEOUT_MS)`,
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
        `the replica is still ${behind} change events behind the snapshot after ${Math.round(options.timeoutMs / 1000)} s: is the projector running? (VERIFY_CATCH_UP_TIMEOUT_MS)`,
      )
    }
    await sleep(250)
  }
  return { ends, waitedSeconds: (performance.now() - started) / 1000, slotFound }
}

/** Whether an organization file has applied a change past `ends` (a change after the snapshot). */
export function appliedPast(path: string, ends: TopicEnds): boolean {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    const rows = db.prepare('SELECT topic, partition, offset FROM applied_offsets').all() as Array<{
      topic: string
      partition: number
      offset: number
    }>
    return rows.some((r) => {
      const end = ends.get(key(r.topic, r.partition))
      // A partition that did not exist at the snapshot: anything applied from it came after.
      return end === undefined || BigInt(r.offset) >= end
    })
  } finally {
    db.close()
  }
}
