// The projector process, assembled from its parts. `main.ts` only reads config and calls this;
// tests build projectors from here too.
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import type { ProjectorConfig } from '../src/config.ts'
import { deadLetterFilePath, ensureCurrentGeneration, type Generation } from '../src/layout.ts'
import { buildAdmin } from './admin.ts'
import { createApplier, type Applier, type BatchOutcome } from './apply.ts'
import { appendDeadLetters } from './dead-letters.ts'
import { createProjectorMetrics, type ProjectorMetrics } from './metrics.ts'
import { readRecordBatches } from './sources/file.ts'
import { createKafkaSource, type KafkaSource } from './sources/kafka.ts'

export interface ProjectorDeps {
  config: ProjectorConfig
  logger: Logger
  clock?: () => Date
  /** Project into this generation instead of the current one (rebuilds). */
  generation?: Generation
}

export interface FileRunSummary {
  records: number
  applied: number
  deadLettered: number
  skipped: number
  seconds: number
  deadLetterFile: string | undefined
}

export interface Projector {
  readonly generation: Generation
  readonly metrics: ProjectorMetrics
  /** Applies an NDJSON file of Kafka records, then marks the replica caught up. */
  runFile(path: string, options?: { batchSize?: number }): Promise<FileRunSummary>
  /** Consumes Kafka until `stop`; serves the admin port meanwhile. */
  startKafka(): Promise<void>
  /** Graceful: finishes the batch in hand, commits, closes files. */
  stop(): Promise<void>
  /** The admin port's address once listening (Kafka mode). */
  adminAddress(): string | undefined
}

export function createProjector(deps: ProjectorDeps): Projector {
  const { config, logger } = deps
  const clock = deps.clock ?? (() => new Date())
  const generation = deps.generation ?? ensureCurrentGeneration(config.dataDir)
  const metrics = createProjectorMetrics()
  let applier: Applier | undefined
  let source: KafkaSource | undefined
  let admin: FastifyInstance | undefined
  let ready = false

  function openApplier(offsetGuard: boolean): Applier {
    applier ??= createApplier({
      generation,
      topicPrefix: config.topicPrefix,
      logger,
      offsetGuard,
      walCheckpointBytes: config.walCheckpointBytes,
      clock,
    })
    ready = applier.control.caughtUpAt() !== undefined
    metrics.setCaughtUp(ready)
    return applier
  }

  const onBatch = (outcome: BatchOutcome, seconds: number) => {
    metrics.recordBatch(outcome, seconds, clock().getTime())
  }

  const caughtUp = () => {
    applier?.markCaughtUp()
    ready = true
    metrics.setCaughtUp(true)
  }

  return {
    generation,
    metrics,
    adminAddress: () => {
      const address = admin?.server.address()
      return address && typeof address === 'object'
        ? `http://${address.address}:${address.port}`
        : undefined
    },

    async runFile(path, options = {}) {
      const a = openApplier(false)
      const deadLetterFile = deadLetterFilePath(config.dataDir)
      const summary: FileRunSummary = {
        records: 0,
        applied: 0,
        deadLettered: 0,
        skipped: 0,
        seconds: 0,
        deadLetterFile: undefined,
      }
      const started = process.hrtime.bigint()
      for await (const records of readRecordBatches(path, options.batchSize ?? 5_000)) {
        const t0 = process.hrtime.bigint()
        const outcome = a.applyBatch(records)
        appendDeadLetters(deadLetterFile, outcome.deadLetters)
        for (const letter of outcome.deadLetters) {
          logger.warn(
            {
              topic: letter.record.topic,
              partition: letter.record.partition,
              offset: letter.record.offset,
              reason: letter.reason,
              error: letter.message,
            },
            'dead-lettered a change event',
          )
        }
        onBatch(outcome, Number(process.hrtime.bigint() - t0) / 1e9)
        summary.records += records.length
        summary.deadLettered += outcome.deadLetters.length
        summary.skipped += outcome.skipped
        for (const byOutcome of outcome.events.values()) summary.applied += byOutcome.applied ?? 0
      }
      caughtUp()
      summary.seconds = Number(process.hrtime.bigint() - started) / 1e9
      if (summary.deadLettered > 0) summary.deadLetterFile = deadLetterFile
      return summary
    },

    async startKafka() {
      const a = openApplier(true)
      admin = buildAdmin({ registry: metrics.registry, isReady: () => ready })
      await admin.listen({ host: config.admin.host, port: config.admin.port })
      source = createKafkaSource({
        brokers: config.kafka.brokers,
        clientId: config.kafka.clientId,
        groupId: config.kafka.groupId,
        topicPrefix: config.topicPrefix,
        deadLetterTopic: config.deadLetterTopic,
        applier: a,
        logger,
        onBatch,
        onLag: metrics.setLag,
        onCaughtUp: caughtUp,
      })
      await source.start()
    },

    async stop() {
      await source?.stop()
      await admin?.close()
      applier?.close()
      applier = undefined
    },
  }
}
