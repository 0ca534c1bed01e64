// Applying a batch of records to the replica: decode each, route it to its file, apply the files
// one transaction each. Sources (Kafka, NDJSON file) call this and commit their own position only
// after it returns, so every effect is in a committed file before its offset is.
import { readdirSync, statSync } from 'node:fs'
import type { Logger } from 'pino'
import { parseOrganizationFileName, type Generation } from '../../src/layout.ts'
import { openForWriting } from '../../src/sqlite.ts'
import {
  buildInParallel,
  type BuildJob,
  type BuildResult,
  type BuiltOrganization,
} from './build-pool.ts'
import { cacheShares, MIN_CACHE_KIB } from '../storage/cache-budget.ts'
import { collectGarbage } from './collect-garbage.ts'
import {
  openControlFile,
  readOrganizationFiles,
  type ControlEvent,
  type ControlFile,
} from '../storage/control-file.ts'
import { classifyRecord } from '../routing/classify.ts'
import { laterCommit, type BadEventReason, type SourceRecord } from '../decode/decode.ts'
import type { DocumentKind, RefreshStats } from '../documents/index.ts'
import { restampAgainstLive } from '../documents/restamp.ts'
import {
  openOrganizationFile,
  useOrganizationFile,
  type OrganizationEvent,
  type OrganizationFile,
} from '../storage/organization-file.ts'
import { nextStamp } from '../storage/stamp.ts'

export interface DeadLetter {
  record: SourceRecord
  reason: BadEventReason
  message: string
}

export interface BatchOutcome {
  deadLetters: DeadLetter[]
  /** Events by table and outcome, for metrics. */
  events: Map<string, Record<string, number>>
  documents: RefreshStats
  /** Latest `source.ts_ms` among applied changes: the source commit time now visible. */
  latestCommittedAtMs: number | undefined
  skipped: number
  /**
   * Whether every batch applied so far is committed. False while an initial load holds its
   * transactions open across batches (`loadCommitEvents`): a source commits its own position only
   * once a batch says true, or after `commit()`.
   */
  committed: boolean
}

/** Whether an initial load's round is over: commit what it holds (`loadCommitEvents`). Pure. */
export function loadRoundOver(
  uncommittedEvents: number,
  heldFiles: number,
  options: Pick<ApplierOptions, 'loadCommitEvents' | 'loadEventsPerHeldFile'>,
): boolean {
  const perFile = options.loadEventsPerHeldFile ?? 0
  return uncommittedEvents >= Math.max(options.loadCommitEvents ?? 0, heldFiles * perFile)
}

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
   * A per-organization rebuild: only these organizations' rows are kept (and routed); every
   * other row is skipped, unless it moves out of one of them. Absent: every organization.
   */
  onlyOrganizations?: ReadonlySet<string>
  /**
   * Whether `markCaughtUp` logs that the api now serves the replica (default true): a scratch
   * generation (a rebuild's aside, verify's build from PostgreSQL) is served by no api.
   */
  announceCaughtUp?: boolean
  clock?: () => Date
  priorStamp?: (
    organizationId: string,
    kind: DocumentKind,
    id: string,
    hash: string,
  ) => string | undefined
}

export interface Applier {
  applyBatch(records: readonly SourceRecord[]): BatchOutcome
  /** Commits what an initial load holds open (`loadCommitEvents`); nothing otherwise. */
  commit(): void
  /**
   * Records that the replica has caught up with its source, so the api serves it: first builds
   * the documents still deferred, organization by organization, yielding between them (a Kafka
   * consumer keeps its heartbeats, and batches applied meanwhile are not lost: a file not built
   * yet takes their mirror rows, a built one their documents too). Returns what the build wrote.
   */
  markCaughtUp(): Promise<RefreshStats>
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
   * Makes `file` (a rebuilt file of the organization, in this generation's folder) the
   * organization's file: its documents keep the current file's stamps where their content is the
   * same and take a new stamp, after every stamp handed out, where it is not; then control.db
   * points the organization at it, for the api and this applier alike. Between batches only.
   * Returns how many document variants took the new stamp.
   */
  replaceOrganizationFile(organizationId: string, file: string): number
  /** The organizations that have a file in this generation. */
  knownOrganizations(): string[]
  /**
   * Commits what is held and closes every organization file this applier has open: another
   * writer (a lane: lanes.ts) may take them from here.
   */
  closeFiles(): void
  /** Whether the replica has caught up with its source (recorded by `markCaughtUp`). */
  readonly caughtUp: boolean
  readonly control: ControlFile
  close(): void
}

export function createApplier(options: ApplierOptions): Applier {
  const { generation, topicPrefix, logger } = options
  const clock = options.clock ?? (() => new Date())
  const maxOpenFiles = options.maxOpenFiles ?? 64
  const control = openControlFile(generation.controlPath)
  const files = new Map<string, OrganizationFile>()
  let closed = false
  let organizationCacheKiB: number | undefined
  let buildOnThreads: Promise<void> | undefined
  /** Stops a catch-up build (`stopBuilding`, `close`): a SIGTERM need not wait for it. */
  const stopBuilds = new AbortController()
  const stopping = () => closed || stopBuilds.signal.aborted
  let caughtUp = control.caughtUpAt() !== undefined
  const only = options.onlyOrganizations
  /** Events applied in the transactions held open since the last commit (initial load). */
  let uncommittedEvents = 0
  const holdsTransactions = () =>
    (options.loadCommitEvents ?? 0) > 0 && options.deferDocumentsUntilCaughtUp === true && !caughtUp
  giveControlItsShare()

  /** control.db's part of the cache budget (cache-budget.ts). */
  function giveControlItsShare(): void {
    if (options.cacheBudgetBytes === undefined) return
    control.setCacheKiB(cacheShares(options.cacheBudgetBytes, 1).controlKiB)
  }

  /** Gives every open organization file its share of the budget, when the number open changed. */
  function shareCache(newFile?: OrganizationFile): void {
    if (options.cacheBudgetBytes === undefined) return
    const share = cacheShares(options.cacheBudgetBytes, files.size).organizationKiB
    if (share === organizationCacheKiB) {
      newFile?.setCacheKiB(share)
      return
    }
    organizationCacheKiB = share
    for (const file of files.values()) file.setCacheKiB(share)
  }

  function organizationFile(organizationId: string): OrganizationFile {
    return useOrganizationFile(
      files,
      organizationId,
      maxOpenFiles,
      () => {
        const prior = options.priorStamp
        const path = generation.organizationPath(
          organizationId,
          control.organizationFile(organizationId),
        )
        return openOrganizationFile(organizationId, path, {
          offsetGuard: options.offsetGuard,
          deferDocuments: options.deferDocumentsUntilCaughtUp === true && !caughtUp,
          ...(prior === undefined
            ? {}
            : { priorStamp: (k, id, h) => prior(organizationId, k, id, h) }),
        })
      },
      shareCache,
    )
  }

  function knownOrganizations(): string[] {
    // A rebuilt file (`<id>.<version>.db`) may lie beside the one it replaced until it is removed.
    const organizations = new Set<string>()
    for (const name of readdirSync(generation.organizationsDir)) {
      const parsed = parseOrganizationFileName(name)
      if (parsed !== undefined) organizations.add(parsed.organizationId)
    }
    return [...organizations]
  }

  /**
   * Builds every organization whose documents are deferred, on worker threads and on this thread
   * beside them; one that fails on a worker is logged and left to the build on this thread, which
   * follows.
   */
  async function buildInParallelLanes(
    workers: number,
    built: RefreshStats,
    /** Organizations built: the pass on this thread that follows need not open them again. */
    builtIds: Set<string>,
  ): Promise<void> {
    const now = clock().toISOString()
    const jobs: Array<BuildJob & { bytes: number }> = []
    const previous = options.previousGeneration
    const previousFiles =
      previous === undefined ? undefined : readOrganizationFiles(previous.controlPath)
    for (const organizationId of knownOrganizations()) {
      const file = organizationFile(organizationId)
      if (file.documentsLive) continue
      // A worker may write the file: this thread's handle (and what it remembers) goes.
      files.delete(organizationId)
      file.close()
      const path = file.path
      const previousPath = previous?.organizationPath(
        organizationId,
        previousFiles?.get(organizationId),
      )
      jobs.push({
        organizationId,
        path,
        ...(previousPath === undefined ? {} : { previousPath }),
        now,
        // The budget split among the builds that run at once (this thread's and the workers').
        cacheKiB:
          options.cacheBudgetBytes === undefined
            ? MIN_CACHE_KIB
            : cacheShares(options.cacheBudgetBytes, workers + 1).organizationKiB,
        walCheckpointBytes: options.walCheckpointBytes,
        bytes: statSync(path).size,
      })
    }
    const here = (job: BuildJob): BuildResult => {
      if (stopping()) return { organizationId: job.organizationId, error: 'stopped' }
      // Sized like the workers' files: opened alone, it would be given the whole budget.
      return buildHere(job.organizationId, new Date(job.now), job.cacheKiB)
    }
    await buildInParallel(jobs, { workers, here, signal: stopBuilds.signal }, (result) => {
      // Stopped meanwhile: the build goes on at the next start (caught_up_at is not set).
      if (stopping()) return
      if (result.error !== undefined) {
        logger.warn(
          { organizationId: result.organizationId, error: result.error },
          'could not build the documents of an organization in parallel; building it alone',
        )
        return
      }
      reportBuilt(result, built)
      builtIds.add(result.organizationId)
    })
  }

  /** Builds one organization's deferred documents on this thread. */
  function buildHere(organizationId: string, now: Date, cacheKiB?: number): BuiltOrganization {
    const started = process.hrtime.bigint()
    const file = organizationFile(organizationId)
    if (cacheKiB !== undefined) file.setCacheKiB(cacheKiB)
    const stats = file.buildDocuments(now)
    file.boundWal(options.walCheckpointBytes)
    // Built, it goes: kept, thousands of organizations built one after another would all stay
    // open, each with the statements and page cache its build filled (3,000 of 20 providers: a
    // peak of 3.1 GB). Closing commits what a load held in it (organization-file.ts).
    if (!file.inTransaction) {
      files.delete(organizationId)
      file.close()
    }
    return { organizationId, stats, seconds: Number(process.hrtime.bigint() - started) / 1e9 }
  }

  /** Counts and logs one organization's build, wherever it ran. */
  function reportBuilt(result: BuiltOrganization, built: RefreshStats): void {
    addDocumentStats(built, result.stats)
    logger.info(
      {
        organizationId: result.organizationId,
        documents: result.stats.rewritten,
        seconds: result.seconds,
      },
      'built the documents of an organization loaded in bulk',
    )
  }

  /** Commits every held transaction, then bounds the files' WALs. */
  function commitAll(): void {
    // Nothing held (control.db's transaction opens first whenever one is): each batch committed
    // and bounded its own WALs.
    if (!control.db.inTransaction) return
    for (const file of files.values()) {
      if (!file.inTransaction) continue
      file.commit()
      file.boundWal(options.walCheckpointBytes)
    }
    control.commit()
    control.boundWal(options.walCheckpointBytes)
    uncommittedEvents = 0
  }

  /** After a failure: every held transaction rolls back (the source redelivers from its position). */
  function rollbackAll(): void {
    for (const file of files.values()) file.rollback()
    control.rollback()
    uncommittedEvents = 0
  }

  function replaceOrganizationFile(organizationId: string, replacement: string): number {
    commitAll()
    const current = organizationFile(organizationId)
    const currentPath = current.path
    const currentLastStamp = current.lastStamp
    files.delete(organizationId)
    current.close()
    const path = generation.organizationPath(organizationId, replacement)
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
      const stamp = nextStamp(clock(), later)
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
      control.transaction(() => control.setOrganizationFile(organizationId, replacement))
      return stamped
    } finally {
      db.close()
    }
  }

  return {
    control,

    commit: commitAll,

    replaceOrganizationFile,

    knownOrganizations,

    closeFiles() {
      commitAll()
      for (const file of files.values()) file.close()
      files.clear()
    },

    buildInProgress: () => buildOnThreads,

    applyBatch(records) {
      if (buildOnThreads !== undefined) {
        throw new Error('a batch was applied while documents were being built on worker threads')
      }
      const outcome: BatchOutcome = {
        deadLetters: [],
        events: new Map(),
        documents: { rewritten: 0, unchanged: 0, removed: 0 },
        latestCommittedAtMs: undefined,
        skipped: 0,
        committed: true,
      }
      const count = (table: string, what: string) => {
        let byOutcome = outcome.events.get(table)
        if (byOutcome === undefined) outcome.events.set(table, (byOutcome = {}))
        byOutcome[what] = (byOutcome[what] ?? 0) + 1
      }

      const controlEvents: ControlEvent[] = []
      const byOrganization = new Map<string, OrganizationEvent[]>()
      const toOrganization = (organizationId: string, event: OrganizationEvent) => {
        let list = byOrganization.get(organizationId)
        if (list === undefined) byOrganization.set(organizationId, (list = []))
        list.push(event)
      }
      // Routes are written as they are decided, in one control.db transaction with the control
      // events, committed before any organization file (during an initial load, with them, every
      // `loadCommitEvents`): if a crash follows, redelivery re-routes idempotently and applies the
      // rest.
      const decodeAndRoute = () => {
        for (const record of records) {
          const classified = classifyRecord(record, topicPrefix)
          if (classified.kind === 'skipped') {
            outcome.skipped++
            continue
          }
          if (classified.kind === 'bad') {
            const { reason, message } = classified
            outcome.deadLetters.push({ record, reason, message })
            count(classified.table, 'dead_lettered')
            continue
          }
          outcome.latestCommittedAtMs = laterCommit(
            outcome.latestCommittedAtMs,
            classified.committedAtMs,
          )
          if (classified.kind === 'control') {
            controlEvents.push(classified.event)
            continue
          }
          const { change: orgChange, origin } = classified.event
          if (orgChange.kind === 'truncate') {
            // Every organization with a file, and those whose first rows came earlier in this
            // batch (their files do not exist yet, but their rows are about to).
            const organizations = new Set([...knownOrganizations(), ...byOrganization.keys()])
            for (const organizationId of organizations) {
              toOrganization(organizationId, { change: orgChange, origin })
            }
            continue
          }
          if (orgChange.kind === 'delete') {
            const organizationId = control.routeOf(orgChange.table, orgChange.id)
            // A delete of a row this replica never saw (compacted away, or older than the topics'
            // retention) has nothing to remove.
            if (organizationId === undefined) count(orgChange.table, 'absent')
            else toOrganization(organizationId, { change: orgChange, origin })
            continue
          }
          const organizationId = (orgChange.row as { organization_id: string }).organization_id
          // Rebuilding some organizations: another's row matters only if it moves out of one.
          if (only !== undefined && !only.has(organizationId)) {
            if (control.routeOf(orgChange.table, orgChange.id) === undefined) {
              outcome.skipped++
              continue
            }
          }
          const movedFrom = control.route(orgChange.table, orgChange.id, organizationId)
          if (movedFrom !== undefined) {
            // The row moved to another organization: it leaves the old file.
            const moved = {
              kind: 'delete',
              table: orgChange.table,
              id: orgChange.id,
              position: orgChange.position,
            }
            toOrganization(movedFrom, { change: moved as OrganizationEvent['change'], origin })
          }
          toOrganization(organizationId, { change: orgChange, origin })
        }
        return control.applyEvents(controlEvents, options.offsetGuard, count)
      }
      const holding = holdsTransactions()
      try {
        if (holding) control.begin()
        const controlResult = control.transaction(decodeAndRoute)
        for (const organizationId of controlResult.organizations) {
          if (only === undefined || only.has(organizationId)) organizationFile(organizationId)
        }
        if (only !== undefined) {
          for (const organizationId of byOrganization.keys()) {
            if (!only.has(organizationId)) byOrganization.delete(organizationId)
          }
        }

        const now = clock()
        for (const [organizationId, events] of byOrganization) {
          const file = organizationFile(organizationId)
          if (holding) file.begin()
          const result = file.apply(events, now, count)
          addDocumentStats(outcome.documents, result.documents)
          if (file.boundWal(options.walCheckpointBytes)) {
            logger.debug({ organizationId }, 'checkpointed organization file WAL')
          }
        }
      } catch (error) {
        if (holding) rollbackAll()
        throw error
      }
      if (holding) {
        uncommittedEvents += records.length
        let heldFiles = 0
        for (const file of files.values()) if (file.inTransaction) heldFiles++
        if (!loadRoundOver(uncommittedEvents, heldFiles, options)) {
          outcome.committed = false
        } else commitAll()
      } else control.boundWal(options.walCheckpointBytes)
      return outcome
    },

    async markCaughtUp() {
      const built: RefreshStats = { rewritten: 0, unchanged: 0, removed: 0 }
      if (caughtUp || stopping()) return built
      // The build reads (and on workers, opens) the files: what the load holds open goes first.
      commitAll()
      // The build is where the load's memory peaks: it never reads control.db, so those pages (the
      // routes the load wrote) make room for the build's, and so does the load's garbage, which
      // V8 would otherwise keep alongside the build's. control.db's share comes back once built.
      control.setCacheKiB(MIN_CACHE_KIB)
      control.db.pragma('shrink_memory')
      collectGarbage()
      const workers = options.documentBuildWorkers ?? 0
      const builtIds = new Set<string>()
      if (workers > 0) {
        buildOnThreads = buildInParallelLanes(workers, built, builtIds)
        try {
          await buildOnThreads
        } finally {
          buildOnThreads = undefined
        }
        if (stopping()) return built
      }
      // Until a pass finds nothing to build: a batch applied while this one yielded may have
      // brought a new organization. The last pass does not yield, so no batch comes between it
      // and the record below.
      for (let buildingAny = true; buildingAny;) {
        buildingAny = false
        for (const organizationId of knownOrganizations()) {
          if (builtIds.has(organizationId)) continue
          if (organizationFile(organizationId).documentsLive) continue
          reportBuilt(buildHere(organizationId, clock()), built)
          buildingAny = true
          await new Promise((resolve) => setImmediate(resolve))
          // Stopped meanwhile: the build goes on at the next start (caught_up_at is not set).
          if (stopping()) return built
        }
      }
      // What batches applied during the build hold commits first: a file built inside their
      // transaction takes WAL at that commit, before the api may open it (organization-file.ts).
      commitAll()
      control.markCaughtUp(clock())
      caughtUp = true
      giveControlItsShare()
      if (options.announceCaughtUp !== false) {
        logger.info('replica caught up with its source: the api now serves it')
      }
      return built
    },

    stopBuilding() {
      stopBuilds.abort()
    },

    get caughtUp() {
      return caughtUp
    },

    close() {
      closed = true
      stopBuilds.abort()
      for (const file of files.values()) file.close()
      files.clear()
      control.close()
    },
  }
}

function addDocumentStats(into: RefreshStats, stats: RefreshStats): void {
  into.rewritten += stats.rewritten
  into.unchanged += stats.unchanged
  into.removed += stats.removed
}
