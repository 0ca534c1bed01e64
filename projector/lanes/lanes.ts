// The live projector's applier: organizations applied in parallel, in lanes.
//
// LANES worker threads (lane.ts) each own the organizations assigned to them, in turn as each is
// first seen (lane-hint.ts `LaneAssignment`), and are the only writers of those files. The main
// thread reads records, and for each one finds its organization in its bytes (lane-hint.ts: no
// parsing), writes its route in control.db (a batch's routes in the order of their ids:
// `routeAndPack`), and packs it for the lane that owns the organization; the lanes parse, decode,
// validate and apply. What the bytes do not name (deletes, truncates, control tables, anything
// unusual) the main thread decodes itself, as the single-threaded applier did, and hands over
// decoded. A batch is done when every lane has applied its share: only then does its outcome
// resolve, so a source commits its offsets only past what every lane applied.
//
// Between batches the main thread may take files back from the lanes (`close-files`): the
// document build at catch-up and the swap of a rebuilt file run on the main thread, with the
// lanes idle, through the single-threaded applier (apply.ts), which also keeps control.db.
import { dirname } from 'node:path'
import { Worker } from 'node:worker_threads'
import type { Logger } from 'pino'
import type { OrganizationTable } from '../../schema/events.ts'
import {
  createApplier,
  loadRoundOver,
  type ApplierOptions,
  type BatchOutcome,
  type DeadLetter,
} from './apply.ts'
import { typescriptWorkerSource } from './build-pool.ts'
import { classifyRecord } from '../routing/classify.ts'
import type { ControlEvent, ControlFile } from '../storage/control-file.ts'
import { laterCommit, type SourceRecord } from '../decode/decode.ts'
import type { RefreshStats } from '../documents/index.ts'
import { LaneAssignment, laneHint, type LaneHint } from '../routing/lane-hint.ts'
import {
  ItemKind,
  type LaneAnswer,
  type LaneOptions,
  type LaneOutcome,
  type LaneRequest,
} from './lane-protocol.ts'
import type { OrganizationEvent } from '../storage/organization-file.ts'
import { FileSourceError, LineReader, type LineBatch } from '../decode/file-line.ts'

const laneSource = typescriptWorkerSource(new URL('./lane.ts', import.meta.url))

/** A lane stopped applying: the projector must stop, committing nothing past what all applied. */
export class LaneFailure extends Error {
  override name = 'LaneFailure'
  constructor(
    readonly lane: number,
    message: string,
    /** The error's code in the lane (SQLITE_FULL, ENOSPC...), when it had one. */
    readonly code?: string,
  ) {
    super(`lane ${lane}: ${message}`)
  }
}

export interface LaneApplierOptions extends ApplierOptions {
  lanes: number
  logger: Logger
}

export interface LaneApplier {
  /** Applies records from Kafka (values as bytes); resolves once every lane applied its share. */
  applyBatch(records: readonly SourceRecord[]): Promise<BatchOutcome>
  /** Applies a file's lines; a line that is not a record rejects with a FileSourceError. */
  applyLines(batch: LineBatch): Promise<BatchOutcome>
  commit(): Promise<void>
  markCaughtUp(): Promise<RefreshStats>
  buildInProgress(): Promise<void> | undefined
  stopBuilding(): void
  replaceOrganizationFile(organizationId: string, file: string): Promise<number>
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

/**
 * The buffers batches are packed in, reused: each lane hands a batch's buffer back with its answer
 * (lane.ts). Allocated afresh, each was garbage in the lane that received it until a collection
 * there, and V8 collects for external memory only after tens of MB of it: a million-event load
 * held about 150 MB of dead batch buffers across the threads at its peak (heaptrack).
 */
class BufferPool {
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

interface Pending {
  resolve: (outcome: LaneOutcome | undefined) => void
  reject: (error: Error) => void
}

/** One lane's thread, and the requests it has not answered yet (answered in order). */
class LaneThread {
  readonly #worker: Worker
  readonly #pending = new Map<number, Pending>()
  #seq = 0
  #terminated = false
  failure: LaneFailure | undefined

  constructor(
    readonly lane: number,
    options: LaneOptions,
    buffers: BufferPool,
  ) {
    // A small young generation, as the build workers have (build-pool.ts): V8's default sizes it
    // for throughput, at tens of MB of resident memory per thread for no measurable speed.
    this.#worker = new Worker(laneSource, {
      eval: true,
      workerData: options,
      resourceLimits: { maxYoungGenerationSizeMb: 8 },
    })
    this.#worker.on('message', (answer: LaneAnswer) => {
      const pending = this.#pending.get(answer.seq)
      this.#pending.delete(answer.seq)
      if (answer.ok && answer.buffer !== undefined) buffers.give(answer.buffer)
      if (answer.ok) pending?.resolve(answer.outcome)
      else if (answer.fileSource) pending?.reject(new FileSourceError(answer.message))
      else this.#fail(answer.message, pending, answer.code)
    })
    this.#worker.on('error', (error: Error) => this.#fail(error.message))
    this.#worker.on('exit', (code: number) => this.#fail(`lane thread exited (${code})`))
  }

  #fail(message: string, pending?: Pending, code?: string): void {
    this.failure ??= new LaneFailure(this.lane, message, code)
    pending?.reject(this.failure)
    for (const p of this.#pending.values()) p.reject(this.failure)
    this.#pending.clear()
  }

  request(
    request: DistributiveOmit<LaneRequest, 'seq'>,
    transfer: ArrayBuffer[] = [],
  ): Promise<LaneOutcome | undefined> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    if (this.#terminated) return Promise.reject(new Error(`lane ${this.lane} has stopped`))
    const seq = ++this.#seq
    return new Promise((resolve, reject) => {
      this.#pending.set(seq, { resolve, reject })
      this.#worker.postMessage({ ...request, seq }, transfer)
    })
  }

  async terminate(): Promise<void> {
    this.#terminated = true
    for (const p of this.#pending.values()) p.reject(new Error(`lane ${this.lane} has stopped`))
    this.#pending.clear()
    this.#worker.removeAllListeners()
    await this.#worker.terminate()
  }
}

/**
 * A row's route to write (organizationId given: an upsert) or to read (a key-only delete), and
 * what was found: the organization the row moved from, or the delete's organization.
 */
interface RouteRequest {
  table: OrganizationTable
  id: string
  organizationId: string | undefined
  found: string | undefined
}

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never

/** Where an item's bytes came from: a Kafka record (line number 0), or a file's line. */
interface ItemOrigin {
  topic: string
  partition: number
  offset: number
  lineNumber: number
}

/** Packs an upsert whose organization its bytes named (lane-hint.ts). */
type PackHinted = (
  hint: LaneHint,
  buf: Buffer,
  start: number,
  end: number,
  record: ItemOrigin,
  index: number,
) => void

/** Packs a record the bytes did not route: the main thread decodes it. */
type PackDecoded = (record: SourceRecord, index: number) => void

/** One lane's share of a batch, as it is packed (lane-protocol.ts). */
class LanePacker {
  /** Transferred to the lane, which hands it back (BufferPool). */
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
}

export function createLaneApplier(options: LaneApplierOptions): LaneApplier {
  const { generation, topicPrefix, logger, lanes } = options
  if (options.onlyOrganizations !== undefined) {
    // A rebuild aside keeps some organizations: it runs the single-threaded applier (apply.ts).
    throw new Error('lanes apply every organization; onlyOrganizations is for createApplier')
  }
  const inner = createApplier(options)
  const control = inner.control
  const laneOptions = (lane: number, caughtUp: boolean): LaneOptions => ({
    lane,
    lanes,
    dataDir: dirname(dirname(generation.dir)),
    generationName: generation.name,
    previousGenerationName: options.previousGeneration?.name,
    topicPrefix,
    offsetGuard: options.offsetGuard,
    walCheckpointBytes: options.walCheckpointBytes,
    deferDocumentsUntilCaughtUp: options.deferDocumentsUntilCaughtUp === true,
    caughtUp,
    maxOpenFiles: Math.max(1, Math.ceil((options.maxOpenFiles ?? 64) / lanes)),
    cacheBudgetBytes: options.cacheBudgetBytes,
  })
  const assignment = new LaneAssignment(lanes)
  // Each lane's batches in flight, the next one packed meanwhile, and one to spare.
  const buffers = new BufferPool((FILE_BATCHES_AHEAD + 2) * lanes)
  const startLanes = () =>
    Array.from(
      { length: lanes },
      (_, lane) => new LaneThread(lane, laneOptions(lane, inner.caughtUp), buffers),
    )
  let threads = startLanes()
  /** Batches handed to the lanes and not answered by all of them yet. */
  const inFlight = new Set<Promise<unknown>>()
  let building: Promise<void> | undefined
  let uncommittedEvents = 0
  /** A lane failed while the load held transactions: they were rolled back, nothing may commit. */
  let heldLost = false
  const mainReader = new LineReader()
  const holdsTransactions = () =>
    (options.loadCommitEvents ?? 0) > 0 &&
    options.deferDocumentsUntilCaughtUp === true &&
    !inner.caughtUp

  const failure = () => threads.find((t) => t.failure !== undefined)?.failure

  async function idle(): Promise<void> {
    while (inFlight.size > 0) await Promise.allSettled([...inFlight])
  }

  async function everyLane(request: DistributiveOmit<LaneRequest, 'seq'>): Promise<void> {
    await Promise.all(threads.map((t) => t.request(request)))
  }

  /** Commits control.db first (routes before files, as apply.ts), then every lane's files. */
  async function commitAll(): Promise<void> {
    if (heldLost) throw new Error('a lane failed: what the load held was rolled back')
    const f = failure()
    if (f !== undefined) throw f
    inner.commit()
    await everyLane({ type: 'commit' })
    uncommittedEvents = 0
  }

  async function rollbackAll(): Promise<void> {
    heldLost = true
    control.rollback()
    await Promise.allSettled(threads.map((t) => t.request({ type: 'rollback' })))
  }

  /**
   * Routes and packs a batch, then hands it to the lanes and merges their outcomes. `pack` goes
   * through the batch's items, calling `hinted` for an upsert found in bytes and `decoded` for the
   * rest.
   */
  async function apply(
    count: number,
    bytes: number,
    pack: (hinted: PackHinted, decoded: PackDecoded) => void,
    recordAt: (index: number) => SourceRecord | undefined,
    /** Called once the batch is packed: the lanes' buffers hold copies of what they need. */
    packed?: () => void,
  ): Promise<BatchOutcome> {
    if (building !== undefined) await building
    const f = failure()
    if (f !== undefined) throw f
    const outcome: BatchOutcome = {
      deadLetters: [],
      events: new Map(),
      documents: { rewritten: 0, unchanged: 0, removed: 0 },
      latestCommittedAtMs: undefined,
      skipped: 0,
      committed: true,
    }
    const tally = (table: string, what: string, n = 1) => {
      let byOutcome = outcome.events.get(table)
      if (byOutcome === undefined) outcome.events.set(table, (byOutcome = {}))
      byOutcome[what] = (byOutcome[what] ?? 0) + n
    }
    const packers = threads.map(() => new LanePacker(Math.ceil((bytes * 1.25) / lanes), buffers))
    /** Organizations with events in this batch: a truncate reaches them, file or not yet. */
    const inBatch = new Set<string>()
    const packerOf = (organizationId: string) => {
      inBatch.add(organizationId)
      return packers[assignment.laneOf(organizationId)]!
    }
    const controlEvents: ControlEvent[] = []
    /** The batch's events to pack, in order, once their routes are known (`routeAndPack`). */
    const steps: Array<() => void> = []
    /** The batch's routes: an upsert's (organizationId) or a key-only delete's lookup. */
    const routes: RouteRequest[] = []
    const routeLater = (
      table: OrganizationTable,
      id: string,
      organizationId: string | undefined,
    ): RouteRequest => {
      const request: RouteRequest = { table, id, organizationId, found: undefined }
      routes.push(request)
      return request
    }
    /** Dead letters in the order of their records (index in the batch, or line number). */
    const letters: Array<{ order: number; letter: DeadLetter }> = []

    const hinted: PackHinted = (hint, buf, start, end, record, index) => {
      const idAt = hint.idAt
      const routed = routeLater(hint.table, hint.id, hint.organizationId)
      steps.push(() => {
        const movedFrom = routed.found
        if (movedFrom !== undefined) {
          packerOf(movedFrom).bytes(
            ItemKind.MoveOut,
            buf,
            start,
            end,
            record,
            movedFrom,
            idAt,
            index,
          )
        }
        packerOf(hint.organizationId).bytes(
          ItemKind.Hinted,
          buf,
          start,
          end,
          record,
          hint.organizationId,
          idAt,
          index,
        )
      })
    }
    // What the bytes did not name: decoded here, as apply.ts does.
    const decoded: PackDecoded = (record, index) => {
      const classified = classifyRecord(record, topicPrefix)
      if (classified.kind === 'skipped') {
        outcome.skipped++
        return
      }
      if (classified.kind === 'bad') {
        const { reason, message } = classified
        letters.push({ order: index, letter: { record, reason, message } })
        tally(classified.table, 'dead_lettered')
        return
      }
      outcome.latestCommittedAtMs = laterCommit(
        outcome.latestCommittedAtMs,
        classified.committedAtMs,
      )
      if (classified.kind === 'control') {
        controlEvents.push(classified.event)
        return
      }
      const event = classified.event
      const { change: orgChange, origin } = event
      if (orgChange.kind === 'truncate') {
        // Every organization with a file, and those whose first rows came earlier in this batch.
        steps.push(() => {
          for (const organizationId of new Set([...inner.knownOrganizations(), ...inBatch])) {
            packerOf(organizationId).decoded(ItemKind.Decoded, organizationId, event)
          }
        })
        return
      }
      if (orgChange.kind === 'delete') {
        const routed = routeLater(orgChange.table, orgChange.id, undefined)
        steps.push(() => {
          const organizationId = routed.found
          if (organizationId === undefined) tally(orgChange.table, 'absent')
          else packerOf(organizationId).decoded(ItemKind.Decoded, organizationId, event)
        })
        return
      }
      const organizationId = (orgChange.row as { organization_id: string }).organization_id
      const routed = routeLater(orgChange.table, orgChange.id, organizationId)
      steps.push(() => {
        const movedFrom = routed.found
        if (movedFrom !== undefined) {
          const moved = {
            change: {
              kind: 'delete',
              table: orgChange.table,
              id: orgChange.id,
              position: orgChange.position,
            },
            origin,
          } as OrganizationEvent
          packerOf(movedFrom).decoded(ItemKind.Decoded, movedFrom, moved)
        }
        packerOf(organizationId).decoded(ItemKind.Decoded, organizationId, event)
      })
    }

    /**
     * Routes the batch's rows in the order of their ids, then packs its events in their own
     * order. Random uuids make each route a random B-tree insert; in key order, neighbours share
     * pages (a million routes in batches of 5,000: about a third less time). A row's own routes
     * and lookups keep their order (the sort is stable and routes touch only their row), so
     * every event finds what routing the batch one by one would have found.
     */
    const routeAndPack = () => {
      pack(hinted, decoded)
      routes.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      for (const r of routes) {
        r.found =
          r.organizationId === undefined
            ? control.routeOf(r.table, r.id)
            : control.route(r.table, r.id, r.organizationId)
      }
      for (const step of steps) step()
      packed?.()
      // Garbage as soon as the batch is packed, not once the lanes answer: held by this call until
      // then, they outlived young-generation collections and swelled the old one.
      routes.length = 0
      steps.length = 0
    }

    const hold = holdsTransactions()
    let answers: Array<LaneOutcome | undefined>
    try {
      if (hold) control.begin()
      const changed = control.transaction(() => {
        routeAndPack()
        return control.applyEvents(controlEvents, options.offsetGuard, (table, what) =>
          tally(table, what),
        )
      })
      for (const organizationId of changed.organizations)
        packerOf(organizationId).ensure(organizationId)
      const now = Date.now()
      // Settled, not raced: when one lane fails, the others finish their share first, so what a
      // restart finds is every healthy lane's share applied, never torn by the stop.
      const handed = Promise.allSettled(
        threads.map((thread, lane) => {
          const packer = packers[lane]!
          if (packer.empty) {
            buffers.give(packer.buf.buffer as ArrayBuffer)
            return Promise.resolve(undefined)
          }
          const buf = new Uint8Array(packer.buf.buffer, packer.buf.byteOffset, packer.used)
          const meta = Float64Array.from(packer.meta)
          return thread.request(
            {
              type: 'batch',
              buf,
              meta,
              strings: packer.strings,
              events: packer.events,
              now,
              hold,
            },
            [packer.buf.buffer as ArrayBuffer, meta.buffer],
          )
        }),
      )
      inFlight.add(handed)
      packers.length = 0
      try {
        const settled = await handed
        const failed = settled.find((r) => r.status === 'rejected')
        if (failed !== undefined) throw failed.reason
        answers = settled.map((r) => (r.status === 'fulfilled' ? r.value : undefined))
      } finally {
        inFlight.delete(handed)
      }
    } catch (error) {
      // A line that is not a record ends a file run as before lanes: what came before it stays.
      if (hold && !(error instanceof FileSourceError)) await rollbackAll()
      if (error instanceof LaneFailure) {
        logger.error(
          { lane: error.lane, error: error.message },
          'a lane failed: the projector stops, committing nothing past what every lane applied',
        )
      }
      throw error
    }
    /** Files the lanes hold in the load's transactions (`loadRoundOver`). */
    let heldFiles = 0
    for (const answer of answers) {
      if (answer === undefined) continue
      heldFiles += answer.heldFiles
      for (const letter of answer.deadLetters) {
        const record = letter.record ?? recordAt(letter.index)
        if (record !== undefined) {
          letters.push({
            order: letter.index,
            letter: { record, reason: letter.reason, message: letter.message },
          })
        }
      }
      for (const [table, byOutcome] of Object.entries(answer.events)) {
        for (const [what, n] of Object.entries(byOutcome)) tally(table, what, n)
      }
      outcome.documents.rewritten += answer.documents.rewritten
      outcome.documents.unchanged += answer.documents.unchanged
      outcome.documents.removed += answer.documents.removed
      outcome.skipped += answer.skipped
      outcome.latestCommittedAtMs = laterCommit(
        outcome.latestCommittedAtMs,
        answer.latestCommittedAtMs,
      )
    }
    outcome.deadLetters = letters.sort((a, b) => a.order - b.order).map((l) => l.letter)
    if (hold) {
      uncommittedEvents += count
      if (!loadRoundOver(uncommittedEvents, heldFiles, options)) {
        outcome.committed = false
      } else await commitAll()
    } else control.boundWal(options.walCheckpointBytes)
    return outcome
  }

  const valueBytes = (value: unknown): Buffer | undefined =>
    Buffer.isBuffer(value) ? value : typeof value === 'string' ? Buffer.from(value) : undefined

  return {
    control,

    applyBatch(records) {
      let bytes = 0
      for (const record of records) bytes += valueBytes(record.value)?.length ?? 0
      return apply(
        records.length,
        bytes,
        (hinted, decoded) => {
          records.forEach((record, index) => {
            const bytes = valueBytes(record.value)
            const hint = bytes === undefined ? undefined : laneHint(bytes)
            if (hint === undefined || bytes === undefined) return decoded(record, index)
            hinted(
              hint,
              bytes,
              0,
              bytes.length,
              {
                topic: record.topic,
                partition: record.partition,
                offset: Number(record.offset),
                lineNumber: 0,
              },
              index,
            )
          })
        },
        (index) => records[index],
      )
    },

    applyLines(batch) {
      const { buf, lines } = batch
      return apply(
        lines.length / 3,
        buf.length,
        (hinted, decoded) => {
          for (let i = 0; i < lines.length; i += 3) {
            const start = lines[i]!
            const end = lines[i + 1]!
            const lineNumber = lines[i + 2]!
            const hint = laneHint(buf, start, end)
            if (hint !== undefined) {
              hinted(
                hint,
                buf,
                start,
                end,
                { topic: '', partition: 0, offset: 0, lineNumber },
                lineNumber,
              )
              continue
            }
            const record = mainReader.record(buf, start, end, lineNumber)
            if (record !== undefined) decoded(record, lineNumber)
          }
        },
        () => undefined,
        () => batch.release(),
      )
    },

    commit: async () => {
      await idle()
      await commitAll()
    },

    async markCaughtUp() {
      if (inner.caughtUp) return { rewritten: 0, unchanged: 0, removed: 0 }
      let built: RefreshStats = { rewritten: 0, unchanged: 0, removed: 0 }
      // The build runs here and on build workers (apply.ts), on files the lanes let go of. The
      // lanes themselves go meanwhile: the build is where memory peaks, and their heaps would
      // sit idle through it. New ones start once it is done.
      building = (async () => {
        await idle()
        await everyLane({ type: 'close' })
        await Promise.all(threads.map((t) => t.terminate()))
        try {
          built = await inner.markCaughtUp()
          inner.closeFiles()
        } finally {
          threads = startLanes()
        }
      })()
      try {
        await building
      } finally {
        building = undefined
      }
      return built
    },

    buildInProgress: () => building ?? inner.buildInProgress(),

    stopBuilding: () => inner.stopBuilding(),

    async replaceOrganizationFile(organizationId, file) {
      await idle()
      const owner = threads[assignment.laneOf(organizationId)]!
      await owner.request({ type: 'close-files', organizations: [organizationId] })
      const restamped = inner.replaceOrganizationFile(organizationId, file)
      inner.closeFiles()
      return restamped
    },

    knownOrganizations: () => inner.knownOrganizations(),

    async retirePrevious() {
      await idle()
      await everyLane({ type: 'retire-prior' })
    },

    get caughtUp() {
      return inner.caughtUp
    },

    async close() {
      await idle()
      inner.stopBuilding()
      if (failure() === undefined) {
        await Promise.allSettled(threads.map((t) => t.request({ type: 'close' })))
      }
      await Promise.all(threads.map((t) => t.terminate()))
      inner.close()
    },
  }
}
