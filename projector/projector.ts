// The projector process, assembled from its parts. `main.ts` only reads config and calls this;
// tests build projectors from here too.
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import type { ProjectorConfig } from '../src/config.ts'
import { existsSync, realpathSync, renameSync, rmSync, statSync } from 'node:fs'
import {
  SQLITE_SIDE_SUFFIXES,
  currentGeneration,
  deadLetterFilePath,
  ensureCurrentGeneration,
  newGenerationName,
  prepareGeneration,
  publishGeneration,
  type Generation,
} from '../src/layout.ts'
import type { Progress } from '../src/progress.ts'
import { readFreshness, writeFreshness } from '../src/freshness.ts'
import { buildAdmin, type Readiness } from './admin.ts'
import type { BatchOutcome } from './lanes/apply.ts'
import { appendDeadLetters, logDeadLetters } from './sources/dead-letters.ts'
import { FreshnessTracker } from './sources/freshness.ts'
import { freeBytes, isDiskFull, waitForSpace } from './storage/disk-space.ts'
import {
  createLaneApplier,
  FILE_BATCHES_AHEAD,
  LaneFailure,
  type LaneApplier,
} from './lanes/lanes.ts'
import { createProjectorMetrics, type ProjectorMetrics } from './metrics.ts'
import {
  readOrganizationCount,
  readOrganizationFiles,
  recordedSharedFiles,
} from './storage/control-file.ts'
import { autoOrganizationFiles, OWN_FILES_UP_TO } from '../src/organization-files.ts'
import { openPriorGeneration, type PriorGeneration } from './storage/prior-stamps.ts'
import { syncGeneration } from './storage/durable.ts'
import { takeControlRepair } from './rebuild/control-repair.ts'
import {
  claimHandovers,
  completeHandover,
  replacedFiles,
  type HandoverRequest,
} from './storage/handover.ts'
import { readLineBatches, recordsOfTopicInFile } from './sources/file.ts'
import {
  ConsumerFailure,
  createKafkaSource,
  organizationsTopic,
  recordsInTopic,
  type KafkaSource,
} from './sources/kafka.ts'
import { untilKafkaAnswers } from './sources/kafka-client.ts'

export interface ProjectorDeps {
  config: ProjectorConfig
  logger: Logger
  clock?: () => Date
  /** Project into this generation instead of the current one (rebuilds). */
  generation?: Generation
  /**
   * A lane failed while consuming Kafka (lanes.ts): the source has stopped, committing nothing
   * past what every lane applied, and the process should stop (main.ts exits 1).
   */
  onFatal?: (error: Error) => void
}

export interface FileRunSummary {
  records: number
  applied: number
  deadLettered: number
  skipped: number
  /** From the start of `runFile`: counting the organizations and starting the lanes included. */
  seconds: number
  deadLetterFile: string | undefined
  /** The process's peak resident memory so far. */
  peakRssMb: number
}

export interface Projector {
  readonly generation: Generation
  readonly metrics: ProjectorMetrics
  /**
   * Applies an NDJSON file of Kafka records, then marks the replica caught up. `progress` counts
   * the file's bytes read (its total: the file's size), and is done once the file is read.
   */
  runFile(
    path: string,
    options?: { batchSize?: number; progress?: Progress },
  ): Promise<FileRunSummary>
  /**
   * Consumes Kafka until `stop`; serves the admin port meanwhile. With `rebuild`, consumes every
   * topic from the beginning into a new generation with a fresh consumer group, keeping the
   * stamps of unchanged documents, and makes it the served generation once caught up.
   * `progress` counts the events consumed until caught up (its total: the topics' end offsets
   * at start, right for a fresh consumer group, as a rebuild's is).
   */
  startKafka(options?: { rebuild?: boolean; progress?: Progress }): Promise<void>
  /** Graceful: finishes the batch in hand, commits, closes files. */
  stop(): Promise<void>
  /** The admin port's address once listening (Kafka mode). */
  adminAddress(): string | undefined
}

/**
 * An initial load commits its files every this many events rather than every batch (apply.ts).
 * The page caches bound what a longer transaction holds in memory (SQLite spills the rest to the
 * WAL); what it costs is redelivery: a crash replays up to this many events, harmlessly.
 */
export const LOAD_COMMIT_EVENTS = 50_000
/**
 * And a round carries at least this many events per file it holds in a transaction. Each file's
 * commit is a few synced writes (its rollback journal, then the file): seven organizations commit
 * seven files a round, but 3,000 small ones, interleaved in the topics, committed nearly every file
 * every round, 37 rounds over a 1.85M-event load, and those syncs were most of its time. The
 * price is the same as a longer round's: a crash replays more events, harmlessly.
 */
export const LOAD_EVENTS_PER_HELD_FILE = 1_000
/** Records per batch read from a file (`runFile`). */
export const FILE_BATCH_RECORDS = 5_000
/**
 * How long a file replaced by a per-organization rebuild stays on disk: the api moves to the new
 * one at its next request for the organization, and never opens the old one again.
 */
const REPLACED_FILE_GRACE_MS = 60_000

export function createProjector(deps: ProjectorDeps): Projector {
  return new ProjectorProcess(deps)
}

/** What `startKafka` consumes with, kept to start consuming again after a full disk. */
interface Consuming {
  groupId: string
  onCaughtUp: () => Promise<void>
  progress: Progress | undefined
  previous: Generation | undefined
}

/**
 * The projector process: its applier over the served (or rebuilt) generation, the source that
 * feeds it, the admin port, and what runs beside them (the freshness tracker's heartbeat watch,
 * the removal of replaced files, the wait for disk space). Each of those is a method here; the
 * state they share is this object's.
 */
class ProjectorProcess implements Projector {
  readonly metrics = createProjectorMetrics()
  readonly #config: ProjectorConfig
  readonly #logger: Logger
  readonly #clock: () => Date
  readonly #onFatal: ((error: Error) => void) | undefined
  #generation: Generation
  #applier: LaneApplier | undefined
  #source: KafkaSource | undefined
  #admin: FastifyInstance | undefined
  #ready = false
  /**
   * The generation a rebuild replaces, for the stamps of unchanged documents; closed once the
   * rebuild is published (from then on documents change from their own stored state).
   */
  #prior: PriorGeneration | undefined
  #heartbeatWatch: NodeJS.Timeout | undefined
  #replacedSweep: NodeJS.Timeout | undefined
  #consuming: Consuming | undefined
  /** Whether applying waits for disk space (`stop` ends the wait through `#stopped`). */
  #waitingForSpace = false
  /**
   * Building a rebuild's generation, not published yet: its files' commits are synced all at once
   * before it is (storage/durable.ts `syncGeneration`).
   */
  #rebuilding = false
  /** ORGANIZATION_FILES as resolved for the generation written (`#organizationFilesFor`). */
  #organizationFiles: number | undefined
  readonly #stopped = new AbortController()

  constructor(deps: ProjectorDeps) {
    this.#config = deps.config
    this.#logger = deps.logger
    this.#clock = deps.clock ?? (() => new Date())
    this.#onFatal = deps.onFatal
    this.#generation = deps.generation ?? ensureCurrentGeneration(deps.config.dataDir)
  }

  get generation(): Generation {
    return this.#generation
  }

  adminAddress(): string | undefined {
    const address = this.#admin?.server.address()
    return address && typeof address === 'object'
      ? `http://${address.address}:${address.port}`
      : undefined
  }

  /**
   * The files a generation made now shares among its organizations (src/organization-files.ts):
   * the setting, or with `auto` chosen from the organizations the source holds (`count`);
   * undefined for a generation made already, which keeps what it recorded then.
   */
  async #organizationFilesFor(count: () => Promise<number>): Promise<number | undefined> {
    const configured = this.#config.organizationFiles
    if (configured !== 'auto') return configured
    const recorded = recordedSharedFiles(this.#generation.controlPath)
    if (recorded !== undefined) {
      // Made with files of their own (before `auto`, or with fewer organizations then): said at
      // each start once they are many, since only a rebuild changes it.
      const organizations = recorded === 0 ? readOrganizationCount(this.#generation.controlPath) : 0
      const files = autoOrganizationFiles(organizations)
      if (files > 0) {
        this.#logger.warn(
          { organizations, organizationFiles: files },
          'ORGANIZATION_FILES=auto: this generation keeps a file for each of its many organizations, as it was made; a --rebuild makes one where they share files (docs/operations.md)',
        )
      }
      return undefined
    }
    const organizations = await count()
    if (this.#stopped.signal.aborted) return undefined
    const files = autoOrganizationFiles(organizations)
    this.#logger.info(
      { organizations, organizationFiles: files, ownFilesUpTo: OWN_FILES_UP_TO },
      files === 0
        ? 'ORGANIZATION_FILES=auto: each organization gets a file of its own'
        : 'ORGANIZATION_FILES=auto: the organizations share files',
    )
    return files
  }

  /**
   * Organizations in the topics (a new generation's, with ORGANIZATION_FILES=auto), asked until
   * Kafka answers, as the consumer connects (sources/kafka.ts `start`); 0 once stopping.
   */
  async #organizationsInTopics(): Promise<number> {
    const config = this.#config
    const { signal } = this.#stopped
    const counted = await untilKafkaAnswers(
      () =>
        recordsInTopic(
          { brokers: config.kafka.brokers, clientId: config.kafka.clientId, logger: this.#logger },
          organizationsTopic(config.topicPrefix),
        ),
      {
        stopped: () => signal.aborted,
        signal,
        logger: this.#logger,
        message:
          'cannot reach Kafka to count the organizations (ORGANIZATION_FILES=auto); retrying',
      },
    )
    return counted?.value ?? 0
  }

  #openApplier(offsetGuard: boolean, previous?: Generation): LaneApplier {
    const config = this.#config
    if (previous !== undefined) this.#prior = openPriorGeneration(previous)
    const prior = this.#prior
    const priorStamp = prior === undefined ? undefined : prior.priorStamp.bind(prior)
    this.#applier ??= createLaneApplier({
      lanes: config.lanes,
      generation: this.#generation,
      topicPrefix: config.topicPrefix,
      logger: this.#logger,
      offsetGuard,
      walCheckpointBytes: config.walCheckpointBytes,
      deferDocumentsUntilCaughtUp: true,
      loadCommitEvents: LOAD_COMMIT_EVENTS,
      loadEventsPerHeldFile: LOAD_EVENTS_PER_HELD_FILE,
      maxOpenFiles: config.openFilesMax,
      cacheBudgetBytes: config.sqliteCacheBytes,
      documentBuildWorkers: config.documentBuildWorkers,
      organizationFiles: this.#organizationFiles,
      clock: this.#clock,
      ...(priorStamp === undefined ? {} : { priorStamp, previousGeneration: previous }),
      unpublishedGeneration: this.#rebuilding,
    })
    this.#ready = this.#applier.caughtUp
    this.metrics.setCaughtUp(this.#ready)
    return this.#applier
  }

  #retirePrevious(): void {
    this.#prior?.close()
    this.#prior = undefined
  }

  /**
   * Files a swap replaced before this start, whose removal a stop cut short (a restart within the
   * grace): removed once the grace has passed from now, if still replaced then.
   */
  #sweepReplacedFiles(): void {
    const generation = this.#generation
    const logger = this.#logger
    const replacedNow = () =>
      replacedFiles(generation, readOrganizationFiles(generation.controlPath))
    const atStart = new Set(replacedNow())
    if (atStart.size === 0) return
    this.#replacedSweep = setTimeout(() => {
      try {
        const removed = replacedNow().filter((path) => atStart.has(path))
        for (const path of removed) rmSync(path, { force: true })
        logger.info({ files: removed.length }, 'removed files replaced before the last stop')
      } catch (error) {
        logger.warn({ err: error }, 'could not remove the files replaced before the last stop')
      }
    }, REPLACED_FILE_GRACE_MS).unref()
  }

  /** Swaps in rebuilt files (storage/handover.ts), between two batches. */
  async #takeHandovers(requests: readonly HandoverRequest[]): Promise<void> {
    const a = this.#applier!
    const generation = this.#generation
    for (const request of requests) {
      const { fileKey, file, organizations } = request
      const current = a.control.organizationFile(fileKey)
      // Taken already, by a run that stopped before removing the request.
      if (current === file) {
        completeHandover(generation, fileKey)
        continue
      }
      const replaced = generation.filePath(fileKey, current)
      const restamped = await a.replaceFile(fileKey, file)
      completeHandover(generation, fileKey)
      this.#logger.info(
        { fileKey, file, organizations, restamped, requestedBy: request.requestedBy },
        'now serving a rebuilt file',
      )
      setTimeout(() => {
        for (const suffix of ['', ...SQLITE_SIDE_SUFFIXES]) {
          rmSync(`${replaced}${suffix}`, { force: true })
        }
      }, REPLACED_FILE_GRACE_MS).unref()
    }
  }

  readonly #onBatch = (outcome: BatchOutcome, seconds: number): void => {
    this.metrics.recordBatch(outcome, seconds, this.#clock().getTime())
  }

  /**
   * The freshness tracker of the generation this process writes (docs/freshness.md), resuming from
   * what it published last, and its one warning when no heartbeat comes.
   */
  #freshnessFor(gen: Generation) {
    const { freshness } = this.#config
    const tracker = new FreshnessTracker({
      settleMs: freshness.settleMs,
      previous: readFreshness(gen.dir),
    })
    this.metrics.watchFreshness(() => ({
      completeThroughMs: tracker.completeThroughMs,
      clockBehindMs: tracker.clockBehindMs,
    }))
    clearTimeout(this.#heartbeatWatch)
    const check = (): void => {
      if (!this.#ready || tracker.heartbeats > 0) {
        if (tracker.heartbeats === 0) this.#heartbeatWatch = setTimeout(check, 1_000).unref()
        return
      }
      this.#logger.warn(
        { topic: freshness.heartbeatTopic, waitedMs: freshness.missingWarnMs },
        "no heartbeat from the database: responses say their freshness is unknown. Is the replica_heartbeat table in the connector's publication, and heartbeat.action.query set? (docs/freshness.md)",
      )
    }
    this.#heartbeatWatch = setTimeout(check, freshness.missingWarnMs).unref()
    return {
      heartbeatTopic: freshness.heartbeatTopic,
      tracker,
      onHeartbeat: (delayMs: number) => this.metrics.recordHeartbeat(delayMs),
      publish: () => writeFreshness(gen.dir, tracker.record(this.#clock().getTime())),
    }
  }

  /** Builds what the load deferred and records the catch-up; false if stopped before that. */
  async #caughtUp(): Promise<boolean> {
    const a = this.#applier
    if (a === undefined) return false
    this.metrics.recordDocuments(await a.markCaughtUp())
    if (!a.caughtUp) return false
    this.#ready = true
    this.metrics.setCaughtUp(true)
    return true
  }

  readonly #readiness = (): Readiness =>
    this.#waitingForSpace ? 'disk_full' : this.#ready ? 'ready' : 'catching_up'

  /** Consumes the topics with the applier open, from the group's committed offsets. */
  async #consume(): Promise<void> {
    const { groupId, onCaughtUp, progress } = this.#consuming!
    const config = this.#config
    const a = this.#applier!
    const generation = this.#generation
    this.#source = createKafkaSource({
      brokers: config.kafka.brokers,
      clientId: config.kafka.clientId,
      groupId,
      topicPrefix: config.topicPrefix,
      deadLetterTopic: config.deadLetterTopic,
      applier: a,
      logger: this.#logger,
      onBatch: this.#onBatch,
      onCommitted: (events) => this.metrics.recordEvents(events),
      onLag: (topic, partition, lag) => this.metrics.setLag(topic, partition, lag),
      onCaughtUp,
      liveApplyIntervalMs: config.liveApplyIntervalMs,
      handovers: {
        pending: () => {
          // control.db's repair (verify --repair) is applied here, between two batches, by
          // this process: the only writer of the generation.
          takeControlRepair(generation, a.control.db, this.#logger)
          return claimHandovers(generation, this.#logger)
        },
        take: (requests) => this.#takeHandovers(requests),
      },
      progress,
      freshness: this.#freshnessFor(generation),
      onFatal: (error) => {
        if (isDiskFull(error)) {
          void this.#waitOutFullDisk(error)
          return true
        }
        if (!(error instanceof LaneFailure || error instanceof ConsumerFailure)) return false
        this.#onFatal?.(error)
        return true
      },
    })
    await this.#source.start()
  }

  /**
   * The disk under DATA_DIR filled while applying. The source has stopped, committing no offset
   * past what every file holds (the failed batch's transactions rolled back): the files are
   * closed, /readyz and the metrics say why, the api goes on serving what they hold, and once
   * space returns the projector consumes again from the committed offsets, as a restart would,
   * ending with the files a run without the fault would have written.
   */
  async #waitOutFullDisk(error: Error): Promise<void> {
    if (this.#waitingForSpace || this.#stopped.signal.aborted) return
    const { dataDir } = this.#config
    this.#waitingForSpace = true
    this.metrics.setDiskFull(true)
    let cause: unknown = error
    // Measured now, not after the stop: space freed meanwhile must count as returned.
    let free = freeBytes(dataDir)
    try {
      await this.#source?.stop()
      this.#source = undefined
      for (;;) {
        await this.#closeAfterFailure()
        this.#logger.error(
          { err: cause, dataDir, freeBytes: free },
          'the disk under DATA_DIR is full: applying stopped, nothing past what the files hold is committed; it resumes when space returns',
        )
        if (!(await waitForSpace(dataDir, free, { signal: this.#stopped.signal }))) return
        try {
          this.#openApplier(true, this.#consuming!.previous)
          break
        } catch (reopening) {
          // Reopening writes too (a file's creation, control.db): still full, wait again.
          if (!isDiskFull(reopening)) throw reopening
          cause = reopening
          free = freeBytes(dataDir)
        }
      }
      this.#logger.info(
        { dataDir, freeBytes: freeBytes(dataDir) },
        'disk space returned: applying again from the committed offsets',
      )
      this.#waitingForSpace = false
      this.metrics.setDiskFull(false)
      await this.#consume()
    } catch (failure) {
      // Not a condition to wait out: stop as any other fatal error does, for the supervisor.
      this.#waitingForSpace = false
      this.#onFatal?.(failure instanceof Error ? failure : new Error(String(failure)))
    }
  }

  /** Closes the files of an applier that failed, their transactions rolled back. */
  async #closeAfterFailure(): Promise<void> {
    await this.#applier?.close().catch((closing: unknown) => {
      this.#logger.warn({ err: closing }, 'closing the files after a full disk')
    })
    this.#applier = undefined
    // A rebuild's prior generation is opened again with the applier.
    this.#retirePrevious()
  }

  async runFile(
    requestedPath: string,
    options: { batchSize?: number; progress?: Progress } = {},
  ): Promise<FileRunSummary> {
    // Timed from here, where a Kafka load also starts: before the organizations are counted (with
    // ORGANIZATION_FILES=auto, a scan of the whole file) and the lanes started. Started after
    // them, a file load was not charged for work a Kafka load is (docs/performance.md).
    const started = process.hrtime.bigint()
    const deadLetterFile = deadLetterFilePath(this.#config.dataDir)
    const path = setAsideIfDeadLetters(requestedPath, deadLetterFile, this.#clock(), this.#logger)
    this.#organizationFiles = await this.#organizationFilesFor(() =>
      Promise.resolve(recordsOfTopicInFile(path, organizationsTopic(this.#config.topicPrefix))),
    )
    const a = this.#openApplier(false)
    const summary: FileRunSummary = {
      records: 0,
      applied: 0,
      deadLettered: 0,
      skipped: 0,
      seconds: 0,
      deadLetterFile: undefined,
      peakRssMb: 0,
    }
    const { progress } = options
    progress?.setTotal(statSync(path).size)
    const batches = readLineBatches(path, options.batchSize ?? FILE_BATCH_RECORDS, (bytes) =>
      progress?.add(bytes),
    )
    const settle = (outcome: BatchOutcome, lines: number, t0: bigint) => {
      appendDeadLetters(deadLetterFile, outcome.deadLetters)
      logDeadLetters(this.#logger, outcome.deadLetters)
      this.#onBatch(outcome, Number(process.hrtime.bigint() - t0) / 1e9)
      summary.records += lines
      summary.deadLettered += outcome.deadLetters.length
      summary.skipped += outcome.skipped
      for (const byOutcome of outcome.events.values()) summary.applied += byOutcome.applied ?? 0
    }
    // Batches are read and routed while the lanes apply those before, up to FILE_BATCHES_AHEAD
    // of them, and settled in their order.
    const ahead: { applied: Promise<BatchOutcome>; lines: number; t0: bigint }[] = []
    try {
      for await (const batch of batches) {
        const t0 = process.hrtime.bigint()
        const applied = a.applyLines(batch)
        // Heard of when awaited below; never an unhandled rejection meanwhile.
        applied.catch(() => undefined)
        ahead.push({ applied, lines: lineCount(batch), t0 })
        while (ahead.length > FILE_BATCHES_AHEAD) {
          const oldest = ahead.shift()!
          settle(await oldest.applied, oldest.lines, oldest.t0)
        }
      }
      for (const oldest of ahead) settle(await oldest.applied, oldest.lines, oldest.t0)
    } finally {
      progress?.done()
    }
    await this.#caughtUp()
    // The load's last round committed at catch-up, its spools applied then: counted now.
    const drained = await a.commit()
    this.metrics.recordEvents(drained)
    for (const byOutcome of Object.values(drained)) summary.applied += byOutcome.applied ?? 0
    summary.seconds = Number(process.hrtime.bigint() - started) / 1e9
    summary.peakRssMb = Math.round(process.resourceUsage().maxRSS / 1024)
    if (summary.deadLettered > 0) summary.deadLetterFile = deadLetterFile
    return summary
  }

  async startKafka(options: { rebuild?: boolean; progress?: Progress } = {}): Promise<void> {
    const config = this.#config
    let groupId: string
    let onCaughtUp = async () => void (await this.#caughtUp())
    let previous: Generation | undefined
    // The operations server first: an orchestrator sees the process alive, and not ready, while
    // it waits for Kafka (for the count ORGANIZATION_FILES=auto takes, or for the consumer).
    this.#admin = buildAdmin({ registry: this.metrics.registry, readiness: this.#readiness })
    await this.#admin.listen({ host: config.admin.host, port: config.admin.port })
    if (options.rebuild === true) {
      previous = currentGeneration(config.dataDir)
      this.#generation = prepareGeneration(config.dataDir, newGenerationName(this.#clock()))
      const generation = this.#generation
      groupId = `${config.kafka.groupId}.${generation.name}`
      this.#rebuilding = true
      const files = await this.#organizationFilesFor(() => this.#organizationsInTopics())
      if (this.#stopped.signal.aborted) return
      this.#organizationFiles = files
      this.#openApplier(true, previous)
      onCaughtUp = async () => {
        // Stopped mid-build: the new generation is not complete, and is not published.
        if (!(await this.#caughtUp())) return
        // The previous generation's stamps are carried only while nothing reads this one. A stamp
        // carried is as old as the unchanged content it names; once the api serves the file,
        // every document written must be stamped after every stamp the file holds (cursors and
        // api/list-order.ts resume from a position), so the lanes let go of it before the swap.
        // A change applied between the two is stamped anew: pollers may get it once more.
        this.#retirePrevious()
        await this.#applier?.retirePrevious()
        await syncGeneration(generation)
        publishGeneration(config.dataDir, generation.name)
        this.#rebuilding = false
        this.#logger.info(
          { generation: generation.name, replaced: previous?.name },
          'rebuild caught up: now serving the new generation',
        )
      }
      this.#logger.info(
        { generation: generation.name, groupId },
        'rebuilding into a new generation',
      )
    } else {
      const files = await this.#organizationFilesFor(() => this.#organizationsInTopics())
      if (this.#stopped.signal.aborted) return
      this.#organizationFiles = files
      this.#openApplier(true)
      this.#sweepReplacedFiles()
      // A generation keeps the consumer group that built it, so a restart resumes, not replays.
      groupId = this.#applier!.control.consumerGroup() ?? config.kafka.groupId
    }
    this.#applier!.control.recordConsumerGroup(groupId)
    this.#consuming = { groupId, onCaughtUp, progress: options.progress, previous }
    await this.#consume()
  }

  async stop(): Promise<void> {
    this.#stopped.abort()
    // First: a Kafka batch waiting for the catch-up build would hold up the consumer's stop.
    this.#applier?.stopBuilding()
    clearTimeout(this.#heartbeatWatch)
    clearTimeout(this.#replacedSweep)
    await this.#source?.stop()
    await this.#admin?.close()
    await this.#applier?.close()
    this.#applier = undefined
    this.#retirePrevious()
  }
}

/**
 * Replaying the dead-letter file (README: `--from-file DATA_DIR/dead-letters.ndjson` after a fix)
 * must not append this run's dead letters to the file being read: the reader would meet them
 * again, and a letter still bad would circle for ever. The file is renamed first and read from
 * its new name; letters still bad start a new dead-letter file.
 */
function setAsideIfDeadLetters(path: string, deadLetterFile: string, now: Date, logger: Logger) {
  if (!existsSync(path) || !existsSync(deadLetterFile)) return path
  if (realpathSync(path) !== realpathSync(deadLetterFile)) return path
  const aside = deadLetterFile.replace(
    /\.ndjson$/,
    `.replayed-${now.toISOString().replace(/[:.]/g, '-')}.ndjson`,
  )
  renameSync(deadLetterFile, aside)
  logger.info({ from: deadLetterFile, to: aside }, 'replaying dead letters from a set-aside copy')
  return aside
}

/** Records in a batch of lines (blank lines are left out by the reader). */
function lineCount(batch: { lines: number[] }): number {
  return batch.lines.length / 3
}
