// The single-threaded applier: one lane run inline (lane-core.ts), on this thread, behind the same
// routing and packing as the live projector's lanes (pack.ts), not a second implementation. A
// rebuild, verify's build and the unit tests apply batches through it; the live projector's lanes
// (lanes.ts) keep one beside them for control.db, the document build at catch-up and the swap of
// a rebuilt file, which run here between batches while the lanes are idle.
//
// Sources (Kafka, NDJSON file) call `applyBatch` and commit their own position only after it
// returns, so every effect is in a committed file before its offset is.
import { readdirSync } from 'node:fs'
import type { Logger } from 'pino'
import { parseOrganizationFileName, sharedFilesIn, type Generation } from '../../src/layout.ts'
import { isSharedFileName } from '../../src/organization-files.ts'
import { openForWriting } from '../../src/sqlite.ts'
import { cacheShares, MIN_CACHE_KIB } from '../storage/cache-budget.ts'
import { collectGarbage } from './collect-garbage.ts'
import { openControlFile, type ControlFile } from '../storage/control-file.ts'
import {
  OrganizationCodes,
  openRouteFile,
  type ResolvedRoutes,
  type RouteBatch,
  type RouteFile,
} from '../storage/route-file.ts'
import { syncWal } from '../storage/wal.ts'
import type { SourceRecord } from '../decode/decode.ts'
import type { RefreshStats } from '../documents/index.ts'
import type { PriorOrganizationStamp } from '../storage/organization-file.ts'
import { restampAgainstLive } from '../documents/restamp.ts'
import { nextStamp } from '../storage/stamp.ts'
import { DocumentBuild } from './catch-up.ts'
import { addDocumentStats, LaneCore, type LaneCommit } from './lane-core.ts'
import type { LaneOutcome } from './lane-protocol.ts'
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
  packRecords,
  recordBytes,
  type OrganizationFilter,
  type PackContext,
  type PackedShare,
} from './pack.ts'

export {
  loadRoundOver,
  type BatchOutcome,
  type DeadLetter,
  type EventTally,
  type OnRouted,
} from './outcome.ts'
export type { OrganizationFilter } from './pack.ts'

export interface ApplierOptions {
  generation: Generation
  topicPrefix: string
  logger: Logger
  /** Kafka: skip what a file already applied. Files: off, they may be replayed on purpose. */
  offsetGuard: boolean
  walCheckpointBytes: number
  /**
   * Until the replica first catches up (nothing is served before), organization files take mirror
   * rows only and their documents are built once, by `markCaughtUp` (organization-file.ts).
   */
  deferDocumentsUntilCaughtUp?: boolean
  /**
   * While documents are deferred, the files' transactions stay open across batches until this
   * many events (then all commit together, or on `commit()`): each commit writes every page its
   * transaction touched, and the random keys of a load touch a page per row, so per-batch commits
   * wrote several times the data. 0 or absent: a commit per batch.
   */
  loadCommitEvents?: number
  /**
   * And at least this many events per file held in a transaction (projector.ts
   * LOAD_EVENTS_PER_HELD_FILE); 0 or absent: `loadCommitEvents` alone.
   */
  loadEventsPerHeldFile?: number
  maxOpenFiles?: number
  /** SQLite page cache shared by control.db and the open organization files (cache-budget.ts). */
  cacheBudgetBytes?: number
  /**
   * Worker threads that build deferred documents at catch-up beside this thread, several
   * organizations at once (build-pool.ts); 0 or absent: on this thread, one after another.
   */
  documentBuildWorkers?: number
  /** A rebuild's previous generation, whose stamps unchanged documents keep (`priorStamp`). */
  previousGeneration?: Generation
  /**
   * `generation` is a rebuild's, published only once caught up and synced whole first
   * (storage/durable.ts): its deferred files' commits are not synced one by one.
   */
  unpublishedGeneration?: boolean
  /**
   * A per-organization rebuild: only these organizations' rows are kept (and routed); every
   * other row is skipped, unless it moves out of one of them. Absent: every organization.
   */
  onlyOrganizations?: OrganizationFilter
  /**
   * Whether `markCaughtUp` logs that the api now serves the replica (default true): a scratch
   * generation (a rebuild's aside, verify's build from PostgreSQL) is served by no api.
   */
  announceCaughtUp?: boolean
  clock?: () => Date
  priorStamp?: PriorOrganizationStamp
  /**
   * Files the organizations of a new generation share (src/organization-files.ts); 0 or absent:
   * a file each. Recorded in the generation's control.db when it is made; a generation keeps the
   * number it was made with.
   */
  organizationFiles?: number
}

/** What the lanes built as they committed an initial load's last round (lane-core.ts). */
export type BuiltAtCommit = Pick<LaneCommit, 'documents' | 'built'>

export interface Applier {
  /** Applies a batch; `onRouted` hears of its organizations once routed, before it is applied. */
  applyBatch(records: readonly SourceRecord[], onRouted?: OnRouted): BatchOutcome
  /**
   * Commits what an initial load holds open (`loadCommitEvents`); nothing otherwise. Returns the
   * outcomes of the events a round's spool applied (lane-core.ts) not reported yet by a batch.
   */
  commit(): EventTally
  /**
   * Records that the replica has caught up with its source, so the api serves it: first builds
   * the documents still deferred, organization by organization, yielding between them (a Kafka
   * consumer keeps its heartbeats, and batches applied meanwhile are not lost: a file not built
   * yet takes their mirror rows, a built one their documents too). Returns what the build wrote.
   */
  markCaughtUp(builtAtCommit?: BuiltAtCommit): Promise<RefreshStats>
  /**
   * While `markCaughtUp` builds documents on worker threads, a promise of the build's end: no
   * batch may be applied until then (the workers write the files).
   */
  buildInProgress(): Promise<void> | undefined
  /**
   * Stops the catch-up build for good (stopping the process): workers are terminated, their
   * organizations stay deferred and are built at the next start; `markCaughtUp` returns without
   * recording the catch-up.
   */
  stopBuilding(): void
  /**
   * Makes `file` (a rebuilt file in this generation's folder) the file of `fileKey` (an
   * organization's own, or a shared file's: src/organization-files.ts): its documents keep the
   * current file's stamps where their content is the same and take a new stamp, after every stamp
   * handed out, where it is not (ids are unique across organizations, so a shared file's compare
   * needs no scope); then control.db points the key at it, for the api and this applier alike.
   * Between batches only. Returns how many document variants took the new stamp.
   */
  replaceFile(fileKey: string, file: string): number
  /** The organizations that have a file in this generation. */
  knownOrganizations(): string[]
  /** The files this generation's organizations share; 0: each has its own. */
  readonly sharedFiles: number
  /**
   * Commits what is held and closes every organization file this applier has open: another
   * writer (a lane: lanes.ts) may take them from here.
   */
  closeFiles(): void
  /** Whether the replica has caught up with its source (recorded by `markCaughtUp`). */
  readonly caughtUp: boolean
  readonly control: ControlFile
  /** The routing index's organization codes, for whoever packs batches (pack.ts). */
  readonly codes: OrganizationCodes
  /**
   * Closes this thread's connection to the routing index: the lanes' coordinator keeps it on a
   * thread of its own during a load (route-thread.ts). This applier applies no batch until it
   * takes it back (`takeRoutesBack`).
   */
  handRoutesOver(): void
  takeRoutesBack(): void
  /**
   * Resolves a batch's routes on this thread (the lanes' coordinator, live), joining the held
   * transaction if `hold`.
   */
  resolveRoutes(routes: RouteBatch, hold: boolean): ResolvedRoutes
  /** Rolls back control.db's held transaction, and the routing index's if it is on this thread. */
  rollbackControl(): void
  /** Bounds control.db's log, and the routing index's if it is on this thread (wal.ts). */
  boundWals(): void
  close(): void
}

export function createApplier(options: ApplierOptions): Applier {
  return new InlineApplier(options)
}

/**
 * The files a generation's organizations share, as its control.db records them; recorded now for a
 * generation made by this process (one that has files of its own already keeps them).
 */
function sharedFilesOf(control: ControlFile, options: ApplierOptions): number {
  const configured = options.organizationFiles ?? 0
  const recorded = control.sharedFiles()
  if (recorded === undefined) {
    const files = organizationsIn(options.generation).length > 0 ? 0 : configured
    control.transaction(() => control.recordSharedFiles(files))
    return files
  }
  // Absent: the caller follows what the generation recorded (ORGANIZATION_FILES=auto).
  if (
    options.organizationFiles !== undefined &&
    recorded !== configured &&
    options.onlyOrganizations === undefined
  ) {
    options.logger.warn(
      { generationFiles: recorded, configured },
      'ORGANIZATION_FILES differs from the number this generation was made with: it keeps its own until a --rebuild makes a new one',
    )
  }
  return recorded
}

/** The organizations that have a file in this generation. */
export function organizationsIn(generation: Generation): string[] {
  // A rebuilt file (`<id>.<version>.db`) may lie beside the one it replaced until it is removed.
  const organizations = new Set<string>()
  for (const name of readdirSync(generation.organizationsDir)) {
    const parsed = parseOrganizationFileName(name)
    if (parsed !== undefined) organizations.add(parsed.organizationId)
  }
  return [...organizations]
}

/** The single-threaded applier: control.db, the routing index, and one lane run inline. */
class InlineApplier implements Applier {
  readonly control: ControlFile
  readonly codes: OrganizationCodes
  /** Undefined once handed over (`handRoutesOver`). */
  #routes: RouteFile | undefined
  readonly sharedFiles: number
  readonly #options: ApplierOptions
  readonly #clock: () => Date
  /** The inline lane: this thread owns every organization file. */
  readonly #lane: LaneCore
  readonly #pack: PackContext
  #closed = false
  #caughtUp: boolean
  #buildOnThreads: Promise<void> | undefined
  /** Stops a catch-up build (`stopBuilding`, `close`): a SIGTERM need not wait for it. */
  readonly #stopBuilds = new AbortController()
  /** Events applied in the transactions held open since the last commit (initial load). */
  #uncommittedEvents = 0
  /** Outcomes of what a round's spool applied, until a batch's outcome or a commit reports them. */
  readonly #drained: EventTally = {}

  constructor(options: ApplierOptions) {
    this.#options = options
    this.#clock = options.clock ?? (() => new Date())
    // The routing index first: it carries over what an older control.db holds.
    this.#routes = openRouteFile(options.generation.routesPath, options.generation.controlPath)
    this.codes = new OrganizationCodes(this.#routes.organizations())
    const control = openControlFile(options.generation.controlPath)
    this.control = control
    this.sharedFiles = sharedFilesOf(control, options)
    this.#caughtUp = control.caughtUpAt() !== undefined
    this.#lane = new LaneCore({
      lane: 0,
      lanes: 1,
      generation: options.generation,
      topicPrefix: options.topicPrefix,
      offsetGuard: options.offsetGuard,
      walCheckpointBytes: options.walCheckpointBytes,
      deferDocuments: () => options.deferDocumentsUntilCaughtUp === true && !this.#caughtUp,
      unpublished: options.unpublishedGeneration === true,
      maxOpenFiles: options.maxOpenFiles ?? 64,
      cacheBudgetBytes: options.cacheBudgetBytes,
      fileOf: (fileKey) => control.organizationFile(fileKey),
      sharedFiles: this.sharedFiles,
      priorStamp: options.priorStamp,
    })
    this.#pack = {
      control,
      codes: this.codes,
      topicPrefix: options.topicPrefix,
      offsetGuard: options.offsetGuard,
      lanes: 1,
      laneOf: () => 0,
      // One batch packed at a time, its buffer given back once applied.
      buffers: new BufferPool(2),
      knownOrganizations: () => this.knownOrganizations(),
      only: options.onlyOrganizations,
    }
    this.#giveControlItsShare()
  }

  get caughtUp(): boolean {
    return this.#caughtUp
  }

  #stopping(): boolean {
    return this.#closed || this.#stopBuilds.signal.aborted
  }

  #holdsTransactions(): boolean {
    const o = this.#options
    return (
      (o.loadCommitEvents ?? 0) > 0 && o.deferDocumentsUntilCaughtUp === true && !this.#caughtUp
    )
  }

  /**
   * The routing index's part of the cache budget (cache-budget.ts): the pages every event touches.
   * control.db, whose other tables are small, keeps SQLite's default.
   */
  #giveControlItsShare(): void {
    if (this.#options.cacheBudgetBytes === undefined) return
    this.#routes?.setCacheKiB(cacheShares(this.#options.cacheBudgetBytes, 1).routesKiB)
  }

  #routeFile(): RouteFile {
    if (this.#routes === undefined) throw new Error('the routing index was handed over')
    return this.#routes
  }

  handRoutesOver(): void {
    this.#routes?.close()
    this.#routes = undefined
  }

  takeRoutesBack(): void {
    if (this.#routes !== undefined) return
    this.#routes = openRouteFile(this.#options.generation.routesPath)
    this.codes.reload(this.#routes.organizations())
    this.#giveControlItsShare()
  }

  resolveRoutes(routes: RouteBatch, hold: boolean): ResolvedRoutes {
    const file = this.#routeFile()
    if (hold) file.begin()
    return { found: file.resolve(routes), unsyncedWal: file.takeUnsyncedWal() }
  }

  boundWals(): void {
    this.#routes?.boundWal(this.#options.walCheckpointBytes)
    this.control.boundWal(this.#options.walCheckpointBytes)
  }

  rollbackControl(): void {
    this.control.rollback()
    if (this.#routes !== undefined) {
      this.#routes.rollback()
      this.codes.reload(this.#routes.organizations())
    }
  }

  knownOrganizations(): string[] {
    // A shared file's organizations are in it, not in its name: every routed one has rows there.
    if (this.sharedFiles > 0) return this.codes.organizations()
    return organizationsIn(this.#options.generation)
  }

  /** The generation's files, by key (lane-core.ts). */
  #knownFiles(): string[] {
    if (this.sharedFiles > 0) return sharedFilesIn(this.#options.generation)
    return organizationsIn(this.#options.generation)
  }

  buildInProgress(): Promise<void> | undefined {
    return this.#buildOnThreads
  }

  applyBatch(records: readonly SourceRecord[], onRouted?: OnRouted): BatchOutcome {
    if (this.#buildOnThreads !== undefined) {
      throw new Error('a batch was applied while documents were being built on worker threads')
    }
    const batch = new PackedBatch(this.#pack, recordBytes(records))
    const hold = this.#holdsTransactions()
    let answer: LaneOutcome | undefined
    let routesWal: string | undefined
    try {
      if (hold) this.control.begin()
      const routes = batch.collect(packRecords(records))
      const resolved = this.resolveRoutes(routes, hold)
      routesWal = resolved.unsyncedWal
      batch.settle(routes, resolved.found)
      onRouted?.(batch.touchedOrganizations())
      const [share] = batch.shares(this.#clock().getTime(), hold)
      answer = share === undefined ? undefined : this.#applyInline(share)
    } catch (error) {
      if (hold) this.#rollbackAll()
      throw error
    }
    // Its files' logs, the routing index's and control.db's (committed unsynced: pack.ts).
    for (const wal of [...(answer?.unsyncedWals ?? []), routesWal]) {
      if (wal !== undefined) syncWal(wal)
    }
    this.control.syncWal()
    const heldFiles = batch.merge([answer], (index) => records[index])
    if (!hold) this.boundWals()
    else {
      this.#uncommittedEvents += records.length
      if (loadRoundOver(this.#uncommittedEvents, heldFiles, this.#options)) this.#commitHeld()
      else batch.outcome.committed = false
    }
    batch.addEvents(takeTally(this.#drained))
    return batch.outcome
  }

  /** The inline lane applies its share, as a worker lane would, and its buffer is reused. */
  #applyInline(share: PackedShare): LaneOutcome {
    try {
      return this.#lane.applyBatch({ ...share.request, seq: 0 })
    } finally {
      this.#pack.buffers.give(share.transfer[0]!)
    }
  }

  /** Commits every held transaction, then bounds the WALs. */
  commit(): EventTally {
    this.#commitHeld()
    return takeTally(this.#drained)
  }

  /**
   * Commits what is held; what its spool applied is reported by the next batch or commit. At
   * catch-up (`buildAt`) the lane builds the files it commits: returns what it built.
   */
  #commitHeld(buildAt?: Date): BuiltAtCommit | undefined {
    // Nothing held (control.db's transaction opens first whenever one is): each batch committed
    // and bounded its own WALs. The routes commit before the files they route to.
    if (!this.control.db.inTransaction) return undefined
    this.#routes?.commit()
    const committed = this.#lane.commit(buildAt)
    addTally(this.#drained, committed.events)
    this.control.commit()
    this.boundWals()
    this.#uncommittedEvents = 0
    return committed
  }

  /** After a failure: every held transaction rolls back (the source redelivers from its position). */
  #rollbackAll(): void {
    this.#lane.rollback()
    this.rollbackControl()
    this.#uncommittedEvents = 0
  }

  closeFiles(): void {
    this.#commitHeld()
    this.#lane.closeFiles()
  }

  replaceFile(fileKey: string, replacement: string): number {
    if (isSharedFileName(fileKey) !== this.sharedFiles > 0) {
      throw new Error(`${fileKey} is not a file key of this generation`)
    }
    this.#commitHeld()
    const current = this.#lane.file(fileKey)
    const { path: currentPath, lastStamp: currentLastStamp } = current
    this.#lane.closeFiles([fileKey])
    const path = this.#options.generation.filePath(fileKey, replacement)
    const stamped = restampReplacement(path, currentPath, currentLastStamp, this.#clock())
    this.control.transaction(() => this.control.setOrganizationFile(fileKey, replacement))
    return stamped
  }

  async markCaughtUp(builtAtCommit?: BuiltAtCommit): Promise<RefreshStats> {
    if (this.#caughtUp || this.#stopping()) return { rewritten: 0, unchanged: 0, removed: 0 }
    // The build reads (and on workers, opens) the files: what the load holds open goes first,
    // each file built as its round commits it (its spool's files are opened once, not twice).
    const committed = this.#commitHeld(this.#clock())
    const built = new Set([...(builtAtCommit?.built ?? []), ...(committed?.built ?? [])])
    // The build is where the load's memory peaks: it never reads the routing index, so its pages
    // (the routes the load wrote) make room for the build's, and so does the load's garbage, which
    // V8 would otherwise keep alongside the build's. The index's share comes back once built.
    this.#routes?.setCacheKiB(MIN_CACHE_KIB)
    this.#routes?.db.pragma('shrink_memory')
    collectGarbage()
    const build = this.#documentBuild(built)
    for (const stats of [builtAtCommit?.documents, committed?.documents]) {
      if (stats !== undefined) addDocumentStats(build.built, stats)
    }
    if (built.size > 0) {
      this.#options.logger.info(
        // Files: an organization's own, or one several share (ORGANIZATION_FILES).
        { files: built.size, documents: build.built.rewritten },
        'built the documents of organizations loaded in bulk as their last round committed',
      )
    }
    const workers = this.#options.documentBuildWorkers ?? 0
    if (workers > 0) {
      this.#buildOnThreads = build.onWorkers(workers)
      try {
        await this.#buildOnThreads
      } finally {
        this.#buildOnThreads = undefined
      }
      if (this.#stopping()) return build.built
    }
    if (!(await build.onThisThread())) return build.built
    this.#recordCaughtUp()
    return build.built
  }

  #documentBuild(builtAlready: ReadonlySet<string>): DocumentBuild {
    const o = this.#options
    return new DocumentBuild({
      builtAlready,
      core: this.#lane,
      logger: o.logger,
      clock: this.#clock,
      walCheckpointBytes: o.walCheckpointBytes,
      cacheBudgetBytes: o.cacheBudgetBytes,
      previousGeneration: o.previousGeneration,
      knownFiles: () => this.#knownFiles(),
      stopping: () => this.#stopping(),
      signal: this.#stopBuilds.signal,
    })
  }

  #recordCaughtUp(): void {
    // What batches applied during the build hold commits first: a file built inside their
    // transaction takes WAL at that commit, before the api may open it (organization-file.ts).
    this.#commitHeld()
    this.control.markCaughtUp(this.#clock())
    this.#caughtUp = true
    this.#giveControlItsShare()
    if (this.#options.announceCaughtUp !== false) {
      this.#options.logger.info('replica caught up with its source: the api now serves it')
    }
  }

  stopBuilding(): void {
    this.#stopBuilds.abort()
  }

  close(): void {
    this.#closed = true
    this.#stopBuilds.abort()
    this.#lane.closeFiles()
    this.#routes?.close()
    this.control.close()
  }
}

/**
 * Restamps a rebuilt file (`path`) against the organization's current one: its documents keep the
 * current stamps where their content is the same, and take a new stamp, after every stamp handed
 * out, where it is not. Returns how many took the new stamp.
 */
function restampReplacement(
  path: string,
  currentPath: string,
  currentLastStamp: string | undefined,
  now: Date,
): number {
  const db = openForWriting(path, 'organization')
  try {
    db.prepare('ATTACH DATABASE ? AS live').run(currentPath)
    const lastStamp = db
      .prepare(`SELECT value FROM replica_meta WHERE key = 'last_stamp'`)
      .pluck()
      .get() as string | undefined
    const later = [lastStamp, currentLastStamp]
      .filter((s) => s !== undefined)
      .sort()
      .at(-1)
    const stamp = nextStamp(now, later)
    const restamp = db.transaction(() => {
      const stamped = restampAgainstLive(db, stamp)
      const last = stamped > 0 ? stamp : later
      if (last !== undefined) {
        db.prepare(
          `INSERT INTO replica_meta (key, value) VALUES ('last_stamp', ?)
           ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
        ).run(last)
      }
      return stamped
    })
    const stamped = restamp()
    db.prepare('DETACH DATABASE live').run()
    return stamped
  } finally {
    db.close()
  }
}
