// The live projector's applier: organizations applied in parallel, in lanes.
//
// LANES worker threads (lane.ts) each own the organizations assigned to them, in turn as each is
// first seen (lane-hint.ts `LaneAssignment`), and are the only writers of those files. The main
// thread collects each batch (pack.ts, the same code the single-threaded applier runs), has its
// routes resolved (during a load by the routing thread, route-thread.ts, while it collects the
// next), packs it and hands each lane its share; a lane applies it with lane-core.ts, the same code the
// single-threaded applier runs inline. A batch is done when every lane has applied its share: only
// then does its outcome resolve, so a source commits its offsets only past what every lane
// applied (`CommitBarrier`, for an initial load's held transactions).
//
// Between batches the main thread may take files back from the lanes (`close-files`): the
// document build at catch-up and the swap of a rebuilt file run on the main thread, with the
// lanes idle, through the single-threaded applier (apply.ts), which also keeps control.db.
import { dirname } from 'node:path'
import type { Logger } from 'pino'
import { createApplier, type Applier, type ApplierOptions, type BuiltAtCommit } from './apply.ts'
import { addDocumentStats } from './lane-core.ts'
import { ThreadChannel, type DistributiveOmit } from './thread-channel.ts'
import type { ControlFile } from '../storage/control-file.ts'
import { syncWals } from '../storage/wal.ts'
import type { SourceRecord } from '../decode/decode.ts'
import type { RefreshStats } from '../documents/index.ts'
import { LaneAssignment } from '../routing/lane-hint.ts'
import { fileKeyOf } from '../../src/organization-files.ts'
import type { LaneAnswer, LaneOptions, LaneOutcome, LaneRequest } from './lane-protocol.ts'
import {
  addTally,
  loadRoundOver,
  takeTally,
  type BatchOutcome,
  type EventTally,
  type OnRouted,
} from './outcome.ts'
import {
  BufferPool,
  PackedBatch,
  packLines,
  packRecords,
  recordBytes,
  type PackContext,
  type PackedShare,
  type PackItems,
} from './pack.ts'
import { FileSourceError, LineReader, type LineBatch } from '../decode/file-line.ts'
import { RouteThread } from './route-thread.ts'
import { cacheShares } from '../storage/cache-budget.ts'
import { LaneFailure } from './lane-failure.ts'
import { workerModule } from './worker-source.ts'

const laneModule = workerModule(new URL('./lane.ts', import.meta.url))

export { LaneFailure }

export interface LaneApplierOptions extends ApplierOptions {
  lanes: number
  logger: Logger
}

export interface CommitOptions {
  /**
   * The round is the load's last, as far as the source knows (it has applied every record its
   * topics hold): its files' documents are built as they commit, as at catch-up, which then skips
   * them. A Kafka load's last round commits before its lag says it caught up (the lag is measured
   * from committed offsets), so without this the catch-up opened every file of the round again.
   * Wrong (more records come), it costs only time: those files' documents are live from then on.
   */
  lastRound?: boolean
}

export interface LaneApplier {
  /**
   * Applies records from Kafka (values as bytes); resolves once every lane applied its share.
   * `onRouted` hears of the batch's organizations once it is routed, before the lanes apply it.
   */
  applyBatch(records: readonly SourceRecord[], onRouted?: OnRouted): Promise<BatchOutcome>
  /** Applies a file's lines; a line that is not a record rejects with a FileSourceError. */
  applyLines(batch: LineBatch): Promise<BatchOutcome>
  /**
   * Commits what an initial load holds. Returns the outcomes of the events a round's spool applied
   * (lane-core.ts) that no batch's outcome reported yet.
   */
  commit(options?: CommitOptions): Promise<EventTally>
  markCaughtUp(): Promise<RefreshStats>
  buildInProgress(): Promise<void> | undefined
  stopBuilding(): void
  /** `Applier.replaceFile`, with every lane idle. */
  replaceFile(fileKey: string, file: string): Promise<number>
  knownOrganizations(): string[]
  /** A rebuild was published: the replaced generation's stamps are no longer consulted. */
  retirePrevious(): Promise<void>
  readonly caughtUp: boolean
  readonly control: ControlFile
  close(): Promise<void>
}

/**
 * Batches a file run reads and routes while the lanes apply the one before. A bench file, like a
 * snapshot of organizations inserted one after another, comes in runs of one organization
 * (median 725 events, up to 20,000): one batch ahead, the lane that owns the run works while the
 * other waits for the next batch. Two ahead let the other lane start it (schemaless million:
 * 26.1 s against 27.6-27.9 s; schema-wrapped: 33.1 s against 40.1 s). Four ahead was faster in
 * one round and no faster past the noise in the next, while the schema-wrapped runs peaked at
 * 467-498 MB, against the 500 MB budget (docs/performance.md).
 */
export const FILE_BATCHES_AHEAD = 2

/** One lane's thread: its requests, answered in order (thread-channel.ts). */
class LaneThread {
  readonly #channel: ThreadChannel<LaneRequest, LaneAnswer>

  constructor(lane: number, options: LaneOptions, buffers: BufferPool) {
    this.#channel = new ThreadChannel<LaneRequest, LaneAnswer>({
      lane,
      module: laneModule,
      workerData: options,
      youngGenerationMb: 8,
      // A file line that is not a record fails its batch, not the lane.
      requestError: (answer) =>
        answer.fileSource ? new FileSourceError(answer.message) : undefined,
      onAnswer: (answer) => {
        if (answer.buffer !== undefined) buffers.give(answer.buffer)
      },
    })
  }

  get failure(): LaneFailure | undefined {
    return this.#channel.failure
  }

  async request(
    request: DistributiveOmit<LaneRequest, 'seq'>,
    transfer: ArrayBuffer[] = [],
  ): Promise<LaneOutcome | undefined> {
    return (await this.#channel.request(request, transfer)).outcome
  }

  terminate(): Promise<void> {
    return this.#channel.terminate()
  }
}

export function createLaneApplier(options: LaneApplierOptions): LaneApplier {
  if (options.onlyOrganizations !== undefined) {
    // A rebuild aside keeps some organizations: it runs the single-threaded applier (apply.ts).
    throw new Error('lanes apply every organization; onlyOrganizations is for createApplier')
  }
  return new LaneCoordinator(options)
}

/**
 * The main thread's side of the lanes: it routes and packs each batch (pack.ts), hands each lane
 * its share, and holds the commit barrier. control.db, the document build and file swaps belong to
 * the single-threaded applier it keeps beside the lanes (`inner`).
 */
class LaneCoordinator implements LaneApplier {
  readonly control: ControlFile
  readonly #options: LaneApplierOptions
  readonly #clock: () => Date
  readonly #inner: Applier
  readonly #assignment: LaneAssignment
  readonly #pack: PackContext
  #threads: LaneThread[]
  /**
   * The routing index's thread, until the replica has caught up. Live, batches are small and
   * latency counts: a hand-off to another thread and back, on two busy cores, cost more than the
   * routes (bench:freshness, docs/performance.md), so the main thread resolves them itself.
   */
  #routes: RouteThread | undefined
  /** Batches handed to the routing thread or the lanes and not answered yet. */
  readonly #inFlight = new Set<Promise<unknown>>()
  #building: Promise<void> | undefined
  readonly #barrier: CommitBarrier
  /** What rounds committed as the load's last (`lastRound`) built, for the catch-up to skip. */
  #builtEarly: BuiltAtCommit = noneBuilt()
  readonly #mainReader = new LineReader()

  constructor(options: LaneApplierOptions) {
    const { lanes } = options
    this.#options = options
    this.#clock = options.clock ?? (() => new Date())
    this.#inner = createApplier(options)
    this.control = this.#inner.control
    this.#assignment = new LaneAssignment(lanes)
    this.#pack = {
      control: this.control,
      codes: this.#inner.codes,
      topicPrefix: options.topicPrefix,
      offsetGuard: options.offsetGuard,
      lanes,
      // A lane owns files: every organization of a shared file goes to the lane that owns it.
      laneOf: (organizationId) => this.#assignment.laneOf(this.#fileKeyOf(organizationId)),
      // Each lane's batches in flight, the next one packed meanwhile, and one to spare.
      buffers: new BufferPool((FILE_BATCHES_AHEAD + 2) * lanes),
      knownOrganizations: () => this.#inner.knownOrganizations(),
      only: undefined,
    }
    this.#threads = this.#startLanes()
    this.#routes = this.#startRoutesIfLoading()
    this.#barrier = new CommitBarrier(options, {
      failure: () => this.#failure(),
      commitControl: async () => {
        // The routes before the files they lead to, as control.db's.
        await this.#routes?.commit()
        addTally(this.#barrier.drained, this.#inner.commit())
      },
      rollbackControl: async () => {
        this.#inner.rollbackControl()
        if (this.#routes === undefined || this.#routes.failure !== undefined) return
        this.#inner.codes.reload(await this.#routes.rollback())
      },
      everyLane: (request) => this.#threads.map((t) => t.request(request)),
    })
  }

  #laneOptions(lane: number, caughtUp: boolean): LaneOptions {
    const o = this.#options
    return {
      lane,
      lanes: o.lanes,
      dataDir: dirname(dirname(o.generation.dir)),
      generationName: o.generation.name,
      previousGenerationName: o.previousGeneration?.name,
      topicPrefix: o.topicPrefix,
      offsetGuard: o.offsetGuard,
      walCheckpointBytes: o.walCheckpointBytes,
      deferDocumentsUntilCaughtUp: o.deferDocumentsUntilCaughtUp === true,
      caughtUp,
      unpublished: o.unpublishedGeneration === true,
      maxOpenFiles: Math.max(1, Math.ceil((o.maxOpenFiles ?? 64) / o.lanes)),
      cacheBudgetBytes: o.cacheBudgetBytes,
      sharedFiles: this.#inner.sharedFiles,
    }
  }

  #startLanes(): LaneThread[] {
    return Array.from(
      { length: this.#options.lanes },
      (_, lane) =>
        new LaneThread(lane, this.#laneOptions(lane, this.#inner.caughtUp), this.#pack.buffers),
    )
  }

  /** The routing thread, while the replica loads; else the routes stay on this thread. */
  #startRoutesIfLoading(): RouteThread | undefined {
    if (this.#inner.caughtUp) {
      this.#inner.takeRoutesBack()
      return undefined
    }
    this.#inner.handRoutesOver()
    const o = this.#options
    return new RouteThread({
      dataDir: dirname(dirname(o.generation.dir)),
      generationName: o.generation.name,
      walCheckpointBytes: o.walCheckpointBytes,
      cacheKiB:
        o.cacheBudgetBytes === undefined ? undefined : cacheShares(o.cacheBudgetBytes, 1).routesKiB,
    })
  }

  #failure(): LaneFailure | undefined {
    return this.#threads.find((t) => t.failure !== undefined)?.failure ?? this.#routes?.failure
  }

  async #idle(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight])
  }

  async #everyLane(request: DistributiveOmit<LaneRequest, 'seq'>): Promise<void> {
    await Promise.all(this.#threads.map((t) => t.request(request)))
  }

  /**
   * Collects a batch, has its routes resolved, packs it, hands it to the lanes and merges their
   * outcomes; resolves once every lane applied its share, and past the commit barrier. Batches
   * reach the routing thread, and then the lanes, in the order of their calls: the routing
   * thread answers in order, and nothing else is awaited between its answer and the hand-off.
   */
  async #apply(
    count: number,
    bytes: number,
    pack: PackItems,
    recordAt: (index: number) => SourceRecord | undefined,
    /** Called once the batch is packed: the lanes' buffers hold copies of what they need. */
    packed?: () => void,
    onRouted?: OnRouted,
  ): Promise<BatchOutcome> {
    if (this.#building !== undefined) await this.#building
    const f = this.#failure()
    if (f !== undefined) throw f
    const batch = new PackedBatch(this.#pack, bytes)
    const hold = this.#barrier.holds(this.#inner.caughtUp)
    let answers: Array<LaneOutcome | undefined>
    let routesWal: string | undefined
    try {
      if (hold) this.control.begin()
      routesWal = await this.#route(batch, pack, hold, packed)
      onRouted?.(batch.touchedOrganizations())
      answers = await this.#handOff(batch.shares(this.#clock().getTime(), hold))
    } catch (error) {
      // A line that is not a record ends a file run as before lanes: what came before it stays.
      if (hold && !(error instanceof FileSourceError)) await this.#barrier.rollback()
      if (error instanceof LaneFailure) {
        this.#options.logger.error(
          { lane: error.lane, error: error.message },
          'a lane failed: the projector stops, committing nothing past what every lane applied',
        )
      }
      throw error
    }
    // Every lane applied its share and committed its files; durable once their logs are synced,
    // and the routing index's and control.db's with them (committed unsynced: pack.ts).
    const controlWal = this.control.takeUnsyncedWal()
    await syncWals([
      ...answers.flatMap((answer) => answer?.unsyncedWals ?? []),
      ...[controlWal, routesWal].filter((wal) => wal !== undefined),
    ])
    const heldFiles = batch.merge(answers, recordAt)
    if (!hold) this.#inner.boundWals()
    else if (!(await this.#barrier.applied(count, heldFiles))) batch.outcome.committed = false
    batch.addEvents(takeTally(this.#barrier.drained))
    return batch.outcome
  }

  /**
   * Collects a batch, has its routes resolved (by the routing thread, awaited as a batch in
   * flight: `#idle`; live, here) and packs it. Returns the routing index's log, when its commit
   * is left unsynced.
   */
  async #route(
    batch: PackedBatch,
    pack: PackItems,
    hold: boolean,
    packed: (() => void) | undefined,
  ): Promise<string | undefined> {
    const routes = batch.collect(pack)
    const { found, unsyncedWal } =
      this.#routes === undefined
        ? this.#inner.resolveRoutes(routes, hold)
        : await this.#inFlightUntil(this.#routes.resolve(routes, hold))
    batch.settle(routes, found, packed)
    return unsyncedWal
  }

  /** `work`, counted as in flight (`#idle`) until it settles. */
  async #inFlightUntil<T>(work: Promise<T>): Promise<T> {
    this.#inFlight.add(work)
    try {
      return await work
    } finally {
      this.#inFlight.delete(work)
    }
  }

  /**
   * Hands each lane its share. Settled, not raced: when one lane fails, the others finish their
   * share first, so what a restart finds is every healthy lane's share applied, never torn.
   */
  async #handOff(
    shares: ReadonlyArray<PackedShare | undefined>,
  ): Promise<Array<LaneOutcome | undefined>> {
    const handed = Promise.allSettled(
      this.#threads.map((thread, lane) => {
        const share = shares[lane]
        if (share === undefined) return Promise.resolve(undefined)
        return thread.request(share.request, share.transfer)
      }),
    )
    const settled = await this.#inFlightUntil(handed)
    const failed = settled.find((r) => r.status === 'rejected')
    if (failed !== undefined) throw failed.reason
    return settled.map((r) => (r.status === 'fulfilled' ? r.value : undefined))
  }

  applyBatch(records: readonly SourceRecord[], onRouted?: OnRouted): Promise<BatchOutcome> {
    return this.#apply(
      records.length,
      recordBytes(records),
      packRecords(records),
      (index) => records[index],
      undefined,
      onRouted,
    )
  }

  applyLines(batch: LineBatch): Promise<BatchOutcome> {
    const { buf, lines } = batch
    return this.#apply(
      lines.length / 3,
      buf.length,
      packLines(batch, this.#mainReader),
      () => undefined,
      () => batch.release(),
    )
  }

  async commit(options: CommitOptions = {}): Promise<EventTally> {
    await this.#idle()
    const building = options.lastRound === true && !this.#inner.caughtUp
    // Live, each batch committed its own files: no round trip to the lanes for nothing (a live
    // source commits after every batch).
    if (!building && !this.#barrier.holding) return takeTally(this.#barrier.drained)
    const built = await this.#barrier.commit(building ? this.#clock().getTime() : undefined)
    this.#builtEarly = mergeBuilt(this.#builtEarly, built)
    return takeTally(this.#barrier.drained)
  }

  async markCaughtUp(): Promise<RefreshStats> {
    if (this.#inner.caughtUp) return { rewritten: 0, unchanged: 0, removed: 0 }
    let built: RefreshStats = { rewritten: 0, unchanged: 0, removed: 0 }
    // The build runs here and on build workers (apply.ts), on files the lanes let go of. The
    // lanes themselves go meanwhile: the build is where memory peaks, and their heaps would
    // sit idle through it. New ones start once it is done.
    this.#building = (async () => {
      await this.#idle()
      // What the load holds commits first (its spools applied), as at any round's end (closing
      // would forget the spools), and each lane builds the files it commits as it goes.
      const builtAtCommit = mergeBuilt(
        this.#builtEarly,
        await this.#barrier.commit(this.#clock().getTime()),
      )
      this.#builtEarly = noneBuilt()
      await this.#everyLane({ type: 'close' })
      await Promise.all(this.#threads.map((t) => t.terminate()))
      await this.#routes?.close()
      try {
        built = await this.#inner.markCaughtUp(builtAtCommit)
        this.#inner.closeFiles()
      } finally {
        this.#threads = this.#startLanes()
        this.#routes = this.#startRoutesIfLoading()
      }
    })()
    try {
      await this.#building
    } finally {
      this.#building = undefined
    }
    return built
  }

  buildInProgress(): Promise<void> | undefined {
    return this.#building ?? this.#inner.buildInProgress()
  }

  stopBuilding(): void {
    this.#inner.stopBuilding()
  }

  async replaceFile(fileKey: string, file: string): Promise<number> {
    await this.#idle()
    const owner = this.#threads[this.#assignment.laneOf(fileKey)]!
    await owner.request({ type: 'close-files', fileKeys: [fileKey] })
    const restamped = this.#inner.replaceFile(fileKey, file)
    this.#inner.closeFiles()
    return restamped
  }

  knownOrganizations(): string[] {
    return this.#inner.knownOrganizations()
  }

  get sharedFiles(): number {
    return this.#inner.sharedFiles
  }

  #fileKeyOf(organizationId: string): string {
    return fileKeyOf(organizationId, this.#inner.sharedFiles)
  }

  async retirePrevious(): Promise<void> {
    await this.#idle()
    await this.#everyLane({ type: 'retire-prior' })
  }

  get caughtUp(): boolean {
    return this.#inner.caughtUp
  }

  async close(): Promise<void> {
    await this.#idle()
    this.#inner.stopBuilding()
    if (this.#failure() === undefined) {
      await Promise.allSettled(this.#threads.map((t) => t.request({ type: 'close' })))
    }
    await Promise.all(this.#threads.map((t) => t.terminate()))
    await this.#routes?.close().catch(() => undefined)
    this.#inner.close()
  }
}

/**
 * The commit barrier of an initial load, whose transactions stay open across batches
 * (`loadCommitEvents`): the routing index and control.db commit first (routes before files), then every lane's files,
 * and a source commits its offsets only once this says the batch is committed. A lane that fails
 * while the load holds transactions rolls every one back, and nothing may commit after.
 */
class CommitBarrier {
  #uncommittedEvents = 0
  /** Outcomes of what the lanes' spools applied, until a batch's outcome or a commit reports them. */
  readonly drained: EventTally = {}
  /** A lane failed while the load held transactions: they were rolled back. */
  #heldLost = false
  #holding = false

  constructor(
    readonly options: LaneApplierOptions,
    readonly lanes: {
      failure(): LaneFailure | undefined
      /** The routing index's held transaction, then control.db's. */
      commitControl(): Promise<void>
      rollbackControl(): Promise<void>
      everyLane(
        request: { type: 'commit'; buildAt?: number } | { type: 'rollback' },
      ): Array<Promise<LaneOutcome | undefined>>
    },
  ) {}

  /** Whether a batch now joins the load's held transactions. */
  holds(caughtUp: boolean): boolean {
    const o = this.options
    const hold =
      (o.loadCommitEvents ?? 0) > 0 && o.deferDocumentsUntilCaughtUp === true && !caughtUp
    if (hold) this.#holding = true
    return hold
  }

  /** Whether a batch joined held transactions since the last commit: a commit has work. */
  get holding(): boolean {
    return this.#holding
  }

  /** A held batch was applied; commits the round if it is over. Whether all is committed. */
  async applied(events: number, heldFiles: number): Promise<boolean> {
    this.#uncommittedEvents += events
    if (!loadRoundOver(this.#uncommittedEvents, heldFiles, this.options)) return false
    await this.commit()
    return true
  }

  /** Commits the round; at catch-up (`buildAt`) the lanes build what they commit: what they built. */
  async commit(buildAt?: number): Promise<BuiltAtCommit> {
    if (this.#heldLost) throw new Error('a lane failed: what the load held was rolled back')
    const f = this.lanes.failure()
    if (f !== undefined) throw f
    await this.lanes.commitControl()
    const answers = await Promise.all(
      this.lanes.everyLane(
        buildAt === undefined ? { type: 'commit' } : { type: 'commit', buildAt },
      ),
    )
    this.#uncommittedEvents = 0
    this.#holding = false
    const built = noneBuilt()
    for (const answer of answers) {
      if (answer === undefined) continue
      addTally(this.drained, answer.events)
      addDocumentStats(built.documents, answer.documents)
      built.built.push(...(answer.built ?? []))
    }
    return built
  }

  async rollback(): Promise<void> {
    this.#heldLost = true
    await Promise.allSettled([
      this.lanes.rollbackControl(),
      ...this.lanes.everyLane({ type: 'rollback' }),
    ])
  }
}

function noneBuilt(): BuiltAtCommit {
  return { documents: { rewritten: 0, unchanged: 0, removed: 0 }, built: [] }
}

function mergeBuilt(a: BuiltAtCommit, b: BuiltAtCommit): BuiltAtCommit {
  const documents = { ...a.documents }
  addDocumentStats(documents, b.documents)
  return { documents, built: [...a.built, ...b.built] }
}
