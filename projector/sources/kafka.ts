// The Kafka source: a kafkajs consumer group over the change topics. Each fetched batch is applied
// (files committed) before its offsets are committed to Kafka, and dead letters are produced
// before that too, so a crash anywhere redelivers rather than loses.
import {
  Kafka,
  logLevel as kafkaLogLevel,
  type Admin,
  type Consumer,
  type EachBatchPayload,
  type Producer,
  type KafkaConfig,
} from 'kafkajs'
import type { Logger } from 'pino'
import { sourceTables } from '../../schema/events.ts'
import type { Progress } from '../../src/progress.ts'
import type { BatchOutcome } from '../lanes/apply.ts'
import { deadLetterHeaders, deadLetterValue, logDeadLetters } from './dead-letters.ts'
import type { SourceRecord } from '../decode/decode.ts'
import { heartbeatCommitMs, type FreshnessTracker, type PartitionEnds } from './freshness.ts'
import { handoverSeeks, type HandoverRequest } from '../storage/handover.ts'
import {
  committedOffsets,
  ensureTopics,
  eventsInTopics,
  groupLag,
  partitionEnds,
} from './topic-admin.ts'

export interface KafkaSourceOptions {
  brokers: string[]
  clientId: string
  groupId: string
  topicPrefix: string
  /** The topics to consume; absent: every change topic (`changeTopics`). */
  topics?: readonly string[]
  /**
   * Where bad events go; absent: they are only counted (a rebuild's replay meets the events the
   * live projector dead-lettered already).
   */
  deadLetterTopic?: string
  applier: BatchApplier
  logger: Logger
  /**
   * An error that must stop the projector (a lane failed: lanes.ts; the consumer stopped for good:
   * ConsumerFailure): true when it is one. The source then stops consuming, committing nothing
   * past what was applied.
   */
  onFatal?: (error: Error) => boolean
  onBatch: (outcome: BatchOutcome, seconds: number) => void
  onLag: (topic: string, partition: number, lag: number) => void
  /** Once, the first time the lag is zero everywhere; the next lag check waits for it. */
  onCaughtUp: () => Promise<void>
  /** How often to compare committed offsets with the topics' ends (lag metric, readiness). */
  lagIntervalMs?: number
  /**
   * Rebuilt organization files waiting for this projector (storage/handover.ts): once caught up,
   * looked for before every batch, and every `handoverIntervalMs` while no batch comes.
   */
  handovers?: {
    pending(): HandoverRequest[]
    take(requests: readonly HandoverRequest[]): void | Promise<void>
  }
  handoverIntervalMs?: number
  /**
   * Counts the events consumed until caught up, out of the topics' end offsets at the first
   * connection: every event there is for a fresh consumer group (a rebuild).
   */
  progress?: Progress | undefined
  /**
   * Freshness (sources/freshness.ts, docs/freshness.md): the heartbeat table's topic is consumed
   * beside the change topics and its beats fed to the tracker, which the source tells what every
   * change partition has applied, files committed. `publish` is called whenever the tracker's
   * record changed, before anything it covers is swapped.
   */
  freshness?: {
    heartbeatTopic: string
    tracker: FreshnessTracker
    /** A beat read, with its delay by the local clock (commit to read). */
    onHeartbeat?: (delayMs: number) => void
    publish: () => void
  }
}

/** The Kafka consumer stopped and kafkajs will not restart it: the projector must stop. */
export class ConsumerFailure extends Error {
  override name = 'ConsumerFailure'
}

/** What the source needs of an applier: the single-threaded one (apply.ts) or the lanes. */
export interface BatchApplier {
  applyBatch(records: readonly SourceRecord[]): BatchOutcome | Promise<BatchOutcome>
  /** Commits what an initial load holds open (`loadCommitEvents`). */
  commit(): void | Promise<void>
  buildInProgress(): Promise<void> | undefined
}

export interface KafkaSource {
  /** Connects (retrying with backoff until stopped) and consumes until `stop`. */
  start(): Promise<void>
  /** Finishes the batch in hand, commits it, disconnects. */
  stop(): Promise<void>
}

/** The change topics this replica reads: one per source table, never payer_portal_logins. */
export function changeTopics(topicPrefix: string): string[] {
  return sourceTables.map((table) => `${topicPrefix}.public.${table}`)
}

export function createKafkaSource(options: KafkaSourceOptions): KafkaSource {
  const { logger, applier } = options
  const freshness = options.freshness
  /** The change topics: what a freshness candidate must see applied (not the heartbeat topic). */
  const dataTopics = [...(options.topics ?? changeTopics(options.topicPrefix))]
  const topics = freshness === undefined ? dataTopics : [...dataTopics, freshness.heartbeatTopic]
  const kafka = new Kafka({
    clientId: options.clientId,
    brokers: options.brokers,
    logLevel: kafkaLogLevel.WARN,
    logCreator: kafkaLogCreator(logger),
    retry: { initialRetryTime: 300, maxRetryTime: 30_000, retries: 8 },
  } satisfies KafkaConfig)

  let consumer: Consumer | undefined
  let producer: Producer | undefined
  /** The dead-letter producer's connection, made beside the consumer's group join (`connect`). */
  let producerConnected: Promise<void> | undefined
  let admin: Admin | undefined
  let stopping = false
  /** The applier failed for good (`onFatal`): nothing more is applied or committed. */
  let failed = false
  let lagTimer: NodeJS.Timeout | undefined
  let caughtUp = false
  let lagChecking = false
  let lagCheckAgain = false
  /** Offsets of batches applied, by partition, not committed to Kafka yet (their files may not be). */
  const uncommitted = new Map<string, { topic: string; partition: number; offset: string }>()
  /** The next offset to read of each partition this process has applied a batch of. */
  const position = new Map<string, bigint>()
  /**
   * The next offset of each partition whose files are committed: `position` as of the last files'
   * commit, lowered at once by a hand-over's seek. What freshness is proved on.
   */
  const visible = new Map<string, bigint>()
  /** The group's committed offsets when this process started: committed only after the files. */
  const committedAtStart = new Map<string, bigint>()
  let freshnessTimer: NodeJS.Timeout | undefined
  let lastBeatCommitAt = 0
  let lastCommitAt = Date.now()
  let progressTotalSet = false
  let handoverTimer: NodeJS.Timeout | undefined
  /** Batches and hand-overs take turns: a hand-over swaps a file between two batches. */
  let turn: Promise<unknown> = Promise.resolve()
  function exclusive<T>(work: () => Promise<T>): Promise<T> {
    const next = turn.then(work)
    turn = next.catch(() => undefined)
    return next
  }

  /** This consumer's next offset per partition: what it applied, else what its group committed. */
  async function nextOffsets(): Promise<Map<string, bigint>> {
    const next = new Map(position)
    for (const [key, offset] of await committedOffsets(admin!, options.groupId, topics)) {
      if (!next.has(key)) next.set(key, offset)
    }
    return next
  }

  /**
   * Takes the rebuilt files waiting (storage/handover.ts has the protocol). True when it sent the
   * consumer back to an earlier position: the batch in hand is stale then.
   */
  async function takeHandovers(): Promise<boolean> {
    const handovers = options.handovers
    if (handovers === undefined || !caughtUp || stopping || consumer === undefined) return false
    const requests = handovers.pending()
    if (requests.length === 0) return false
    // Every batch handed over is applied and recorded first: the seeks start from there.
    await settling
    const seeks = handoverSeeks(requests, await nextOffsets())
    // Positions go back first, then the swapped files are held behind the published instant, and
    // only then swapped: no instant is proved for them on positions they have not reached, and no
    // reader finds a swapped file before the hold (docs/freshness.md).
    for (const seek of seeks) {
      const key = `${seek.topic}\u0000${seek.partition}`
      position.set(key, BigInt(seek.offset))
      visible.set(key, BigInt(seek.offset))
      uncommitted.set(key, seek)
    }
    if (freshness !== undefined) {
      freshness.tracker.hold(requests.map((r) => r.file))
      freshness.publish()
    }
    if (seeks.length > 0) await commitApplied()
    await handovers.take(requests)
    for (const seek of seeks) consumer.seek(seek)
    if (seeks.length > 0) {
      logger.info({ seeks }, 'went back to where the rebuilt files end, to bring them up to date')
    }
    return seeks.length > 0
  }

  function watchHandovers(): void {
    if (options.handovers === undefined) return
    handoverTimer = setInterval(() => {
      exclusive(takeHandovers).catch((error: unknown) =>
        logger.error({ err: error }, 'could not take a rebuilt organization file'),
      )
    }, options.handoverIntervalMs ?? 1_000)
    handoverTimer.unref()
  }

  /** Commits the files, then the offsets of every batch applied so far. */
  async function commitApplied(): Promise<void> {
    if (failed) return
    await applier.commit()
    lastCommitAt = Date.now()
    for (const [key, next] of position) visible.set(key, next)
    advanceFreshness()
    if (uncommitted.size === 0 || consumer === undefined) return
    const offsets = [...uncommitted.values()]
    uncommitted.clear()
    await consumer.commitOffsets(offsets)
  }

  async function connect(): Promise<void> {
    admin = kafka.admin()
    await admin.connect()
    await ensureTopics(admin, topics, options.deadLetterTopic, logger)

    if (freshness !== undefined && committedAtStart.size === 0) {
      for (const [key, offset] of await committedOffsets(admin, options.groupId, dataTopics)) {
        committedAtStart.set(key, offset)
      }
    }

    if (options.progress !== undefined && !progressTotalSet) {
      options.progress.setTotal(await eventsInTopics(admin, topics))
      progressTotalSet = true
    }

    producer = kafka.producer({
      allowAutoTopicCreation: false,
      idempotent: true,
      maxInFlightRequests: 1,
    })
    // Not awaited before the consumer joins its group: on a fresh broker the connection took a
    // third of a second (the idempotent producer waits for its coordinator), all of it start-up.
    // A dead letter waits for it (recordOutcome); start-up fails if it does.
    producerConnected = producer.connect()
    producerConnected.catch(() => undefined)

    consumer = kafka.consumer({
      groupId: options.groupId,
      maxBytesPerPartition: 8 * 1024 * 1024,
      maxBytes: 32 * 1024 * 1024,
      // The broker answers a fetch as soon as it has one byte (minBytes 1: a change is handed over
      // the moment it is appended); maxWaitTimeInMs only bounds an idle fetch, so it sets how often
      // an idle consumer wakes, not any change's delay (docs/freshness.md).
      minBytes: 1,
      maxWaitTimeInMs: 1_000,
      // kafkajs restarts the consumer itself after a crash on a retriable error (a lost broker is
      // waited for, logged, and resumed from the committed offsets); after any other it stops it
      // for good, which stops the projector (below).
      retry: {
        initialRetryTime: 500,
        maxRetryTime: 30_000,
        retries: 10,
        restartOnFailure: () => Promise.resolve(true),
      },
    })
    // A consumer kafkajs will not restart (a non-retriable error, such as commits refused after a
    // batch outlasted the group's session) would leave the process up and consuming nothing, its
    // lag growing and /readyz never ready: it stops the projector instead (exit 1), and the
    // restart resumes from the committed offsets.
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      if (payload.restart || stopping) return
      const failure = new ConsumerFailure(payload.error.message)
      logger.error({ err: payload.error }, 'the Kafka consumer stopped for good')
      options.onFatal?.(failure)
    })
    await consumer.connect()
    await consumer.subscribe({ topics, fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 1,
      eachBatch: (payload) => exclusive(() => applyBatch(payload)),
    })
    await producerConnected
  }

  /**
   * Batches handed to the applier whose outcome is not recorded yet, settled in order: the next
   * batch is fetched and routed while the lanes apply this one. At most MAX_AHEAD wait.
   */
  let settling: Promise<void> = Promise.resolve()
  let unsettled = 0
  /** A batch that failed to settle: no later one may commit past it (kafkajs redelivers). */
  let broken: Error | undefined

  async function applyBatch(payload: EachBatchPayload): Promise<void> {
    const { batch } = payload
    await throwIfBroken()
    if (batch.messages.length === 0 || !payload.isRunning() || payload.isStale()) return
    if (failed) return
    if (freshness !== undefined && batch.topic === freshness.heartbeatTopic) {
      await heartbeats(payload)
      return
    }
    // Catch-up's document build writes the files on worker threads: wait, staying in the group.
    for (let build = applier.buildInProgress(); build; build = applier.buildInProgress()) {
      await heartbeating(payload, build)
    }
    if (!payload.isRunning() || payload.isStale()) return
    if (await takeHandovers()) return
    const started = process.hrtime.bigint()
    const records: SourceRecord[] = batch.messages.map((m) => ({
      topic: batch.topic,
      partition: batch.partition,
      offset: m.offset,
      key: m.key,
      value: m.value,
    }))
    const applied = Promise.resolve().then(() => applier.applyBatch(records))
    applied.catch(() => undefined)
    const last = batch.lastOffset()
    // kafkajs's own position (it fetches from there); Kafka's committed offset waits for the files.
    payload.resolveOffset(last)
    const atEnd = batch.offsetLag() === '0'

    const settle = async (): Promise<void> => {
      if (broken !== undefined || failed) return
      let outcome: BatchOutcome
      try {
        outcome = await applied
      } catch (error) {
        if (!(error instanceof Error) || options.onFatal?.(error) !== true) {
          broken = asError(error)
          return
        }
        // Stopping: the offsets of this batch (and of what the load held) are never committed.
        failed = true
        stopping = true
        uncommitted.clear()
        return
      }
      try {
        await recordOutcome(payload, outcome, last, atEnd, started)
      } catch (error) {
        broken = asError(error)
      }
    }
    const previous = settling
    unsettled++
    settling = previous.then(settle).finally(() => unsettled--)
    // A partition at its end, or a stop: settled now (the lag check and a stop count on it).
    // Otherwise the batch before this one, if too many wait.
    if (atEnd || !payload.isRunning()) await heartbeating(payload, settling)
    else if (unsettled > MAX_AHEAD) await heartbeating(payload, previous)
    await throwIfBroken()
  }

  /**
   * Beats of the heartbeat table: never applied to a file, only fed to the freshness tracker. Their
   * offsets are committed with the next files' commit (at once when it is due), like any batch's.
   */
  async function heartbeats(payload: EachBatchPayload): Promise<void> {
    const { batch } = payload
    const now = Date.now()
    for (const message of batch.messages) {
      const commitMs = heartbeatCommitMs(message.value)
      if (commitMs === undefined) continue
      const delay = freshness!.tracker.heartbeat(commitMs, now)
      freshness!.onHeartbeat?.(delay)
    }
    const last = batch.lastOffset()
    payload.resolveOffset(last)
    const key = `${batch.topic}\u0000${batch.partition}`
    const offset = {
      topic: batch.topic,
      partition: batch.partition,
      offset: String(BigInt(last) + 1n),
    }
    position.set(key, BigInt(offset.offset))
    // Beats touch no file, so their offsets need not wait for one: committed on their own before
    // the catch-up (which waits for every partition's lag, this one's too), then every few seconds.
    if (!caughtUp || Date.now() - lastBeatCommitAt >= HEARTBEAT_COMMIT_MS) {
      uncommitted.delete(key)
      await consumer?.commitOffsets([offset])
      lastBeatCommitAt = Date.now()
      if (!caughtUp && batch.offsetLag() === '0') checkLagNow()
    } else {
      uncommitted.set(key, offset)
    }
    await payload.heartbeat()
    pumpFreshness()
  }

  /** The end offsets of every change partition, for a freshness candidate. */
  async function changeEnds(): Promise<Map<string, PartitionEnds>> {
    if (admin === undefined) throw new Error('not connected')
    return partitionEnds(admin, dataTopics)
  }

  /** Fetches the ends a candidate is due for, or waits until it is. */
  function pumpFreshness(): void {
    if (freshness === undefined || stopping) return
    clearTimeout(freshnessTimer)
    const { due, msUntil } = freshness.tracker.endsDue(Date.now())
    if (due) {
      changeEnds().then(
        (ends) => {
          freshness.tracker.setEnds(ends)
          advanceFreshness()
          pumpFreshness()
        },
        (error: unknown) => {
          freshness.tracker.setEnds(undefined)
          logger.debug({ err: error }, 'could not fetch the change topics ends for freshness')
          freshnessTimer = setTimeout(pumpFreshness, FRESHNESS_RETRY_MS)
          freshnessTimer.unref()
        },
      )
    } else if (msUntil !== undefined) {
      freshnessTimer = setTimeout(pumpFreshness, msUntil)
      freshnessTimer.unref()
    }
  }

  /**
   * Proves what the committed files allow. Not before the catch-up: until the documents of an
   * initial load are built, committed mirror rows are not yet what the api serves.
   */
  function advanceFreshness(): void {
    if (freshness === undefined || !caughtUp) return
    const changed = freshness.tracker.advance(
      (key) => visible.get(key) ?? committedAtStart.get(key),
    )
    if (changed) freshness.publish()
  }

  /** A batch failed to settle: thrown to kafkajs once all are settled; it restarts from the
   * committed offsets, which none of the later batches moved. */
  async function throwIfBroken(): Promise<void> {
    if (broken === undefined) return
    await settling
    const error = broken
    broken = undefined
    throw error
  }

  async function recordOutcome(
    payload: EachBatchPayload,
    outcome: BatchOutcome,
    last: string,
    atEnd: boolean,
    started: bigint,
  ): Promise<void> {
    const { batch } = payload
    if (outcome.deadLetters.length > 0 && options.deadLetterTopic !== undefined) {
      await producerConnected
      await producer!.send({
        topic: options.deadLetterTopic,
        acks: -1,
        messages: outcome.deadLetters.map((letter) => ({
          key: letter.record.key as Buffer | null,
          value: deadLetterValue(letter),
          headers: { ...deadLetterHeaders(letter) },
        })),
      })
      logDeadLetters(logger, outcome.deadLetters)
    }
    position.set(`${batch.topic}\u0000${batch.partition}`, BigInt(last) + 1n)
    uncommitted.set(`${batch.topic}\u0000${batch.partition}`, {
      topic: batch.topic,
      partition: batch.partition,
      offset: (BigInt(last) + 1n).toString(),
    })
    // Counted before its offsets are committed: a lag check that sees them committed ends the
    // progress, which must have counted them by then.
    if (!caughtUp) options.progress?.add(batch.messages.length)
    // An initial load holds its files' transactions over several batches (apply.ts): their
    // offsets wait for the commit. A partition at its end, a stop, or a few seconds commit
    // now: the lag (and with it readiness) is measured from committed offsets.
    if (
      outcome.committed ||
      atEnd ||
      !payload.isRunning() ||
      Date.now() - lastCommitAt >= HOLD_MS
    ) {
      await commitApplied()
    }
    await payload.heartbeat()
    options.onBatch(outcome, Number(process.hrtime.bigint() - started) / 1e9)
    // This partition is at its end: the replica may have caught up now, not at the next tick
    // (readiness, and the initial load's document build, wait on that check).
    if (!caughtUp && atEnd) checkLagNow()
  }

  async function checkLag(): Promise<void> {
    if (admin === undefined) return
    let total = 0
    for (const { topic, partition, lag } of await groupLag(admin, options.groupId, topics)) {
      total += lag
      options.onLag(topic, partition, lag)
    }
    if (total === 0 && !caughtUp) {
      options.progress?.done()
      await options.onCaughtUp()
      caughtUp = true
      advanceFreshness()
    }
  }

  /**
   * Measures the lag now, then every lagIntervalMs. One check at a time: asked for during one, the
   * next starts as soon as it ends.
   */
  function checkLagNow(): void {
    if (stopping) return
    if (lagChecking) {
      lagCheckAgain = true
      return
    }
    clearTimeout(lagTimer)
    lagChecking = true
    checkLag()
      .catch((error: unknown) => logger.warn({ err: error }, 'could not measure consumer lag'))
      .finally(() => {
        lagChecking = false
        if (stopping) return
        if (lagCheckAgain) {
          lagCheckAgain = false
          checkLagNow()
        } else {
          lagTimer = setTimeout(checkLagNow, options.lagIntervalMs ?? 2_000)
        }
      })
  }

  async function disconnectAll(): Promise<void> {
    // The consumer first: its disconnect waits for the batch in hand, which may still produce
    // dead letters and then commits its offsets. Only then may the producer go.
    await consumer?.disconnect().catch(() => undefined)
    await Promise.allSettled([producer?.disconnect(), admin?.disconnect()])
    consumer = producer = admin = producerConnected = undefined
  }

  return {
    async start() {
      let delay = 500
      while (!stopping) {
        try {
          await connect()
          break
        } catch (error) {
          await disconnectAll()
          if (stopping) return
          logger.error({ err: error, retryInMs: delay }, 'cannot reach Kafka; retrying')
          await sleep(delay)
          delay = Math.min(delay * 2, 30_000)
        }
      }
      checkLagNow()
      watchHandovers()
    },
    async stop() {
      stopping = true
      options.progress?.done()
      if (lagTimer !== undefined) clearTimeout(lagTimer)
      if (handoverTimer !== undefined) clearInterval(handoverTimer)
      clearTimeout(freshnessTimer)
      // Offsets held back for the load's open transactions: committed while the group is joined
      // (a batch in hand when the consumer stops commits its own: `!isRunning()` above).
      await settling
      await commitApplied().catch((error: unknown) =>
        logger.warn({ err: error }, 'could not commit applied offsets while stopping'),
      )
      // kafkajs's disconnect waits for the batch in hand, which commits before it returns.
      await disconnectAll()
    },
  }
}

/** Batches applied while the next is fetched and routed (`settling`). */
const MAX_AHEAD = 1

/** While only beats arrive, their offsets are committed this often (the lag metric reads them). */
const HEARTBEAT_COMMIT_MS = 5_000

/** A failed fetch of the change topics' ends for freshness is tried again after this. */
const FRESHNESS_RETRY_MS = 1_000

/** The longest an initial load holds applied batches uncommitted (with their offsets). */
const HOLD_MS = 5_000

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error))
}

/**
 * Waits for `work`, heartbeating every few seconds meanwhile. kafkajs heartbeats only when asked,
 * and a batch spread over thousands of organization files can take longer than the group's
 * session to apply and commit: the member would be dropped, its commits refused.
 */
async function heartbeating(payload: EachBatchPayload, work: Promise<void>): Promise<void> {
  let done = false
  const finished = work.finally(() => (done = true))
  while (!done) {
    let timer: NodeJS.Timeout | undefined
    await Promise.race([finished, new Promise((resolve) => (timer = setTimeout(resolve, 3_000)))])
    clearTimeout(timer)
    if (!done) await payload.heartbeat()
  }
  await finished
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * Routes kafkajs's own logs into pino as structured lines. kafkajs adds the stack of the error it
 * reports (`stack`); that stays out, as every stack does (src/log.ts).
 */
function kafkaLogCreator(logger: Logger) {
  const child = logger.child({ component: 'kafkajs' })
  return () =>
    ({ level, log }: { level: kafkaLogLevel; log: { message: string; [k: string]: unknown } }) => {
      const { message, timestamp: _t, logger: _l, stack: _s, ...rest } = log
      const fields = { ...rest }
      if (level <= kafkaLogLevel.ERROR) child.error(fields, message)
      else if (level === kafkaLogLevel.WARN) child.warn(fields, message)
      else if (level === kafkaLogLevel.INFO) child.info(fields, message)
      else child.debug(fields, message)
    }
}
