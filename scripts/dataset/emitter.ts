// Turns rows into Kafka records the way Debezium would write them: per-topic offsets, snapshot
// markers, transactions with increasing LSNs, delete + tombstone pairs.
import {
  type Encoding,
  type Op,
  type Row,
  type TableCodec,
  type TableName,
  TABLE_NAMES,
  envelope,
  sequenceJson,
  sourceMiddle,
  sourceTail,
  tableCodec,
} from './debezium.ts'
import { Rng } from './prng.ts'

/** One record, pre-serialized in parts: the writer copies the constant parts as bytes. */
export interface RecordParts {
  readonly codec: TableCodec
  readonly offset: number
  readonly id: string
  /** The value's payload JSON; null for a tombstone. */
  readonly payload: string | null
  readonly op: Op | 'tombstone'
}

export function recordLine(parts: RecordParts): string {
  const { codec } = parts
  const head = codec.linePrefix + parts.offset + '"' + codec.keyPrefix + parts.id + codec.keySuffix
  return parts.payload === null
    ? head + ',"value":null}'
    : head + codec.valuePrefix + parts.payload + codec.valueSuffix
}

interface Pending {
  readonly table: TableName
  readonly id: string
  readonly after: string
  readonly readUs: number
}

interface TxEvent {
  readonly table: TableName
  readonly op: Op
  readonly id: string
  readonly before: string
  readonly after: string
  readonly lsn: number
  readonly sequence: string
}

const SNAPSHOT_MARKERS = [
  'first',
  'first_in_data_collection',
  'true',
  'last_in_data_collection',
  'last',
] as const
export type SnapshotMarker = (typeof SNAPSHOT_MARKERS)[number]

export class Emitter {
  readonly codecs: Record<TableName, TableCodec>
  private readonly offsets = new Map<TableName, number>()
  private readonly seenInSnapshot = new Set<TableName>()
  private emittedSnapshot = 0
  private readonly clockRng: Rng
  private readUs: number
  private readonly snapshotLsn: number
  private readonly snapshotTxId: number
  /** Constant parts of snapshot `source` blocks, by marker and by table. */
  private readonly snapshotMiddles: Record<SnapshotMarker, string>
  private readonly snapshotTails: Record<TableName, string>
  private lsn: number
  /** LSN of the current transaction's first change; null before the first commit streamed. */
  private txStartLsn: number | null = null
  private streamedCommits = 0
  private txId: number
  /** Commit time of the current (or last) transaction. */
  clockUs: number
  /** The connector's clock (the envelope's ts_*): never goes back. */
  private processedUs = 0
  private tx: TxEvent[] = []
  /** Records ready to hand out, in order. */
  private out: RecordParts[] = []
  /** The latest snapshot read of the current section, held until its marker is known. */
  private pending: Pending | undefined

  /**
   * `txGapUs`: mean time between streamed transactions (the generator sizes it so the stream
   * ends before `now`).
   */
  constructor(
    prefix: string,
    seed: number,
    snapshotUs: number,
    private readonly txGapUs = 200_000,
    encoding: Encoding = { schemas: true },
  ) {
    this.codecs = Object.fromEntries(
      TABLE_NAMES.map((t) => [t, tableCodec(prefix, t, encoding)]),
    ) as Record<TableName, TableCodec>
    this.clockRng = new Rng(seed, 0xc10c)
    this.readUs = snapshotUs
    this.snapshotLsn = 24_000_000 + this.clockRng.int(8_000_000) * 8
    this.snapshotTxId = 700 + this.clockRng.int(300)
    const sequence = sequenceJson(null, this.snapshotLsn)
    this.snapshotMiddles = Object.fromEntries(
      SNAPSHOT_MARKERS.map((m) => [m, sourceMiddle(m, sequence)]),
    ) as Record<SnapshotMarker, string>
    this.snapshotTails = Object.fromEntries(
      TABLE_NAMES.map((t) => [t, sourceTail(t, this.snapshotTxId, this.snapshotLsn)]),
    ) as Record<TableName, string>
    this.lsn = this.snapshotLsn + 4096
    this.txId = this.snapshotTxId + 1
    this.clockUs = snapshotUs
  }

  private nextOffset(table: TableName): number {
    const offset = this.offsets.get(table) ?? 0
    this.offsets.set(table, offset + 1)
    return offset
  }

  get buffered(): number {
    return this.out.length
  }

  /** Hands out the records made so far. */
  drain(): RecordParts[] {
    const out = this.out
    this.out = []
    return out
  }

  // ---- snapshot -------------------------------------------------------------------------------

  /**
   * A snapshot read. Each section (a run of reads of one table) holds its latest read back until
   * the next one, so `endSection` can give the section's last record its marker.
   */
  read(table: TableName, row: Row): void {
    if (this.pending !== undefined) this.out.push(this.snapshotRecord(this.pending, false, false))
    // Debezium reads a few thousand rows per millisecond; the clock creeps accordingly.
    this.readUs += 1 + (this.emittedSnapshot & 3)
    const after = this.codecs[table].serializeRow(row)
    this.pending = { table, id: row.id as string, after, readUs: this.readUs }
  }

  /** Closes a section: says whether its last read is its table's last, or the snapshot's. */
  endSection(lastOfTable: boolean, lastOfSnapshot: boolean): void {
    if (this.pending !== undefined) {
      this.out.push(this.snapshotRecord(this.pending, lastOfTable, lastOfSnapshot))
    }
    this.pending = undefined
  }

  /**
   * Markers as Debezium 3 writes them: `first` on the snapshot's first record,
   * `first_in_data_collection` / `last_in_data_collection` at each table's ends, `last` on the
   * snapshot's last record, `true` elsewhere.
   */
  private snapshotRecord(
    pending: Pending,
    lastOfTable: boolean,
    lastOfSnapshot: boolean,
  ): RecordParts {
    let marker: SnapshotMarker
    if (lastOfSnapshot) marker = 'last'
    else if (lastOfTable) marker = 'last_in_data_collection'
    else if (this.emittedSnapshot === 0) marker = 'first'
    else if (!this.seenInSnapshot.has(pending.table)) marker = 'first_in_data_collection'
    else marker = 'true'
    this.seenInSnapshot.add(pending.table)
    this.emittedSnapshot++
    const codec = this.codecs[pending.table]
    const offset = this.nextOffset(pending.table)
    const source = codec.source(
      pending.readUs,
      this.snapshotMiddles[marker],
      this.snapshotTails[pending.table],
    )
    const processedUs = this.processed(pending.readUs + 40_000, 3)
    return {
      codec,
      offset,
      id: pending.id,
      payload: envelope('r', 'null', pending.after, source, processedUs, offset % 1000),
      op: 'r',
    }
  }

  /** When the connector handles an event: not before `earliest`, and after the previous one. */
  private processed(earliestUs: number, stepUs: number): number {
    this.processedUs = Math.max(this.processedUs + stepUs, earliestUs)
    return this.processedUs
  }

  /** Streaming starts a little after the snapshot's last read. */
  startStreaming(): void {
    this.clockUs = Math.max(this.clockUs, this.readUs) + 5_000_000
  }

  // ---- streaming ------------------------------------------------------------------------------

  begin(): number {
    this.tx = []
    this.txStartLsn = null
    this.clockUs += 1 + this.clockRng.int(2 * this.txGapUs)
    this.txId += 1 + this.clockRng.int(3)
    return this.clockUs
  }

  private walRecord(table: TableName, op: Op, id: string, before: string, after: string): void {
    this.lsn += 40 + (((after.length >> 1) + 7) & ~7)
    this.txStartLsn ??= this.lsn
    // As captured from Debezium 3: [where the transaction started, this change], with null
    // in place of the first for the first transaction streamed.
    const sequence = sequenceJson(this.streamedCommits === 0 ? null : this.txStartLsn, this.lsn)
    this.tx.push({ table, op, id, before, after, lsn: this.lsn, sequence })
  }

  /** Returns the row's JSON as the event carries it. */
  insert(table: TableName, row: Row): string {
    const after = this.codecs[table].serializeRow(row)
    this.walRecord(table, 'c', row.id as string, 'null', after)
    return after
  }

  /** REPLICA IDENTITY DEFAULT: an update's before-image is null unless the key changed. */
  update(table: TableName, row: Row): string {
    const after = this.codecs[table].serializeRow(row)
    this.walRecord(table, 'u', row.id as string, 'null', after)
    return after
  }

  delete(table: TableName, id: string): void {
    this.walRecord(table, 'd', id, this.codecs[table].deleteBefore(id), 'null')
  }

  /**
   * Commits the transaction: its records join the output in emission order. `childrenFirst` moves the
   * transaction's first record (its parent row) behind the rest, as consumers reading topics
   * independently may see it; only when no other record shares its topic, so every topic stays
   * in LSN order.
   */
  commit(childrenFirst = false): void {
    const events = this.tx
    this.tx = []
    if (childrenFirst && events.length > 1) {
      const [head] = events
      if (head !== undefined && events.every((e, n) => n === 0 || e.table !== head.table)) {
        events.push(events.shift()!)
      }
    }
    this.lsn += 48
    this.streamedCommits++
    const out = this.out
    for (const event of events) {
      const codec = this.codecs[event.table]
      const offset = this.nextOffset(event.table)
      const source = codec.source(
        this.clockUs,
        sourceMiddle('false', event.sequence),
        sourceTail(event.table, this.txId, event.lsn),
      )
      const processedUs = this.processed(this.clockUs + 30_000 + this.clockRng.int(300_000), 50)
      out.push({
        codec,
        offset,
        id: event.id,
        payload: envelope(event.op, event.before, event.after, source, processedUs, offset % 1000),
        op: event.op,
      })
      // Debezium follows each delete with a tombstone so log compaction can drop the key.
      if (event.op === 'd') {
        out.push({
          codec,
          offset: this.nextOffset(event.table),
          id: event.id,
          payload: null,
          op: 'tombstone',
        })
      }
    }
  }
}
