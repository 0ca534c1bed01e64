// A batch on the main thread: routed, packed for its lanes, and merged from their answers. The one
// implementation of decode -> classify -> route, used alike by the live projector's lanes (lanes.ts)
// and by the single-threaded applier's one inline lane (apply.ts).
//
// For each record the organization is found in its bytes where they name it (lane-hint.ts: no
// parsing), and the record goes to the owning lane as bytes, to decode there. What the bytes do not
// name (deletes, truncates, control tables, anything unusual) is decoded here and handed over
// decoded. A batch is packed in two steps: `collect` reads it (its control events applied to
// control.db) and says which routes it needs; once the routing index answered them
// (storage/route-file.ts: inline, or on a thread of its own while the next batch is collected),
// `settle` packs the lanes' shares. The routes commit before any organization file (during an
// initial load, with them): if a crash follows, redelivery re-routes idempotently and applies the
// rest.
import type { OrganizationTable } from '../../schema/events.ts'
import { classifyRecord } from '../routing/classify.ts'
import type { ControlEvent, ControlFile } from '../storage/control-file.ts'
import {
  RouteBatchBuilder,
  RouteKind,
  SKIPPED,
  type OrganizationCodes,
  type RouteAnswer,
  type RouteBatch,
} from '../storage/route-file.ts'
import { laterCommit, type SourceRecord } from '../decode/decode.ts'
import { laneHint, type LaneHint } from '../routing/lane-hint.ts'
import { ItemKind, type BatchRequest, type LaneOutcome } from './lane-protocol.ts'
import type { OrganizationEvent } from '../storage/organization-file.ts'
import type { BatchOutcome, DeadLetter, EventTally } from './outcome.ts'
import type { LineBatch, LineReader } from '../decode/file-line.ts'

/**
 * The buffers batches are packed in, reused once a lane is done with one. Allocated afresh, each
 * was garbage in the lane that received it until a collection there, and V8 collects for external
 * memory only after tens of MB of it: a million-event load held about 150 MB of dead batch buffers
 * across the threads at its peak (heaptrack).
 */
export class BufferPool {
  readonly #free: ArrayBuffer[] = []

  constructor(readonly capacity: number) {}

  /** A buffer of at least `bytes`, never from Buffer's shared pool: it is transferred whole. */
  take(bytes: number): Buffer {
    const at = this.#free.findIndex((b) => b.byteLength >= bytes)
    if (at === -1) return Buffer.allocUnsafeSlow(bytes)
    return Buffer.from(this.#free.splice(at, 1)[0]!)
  }

  give(buffer: ArrayBuffer): void {
    if (buffer.byteLength === 0) return // detached
    if (this.#free.length >= this.capacity) {
      // Keep the larger ones: a batch's size varies, and a small buffer would only be passed over.
      const smallest = this.#free.reduce(
        (min, b, i, all) => (b.byteLength < all[min]!.byteLength ? i : min),
        0,
      )
      if (this.#free[smallest]!.byteLength >= buffer.byteLength) return
      this.#free.splice(smallest, 1)
    }
    this.#free.push(buffer)
  }
}

/** Where an item's bytes came from: a Kafka record (line number 0), or a file's line. */
export interface ItemOrigin {
  topic: string
  partition: number
  offset: number
  lineNumber: number
}

/**
 * What a batch's items are packed into (PackedBatch). Methods of long-lived objects, not closures
 * made for each batch or record: V8 keeps a function's optimized code only while a closure of it
 * lives, so closures made per batch lost theirs at each full collection of the main thread and
 * ran unoptimized until compiled again (6-8 times each in a 40 s step of bench:freshness at
 * 2,000/s, 36-88 times with V8's default young generation; docs/freshness.md).
 */
export interface PackSink {
  hinted(item: HintedItem): void
  /** A record the bytes did not route: the main thread decodes it. */
  decoded(record: SourceRecord, index: number): void
}

/** An upsert whose organization its bytes named (lane-hint.ts): its value is `buf[start, end)`. */
export interface HintedItem {
  hint: LaneHint
  buf: Buffer
  start: number
  end: number
  record: ItemOrigin
  index: number
}

/** A batch's items, gone through in order: `hinted` for an upsert found in bytes, `decoded` else. */
export interface PackItems {
  each(sink: PackSink): void
}

/** One lane's share of a batch, as it is packed (lane-protocol.ts). */
class LanePacker {
  /** Transferred to a worker lane; given back to the pool by an inline one. */
  buf: Buffer
  used = 0
  meta: number[] = []
  strings: string[] = []
  readonly #stringIndex = new Map<string, number>()
  events: Array<{ organizationId: string; event: OrganizationEvent }> = []

  constructor(
    expectedBytes: number,
    readonly buffers: BufferPool,
  ) {
    this.buf = buffers.take(Math.max(64 * 1024, expectedBytes))
  }

  #string(value: string): number {
    let index = this.#stringIndex.get(value)
    if (index === undefined) {
      index = this.strings.push(value) - 1
      this.#stringIndex.set(value, index)
    }
    return index
  }

  bytes(
    kind: ItemKind,
    from: Buffer,
    start: number,
    end: number,
    record: ItemOrigin,
    organizationId: string,
    idAt: number,
    index: number,
  ): void {
    const length = end - start
    if (this.used + length > this.buf.length) {
      const grown = this.buffers.take(Math.max(this.buf.length * 2, this.used + length))
      this.buf.copy(grown, 0, 0, this.used)
      this.buffers.give(this.buf.buffer as ArrayBuffer)
      this.buf = grown
    }
    from.copy(this.buf, this.used, start, end)
    this.meta.push(
      kind,
      this.#string(record.topic),
      record.partition,
      record.offset,
      this.used,
      this.used + length,
      record.lineNumber,
      this.#string(organizationId),
      record.lineNumber > 0 ? 1 : 0,
      index,
      idAt < 0 ? -1 : this.used + (idAt - start),
    )
    this.used += length
  }

  decoded(kind: ItemKind, organizationId: string, event: OrganizationEvent): void {
    this.meta.push(kind, 0, 0, 0, 0, 0, 0, this.#string(organizationId), 0, -1, -1)
    this.events.push({ organizationId, event })
  }

  ensure(organizationId: string): void {
    this.meta.push(ItemKind.Ensure, 0, 0, 0, 0, 0, 0, this.#string(organizationId), 0, -1, -1)
  }

  get empty(): boolean {
    return this.meta.length === 0
  }

  /** The share as a request, and what to transfer with it; undefined when it has nothing. */
  request(now: number, hold: boolean): PackedShare | undefined {
    if (this.empty) {
      this.buffers.give(this.buf.buffer as ArrayBuffer)
      return undefined
    }
    const buf = new Uint8Array(this.buf.buffer, this.buf.byteOffset, this.used)
    const meta = Float64Array.from(this.meta)
    const { strings, events } = this
    return {
      request: { type: 'batch', buf, meta, strings, events, now, hold },
      transfer: [this.buf.buffer as ArrayBuffer, meta.buffer],
    }
  }
}

/** A lane's share of a batch: the request (its `seq` given by the lane) and what it transfers. */
export interface PackedShare {
  request: Omit<BatchRequest, 'seq'>
  transfer: ArrayBuffer[]
}

/**
 * An event to pack once the batch's routes are known, in the batch's order: an upsert found in
 * bytes, or a decoded truncate, delete or upsert (data, not closures: see PackSink). `route`: its
 * route's index in the batch's `RouteBatch`.
 */
type PackStep =
  | { kind: 'hinted'; route: number; item: HintedItem }
  | { kind: 'truncate'; event: OrganizationEvent }
  | { kind: 'delete'; route: number; event: OrganizationEvent }
  | {
      kind: 'upsert'
      route: number
      event: OrganizationEvent
      change: Extract<OrganizationEvent['change'], { kind: 'upsert' }>
      organizationId: string
    }

export interface PackContext {
  control: ControlFile
  /** The routing index's organization codes, kept by whoever packs (storage/route-file.ts). */
  codes: OrganizationCodes
  topicPrefix: string
  offsetGuard: boolean
  lanes: number
  laneOf: (organizationId: string) => number
  buffers: BufferPool
  knownOrganizations: () => string[]
  /** A per-organization rebuild: only these organizations' events are packed. */
  only: OrganizationFilter | undefined
}

/** The organizations a per-organization rebuild keeps: a set of them, or of their files'. */
export interface OrganizationFilter {
  has(organizationId: string): boolean
}

export function emptyOutcome(): BatchOutcome {
  return {
    deadLetters: [],
    events: new Map(),
    documents: { rewritten: 0, unchanged: 0, removed: 0 },
    latestCommittedAtMs: undefined,
    skipped: 0,
    committed: true,
  }
}

/** A batch routed and packed on the main thread, then merged from its lanes' answers. */
export class PackedBatch implements PackSink {
  readonly outcome = emptyOutcome()
  readonly #packers: LanePacker[]
  /** Organizations with events in this batch: a truncate reaches them, file or not yet. */
  readonly #inBatch = new Set<string>()
  readonly #controlEvents: ControlEvent[] = []
  /** The batch's events to pack, in order, once their routes are known (`settle`). */
  #steps: PackStep[] = []
  /** The batch's routes: an upsert's (its organization) or a key-only delete's lookup. */
  #routes: RouteBatchBuilder
  /** What the routing index answered (`settle`). */
  #found: RouteAnswer = new Int32Array(0)
  /** Organizations the batch's control events changed: their files are ensured (`settle`). */
  #changedOrganizations: string[] = []
  /** Dead letters in the order of their records (index in the batch, or line number). */
  readonly #letters: Array<{ order: number; letter: DeadLetter }> = []

  constructor(
    readonly context: PackContext,
    bytes: number,
  ) {
    const { lanes, buffers } = context
    const expected = Math.ceil((bytes * 1.25) / lanes)
    this.#packers = Array.from({ length: lanes }, () => new LanePacker(expected, buffers))
    this.#routes = new RouteBatchBuilder(context.codes)
  }

  tally(table: string, what: string, n = 1): void {
    let byOutcome = this.outcome.events.get(table)
    if (byOutcome === undefined) this.outcome.events.set(table, (byOutcome = {}))
    byOutcome[what] = (byOutcome[what] ?? 0) + n
  }

  /** Counts events a lane applied (a batch's share, or what a round's spool applied). */
  addEvents(events: EventTally): void {
    for (const [table, byOutcome] of Object.entries(events)) {
      for (const [what, n] of Object.entries(byOutcome)) this.tally(table, what, n)
    }
  }

  /** The packer of the organization's lane; undefined for one a rebuild does not keep. */
  #packerOf(organizationId: string): LanePacker | undefined {
    this.#inBatch.add(organizationId)
    const only = this.context.only
    if (only !== undefined && !only.has(organizationId)) return undefined
    return this.#packers[this.context.laneOf(organizationId)]!
  }

  /** A route the batch needs: an upsert's (its organization given) or a delete's lookup. */
  #routeLater(table: OrganizationTable, id: string, organizationId?: string): number {
    const only = this.context.only
    const kind =
      organizationId === undefined
        ? RouteKind.Lookup
        : only !== undefined && !only.has(organizationId)
          ? RouteKind.RouteUnlessNew
          : RouteKind.Route
    return this.#routes.add(table, id, kind, organizationId)
  }

  /**
   * Reads the batch, applies its control events in one control.db transaction (the caller may
   * hold it open: an initial load), and returns the routes it needs, for the routing index to
   * resolve (in its own transaction there). The control.db commit is left unsynced: the caller
   * syncs its log with the files' (`control.takeUnsyncedWal`) before it reports the batch applied.
   */
  collect(pack: PackItems): RouteBatch {
    const { control, offsetGuard } = this.context
    pack.each(this)
    // Most batches have no control event: then control.db is not written, nor its log synced.
    const changed =
      this.#controlEvents.length === 0
        ? { organizations: [] }
        : control.transaction(
            () =>
              control.applyEvents(this.#controlEvents, offsetGuard, (table, what) =>
                this.tally(table, what),
              ),
            'byCaller',
          )
    this.#changedOrganizations = changed.organizations
    const routes = this.#routes.build()
    // Garbage once resolved, not once the lanes answer (see `settle`).
    this.#routes = new RouteBatchBuilder(this.context.codes)
    return routes
  }

  /**
   * Packs the batch's events in their own order with the routes the index found (`routes`, as
   * `collect` returned them), then has each lane create the files of organizations that a control
   * event named. `packed`: the lanes' buffers now hold copies of what they need.
   */
  settle(routes: RouteBatch, found: RouteAnswer, packed?: () => void): void {
    this.context.codes.recorded(routes)
    this.#found = found
    for (const step of this.#steps) this.#pack(step)
    packed?.()
    for (const organizationId of this.#changedOrganizations) {
      this.#packerOf(organizationId)?.ensure(organizationId)
    }
    // Garbage as soon as the batch is packed, not once the lanes answer: held by this batch until
    // then, they outlived young-generation collections and swelled the old one.
    this.#steps = []
    this.#found = new Int32Array(0)
  }

  /**
   * Once settled: the organizations the batch changes (every one it packed for, a move's both, a
   * truncate's all), or undefined when a control event may change any organization's responses.
   */
  touchedOrganizations(): ReadonlySet<string> | undefined {
    return this.#controlEvents.length > 0 ? undefined : this.#inBatch
  }

  /** The organization a route found (a moved row's former one, or a delete's), if any. */
  #foundAt(route: number): string | undefined {
    const code = this.#found[route]!
    return code > 0 ? this.context.codes.idOf(code) : undefined
  }

  hinted(item: HintedItem): void {
    const { hint } = item
    const route = this.#routeLater(hint.table, hint.id, hint.organizationId)
    this.#steps.push({ kind: 'hinted', route, item })
  }

  /** Packs a step whose route is known now. */
  #pack(step: PackStep): void {
    switch (step.kind) {
      case 'hinted':
        return this.#packHinted(step.route, step.item)
      case 'truncate': {
        // Every organization with a file, and those whose first rows came earlier in this batch
        // (their files do not exist yet, but their rows are about to).
        const organizations = new Set([...this.context.knownOrganizations(), ...this.#inBatch])
        for (const organizationId of organizations) this.#packDecoded(organizationId, step.event)
        return
      }
      case 'delete': {
        // A delete of a row this replica never saw (compacted away, or older than the topics'
        // retention) has nothing to remove.
        const { route, event } = step
        const found = this.#foundAt(route)
        if (found === undefined) this.tally(event.change.table, 'absent')
        else this.#packDecoded(found, event)
        return
      }
      case 'upsert': {
        const { route, event } = step
        // Rebuilding some organizations: another's row matters only if it moves out of one.
        if (this.#found[route] === SKIPPED) return void this.outcome.skipped++
        const found = this.#foundAt(route)
        if (found !== undefined) {
          // The row moved to another organization: it leaves the old file.
          const { table, id, position } = step.change
          const moved = { change: { kind: 'delete', table, id, position }, origin: event.origin }
          this.#packDecoded(found, moved as OrganizationEvent)
        }
        this.#packDecoded(step.organizationId, event)
        return
      }
    }
  }

  #packHinted(route: number, item: HintedItem): void {
    // Rebuilding some organizations: another's row matters only if it moves out of one (then
    // only its move-out is packed: the packer of an organization not kept is none).
    if (this.#found[route] === SKIPPED) return void this.outcome.skipped++
    const found = this.#foundAt(route)
    if (found !== undefined) this.#packBytes(ItemKind.MoveOut, found, item)
    this.#packBytes(ItemKind.Hinted, item.hint.organizationId, item)
  }

  #packBytes(kind: ItemKind, organizationId: string, item: HintedItem): void {
    const { hint, buf, start, end, record, index } = item
    this.#packerOf(organizationId)?.bytes(
      kind,
      buf,
      start,
      end,
      record,
      organizationId,
      hint.idAt,
      index,
    )
  }

  #packDecoded(organizationId: string, event: OrganizationEvent): void {
    this.#packerOf(organizationId)?.decoded(ItemKind.Decoded, organizationId, event)
  }

  /** What the bytes did not name: decoded here. */
  decoded(record: SourceRecord, index: number): void {
    const classified = classifyRecord(record, this.context.topicPrefix)
    if (classified.kind === 'skipped') {
      this.outcome.skipped++
      return
    }
    if (classified.kind === 'bad') {
      const { reason, message } = classified
      this.#letters.push({ order: index, letter: { record, reason, message } })
      this.tally(classified.table, 'dead_lettered')
      return
    }
    this.outcome.latestCommittedAtMs = laterCommit(
      this.outcome.latestCommittedAtMs,
      classified.committedAtMs,
    )
    if (classified.kind === 'control') this.#controlEvents.push(classified.event)
    else this.#organizationEvent(classified.event)
  }

  #organizationEvent(event: OrganizationEvent): void {
    const { change } = event
    if (change.kind === 'truncate') return void this.#steps.push({ kind: 'truncate', event })
    if (change.kind === 'delete') {
      const route = this.#routeLater(change.table, change.id)
      return void this.#steps.push({ kind: 'delete', route, event })
    }
    const organizationId = (change.row as { organization_id: string }).organization_id
    const route = this.#routeLater(change.table, change.id, organizationId)
    this.#steps.push({ kind: 'upsert', route, event, change, organizationId })
  }

  /** Each lane's share (undefined: it has none), once routed. The packers are done with. */
  shares(now: number, hold: boolean): Array<PackedShare | undefined> {
    const shares = this.#packers.map((packer) => packer.request(now, hold))
    this.#packers.length = 0
    return shares
  }

  /**
   * Merges the lanes' answers into the batch's outcome; `recordAt` finds a dead-lettered
   * record's by its index (a file's lanes send their lines back). Returns the files the lanes
   * hold in an initial load's transactions.
   */
  merge(
    answers: ReadonlyArray<LaneOutcome | undefined>,
    recordAt: (index: number) => SourceRecord | undefined,
  ): number {
    const outcome = this.outcome
    let heldFiles = 0
    for (const answer of answers) {
      if (answer === undefined) continue
      heldFiles += answer.heldFiles
      for (const letter of answer.deadLetters) {
        const record = letter.record ?? recordAt(letter.index)
        if (record === undefined) continue
        const { reason, message } = letter
        this.#letters.push({ order: letter.index, letter: { record, reason, message } })
      }
      this.addEvents(answer.events)
      outcome.documents.rewritten += answer.documents.rewritten
      outcome.documents.unchanged += answer.documents.unchanged
      outcome.documents.removed += answer.documents.removed
      outcome.skipped += answer.skipped
      outcome.latestCommittedAtMs = laterCommit(
        outcome.latestCommittedAtMs,
        answer.latestCommittedAtMs,
      )
    }
    outcome.deadLetters = this.#letters.sort((a, b) => a.order - b.order).map((l) => l.letter)
    return heldFiles
  }
}

const valueBytes = (value: unknown): Buffer | undefined =>
  Buffer.isBuffer(value) ? value : typeof value === 'string' ? Buffer.from(value) : undefined

/** The bytes of a batch of records' values (to size the lanes' buffers). */
export function recordBytes(records: readonly SourceRecord[]): number {
  let bytes = 0
  for (const record of records) bytes += valueBytes(record.value)?.length ?? 0
  return bytes
}

/**
 * Packs records from Kafka (values as bytes): by their bytes' hint where they name their
 * organization, decoded otherwise (values already parsed, as tests and verify's build give them).
 */
export function packRecords(records: readonly SourceRecord[]): PackItems {
  return new RecordItems(records)
}

class RecordItems implements PackItems {
  constructor(readonly records: readonly SourceRecord[]) {}

  each(sink: PackSink): void {
    const { records } = this
    for (let index = 0; index < records.length; index++) {
      const record = records[index]!
      const bytes = valueBytes(record.value)
      const hint = bytes === undefined ? undefined : laneHint(bytes)
      if (hint === undefined || bytes === undefined) {
        sink.decoded(record, index)
        continue
      }
      const { topic, partition } = record
      const origin = { topic, partition, offset: Number(record.offset), lineNumber: 0 }
      sink.hinted({ hint, buf: bytes, start: 0, end: bytes.length, record: origin, index })
    }
  }
}

/**
 * Packs a file's lines: by their bytes' hint where they name their organization, parsed here
 * otherwise (`reader`: a line that is not a record throws a FileSourceError).
 */
export function packLines(batch: LineBatch, reader: LineReader): PackItems {
  return new LineItems(batch, reader)
}

class LineItems implements PackItems {
  constructor(
    readonly batch: LineBatch,
    readonly reader: LineReader,
  ) {}

  each(sink: PackSink): void {
    const { buf, lines } = this.batch
    for (let i = 0; i < lines.length; i += 3) {
      const start = lines[i]!
      const end = lines[i + 1]!
      const lineNumber = lines[i + 2]!
      const hint = laneHint(buf, start, end)
      if (hint !== undefined) {
        const origin = { topic: '', partition: 0, offset: 0, lineNumber }
        sink.hinted({ hint, buf, start, end, record: origin, index: lineNumber })
        continue
      }
      const record = this.reader.record(buf, start, end, lineNumber)
      if (record !== undefined) sink.decoded(record, lineNumber)
    }
  }
}
