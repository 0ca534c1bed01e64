// A lane's work, wherever it runs: the organization files it owns and the batches it applies to
// them. The one implementation of "apply decoded records to an organization's files": a worker
// thread (lane.ts) runs one for the live projector's lanes, and the single-threaded applier
// (apply.ts: a rebuild, verify's build, the document build at catch-up) runs one inline, on its own
// thread. The main thread routes and packs a batch (pack.ts); a lane decodes what came as bytes,
// checks it against what the bytes named, and applies each organization's events in their order.
import { join } from 'node:path'
import { threadId } from 'node:worker_threads'
import type { Generation } from '../../src/layout.ts'
import type { OrganizationTable } from '../../schema/events.ts'
import { cacheShares } from '../storage/cache-budget.ts'
import { decodeRecord, laterCommit, type RowChange, type SourceRecord } from '../decode/decode.ts'
import type { RefreshStats } from '../documents/index.ts'
import { fileKeyOf, isSharedFileName } from '../../src/organization-files.ts'
import type { FileLayout } from '../../src/organization-scope.ts'
import {
  ITEM_FIELDS,
  ItemKind,
  type BatchRequest,
  type EventTally,
  type LaneAnswer,
  type LaneOutcome,
  type LaneRequest,
} from './lane-protocol.ts'
import { countEvents } from './outcome.ts'
import {
  createFromImage,
  openOrganizationFile,
  useOrganizationFile,
  type OrganizationEvent,
  type OrganizationFile,
  type PriorOrganizationStamp,
} from '../storage/organization-file.ts'
import { failedAnswer } from './lane-failure.ts'
import { FileSourceError, LineReader } from '../decode/file-line.ts'
import { LoadSpool } from './load-spool.ts'

/** Events decoded before they are applied, in an initial load (`LaneBatch.toOrganization`). */
const LOAD_APPLY_EVENTS = 500

/**
 * Files a lane holds open in an initial load's round; the round's other files go through
 * its spool (load-spool.ts). Seven organizations never reach it (nothing is spooled, as before);
 * 3,000 held open cost 1.5 GB. Sixteen a lane keep the organizations a bench's snapshot brings in
 * long runs (one organization after another) direct, at about 8 MB.
 */
export const LOAD_DIRECT_FILES = 16

export interface LaneCoreOptions {
  lane: number
  /** Lanes in all: the cache budget is shared as if one process held every lane's files. */
  lanes: number
  generation: Generation
  topicPrefix: string
  offsetGuard: boolean
  walCheckpointBytes: number
  /** Whether a file opened now defers its documents (an initial load, before catch-up). */
  deferDocuments: () => boolean
  /** The generation is a rebuild's, not published yet (organization-file.ts `unpublished`). */
  unpublished: boolean
  maxOpenFiles: number
  cacheBudgetBytes: number | undefined
  /** The file of a key in this generation, as control.db names it; undefined: its first. */
  fileOf: (fileKey: string) => string | undefined
  /** The files the generation's organizations share; 0: each has its own (control-file.ts). */
  sharedFiles: number
  priorStamp?: PriorOrganizationStamp | undefined
}

/** What a lane's commit did beside committing: its spool applied, and at catch-up its builds. */
export interface LaneCommit {
  /** Outcomes of the spooled events it applied. */
  events: EventTally
  /** Documents it wrote: built (`buildAt`), or refreshed in a file built before the round. */
  documents: RefreshStats
  /** Files whose documents it built (`buildAt`), by key: the catch-up build skips them. */
  built: string[]
}

/** Builds a file's deferred documents at catch-up, as the catch-up build would (catch-up.ts). */
function build(file: OrganizationFile, at: Date, done: LaneCommit): void {
  if (file.documentsLive) return
  addDocumentStats(done.documents, file.buildDocuments(at))
  done.built.push(file.fileKey)
}

function layoutOf(fileKey: string): FileLayout {
  return isSharedFileName(fileKey) ? 'shared' : 'own'
}

export function addDocumentStats(into: RefreshStats, stats: RefreshStats): void {
  into.rewritten += stats.rewritten
  into.unchanged += stats.unchanged
  into.removed += stats.removed
}

/**
 * A lane's organization files (it is their only writer), and what it does with them. Files are
 * known by their key (src/organization-files.ts): an organization's id, or a shared file's name.
 */
export class LaneCore {
  /** Open files by key, least recently used first (`useOrganizationFile`). */
  readonly files = new Map<string, OrganizationFile>()
  readonly reader = new LineReader()
  #cacheKiB: number | undefined
  /** An initial load's events for the files past `LOAD_DIRECT_FILES` (load-spool.ts). */
  #spool: LoadSpool | undefined

  constructor(readonly options: LaneCoreOptions) {}

  /** The key of the file that holds the organization's rows. */
  fileKeyOf(organizationId: string): string {
    return fileKeyOf(organizationId, this.options.sharedFiles)
  }

  /** A file in this lane's generation, by key, open or not. */
  pathOf(fileKey: string): string {
    return this.options.generation.filePath(fileKey, this.options.fileOf(fileKey))
  }

  /** The organization's file, opened if it is not. */
  organizationFile(organizationId: string): OrganizationFile {
    return this.file(this.fileKeyOf(organizationId))
  }

  /** A file by key, opened if it is not. */
  file(fileKey: string): OrganizationFile {
    const o = this.options
    return useOrganizationFile(
      this.files,
      fileKey,
      o.maxOpenFiles,
      () =>
        openOrganizationFile(fileKey, this.pathOf(fileKey), {
          offsetGuard: o.offsetGuard,
          deferDocuments: o.deferDocuments(),
          unpublished: o.unpublished,
          layout: layoutOf(fileKey),
          ...(o.priorStamp === undefined ? {} : { priorStamp: o.priorStamp }),
        }),
      (file) => this.#shareCache(file),
    )
  }

  /** Gives every open file its share of the budget, when the number open changed. */
  #shareCache(newFile: OrganizationFile): void {
    const budget = this.options.cacheBudgetBytes
    if (budget === undefined) return
    const share = cacheShares(budget, this.files.size * this.options.lanes).organizationKiB
    if (share === this.#cacheKiB) return newFile.setCacheKiB(share)
    this.#cacheKiB = share
    for (const file of this.files.values()) file.setCacheKiB(share)
  }

  /**
   * Applies a packed batch. On failure what it (and an initial load's held transactions) wrote
   * goes: the source re-reads from its committed position, which is not past this batch. A line
   * that is not a record is found before anything is written, and ends a file run: what came
   * before it stays.
   */
  applyBatch(request: BatchRequest): LaneOutcome {
    try {
      return new LaneBatch(this, request).run()
    } catch (error) {
      if (!(error instanceof FileSourceError)) this.rollback()
      throw error
    }
  }

  /**
   * An initial load's file (by key) in the round's transaction, opened and begun if the lane
   * holds fewer than `LOAD_DIRECT_FILES`; undefined when its events go to the spool this round.
   * Once spooled, always (its events stay in their order).
   */
  heldFile(fileKey: string): OrganizationFile | undefined {
    if (this.#spool?.has(fileKey) === true) return undefined
    const held = this.files.get(fileKey)?.inTransaction === true
    const limit = Math.min(LOAD_DIRECT_FILES, this.options.maxOpenFiles)
    if (!held && this.#directFiles() >= limit) return undefined
    const file = this.file(fileKey)
    file.begin()
    return file
  }

  /**
   * The lane's spool, for a file `heldFile` turned away. The file is made now, empty (a copy of
   * the new file's image), as opening it would: a truncate reaches every organization with a
   * file (pack.ts).
   */
  spoolFor(fileKey: string): LoadSpool {
    const spool = (this.#spool ??= new LoadSpool(
      join(
        this.options.generation.dir,
        `.load-spool-${process.pid}-${threadId}-${this.options.lane}`,
      ),
    ))
    if (!spool.has(fileKey) && !this.files.has(fileKey)) {
      createFromImage(this.pathOf(fileKey), this.options.deferDocuments(), layoutOf(fileKey))
    }
    return spool
  }

  /**
   * Commits every file's held transaction, syncs what that wrote to a log (a file built before
   * this load's round: rare, one after another), then bounds its WAL; then applies what the round
   * spooled, organization by organization. At catch-up (`buildAt`) it also builds the deferred
   * documents of the files it commits, as each is open: the build that follows skips them.
   */
  commit(buildAt?: Date): LaneCommit {
    const done: LaneCommit = {
      events: {},
      documents: { rewritten: 0, unchanged: 0, removed: 0 },
      built: [],
    }
    for (const file of this.files.values()) {
      if (!file.inTransaction) continue
      file.commit()
      file.syncWal()
      if (buildAt !== undefined) build(file, buildAt, done)
      file.boundWal(this.options.walCheckpointBytes)
    }
    this.#drainSpool(done, buildAt)
    return done
  }

  /**
   * Each spooled organization's file is opened, takes the round's events in one transaction (and
   * its documents, at catch-up), commits and closes: the next organization's takes its place. A
   * failure leaves the files not committed yet as they were, and the caller rolls the rest back
   * (the source replays the round).
   */
  #drainSpool(done: LaneCommit, buildAt: Date | undefined): void {
    const spool = this.#spool
    if (spool === undefined || spool.files === 0) return
    const count = (table: string, what: string): void => countEvents(done.events, table, what)
    const now = buildAt ?? new Date()
    spool.drain(LOAD_APPLY_EVENTS, (fileKey, parts) => {
      const file = this.file(fileKey)
      file.begin()
      for (const part of parts) {
        // Documents are live only in a file built before this round (rare): counted all the same.
        addDocumentStats(done.documents, file.apply(part, now, count).documents)
      }
      if (buildAt !== undefined) build(file, buildAt, done)
      file.commit()
      this.closeFiles([fileKey])
    })
  }

  rollback(): void {
    for (const file of this.files.values()) file.rollback()
    this.#spool?.clear()
  }

  /**
   * Closes these files, by key (every file: none named); another writer may take them. Closing
   * every file forgets what the spool holds: a stop, whose round is replayed.
   */
  closeFiles(fileKeys?: readonly string[]): void {
    for (const fileKey of fileKeys ?? [...this.files.keys()]) {
      const file = this.files.get(fileKey)
      if (file === undefined) continue
      this.files.delete(fileKey)
      file.close()
    }
    if (fileKeys === undefined) {
      this.#spool?.close()
      this.#spool = undefined
    }
  }

  /** Files in an initial load's held transaction, or in its spool (applied at its commit). */
  heldFiles(): number {
    return this.#directFiles() + (this.#spool?.files ?? 0)
  }

  #directFiles(): number {
    let held = 0
    for (const file of this.files.values()) if (file.inTransaction) held++
    return held
  }

  /**
   * Answers one request of the lane protocol; every request gets one answer. `closing` lets go of
   * what the lane holds beside its files (a worker's control.db handle, its prior generation).
   */
  answer(request: LaneRequest, hooks: { retirePrior(): void; close(): void }): LaneAnswer {
    try {
      switch (request.type) {
        case 'batch':
          return { seq: request.seq, ok: true, outcome: this.applyBatch(request) }
        case 'commit':
          return {
            seq: request.seq,
            ok: true,
            outcome: committedOutcome(
              this.commit(request.buildAt === undefined ? undefined : new Date(request.buildAt)),
            ),
          }
        case 'rollback':
          this.rollback()
          break
        case 'close-files':
          this.closeFiles(request.fileKeys)
          break
        case 'retire-prior':
          hooks.retirePrior()
          break
        case 'close':
          this.closeFiles()
          hooks.close()
          break
      }
      return { seq: request.seq, ok: true }
    } catch (error) {
      // With SQLite's or Node's error code (a full disk: SQLITE_FULL, ENOSPC), for the main thread.
      return { ...failedAnswer(request.seq, error), fileSource: error instanceof FileSourceError }
    }
  }
}

/** A commit's answer: what its spool applied, and what it built at catch-up. */
function committedOutcome({ events, documents, built }: LaneCommit): LaneOutcome {
  return {
    deadLetters: [],
    events,
    documents,
    latestCommittedAtMs: undefined,
    skipped: 0,
    heldFiles: 0,
    unsyncedWals: [],
    built,
  }
}

function originOf(record: SourceRecord) {
  return { topic: record.topic, partition: record.partition, offset: Number(record.offset) }
}

/**
 * One packed batch as a lane applies it: its items decoded, grouped by file (one transaction for
 * every organization of a shared file), applied.
 */
class LaneBatch {
  readonly outcome: LaneOutcome = {
    deadLetters: [],
    events: {},
    documents: { rewritten: 0, unchanged: 0, removed: 0 },
    latestCommittedAtMs: undefined,
    skipped: 0,
    heldFiles: 0,
    unsyncedWals: [],
  }
  readonly #now: Date
  readonly #buf: Buffer
  /** Events decoded and not applied yet, by file key, each organization's in their order. */
  readonly #byFile = new Map<string, OrganizationEvent[]>()
  /** Files this batch committed (not held): their logs are synced together at its end. */
  readonly #committed = new Set<OrganizationFile>()
  #held = 0
  #nextEvent = 0

  constructor(
    readonly lane: LaneCore,
    readonly request: BatchRequest,
  ) {
    this.#now = new Date(request.now)
    const { buf } = request
    this.#buf = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength)
  }

  readonly count = (table: string, what: string): void =>
    countEvents(this.outcome.events, table, what)

  run(): LaneOutcome {
    const { meta } = this.request
    for (let i = 0; i < meta.length; i += ITEM_FIELDS) this.#item(i)
    this.#applyDecoded()
    if (this.request.hold) this.outcome.heldFiles = this.lane.heldFiles()
    for (const file of this.#committed) {
      const wal = file.takeUnsyncedWal()
      if (wal !== undefined) this.outcome.unsyncedWals.push(wal)
    }
    return this.outcome
  }

  #item(i: number): void {
    const { meta, strings, events } = this.request
    const kind = meta[i]! as ItemKind
    if (kind === ItemKind.Decoded) {
      const { organizationId, event } = events[this.#nextEvent++]!
      return this.#toOrganization(organizationId, event)
    }
    const organizationId = strings[meta[i + 7]!]!
    if (kind === ItemKind.Ensure) {
      const fileKey = this.lane.fileKeyOf(organizationId)
      if (!this.request.hold) this.lane.file(fileKey)
      else if (this.lane.heldFile(fileKey) === undefined) {
        this.lane.spoolFor(fileKey).touch(fileKey)
      }
      return
    }
    const record = this.#record(i)
    if (record === undefined) return
    const decoded = decodeRecord(record, this.lane.options.topicPrefix)
    if (kind === ItemKind.MoveOut) {
      // The row moved to another organization (pack.ts found it in the routing index): it
      // leaves this one's file. A bad event moves nothing.
      if (decoded.kind !== 'change' || decoded.change.kind !== 'upsert') return
      return this.#moveOut(organizationId, decoded.change, record)
    }
    if (decoded.kind === 'skipped') {
      this.outcome.skipped++
      return
    }
    if (decoded.kind === 'bad') {
      this.outcome.deadLetters.push({
        index: meta[i + 9]!,
        ...(meta[i + 8] === 1 ? { record } : {}),
        reason: decoded.reason,
        message: decoded.message,
      })
      this.count(decoded.table ?? 'unknown', 'dead_lettered')
      return
    }
    this.#upsert(i, organizationId, decoded.change, record)
  }

  /** The item's bytes as a record: a file's line (undefined: a line of nothing), or a value. */
  #record(i: number): SourceRecord | undefined {
    const { meta, strings } = this.request
    const start = meta[i + 4]!
    const end = meta[i + 5]!
    if (meta[i + 8] === 1) return this.lane.reader.record(this.#buf, start, end, meta[i + 6]!)
    return {
      topic: strings[meta[i + 1]!]!,
      partition: meta[i + 2]!,
      offset: String(meta[i + 3]!),
      key: null,
      value: this.#buf.subarray(start, end),
    }
  }

  #moveOut(organizationId: string, change: RowChange, record: SourceRecord): void {
    const upsert = change as Extract<RowChange, { kind: 'upsert' }> & { table: OrganizationTable }
    const moved = { kind: 'delete', table: upsert.table, id: upsert.id, position: upsert.position }
    this.#toOrganization(organizationId, {
      change: moved as OrganizationEvent['change'],
      origin: originOf(record),
    })
  }

  /** An upsert whose organization its bytes named: it must be the upsert they named. */
  #upsert(i: number, organizationId: string, change: RowChange, record: SourceRecord): void {
    const idAt = this.request.meta[i + 10]!
    if (
      change.kind !== 'upsert' ||
      change.id !== this.#buf.toString('latin1', idAt, idAt + 36).toLowerCase() ||
      (change.row as { organization_id?: string }).organization_id !== organizationId
    ) {
      // The main thread routed this event from its bytes (lane-hint.ts) and wrote its route:
      // a disagreement is a defect, and going on would put the row in the wrong file.
      throw new Error(
        `lane ${this.lane.options.lane}: the event at ${record.topic}/${record.partition}/${record.offset} is not the upsert its bytes named`,
      )
    }
    this.outcome.latestCommittedAtMs = laterCommit(
      this.outcome.latestCommittedAtMs,
      change.position.committedAtMs,
    )
    this.#toOrganization(organizationId, {
      change: change as OrganizationEvent['change'],
      origin: originOf(record),
    })
  }

  #toOrganization(organizationId: string, event: OrganizationEvent): void {
    const fileKey = this.lane.fileKeyOf(organizationId)
    let list = this.#byFile.get(fileKey)
    if (list === undefined) this.#byFile.set(fileKey, (list = []))
    list.push(event)
    // In an initial load's held transaction (documents deferred, a failure rolls back all of it)
    // a batch is applied in parts, so that its decoded rows die young: held for the whole batch
    // they outgrew the lane's young generation, were promoted, and kept its heap large.
    if (this.request.hold && ++this.#held >= LOAD_APPLY_EVENTS) this.#applyDecoded()
  }

  /** Applies what was decoded so far, each file's events in their order. */
  #applyDecoded(): void {
    for (const [fileKey, list] of this.#byFile) {
      const file = this.request.hold ? this.lane.heldFile(fileKey) : this.lane.file(fileKey)
      if (file === undefined) {
        this.lane.spoolFor(fileKey).append(fileKey, list)
        continue
      }
      if (!this.request.hold) this.#committed.add(file)
      const result = file.apply(list, this.#now, this.count)
      addDocumentStats(this.outcome.documents, result.documents)
      file.boundWal(this.lane.options.walCheckpointBytes)
    }
    this.#byFile.clear()
    this.#held = 0
  }
}
