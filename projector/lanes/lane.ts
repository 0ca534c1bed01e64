// One lane: a worker thread that owns the organizations the main thread assigned to it
// (lane-hint.ts) and is the only writer of their files. It decodes the events handed to it (lanes.ts packs them),
// applies them per organization exactly as the single-threaded applier does (apply.ts), and
// answers each request in order. Started by lanes.ts; every request gets one answer.
import Database from 'better-sqlite3'
import { parentPort, workerData } from 'node:worker_threads'
import type { OrganizationTable } from '../../schema/events.ts'
import { generation as generationAt } from '../../src/layout.ts'
import { cacheShares } from '../storage/cache-budget.ts'
import { decodeRecord, laterCommit, type RowChange, type SourceRecord } from '../decode/decode.ts'
import type { RefreshStats } from '../documents/index.ts'
import {
  ITEM_FIELDS,
  ItemKind,
  type LaneAnswer,
  type LaneOptions,
  type LaneOutcome,
  type LaneRequest,
} from './lane-protocol.ts'
import {
  openOrganizationFile,
  useOrganizationFile,
  type OrganizationEvent,
  type OrganizationFile,
} from '../storage/organization-file.ts'
import { openPriorGeneration } from '../storage/prior-stamps.ts'
import { FileSourceError, LineReader } from '../decode/file-line.ts'

const options = workerData as LaneOptions
/** Events decoded before they are applied, in an initial load (`applyDecoded`). */
const LOAD_APPLY_EVENTS = 500
const generation = generationAt(options.dataDir, options.generationName)
const prior =
  options.previousGenerationName === undefined
    ? undefined
    : openPriorGeneration(generationAt(options.dataDir, options.previousGenerationName))
const control = new Database(generation.controlPath, { readonly: true, fileMustExist: true })
const fileOf = control.prepare<[string], string>(
  'SELECT file FROM organization_files WHERE organization_id = ?',
)
fileOf.pluck()
const files = new Map<string, OrganizationFile>()
const reader = new LineReader()
const caughtUp = options.caughtUp
let cacheKiB: number | undefined

function organizationFile(organizationId: string): OrganizationFile {
  return useOrganizationFile(
    files,
    organizationId,
    options.maxOpenFiles,
    () =>
      openOrganizationFile(
        organizationId,
        generation.organizationPath(organizationId, fileOf.get(organizationId)),
        {
          offsetGuard: options.offsetGuard,
          deferDocuments: options.deferDocumentsUntilCaughtUp && !caughtUp,
          ...(prior === undefined
            ? {}
            : { priorStamp: (k, id, h) => prior.priorStamp(organizationId, k, id, h) }),
        },
      ),
    shareCache,
  )
}

/** The whole budget is shared by every lane's open files as if one process held them all. */
function shareCache(newFile: OrganizationFile): void {
  if (options.cacheBudgetBytes === undefined) return
  const share = cacheShares(options.cacheBudgetBytes, files.size * options.lanes).organizationKiB
  if (share === cacheKiB) return newFile.setCacheKiB(share)
  cacheKiB = share
  for (const file of files.values()) file.setCacheKiB(share)
}

function applyBatch(request: Extract<LaneRequest, { type: 'batch' }>): LaneOutcome {
  const outcome: LaneOutcome = {
    deadLetters: [],
    events: {},
    documents: { rewritten: 0, unchanged: 0, removed: 0 },
    latestCommittedAtMs: undefined,
    skipped: 0,
    heldFiles: 0,
  }
  const count = (table: string, what: string) => {
    const byOutcome = (outcome.events[table] ??= {})
    byOutcome[what] = (byOutcome[what] ?? 0) + 1
  }
  const now = new Date(request.now)
  const byOrganization = new Map<string, OrganizationEvent[]>()
  let held = 0
  /** Applies what was decoded so far, each organization's events in their order. */
  const applyDecoded = () => {
    for (const [organizationId, list] of byOrganization) {
      const file = organizationFile(organizationId)
      if (request.hold) file.begin()
      const result = file.apply(list, now, count)
      addDocumentStats(outcome.documents, result.documents)
      file.boundWal(options.walCheckpointBytes)
    }
    byOrganization.clear()
    held = 0
  }
  const toOrganization = (organizationId: string, event: OrganizationEvent) => {
    let list = byOrganization.get(organizationId)
    if (list === undefined) byOrganization.set(organizationId, (list = []))
    list.push(event)
    // In an initial load's held transaction (documents deferred, a failure rolls back all of it)
    // a batch is applied in parts, so that its decoded rows die young: held for the whole batch
    // they outgrew the lane's young generation, were promoted, and kept its heap large.
    if (request.hold && ++held >= LOAD_APPLY_EVENTS) applyDecoded()
  }
  const buf = Buffer.from(request.buf.buffer, request.buf.byteOffset, request.buf.byteLength)
  const { meta, strings, events } = request
  let nextEvent = 0
  for (let i = 0; i < meta.length; i += ITEM_FIELDS) {
    const kind = meta[i]! as ItemKind
    if (kind === ItemKind.Decoded) {
      const { organizationId, event } = events[nextEvent++]!
      toOrganization(organizationId, event)
      continue
    }
    const organizationId = strings[meta[i + 7]!]!
    if (kind === ItemKind.Ensure) {
      organizationFile(organizationId)
      continue
    }
    const start = meta[i + 4]!
    const end = meta[i + 5]!
    let record: SourceRecord
    if (meta[i + 8] === 1) {
      const line = reader.record(buf, start, end, meta[i + 6]!)
      if (line === undefined) continue
      record = line
    } else {
      record = {
        topic: strings[meta[i + 1]!]!,
        partition: meta[i + 2]!,
        offset: String(meta[i + 3]!),
        key: null,
        value: buf.subarray(start, end),
      }
    }
    const decoded = decodeRecord(record, options.topicPrefix)
    if (kind === ItemKind.MoveOut) {
      // The row moved to another organization (lanes.ts found it in the routing index): it
      // leaves this one's file. A bad event moves nothing.
      if (decoded.kind !== 'change' || decoded.change.kind !== 'upsert') continue
      const change = decoded.change as Extract<RowChange, { kind: 'upsert' }> & {
        table: OrganizationTable
      }
      const moved = {
        kind: 'delete',
        table: change.table,
        id: change.id,
        position: change.position,
      }
      toOrganization(organizationId, {
        change: moved as OrganizationEvent['change'],
        origin: originOf(record),
      })
      continue
    }
    if (decoded.kind === 'skipped') {
      outcome.skipped++
      continue
    }
    if (decoded.kind === 'bad') {
      outcome.deadLetters.push({
        index: meta[i + 9]!,
        ...(meta[i + 8] === 1 ? { record } : {}),
        reason: decoded.reason,
        message: decoded.message,
      })
      count(decoded.table ?? 'unknown', 'dead_lettered')
      continue
    }
    const change = decoded.change
    if (
      change.kind !== 'upsert' ||
      change.id !== buf.toString('latin1', meta[i + 10], meta[i + 10]! + 36).toLowerCase() ||
      (change.row as { organization_id?: string }).organization_id !== organizationId
    ) {
      // The main thread routed this event from its bytes (lane-hint.ts) and wrote its route:
      // a disagreement is a defect, and going on would put the row in the wrong file.
      throw new Error(
        `lane ${options.lane}: the event at ${record.topic}/${record.partition}/${record.offset} is not the upsert its bytes named`,
      )
    }
    outcome.latestCommittedAtMs = laterCommit(
      outcome.latestCommittedAtMs,
      change.position.committedAtMs,
    )
    toOrganization(organizationId, {
      change: change as OrganizationEvent['change'],
      origin: originOf(record),
    })
  }
  applyDecoded()
  if (request.hold) {
    for (const file of files.values()) if (file.inTransaction) outcome.heldFiles++
  }
  return outcome
}

function originOf(record: SourceRecord) {
  return { topic: record.topic, partition: record.partition, offset: Number(record.offset) }
}

function addDocumentStats(into: RefreshStats, stats: RefreshStats): void {
  into.rewritten += stats.rewritten
  into.unchanged += stats.unchanged
  into.removed += stats.removed
}

function commitAll(): void {
  for (const file of files.values()) {
    if (!file.inTransaction) continue
    file.commit()
    file.boundWal(options.walCheckpointBytes)
  }
}

function closeFiles(organizations: readonly string[] | undefined): void {
  for (const organizationId of organizations ?? [...files.keys()]) {
    const file = files.get(organizationId)
    if (file === undefined) continue
    files.delete(organizationId)
    file.close()
  }
}

function handle(request: LaneRequest): LaneAnswer {
  try {
    switch (request.type) {
      case 'batch':
        try {
          return { seq: request.seq, ok: true, outcome: applyBatch(request) }
        } catch (error) {
          // What this batch (and the load's held transactions) wrote goes: the source re-reads
          // from its committed position, which is not past this batch. A line that is not a
          // record is found before anything is written, and ends a file run: what came before
          // it stays, as before lanes.
          if (!(error instanceof FileSourceError)) {
            for (const file of files.values()) file.rollback()
          }
          throw error
        }
      case 'commit':
        commitAll()
        break
      case 'rollback':
        for (const file of files.values()) file.rollback()
        break
      case 'close-files':
        closeFiles(request.organizations)
        break
      case 'retire-prior':
        prior?.close()
        break
      case 'close':
        closeFiles(undefined)
        prior?.close()
        control.close()
        break
    }
    return { seq: request.seq, ok: true }
  } catch (error) {
    return {
      seq: request.seq,
      ok: false,
      message: error instanceof Error ? error.message : String(error),
      // SQLite's or Node's error code (a full disk: SQLITE_FULL, ENOSPC), for the main thread.
      code: errorCode(error),
      fileSource: error instanceof FileSourceError,
    }
  }
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

parentPort?.on('message', (request: LaneRequest) => {
  parentPort?.postMessage(handle(request))
})
