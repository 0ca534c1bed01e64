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
import type { BatchOutcome, EventTally, OnRouted } from '../lanes/apply.ts'
import { deadLetterHeaders, deadLetterValue, logDeadLetters } from './dead-letters.ts'
import {
  abortableSleep,
  consumerOf,
  CONSUMER_RETRIES,
  errorForKafkajs,
  heartbeating,
  kafkaLogCreator,
  passingForKafkajs,
  sleep,
  untilKafkaAnswers,
} from './kafka-client.ts'
import type { SourceRecord } from '../decode/decode.ts'
import { heartbeatCommitMs, type FreshnessTracker } from './freshness.ts'
import { FreshnessPump } from './freshness-pump.ts'
import { LagWatch } from './lag-watch.ts'
import { ConsumedPositions, type PartitionOffset } from './positions.ts'
import { handoverSeeks, type HandoverRequest } from '../storage/handover.ts'
import {
  committedOffsets,
  ensureTopics,
  eventsInTopics,
  groupLag,
  partitionEnds,
  partitionKey,
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
  /** Outcomes of an initial load's spooled events, applied at a commit no batch reported. */
  onCommitted?: (events: EventTally) => void
  onLag: (topic: string, partition: number, lag: number) => void
  /** Once, the first time the lag is zero everywhere; the next lag check waits for it. */
  onCaughtUp: () => Promise<void>
  /** How often to compare committed offsets with the topics' ends (lag metric, readiness). */
  lagIntervalMs?: number
  /** Live, the least time between the starts of two applied groups (`#paced`); 0 by default. */
  liveApplyIntervalMs?: number
  /**
   * How many times kafkajs retries a failing fetch or commit before it gives the consumer up and
   * the source builds a new one (`#consumerLost`): 10 by default, about two and a half minutes of
   * a lost broker. Tests set 0 to have a lost broker give the consumer up at once.
   */
  consumerRetries?: number
  /**
   * Rebuilt organization files waiting for this projector (storage/handover.ts): once caught up,
   * looked for before a batch (at most every `HANDOVER_LOOK_MS`), and every `handoverIntervalMs`
   * while no batch comes.
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

/** The Kafka consumer stopped on an error no new consumer would get past: the projector must stop. */
export class ConsumerFailure extends Error {
  override name = 'ConsumerFailure'
}

/** What the source needs of an applier: the single-threaded one (apply.ts) or the lanes. */
export interface BatchApplier {
  /** Applies a batch; `onRouted` hears of its organizations once routed, before it is applied. */
  applyBatch(
    records: readonly SourceRecord[],
    onRouted?: OnRouted,
  ): BatchOutcome | Promise<BatchOutcome>
  /**
   * Commits what an initial load holds open (`loadCommitEvents`); returns the outcomes of events
   * its spools applied that no batch's outcome reported (lanes/lane-core.ts).
   */
  commit(options?: { lastRound?: boolean }): EventTally | Promise<EventTally>
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

/** The change topic of the organizations table. */
export function organizationsTopic(topicPrefix: string): string {
  return `${topicPrefix}.public.organizations`
}

export function createKafkaSource(options: KafkaSourceOptions): KafkaSource {
  return new KafkaChangeSource(options)
}

/**
 * The records `topic` holds now, between its partitions' first and next offsets (a compacted
 * topic: about one per key once compacted, more before); 0 for a topic that does not exist yet.
 * What `ORGANIZATION_FILES=auto` counts the organizations by (projector.ts).
 */
export async function recordsInTopic(
  options: Pick<KafkaSourceOptions, 'brokers' | 'clientId' | 'logger'>,
  topic: string,
): Promise<number> {
  const admin = new Kafka({
    clientId: options.clientId,
    brokers: options.brokers,
    logLevel: kafkaLogLevel.WARN,
    logCreator: kafkaLogCreator(options.logger),
    // The caller retries, as long as it needs to: one attempt here fails in seconds.
    retry: { initialRetryTime: 300, retries: 2 },
  } satisfies KafkaConfig).admin()
  await admin.connect()
  try {
    if (!(await admin.listTopics()).includes(topic)) return 0
    return await eventsInTopics(admin, [topic])
  } finally {
    await admin.disconnect().catch(() => undefined)
  }
}

/** A batch kafkajs delivered (one partition's share of a fetch), until its outcome is recorded. */
interface Delivery {
  payload: EachBatchPayload
  records: SourceRecord[]
  /** Its records' keys and values, in bytes (`GroupBounds`). */
  bytes: number
  /** Its last record's offset. */
  last: string
  /** Its partition was at its end when fetched. */
  atEnd: boolean
  started: bigint
}

/**
 * The consumer group at work: it connects, hands each fetched batch to the applier, records the
 * outcomes in batch order, and commits offsets only behind the files (`ConsumedPositions`);
 * between batches it takes the hand-overs of rebuilt files.
 */
class KafkaChangeSource implements KafkaSource {
  readonly #options: KafkaSourceOptions
  readonly #logger: Logger
  readonly #applier: BatchApplier
  /** The change topics: what a freshness candidate must see applied (not the heartbeat topic). */
  readonly #dataTopics: string[]
  readonly #topics: string[]
  readonly #kafka: Kafka
  readonly #positions = new ConsumedPositions()
  readonly #lag: LagWatch
  readonly #freshness: FreshnessPump | undefined
  /** The consumer in the group; undefined while none is (between a lost one and its successor). */
  #consumer: Consumer | undefined
  /** A lost consumer's successor being built (`#consumerLost`). */
  #rebuilding: Promise<void> | undefined
  /** How long the next successor waits before it joins: doubles while consumers keep failing. */
  #rebuildDelayMs = REBUILD_DELAY_MS.first
  #producer: Producer | undefined
  /** The dead-letter producer's connection, made beside the consumer's group join (`#connect`). */
  #producerConnected: Promise<void> | undefined
  #admin: Admin | undefined
  #stopping = false
  /** Aborted as the source stops: ends the waits of a consumer's successor (`#consumerLost`). */
  readonly #stopped = new AbortController()
  /** The applier failed for good (`onFatal`): nothing more is applied or committed. */
  #failed = false
  #lastBeatCommitAt = 0
  /** Partitions whose last batch was not at their end (`topic/partition`). */
  readonly #behind = new Set<string>()
  #progressTotalSet = false
  #handoverTimer: NodeJS.Timeout | undefined
  /** When a batch last looked for hand-overs (`#takeHandovers`). */
  #handoversLookedAt = 0
  /** Batches and hand-overs take turns: a hand-over swaps a file between two batches. */
  #turn: Promise<unknown> = Promise.resolve()
  /** Delivered batches not taken by the drain yet, in delivery order (`#drain`). */
  #pending: Delivery[] = []
  #pendingRecords = 0
  #pendingBytes = 0
  /** The drain runs; `#settling` ends when it has applied and recorded everything delivered. */
  #draining = false
  /** When the drain last took a live group (`#paced`), by `performance.now()`. */
  #lastGroupTakenAt = Number.NEGATIVE_INFINITY
  #settling: Promise<void> = Promise.resolve()
  /** Groups taken and not yet settled (applied, and their positions recorded). */
  #groupsInFlight = 0
  #onGroupTaken: Array<() => void> = []
  /** A group that failed to settle: no later one may commit past it (`#reread`). */
  #broken: Error | undefined
  /** Per partition, the first offset delivered and not recorded since a group failed (`#reread`). */
  readonly #rereadFrom = new Map<string, PartitionOffset>()

  constructor(options: KafkaSourceOptions) {
    this.#options = options
    this.#logger = options.logger
    this.#applier = options.applier
    const freshness = options.freshness
    this.#dataTopics = [...(options.topics ?? changeTopics(options.topicPrefix))]
    this.#topics =
      freshness === undefined ? this.#dataTopics : [...this.#dataTopics, freshness.heartbeatTopic]
    this.#kafka = new Kafka({
      clientId: options.clientId,
      brokers: options.brokers,
      logLevel: kafkaLogLevel.WARN,
      logCreator: kafkaLogCreator(options.logger),
      retry: { initialRetryTime: 300, maxRetryTime: 30_000, retries: 8 },
    } satisfies KafkaConfig)
    this.#lag = new LagWatch({
      measure: async () =>
        this.#admin === undefined
          ? undefined
          : groupLag(this.#admin, options.groupId, this.#topics),
      onLag: options.onLag,
      onCaughtUp: async () => {
        options.progress?.done()
        await options.onCaughtUp()
      },
      afterCaughtUp: () => this.#freshness?.advance(),
      intervalMs: options.lagIntervalMs ?? 2_000,
      logger: options.logger,
    })
    this.#freshness =
      freshness === undefined
        ? undefined
        : new FreshnessPump({
            tracker: freshness.tracker,
            publish: freshness.publish,
            ends: async () => {
              if (this.#admin === undefined) throw new Error('not connected')
              return partitionEnds(this.#admin, this.#dataTopics)
            },
            visibleAt: this.#positions.visibleAt,
            caughtUp: () => this.#lag.caughtUp,
            logger: options.logger,
          })
  }

  async start(): Promise<void> {
    const connected = await untilKafkaAnswers(() => this.#connect(), {
      stopped: () => this.#stopping,
      logger: this.#logger,
      message: 'cannot reach Kafka; retrying',
      cleanUp: () => this.#disconnectAll(),
    })
    if (connected === undefined) return
    this.#lag.checkNow()
    this.#watchHandovers()
  }

  async stop(): Promise<void> {
    this.#halt()
    this.#options.progress?.done()
    if (this.#handoverTimer !== undefined) clearInterval(this.#handoverTimer)
    // Offsets held back for the load's open transactions: committed while the group is joined
    // (a batch in hand when the consumer stops commits its own: `!isRunning()` below).
    await this.#settling
    await this.#commitApplied().catch((error: unknown) =>
      this.#logger.warn({ err: error }, 'could not commit applied offsets while stopping'),
    )
    // kafkajs's disconnect waits for the batch in hand, which commits before it returns.
    await this.#disconnectAll()
  }

  /** No more lag checks, freshness fetches or hand-overs: stopping, or the applier failed. */
  #halt(): void {
    this.#stopping = true
    this.#stopped.abort()
    this.#lag.stop()
    this.#freshness?.stop()
  }

  #exclusive<T>(work: () => Promise<T>): Promise<T> {
    const next = this.#turn.then(work)
    this.#turn = next.catch(() => undefined)
    return next
  }

  async #connect(): Promise<void> {
    const options = this.#options
    const admin = (this.#admin = this.#kafka.admin())
    await admin.connect()
    await ensureTopics(admin, this.#topics, options.deadLetterTopic, this.#logger)
    if (options.freshness !== undefined && !this.#positions.knowsCommittedAtStart) {
      const committed = await committedOffsets(admin, options.groupId, this.#dataTopics)
      this.#positions.rememberCommittedAtStart(committed)
    }
    if (options.progress !== undefined && !this.#progressTotalSet) {
      options.progress.setTotal(await eventsInTopics(admin, this.#topics))
      this.#progressTotalSet = true
    }
    const producer = (this.#producer = this.#kafka.producer({
      allowAutoTopicCreation: false,
      idempotent: true,
      maxInFlightRequests: 1,
    }))
    // Not awaited before the consumer joins its group: on a fresh broker the connection took a
    // third of a second (the idempotent producer waits for its coordinator), all of it start-up.
    // A dead letter waits for it (#sendDeadLetters); start-up fails if it does.
    const producerConnected = (this.#producerConnected = producer.connect())
    producerConnected.catch(() => undefined)
    await this.#startConsumer()
    await producerConnected
  }

  /**
   * A new consumer in the group, consuming from the committed offsets. kafkajs retries what fails
   * (a fetch, a commit, a lost broker) for a while; when it gives the consumer up, it stops it and
   * leaves the group: a retriable failure builds the next consumer (`#consumerLost`), any other
   * stops the projector (exit 1: a consumer kafkajs will not get past, such as the group's
   * authorization refused, would leave the process up and consuming nothing, its lag growing and
   * /readyz never ready; the restart resumes from the committed offsets). A member dropped from
   * its group while it runs rejoins instead (`errorForKafkajs`).
   */
  async #startConsumer(): Promise<void> {
    const { groupId, consumerRetries } = this.#options
    let lost = false
    const lose = (error: Error): void => {
      lost = true
      this.#consumerLost(consumer, error)
    }
    const consumer = consumerOf(this.#kafka, groupId, {
      retries: consumerRetries ?? CONSUMER_RETRIES,
      onRetriableCrash: lose,
    })
    // Emitted after `onRetriableCrash`, when kafkajs has judged the error retriable.
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      if (lost || this.#stopping) return
      if (passingForKafkajs(payload.error)) {
        lose(payload.error)
        return
      }
      const failure = new ConsumerFailure(payload.error.message)
      this.#logger.error({ err: payload.error }, 'the Kafka consumer stopped for good')
      this.#options.onFatal?.(failure)
    })
    consumer.on(consumer.events.GROUP_JOIN, () => {
      // Partitions this consumer no longer holds are not behind for it.
      this.#behind.clear()
      this.#rebuildDelayMs = REBUILD_DELAY_MS.first
    })
    try {
      await consumer.connect()
      await consumer.subscribe({ topics: this.#topics, fromBeginning: true })
    } catch (error) {
      await consumer.disconnect().catch(() => undefined)
      throw error
    }
    if (this.#stopping) {
      await consumer.disconnect().catch(() => undefined)
      return
    }
    this.#consumer = consumer
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 1,
      eachBatch: (payload) =>
        this.#exclusive(() => this.#applyBatch(payload)).catch((error: unknown) => {
          throw errorForKafkajs(asError(error))
        }),
    })
  }

  /**
   * kafkajs gave the consumer up on a retriable error (a broker lost for longer than its retries,
   * no broker left in its metadata): it has stopped it and left the group. kafkajs could restart
   * it itself, as a new member with a new fetch loop, but the drain would still hold the lost
   * one's deliveries and commit through whichever consumer is current: the e2e fault test "Kafka
   * lost mid-stream" once saw the restarted member dropped from its group every 30 s after that,
   * for good (CI, 2026-11-30). So the source builds the successor itself, from a settled state:
   * the deliveries not taken yet are dropped (Kafka redelivers them from the committed offsets,
   * and every file skips what it applied already), the group in hand is applied and recorded, its
   * offsets kept for the successor to commit, and only then does a new consumer join.
   */
  #consumerLost(lostConsumer: Consumer, error: Error): void {
    this.#logger.warn(
      { err: error },
      'the Kafka consumer gave up; a new one resumes from the committed offsets',
    )
    if (this.#consumer === lostConsumer) this.#consumer = undefined
    this.#took(this.#pending.length)
    const delayMs = this.#rebuildDelayMs
    this.#rebuildDelayMs = Math.min(delayMs * 2, REBUILD_DELAY_MS.most)
    const previous = this.#rebuilding ?? Promise.resolve()
    const rebuilding = (this.#rebuilding = (async () => {
      await previous
      await this.#settling
      // What the lost consumer's groups could not commit is committed by its successor, or
      // redelivered to it: none of it is lost.
      this.#broken = undefined
      this.#rereadFrom.clear()
      await abortableSleep(delayMs, this.#stopped.signal)
      await untilKafkaAnswers(() => this.#startConsumer(), {
        stopped: () => this.#stopping,
        logger: this.#logger,
        message: 'cannot reach Kafka; retrying',
        signal: this.#stopped.signal,
      })
    })()
      // Nothing above throws (the waits and the attempts catch their own); were it to, no consumer
      // would follow and the projector would consume nothing: it stops instead, as for a consumer
      // kafkajs will not restart.
      .catch((failure: unknown) => {
        this.#logger.error({ err: failure }, 'could not follow the lost Kafka consumer')
        this.#options.onFatal?.(new ConsumerFailure(asError(failure).message))
      })
      .finally(() => {
        if (this.#rebuilding === rebuilding) this.#rebuilding = undefined
      }))
  }

  async #disconnectAll(): Promise<void> {
    // The consumer first: its disconnect waits for the batch in hand, which may still produce
    // dead letters and then commits its offsets. Only then may the producer go.
    await this.#consumer?.disconnect().catch(() => undefined)
    await Promise.allSettled([this.#producer?.disconnect(), this.#admin?.disconnect()])
    this.#consumer = undefined
    this.#producer = undefined
    this.#admin = undefined
    this.#producerConnected = undefined
  }

  async #applyBatch(payload: EachBatchPayload): Promise<void> {
    const { batch } = payload
    await this.#throwIfBroken(payload)
    if (batch.messages.length === 0 || !payload.isRunning() || payload.isStale()) return
    if (this.#failed) return
    if (batch.topic === this.#options.freshness?.heartbeatTopic) {
      await this.#heartbeats(payload)
      return
    }
    // Catch-up's document build writes the files on worker threads: wait, staying in the group.
    for (
      let build = this.#applier.buildInProgress();
      build;
      build = this.#applier.buildInProgress()
    ) {
      await heartbeating(payload, build)
    }
    if (!payload.isRunning() || payload.isStale()) return
    if (Date.now() - this.#handoversLookedAt >= HANDOVER_LOOK_MS) {
      this.#handoversLookedAt = Date.now()
      if (await this.#takeHandovers()) return
    }
    const delivery: Delivery = {
      payload,
      records: recordsOf(batch),
      bytes: bytesOf(batch),
      last: batch.lastOffset(),
      atEnd: batch.offsetLag() === '0',
      started: process.hrtime.bigint(),
    }
    // kafkajs's own position (it fetches from there); Kafka's committed offset waits for the files.
    payload.resolveOffset(delivery.last)
    const partition = `${batch.topic}/${batch.partition}`
    if (delivery.atEnd) this.#behind.delete(partition)
    else this.#behind.add(partition)
    this.#pending.push(delivery)
    this.#pendingRecords += delivery.records.length
    this.#pendingBytes += delivery.bytes
    this.#drainSoon()
    // A stop, or a load's partition at its end: settled now (a stop, and the lag check that ends a
    // load, count on it). Otherwise kafkajs fetches on while the lanes apply, until a group's
    // worth waits (`groupBounds`).
    if (!payload.isRunning() || (delivery.atEnd && !this.#lag.caughtUp)) {
      await heartbeating(payload, this.#settling)
    }
    while (this.#pendingOverBounds() && this.#draining) {
      await heartbeating(payload, this.#groupTaken())
    }
    await this.#throwIfBroken(payload)
  }

  /** Starts the drain unless it runs: it takes what arrives meanwhile itself. */
  #drainSoon(): void {
    if (this.#draining) return
    this.#draining = true
    this.#settling = this.#settling.then(() => this.#drain())
  }

  /**
   * Applies what kafkajs delivered, a group at a time: every batch that arrived while the group
   * before was applied goes to the applier as one batch, with one commit of the files and one of
   * the offsets. A fetch hands over one batch per partition, and a change of one transaction
   * spans several tables' topics: applied one by one, a live batch of five records cost 5.7 ms,
   * four of them the lanes' round trip and the files' commit (bench:freshness at 500
   * transactions/s; docs/freshness.md). Grouped, that cost is paid once per group, and the group
   * grows with the load: one record when quiet, thousands behind a burst.
   */
  async #drain(): Promise<void> {
    let previous: Promise<void> = Promise.resolve()
    try {
      for (;;) {
        while (this.#pending.length > 0) {
          // Off (0), the default: no await between two groups, as before pacing existed.
          if (this.#lag.caughtUp && (this.#options.liveApplyIntervalMs ?? 0) > 0)
            await this.#paced()
          if (this.#broken !== undefined || this.#failed) {
            const dropped = this.#took(this.#pending.length)
            if (!this.#failed) this.#reread(dropped)
            break
          }
          const group = this.#took(this.#groupSize())
          const records = group.length === 1 ? group[0]!.records : group.flatMap((d) => d.records)
          const onRouted = (touched: ReadonlySet<string> | undefined) =>
            this.#claimUntouched(group, touched)
          this.#groupsInFlight++
          const applied = Promise.resolve().then(() => this.#applier.applyBatch(records, onRouted))
          applied.catch(() => undefined)
          const settled = previous
            .then(() => this.#settle(group, applied))
            .finally(() => void this.#groupsInFlight--)
          // Live, one group at a time: the next grows meanwhile. A load routes the next group
          // while the lanes apply this one (as the file source does), and waits for the one before.
          await (this.#lag.caughtUp ? settled : previous)
          previous = settled
        }
        await previous
        // Checked in the same turn as `#draining` is cleared: nothing delivered is left behind.
        if (this.#pending.length === 0) break
      }
    } finally {
      this.#draining = false
    }
  }

  /**
   * Live, waits until `liveApplyIntervalMs` has passed since the last group was taken. A group
   * costs the projector milliseconds of CPU however small it is (kafkajs's fetch, the lanes' round
   * trip, each file's commit and sync: about 6 ms at 50 transactions/s), so at moderate rates
   * many small groups cost most of its CPU. Paced at 25 ms, its share of a core at 500
   * transactions/s fell from 58-65% to 41-46%, for about 15 ms more at the median
   * (docs/freshness.md). Off by default: a change is applied as soon as the projector is free. A
   * group that takes longer to apply than the interval is followed at once: behind a backlog
   * nothing waits.
   */
  async #paced(): Promise<void> {
    const interval = this.#options.liveApplyIntervalMs ?? 0
    const wait = this.#lastGroupTakenAt + interval - performance.now()
    if (wait > 0) await sleep(wait)
    this.#lastGroupTakenAt = performance.now()
  }

  /** Whether more than a group's worth waits (the bounds of now: the load may end meanwhile). */
  #pendingOverBounds(): boolean {
    const bound = groupBounds(this.#lag.caughtUp)
    return this.#pendingRecords > bound.records || this.#pendingBytes > bound.bytes
  }

  /** How many of the deliveries waiting make the next group: a group's worth (at least one). */
  #groupSize(): number {
    const bound = groupBounds(this.#lag.caughtUp)
    let records = 0
    let bytes = 0
    let n = 0
    while (n < this.#pending.length) {
      const delivery = this.#pending[n]!
      const over =
        records + delivery.records.length > bound.records || bytes + delivery.bytes > bound.bytes
      if (n > 0 && over) break
      records += delivery.records.length
      bytes += delivery.bytes
      n++
    }
    return n
  }

  /** Takes the first `n` deliveries waiting; kafkajs may deliver more. */
  #took(n: number): Delivery[] {
    const group = this.#pending.splice(0, n)
    for (const delivery of group) {
      this.#pendingRecords -= delivery.records.length
      this.#pendingBytes -= delivery.bytes
    }
    const waiting = this.#onGroupTaken
    this.#onGroupTaken = []
    for (const resolve of waiting) resolve()
    return group
  }

  /** Resolves once the drain takes its next group (room for more deliveries). */
  #groupTaken(): Promise<void> {
    return new Promise((resolve) => this.#onGroupTaken.push(resolve))
  }

  /**
   * The group in hand is routed: freshness for every organization it leaves alone (freshness.ts
   * `claimUntouched`), live, when it is the only group being applied and every record before its
   * own in its partitions is in a committed file (a load holds its files' transactions open).
   */
  #claimUntouched(group: readonly Delivery[], touched: ReadonlySet<string> | undefined): void {
    if (this.#freshness === undefined || !this.#lag.caughtUp || this.#groupsInFlight !== 1) return
    const reach = new Map<string, bigint>()
    for (const { payload, last } of group) {
      const key = partitionKey(payload.batch.topic, payload.batch.partition)
      if (!this.#positions.committedThrough(key)) return
      const next = BigInt(last) + 1n
      if ((reach.get(key) ?? -1n) < next) reach.set(key, next)
    }
    const position = (key: string) => {
      const visible = this.#positions.visibleAt(key)
      const next = reach.get(key)
      if (next === undefined) return visible
      return visible === undefined || visible < next ? next : visible
    }
    try {
      this.#freshness.claimUntouched(position, touched)
    } catch (error) {
      // Unwritten (freshness.json: a full disk), the record claims less: the group goes on.
      this.#logger.warn({ err: error }, 'could not publish freshness for a group in hand')
    }
  }

  /** Records a group's outcome once it is applied, after every group before it. */
  async #settle(group: Delivery[], applied: Promise<BatchOutcome>): Promise<void> {
    if (this.#failed) return
    if (this.#broken !== undefined) {
      this.#reread(group)
      return
    }
    let outcome: BatchOutcome
    try {
      outcome = await applied
    } catch (error) {
      if (!(error instanceof Error) || this.#options.onFatal?.(error) !== true) {
        this.#broken = asError(error)
        this.#reread(group)
        return
      }
      // Stopping: the offsets of this group (and of what the load held) are never committed.
      this.#failed = true
      this.#halt()
      this.#positions.abandonUncommitted()
      return
    }
    try {
      await this.#recordOutcome(group, outcome)
    } catch (error) {
      this.#broken = asError(error)
      this.#reread(group)
    }
  }

  /**
   * Deliveries that will not be recorded: a group that failed to settle, and every one behind it.
   * kafkajs fetches from past them (each delivery's offset was resolved as it arrived), and it
   * goes back to the committed offsets only when it joins its group again: dropped as they were,
   * they were lost (a file that applied what came after skips them when they come again). So the
   * consumer is sent back to the first of each partition's, at once, and reads them again; every
   * file skips what it applied already. A consumer lost meanwhile needs none of this: its
   * successor starts from the committed offsets (`#consumerLost`).
   */
  #reread(deliveries: readonly Delivery[]): void {
    const consumer = this.#consumer
    if (consumer === undefined) return
    for (const { payload, records } of deliveries) {
      const { topic, partition } = payload.batch
      const key = partitionKey(topic, partition)
      const first = records[0]!.offset
      const known = this.#rereadFrom.get(key)
      if (known !== undefined && BigInt(known.offset) <= BigInt(first)) continue
      const seek = { topic, partition, offset: first }
      this.#rereadFrom.set(key, seek)
      try {
        consumer.seek(seek)
      } catch (error) {
        // Not running any more: it is being lost, and its successor reads from the committed offsets.
        this.#logger.warn({ err: error, seek }, 'could not send the consumer back')
      }
    }
  }

  /**
   * A group failed to settle: thrown to kafkajs once all are settled (a membership error makes it
   * join its group again); the consumer reads again from where the failed groups began
   * (`#reread`), and no later group moved the committed offsets. The wait stays in the group:
   * groups spread over thousands of files take seconds, and a member silent for a session is
   * dropped.
   */
  async #throwIfBroken(payload: EachBatchPayload): Promise<void> {
    if (this.#broken === undefined) return
    await heartbeating(payload, this.#settling)
    // Every group that failed is settled: what comes next is read from where they began.
    this.#rereadFrom.clear()
    const error = this.#broken
    this.#broken = undefined
    // Cleared meanwhile if its consumer was lost: its successor is consuming from there.
    if (error !== undefined) throw error
  }

  async #recordOutcome(group: Delivery[], outcome: BatchOutcome): Promise<void> {
    await this.#sendDeadLetters(outcome.deadLetters)
    let atEnd = false
    let running = true
    let events = 0
    for (const { payload, records, last, atEnd: deliveryAtEnd } of group) {
      this.#positions.applied(payload.batch.topic, payload.batch.partition, BigInt(last) + 1n)
      atEnd ||= deliveryAtEnd
      running &&= payload.isRunning()
      events += records.length
    }
    // Counted before its offsets are committed: a lag check that sees them committed ends the
    // progress, which must have counted them by then.
    if (!this.#lag.caughtUp) this.#options.progress?.add(events)
    // An initial load holds its files' transactions over rounds of batches (lanes/outcome.ts
    // `loadRoundOver`: at least 50,000 events, and 1,000 for each file the round holds, as from a
    // file): their offsets wait for the round's commit, or a stop's. No clock commits a round
    // early: each commit of a load of thousands of organizations opens every spooled one's file
    // (lanes/lane-core.ts); the 5 s hold that did made a 3,000-organization rebuild commit three
    // rounds of 10 s where the file load commits one. What a long round costs is what a crash
    // replays. Live, a partition at its end commits at once: the lag (and with it readiness) is
    // measured from committed offsets. A load's partitions at their end commit only once no other
    // is behind (a topic per table ends one after another) and the topics' ends say every record
    // is applied (a partition that delivered nothing yet is unknown here until then): that is the
    // load's last round, whose files build their documents as they commit (lanes.ts
    // `lastRound`). Committed at an earlier end, the round drained its spools unbuilt, and the
    // catch-up opened each of those files again.
    const allAtEnd = atEnd && this.#behind.size === 0
    const loading = !this.#lag.caughtUp
    const lastRound = allAtEnd && loading && (await this.#appliedEverything())
    if (outcome.committed || (allAtEnd && !loading) || lastRound || !running) {
      await this.#commitApplied(lastRound)
    }
    const newest = group[group.length - 1]!
    // Not through a consumer that stopped (a stop, or one kafkajs gave up: `#consumerLost`).
    if (running) await newest.payload.heartbeat()
    const seconds = Number(process.hrtime.bigint() - group[0]!.started) / 1e9
    this.#options.onBatch(outcome, seconds)
    // A partition is at its end: the replica may have caught up now, not at the next tick
    // (readiness, and the initial load's document build, wait on that check).
    if (!this.#lag.caughtUp && atEnd) this.#lag.checkNow()
  }

  async #sendDeadLetters(letters: BatchOutcome['deadLetters']): Promise<void> {
    const topic = this.#options.deadLetterTopic
    if (letters.length === 0 || topic === undefined) return
    await this.#producerConnected
    await this.#producer!.send({
      topic,
      acks: -1,
      messages: letters.map((letter) => ({
        key: letter.record.key as Buffer | null,
        value: deadLetterValue(letter),
        headers: { ...deadLetterHeaders(letter) },
      })),
    })
    logDeadLetters(this.#logger, letters)
  }

  /**
   * Whether this process has applied every record its change topics hold now (a failed look: no).
   * One look at the topics' ends, only as a load's partitions all reach theirs.
   */
  async #appliedEverything(): Promise<boolean> {
    if (this.#admin === undefined) return false
    try {
      // The data topics alone: a beat that arrived since touches no file.
      const lags = await groupLag(
        this.#admin,
        this.#options.groupId,
        this.#dataTopics,
        (committed) => this.#positions.next(committed),
      )
      return lags.every(({ lag }) => lag === 0)
    } catch (error) {
      this.#logger.warn({ err: error }, 'could not read the topics’ ends')
      return false
    }
  }

  /** Commits the files, then the offsets of every batch applied so far. */
  async #commitApplied(lastRound = false): Promise<void> {
    if (this.#failed) return
    const drained = await this.#applier.commit({ lastRound })
    if (Object.keys(drained).length > 0) this.#options.onCommitted?.(drained)
    this.#positions.filesCommitted()
    this.#freshness?.advance()
    if (this.#consumer === undefined) return
    const offsets = this.#positions.takeUncommitted()
    if (offsets.length > 0) await this.#consumer.commitOffsets(offsets)
  }

  /**
   * Beats of the heartbeat table: never applied to a file, only fed to the freshness tracker. Their
   * offsets are committed with the next files' commit (at once when it is due), like any batch's.
   */
  async #heartbeats(payload: EachBatchPayload): Promise<void> {
    const freshness = this.#options.freshness!
    const { batch } = payload
    const now = Date.now()
    for (const message of batch.messages) {
      const commitMs = heartbeatCommitMs(message.value)
      if (commitMs === undefined) continue
      const delay = freshness.tracker.heartbeat(commitMs, now)
      freshness.onHeartbeat?.(delay)
    }
    const last = batch.lastOffset()
    payload.resolveOffset(last)
    // Beats touch no file, so their offsets need not wait for one: committed on their own before
    // the catch-up (which waits for every partition's lag, this one's too), then every few seconds.
    const commitNow =
      !this.#lag.caughtUp || Date.now() - this.#lastBeatCommitAt >= HEARTBEAT_COMMIT_MS
    const next = BigInt(last) + 1n
    const offset = this.#positions.beaten(batch.topic, batch.partition, next, commitNow)
    if (commitNow) {
      await this.#consumer?.commitOffsets([offset])
      this.#lastBeatCommitAt = Date.now()
      if (!this.#lag.caughtUp && batch.offsetLag() === '0') this.#lag.checkNow()
    }
    await payload.heartbeat()
    this.#freshness?.pump()
  }

  /**
   * Takes the rebuilt files waiting (storage/handover.ts has the protocol). True when it sent the
   * consumer back to an earlier position: the batch in hand is stale then.
   */
  async #takeHandovers(): Promise<boolean> {
    const { handovers, freshness } = this.#options
    const consumer = this.#consumer
    if (handovers === undefined || !this.#lag.caughtUp || this.#stopping) return false
    if (consumer === undefined) return false
    const requests = handovers.pending()
    if (requests.length === 0) return false
    // Every batch handed over is applied and recorded first: the seeks start from there.
    await this.#settling
    const committed = await committedOffsets(this.#admin!, this.#options.groupId, this.#topics)
    const seeks = handoverSeeks(requests, this.#positions.next(committed))
    // Positions go back first, then the swapped files are held behind the published instant, and
    // only then swapped: no instant is proved for them on positions they have not reached, and no
    // reader finds a swapped file before the hold (docs/freshness.md).
    for (const seek of seeks) this.#positions.rewound(seek)
    if (freshness !== undefined) {
      freshness.tracker.hold(requests.map((r) => r.file))
      freshness.publish()
    }
    if (seeks.length > 0) await this.#commitApplied()
    await handovers.take(requests)
    for (const seek of seeks) consumer.seek(seek)
    if (seeks.length > 0) {
      this.#logger.info(
        { seeks },
        'went back to where the rebuilt files end, to bring them up to date',
      )
    }
    return seeks.length > 0
  }

  #watchHandovers(): void {
    if (this.#options.handovers === undefined) return
    this.#handoverTimer = setInterval(() => {
      this.#exclusive(() => this.#takeHandovers()).catch((error: unknown) =>
        this.#logger.error({ err: error }, 'could not take a rebuilt organization file'),
      )
    }, this.#options.handoverIntervalMs ?? 1_000)
    this.#handoverTimer.unref()
  }
}

/** A batch's messages as the applier takes records. */
function recordsOf(batch: EachBatchPayload['batch']): SourceRecord[] {
  return batch.messages.map((m) => ({
    topic: batch.topic,
    partition: batch.partition,
    offset: m.offset,
    key: m.key,
    value: m.value,
  }))
}

/** The bytes of a batch's keys and values. */
function bytesOf(batch: EachBatchPayload['batch']): number {
  let bytes = 0
  for (const { key, value } of batch.messages) bytes += (key?.length ?? 0) + (value?.length ?? 0)
  return bytes
}

/**
 * How long a lost consumer's successor waits before it joins (`#consumerLost`): as kafkajs waited
 * before it restarted one itself, then twice as long after each successor lost before it joined.
 */
const REBUILD_DELAY_MS = { first: 500, most: 30_000 }

/** A group's bounds: how many records, and how many bytes of keys and values, at most. */
export interface GroupBounds {
  records: number
  bytes: number
}

/**
 * An initial load's group bounds. The drain applies at most this many as one batch (a delivery is
 * never split), and kafkajs waits to deliver more while as many wait: a group is applied while the
 * next is fetched, as the file source reads its next batch, and no more is held in memory. 5,000
 * records with schemas are 25 MB: a load of a million events with schemas over Kafka peaked at
 * 606 MB with the records' bound alone, at 503-511 MB with a bound of 8 MB, and at 432 MB with
 * 4 MB (schemaless: 449 MB, as fast as at 8 MB; docs/performance.md).
 */
export const LOAD_GROUP_BOUNDS: GroupBounds = { records: 5_000, bytes: 4 * 1024 * 1024 }

/**
 * Live, once caught up. A group grows only behind a backlog, and commits each file it touches
 * once, with its log's sync: a burst spread over many organizations pays that per file and per
 * group, and larger groups pay it fewer times. A burst of 20,000 provider renames (2.6 KB each,
 * `bench:tenants`) ran at a median 3,132 events/s over 7 organizations and 1,204 over 3,000 in
 * groups of 16 MB, against 2,783 and 1,075 in groups of 4 MB (five or six runs each); in groups
 * of 64 MB, 3,372 and 1,310, but the projector then peaked at 522 MB during the burst (16 MB:
 * 452; 4 MB: 441), past the 500 MB README states (docs/many-organizations.md).
 */
export const LIVE_GROUP_BOUNDS: GroupBounds = { records: 20_000, bytes: 16 * 1024 * 1024 }

/** The bounds of the next group: a load's until the replica has caught up, then live ones. */
export function groupBounds(caughtUp: boolean): GroupBounds {
  return caughtUp ? LIVE_GROUP_BOUNDS : LOAD_GROUP_BOUNDS
}

/**
 * How often a batch looks for hand-overs. A look costs two file-system calls, one of them a
 * failed rename: before every one of a live load's batches, 2% of the projector's CPU
 * (bench:freshness at 500 transactions/s), to take a file rebuilt minutes ago a few ms sooner.
 */
const HANDOVER_LOOK_MS = 100

/** While only beats arrive, their offsets are committed this often (the lag metric reads them). */
const HEARTBEAT_COMMIT_MS = 5_000

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error))
}
