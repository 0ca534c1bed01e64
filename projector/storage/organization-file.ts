// One organization's file as the projector writes it: the mirror rows, the documents built from
// them, and the Kafka offsets applied, all committed in one transaction per batch.
import { existsSync, renameSync, writeFileSync } from 'node:fs'
import * as tables from '../../schema/organization-db.ts'
import type { OrganizationTable } from '../../schema/events.ts'
import {
  heldTransaction,
  openForWriting,
  setCacheKiB,
  useJournal,
  type SqliteDatabase,
} from '../../src/sqlite.ts'
import {
  fileLayout,
  NO_ORGANIZATION,
  OWN_ORGANIZATION,
  scopeConnection,
  type FileLayout,
} from '../../src/organization-scope.ts'
import type { RowChange } from '../decode/decode.ts'
import {
  createDocumentRefresher,
  type DocumentKind,
  type DocumentRefresher,
  type MirrorChange as DocumentsMirrorChange,
  type RefreshStats,
} from '../documents/index.ts'
import { applyOnce, appliedOffsets, type Origin, type Tally } from './applied-offsets.ts'
import { createMirror, type MirrorChange } from './mirror.ts'
import { coalesce } from './coalesce.ts'
import { nextStamp } from './stamp.ts'
import { boundWal, unsyncedLog } from './wal.ts'
import { restoreIndexes, setIndexesAside } from './deferred-indexes.ts'
import { fileOrganizations } from './file-organizations.ts'
import { useSharedLayout } from './shared-layout.ts'

export type { Origin } from './applied-offsets.ts'

export interface OrganizationEvent {
  change: RowChange & { table: OrganizationTable }
  origin: Origin
}

export type { Tally } from './applied-offsets.ts'

export interface OrganizationApplyResult {
  documents: RefreshStats
}

export interface OrganizationFileOptions {
  /** Skip records at or below the file's applied offset (Kafka). Off for files, which are replayed. */
  offsetGuard: boolean
  /**
   * Apply mirror rows only, and build the documents once, on `buildDocuments`: for the replica's
   * initial load (or a rebuild), while nothing is served yet. Built batch by batch, a provider's
   * document would be rebuilt as each snapshot table arrives (providers, then identifiers, then
   * memberships...), each time to be overwritten before anyone could read it. A file whose
   * documents were built once stays live for good.
   */
  deferDocuments?: boolean
  /**
   * The file's generation is not published yet (a rebuild's): a deferred file's commits are not
   * synced one by one, the generation is synced whole before it is published (src/sqlite.ts
   * `atPublish`). At 3,000 small organizations a rebuild's last round spent 12% of its lanes'
   * time in those syncs.
   */
  unpublished?: boolean
  /** For rebuilds: the previous generation's stamp of an organization's unchanged document. */
  priorStamp?: PriorOrganizationStamp
  /** A new file's layout: a file of its own (the default) or one organizations share. */
  layout?: FileLayout
}

/** The stamp the previous generation gave an organization's document of this content, if any. */
export type PriorOrganizationStamp = (
  organizationId: string,
  kind: DocumentKind,
  id: string,
  hash: string,
) => string | undefined

const mirroredTables = {
  providers: tables.providers,
  provider_identifiers: tables.providerIdentifiers,
  provider_groups: tables.providerGroups,
  group_memberships: tables.groupMemberships,
  service_locations: tables.serviceLocations,
  group_identifiers: tables.groupIdentifiers,
  enrollments: tables.enrollments,
  enrollment_requirements: tables.enrollmentRequirements,
  enrollment_lines_of_business: tables.enrollmentLinesOfBusiness,
  enrollment_location_participations: tables.enrollmentLocationParticipations,
  group_enrollments: tables.groupEnrollments,
  group_enrollment_lines_of_business: tables.groupEnrollmentLinesOfBusiness,
  documents: tables.documents,
} satisfies Record<OrganizationTable, unknown>
const mirroredTableNames = Object.keys(mirroredTables)

export interface OrganizationFile {
  /**
   * What its writer knows it by (src/organization-files.ts `fileKeyOf`): its organization's id,
   * or a shared file's name.
   */
  readonly fileKey: string
  readonly path: string
  apply(events: readonly OrganizationEvent[], now: Date, tally: Tally): OrganizationApplyResult
  /** Whether documents follow each batch (true unless deferred and not built yet). */
  readonly documentsLive: boolean
  /** The newest stamp a document of this file carries; stamps never go back (stamp.ts). */
  readonly lastStamp: string | undefined
  /**
   * Builds every document from the mirror in one transaction, unless they are live already, and
   * from then on keeps them up to date batch by batch.
   */
  buildDocuments(now: Date): RefreshStats
  /**
   * Opens a transaction that `apply` calls join until `commit`: an initial load commits every few
   * batches, not every batch (see apply.ts). A failure inside it leaves the batch half written:
   * the caller then rolls the whole transaction back.
   */
  begin(): void
  /** Commits the transaction `begin` opened; nothing if none is open. */
  commit(): void
  /** Rolls back the transaction `begin` opened, and what this handle remembers of it. */
  rollback(): void
  /** Whether a transaction opened by `begin` is open. */
  readonly inTransaction: boolean
  /** Checkpoints the WAL back to zero when it has grown past `maxBytes`; true if it did. */
  boundWal(maxBytes: number): boolean
  /** Sizes the file's SQLite page cache. */
  setCacheKiB(kib: number): void
  /**
   * The write-ahead log this file's commits appended to since the last call, unsynced: a commit
   * in WAL is not synced by SQLite here (src/sqlite.ts `syncedCommits`), so whoever reports the
   * batch applied syncs the log first (storage/wal.ts), and undefined when there is nothing to
   * sync. Commits under the rollback journal of a load are synced as they happen.
   */
  takeUnsyncedWal(): string | undefined
  /** Syncs what `takeUnsyncedWal` would hand over, now. */
  syncWal(): void
  /** Closes the file, committing a transaction `begin` opened and syncing its log. */
  close(): void
}

/**
 * The open file of `fileKey` among `files` (kept most recently used last), opened by `open` when it
 * is not, then handed to `opened`; past `max` open, the least recently used is closed.
 */
export function useOrganizationFile(
  files: Map<string, OrganizationFile>,
  fileKey: string,
  max: number,
  open: () => OrganizationFile,
  opened: (file: OrganizationFile) => void,
): OrganizationFile {
  let file = files.get(fileKey)
  if (file !== undefined) {
    files.delete(fileKey)
    files.set(fileKey, file)
    return file
  }
  file = open()
  files.set(fileKey, file)
  if (files.size > max) {
    const [oldestId, oldest] = files.entries().next().value as [string, OrganizationFile]
    files.delete(oldestId)
    oldest.close()
  }
  opened(file)
  return file
}

/** New files' images, made once per process: by layout, with indexes set aside or in place. */
const newFileImages = new Map<string, Buffer>()

/**
 * The page size of a new file of one organization's own: 8 KB, where SQLite's default is 4 KB. A
 * provider's document (two bodies, about 6 KB) then fits one page instead of spilling into overflow
 * pages, and a load's inserts split pages half as often: the bench's million events in seven
 * organizations loaded 3-6% faster in five alternated pairs, for 6% more disk (2026-12-01). Shared
 * files keep 4 KB: 30,000 organizations of two providers in 1,000 of them loaded no faster at 8 KB
 * and took 16% more disk. A file keeps the page size it was made with.
 */
const OWN_FILE_PAGE_BYTES = 8192

/**
 * A new organization file starts as a copy of an image made once per process: an in-memory
 * database migrated (for an initial load, with its indexes set aside) and serialized. Migrated
 * file by file, each new file cost about 35 ms of synced DDL transactions, and an initial load of
 * thousands of organizations creates thousands of files. Nothing if the file exists.
 */
export function createFromImage(path: string, deferred: boolean, layout: FileLayout = 'own'): void {
  if (existsSync(path)) return
  const imageKey = `${layout}:${deferred}`
  let image = newFileImages.get(imageKey)
  if (image === undefined) {
    const pageBytes = layout === 'own' ? OWN_FILE_PAGE_BYTES : undefined
    const db = openForWriting(':memory:', 'organization', 'wal', 'synced', pageBytes)
    if (layout === 'shared') useSharedLayout(db)
    if (deferred) setIndexesAside(db, mirroredTableNames)
    // Dropped indexes leave free pages: without the deferred ones a new file is 200 KB, not 336.
    if (deferred || layout === 'shared') db.exec('VACUUM')
    image = db.serialize()
    db.close()
    newFileImages.set(imageKey, image)
  }
  // Under another name first: a crash mid-copy must not leave a torn file under the real one.
  const partial = `${path}.new`
  writeFileSync(partial, image)
  renameSync(partial, path)
}

/**
 * What a file records about itself in its own transactions (`replica_meta`, `applied_offsets`,
 * `file_organizations`), remembered by its handle and read back after a rollback. `fileKey`: the
 * organization's id, for a file of its own.
 */
function fileRecords(db: SqliteDatabase, fileKey: string, layout: FileLayout) {
  const readMeta = db.prepare<[string], { value: string }>(
    'SELECT value FROM replica_meta WHERE key = ?',
  )
  const writeMeta = db.prepare<[string, string]>(
    'INSERT INTO replica_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
  )
  const offsets = appliedOffsets(db)
  const organizations = fileOrganizations(db, layout)
  let lastStamp: string | undefined
  /** The latest stamp carried from a previous generation since the last `recordStamp`. */
  let carriedStamp: string | undefined
  let documentsBuilt = false

  function readBack(): void {
    offsets.readBack()
    organizations.readBack()
    lastStamp = readMeta.get('last_stamp')?.value
    carriedStamp = undefined
    documentsBuilt = readMeta.get('documents_built') !== undefined
  }
  readBack()

  return {
    readBack,
    get lastStamp() {
      return lastStamp
    },
    get documentsBuilt() {
      return documentsBuilt
    },
    offsets,
    organizations,
    /**
     * Whose file this is, if it is a file of its own: numbered in its first write transaction
     * (on its own it cost a synced commit). A shared file numbers organizations as rows arrive.
     */
    recordOrganization(): void {
      if (layout === 'own') organizations.keyOf(fileKey)
    },
    /** The organization numbered `key` in the file. */
    organizationOf(key: number): string {
      if (layout === 'own') return fileKey
      const organizationId = organizations.keys.get(key)
      if (organizationId === undefined) throw new Error(`no organization numbered ${key} here`)
      return organizationId
    },
    /** The keys of the organizations whose documents a whole build makes. */
    organizationKeys(): Iterable<number> {
      return layout === 'own' ? [OWN_ORGANIZATION] : organizations.keys.keys()
    },
    /** The key an event's row is stored with: its organization's (an upsert's row names it). */
    organizationKeyOf(change: OrganizationEvent['change']): number {
      if (change.kind !== 'upsert') return NO_ORGANIZATION
      return organizations.keyOf((change.row as { organization_id: string }).organization_id)
    },
    /**
     * A stamp a document keeps from a rebuild's previous generation (`priorStamp`), returned as
     * given. That generation's writer stamped it by its own clock, which may run ahead of this
     * one's, so it counts toward the last stamp as the batch's own does.
     */
    carried(stamp: string | undefined): string | undefined {
      if (stamp !== undefined && (carriedStamp === undefined || stamp > carriedStamp)) {
        carriedStamp = stamp
      }
      return stamp
    },
    /**
     * The last stamp is the latest one some document now carries, the batch's or one carried
     * (`carried`): the next batch's is strictly later than every stamp in the file
     * (storage/stamp.ts). Writing that rewrote nothing must not push the next stamp ahead of the
     * clock. Inside the write transaction.
     */
    recordStamp(stamp: string, rewritten: number): void {
      const latest = carriedStamp !== undefined && carriedStamp > stamp ? carriedStamp : stamp
      carriedStamp = undefined
      if (rewritten === 0) return
      writeMeta.run('last_stamp', latest)
      lastStamp = latest
    },
    recordBuilt(stamp: string): void {
      writeMeta.run('documents_built', stamp)
    },
  }
}

function noDocuments(): RefreshStats {
  return { rewritten: 0, unchanged: 0, removed: 0 }
}

/**
 * Whether a file's documents follow each batch, and its journal: a deferred file (an initial
 * load's, a rebuild's) has its indexes aside and a rollback journal until its documents are built
 * once; then WAL, switched only outside a transaction (at the commit of a load's held one).
 */
function documentsMode(db: SqliteDatabase, deferred: boolean, built: boolean) {
  let live = !deferred || built
  /** Built inside a transaction `begin` held: WAL once it commits. */
  let walAtCommit = false
  if (deferred && live) useJournal(db, 'wal', 'byWriter')
  // A live file has every index (one opened live while they are aside, which the build prevents,
  // gets them back here).
  if (live) restoreIndexes(db)
  else setIndexesAside(db, mirroredTableNames)
  return {
    get live() {
      return live
    },
    /** Whether the file journals in WAL now (commits its writer syncs: `takeUnsyncedWal`). */
    get wal() {
      return live && !walAtCommit
    },
    built(): void {
      live = true
      if (db.inTransaction) walAtCommit = true
      else useJournal(db, 'wal', 'byWriter')
    },
    committed(): void {
      if (!walAtCommit) return
      walAtCommit = false
      useJournal(db, 'wal', 'byWriter')
    },
    /** After a rollback: a build it undid leaves the documents waiting again, and WAL too. */
    readBack(builtNow: boolean): void {
      live = !deferred || builtNow
      if (!live) walAtCommit = false
    },
  }
}

/**
 * Opens (and makes, if new) the file `fileKey` names: an organization's own file (the key is its
 * id) or a shared one.
 */
export function openOrganizationFile(
  fileKey: string,
  path: string,
  options: OrganizationFileOptions,
): OrganizationFile {
  // A file whose documents wait for the end of an initial load has no reader: the api answers 503
  // until the replica first catches up, and a rebuild's generation is served only once built.
  // Until then it takes a rollback journal: its pages go to the file once, where WAL wrote each to
  // the log and again to the file at a checkpoint (schemaless million, alternating runs: 39,441-
  // 41,085 events/s against 35,847-38,495, two seconds less system time). It returns to WAL as
  // its documents are built, before anything serves it.
  const deferred = options.deferDocuments === true
  createFromImage(path, deferred, options.layout)
  const db: SqliteDatabase = openForWriting(
    path,
    'organization',
    deferred ? 'rollback' : 'wal',
    options.unpublished === true ? 'atPublish' : 'byWriter',
  )
  // Before anything prepares a read: a shared file's reads go through one organization's views.
  const layout = fileLayout(db)
  const scope = scopeConnection(db, layout)
  const mirror = createMirror(db, mirroredTables)
  // Made on the first refresh or build, not at open: an initial load's files take mirror rows
  // only until their build (mostly on another connection), and the refresher's readers and
  // writers cost 43 KB of heap per file, which thousands of small organizations held open in the
  // lanes through the whole load (more for the collector to mark, nothing it could free).
  let documentRefresher: DocumentRefresher | undefined
  const records = fileRecords(db, fileKey, layout)
  const prior = options.priorStamp
  const refresher = (): DocumentRefresher =>
    (documentRefresher ??= createDocumentRefresher(db, {
      // The stamp of the organization in scope: documents are built an organization at a time.
      ...(prior === undefined
        ? {}
        : {
            priorStamp: (k, id, h) =>
              records.carried(prior(records.organizationOf(scope.key), k, id, h)),
          }),
      organizations: { scope, keys: () => records.organizationKeys() },
    }))
  const documents = documentsMode(db, deferred, records.documentsBuilt)

  /** What this handle remembers of the file, read back after a rollback. */
  function forgetUncommitted(): void {
    records.readBack()
    documents.readBack(records.documentsBuilt)
  }

  /** The transaction an initial load holds across batches (apply.ts). */
  const { joinable, ...held } = heldTransaction(db, forgetUncommitted)
  const applyInTransaction = joinable(
    (events: readonly OrganizationEvent[], now: Date, tally: Tally): OrganizationApplyResult =>
      applyBatch({ records, documents, mirror, refresher, options }, events, now, tally),
  )
  const log = unsyncedLog(path)

  function commit(): void {
    const committing = db.inTransaction && documents.wal
    held.commit()
    documents.committed()
    if (committing) log.appended()
  }

  const buildDocuments = documentBuild(db, records, documents, refresher)

  return {
    fileKey,
    path,
    get documentsLive() {
      return documents.live
    },
    get lastStamp() {
      return records.lastStamp
    },
    buildDocuments,
    apply(events, now, tally) {
      try {
        const result = applyInTransaction(events, now, tally)
        // Committed as a transaction of its own (not joined to one `begin` holds).
        if (!db.inTransaction && documents.wal) log.appended()
        return result
      } catch (error) {
        // Rolled back (inside `begin`'s transaction, the caller rolls all of it back): forget what
        // it recorded.
        forgetUncommitted()
        throw error
      }
    },
    ...held,
    commit,
    get inTransaction() {
      return db.inTransaction
    },
    takeUnsyncedWal: log.take,
    syncWal: log.sync,
    boundWal: (maxBytes) => boundWal(db, path, maxBytes),
    setCacheKiB: (kib) => setCacheKiB(db, kib),
    close() {
      commit()
      log.sync()
      db.close()
    },
  }
}

/**
 * The file's one build of every document, in a transaction of its own, unless its documents are
 * live already; then they follow each batch.
 */
function documentBuild(
  db: SqliteDatabase,
  records: ReturnType<typeof fileRecords>,
  documents: ReturnType<typeof documentsMode>,
  refresher: () => DocumentRefresher,
): (now: Date) => RefreshStats {
  const buildInTransaction = db.transaction((now: Date): RefreshStats => {
    restoreIndexes(db)
    const stamp = nextStamp(now, records.lastStamp)
    const { rewritten, unchanged, removed } = refresher().refreshAll(stamp)
    records.recordBuilt(stamp)
    records.recordStamp(stamp, rewritten)
    return { rewritten, unchanged, removed }
  })
  return (now) => {
    if (documents.live) return noDocuments()
    try {
      const stats = buildInTransaction(now)
      documents.built()
      return stats
    } catch (error) {
      records.readBack()
      throw error
    }
  }
}

/** What one batch's apply needs of its file's handle. */
interface BatchContext {
  records: ReturnType<typeof fileRecords>
  documents: ReturnType<typeof documentsMode>
  mirror: ReturnType<typeof createMirror>
  refresher: () => DocumentRefresher
  options: OrganizationFileOptions
}

/**
 * One batch inside the file's write transaction: its events to the mirror (each once, by its
 * offset), then, when the documents are live, the documents they touched under one stamp.
 */
function applyBatch(
  { records, documents, mirror, refresher, options }: BatchContext,
  events: readonly OrganizationEvent[],
  now: Date,
  tally: Tally,
): OrganizationApplyResult {
  records.recordOrganization()
  const changes: MirrorChange[] = []
  const wanted = documents.live ? changes : undefined
  applyOnce(events, records.offsets, options.offsetGuard, tally, (event) =>
    mirror.apply(event.change, wanted, records.organizationKeyOf(event.change)),
  )
  if (changes.length === 0 || !documents.live) return { documents: noDocuments() }
  const stamp = nextStamp(now, records.lastStamp)
  const coalesced = coalesce(changes) as unknown as DocumentsMirrorChange[]
  const refreshed = refresher().refresh(coalesced, stamp)
  records.recordStamp(stamp, refreshed.rewritten)
  return { documents: refreshed }
}
