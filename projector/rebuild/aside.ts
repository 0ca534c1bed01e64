// A rebuild's replay, aside: every change topic from the beginning, with a consumer group of its
// own, into a scratch generation under DATA_DIR/rebuilds/<run>/, until caught up and built. The
// live generation is only read (for the stamps of unchanged documents). What is done with the
// result (a hand-over, a dry-run report) is the caller's; the scratch folder is too.
import { Kafka, logLevel as kafkaLogLevel } from 'kafkajs'
import { join } from 'node:path'
import type { Logger } from 'pino'
import type { ProjectorConfig } from '../../src/config.ts'
import { prepareGeneration, type Generation } from '../../src/layout.ts'
import { createApplier, type OrganizationFilter } from '../lanes/apply.ts'
import { changeTopics, createKafkaSource } from '../sources/kafka.ts'
import type { PartitionPosition } from '../storage/handover.ts'
import { openPriorGeneration } from '../storage/prior-stamps.ts'

export interface AsideBuild {
  readonly generation: Generation
  /** Where the replay ended: the next offset of every partition of the change topics. */
  readonly position: PartitionPosition[]
  /** The organizations it built a file for. */
  readonly organizations: string[]
  readonly events: number
}

export interface AsideBuildDeps {
  config: ProjectorConfig
  logger: Logger
  /** The scratch folder (DATA_DIR/rebuilds/<run>); the caller removes it. */
  dir: string
  /** The consumer group of the replay, deleted when it is done. */
  groupId: string
  /** Only these organizations (per-organization rebuild); absent: all. */
  organizations?: OrganizationFilter
  /**
   * The files the organizations share, as the live generation keeps them (src/organization-files.ts);
   * 0 or absent: each its own.
   */
  organizationFiles?: number
  /** Only these topics (control.db's, for its repair); absent: every change topic. */
  topics?: readonly string[]
  /** The generation served now, whose stamps unchanged documents keep. */
  live?: Generation
  /** Events consumed so far, and in all (the topics' ends when the replay began). */
  onProgress?: (done: number, total: number) => void
  /** Aborting stops the replay; the build then rejects. */
  signal?: AbortSignal
  clock?: () => Date
}

export class RebuildStopped extends Error {
  override name = 'RebuildStopped'
}

export async function buildAside(deps: AsideBuildDeps): Promise<AsideBuild> {
  const { config, logger, dir, groupId } = deps
  const generation = prepareGeneration(join(dir, 'data'), 'aside')
  const prior = deps.live === undefined ? undefined : openPriorGeneration(deps.live)
  const applier = createApplier({
    generation,
    topicPrefix: config.topicPrefix,
    logger,
    offsetGuard: true,
    walCheckpointBytes: config.walCheckpointBytes,
    deferDocumentsUntilCaughtUp: true,
    // Built aside: no api serves it, so there is no catch-up to announce.
    announceCaughtUp: false,
    loadCommitEvents: 50_000,
    maxOpenFiles: config.openFilesMax,
    cacheBudgetBytes: config.sqliteCacheBytes,
    documentBuildWorkers: deps.organizations === undefined ? config.documentBuildWorkers : 0,
    ...(deps.clock === undefined ? {} : { clock: deps.clock }),
    ...(prior === undefined
      ? {}
      : { priorStamp: prior.priorStamp.bind(prior), previousGeneration: deps.live }),
    ...(deps.organizations === undefined ? {} : { onlyOrganizations: deps.organizations }),
    organizationFiles: deps.organizationFiles ?? 0,
  })
  const kafka = new Kafka({
    clientId: config.kafka.clientId,
    brokers: config.kafka.brokers,
    logLevel: kafkaLogLevel.NOTHING,
  })
  const admin = kafka.admin()
  const topics = [...(deps.topics ?? changeTopics(config.topicPrefix))]
  let events = 0
  try {
    await admin.connect()
    let total = 0
    for (const topic of topics) {
      for (const p of await admin.fetchTopicOffsets(topic).catch(() => [])) {
        total += Number(BigInt(p.high) - BigInt(p.low))
      }
    }
    deps.onProgress?.(0, total)
    let finish: () => void = () => undefined
    let fail: (error: Error) => void = () => undefined
    const done = new Promise<void>((resolve, reject) => {
      finish = resolve
      fail = reject
    })
    const source = createKafkaSource({
      brokers: config.kafka.brokers,
      clientId: config.kafka.clientId,
      groupId,
      topicPrefix: config.topicPrefix,
      topics,
      // No dead-letter topic: the live projector dead-lettered the bad events when it met them.
      applier,
      logger,
      onBatch: (outcome) => {
        for (const byOutcome of outcome.events.values()) {
          for (const n of Object.values(byOutcome)) events += n
        }
        events += outcome.skipped
        deps.onProgress?.(Math.min(events, total), total)
      },
      onLag: () => undefined,
      onCaughtUp: async () => {
        await applier.markCaughtUp()
        if (applier.caughtUp) finish()
        else fail(new RebuildStopped('the rebuild was stopped'))
      },
      // A build aside that cannot apply a batch (a full disk, a lane's failure) ends: redelivered
      // by kafkajs, the batch would fail again, and again, until someone noticed the hang.
      onFatal: (error) => {
        fail(error)
        return true
      },
    })
    const stop = () => {
      applier.stopBuilding()
      fail(new RebuildStopped('the rebuild was stopped'))
    }
    deps.signal?.addEventListener('abort', stop, { once: true })
    try {
      await source.start()
      await done
    } finally {
      deps.signal?.removeEventListener('abort', stop)
      await source.stop()
    }
    const position = await endPosition(admin, groupId, topics)
    logger.info({ events, organizations: applier.knownOrganizations().length }, 'replayed aside')
    return {
      generation,
      position,
      organizations: applier.knownOrganizations(),
      events,
    }
  } finally {
    applier.close()
    prior?.close()
    await admin.deleteGroups([groupId]).catch(() => undefined)
    await admin.disconnect().catch(() => undefined)
  }
}

/** The replay's committed offsets: where the rebuilt files end. */
async function endPosition(
  admin: ReturnType<Kafka['admin']>,
  groupId: string,
  topics: string[],
): Promise<PartitionPosition[]> {
  const committed = await admin.fetchOffsets({ groupId, topics })
  const position: PartitionPosition[] = []
  for (const { topic, partitions } of committed) {
    const starts = await admin.fetchTopicOffsets(topic)
    for (const { partition, offset } of partitions) {
      // '-1': nothing read of a partition empty until then; its next offset is its start.
      const start = starts.find((s) => s.partition === partition)?.low ?? '0'
      position.push({ topic, partition, offset: offset === '-1' ? start : offset })
    }
  }
  return position
}
