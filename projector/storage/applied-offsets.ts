// The Kafka position a file has applied, per topic partition, kept in the file itself
// (`applied_offsets`) and written in the same transaction as the rows: a batch redelivered after
// a crash finds its records at or below the position and skips them, so each change takes effect
// once, whatever the source's committed offsets say. Organization files and control.db both keep
// one.
import type { SqliteDatabase } from '../../src/sqlite.ts'
import type { ApplyOutcome } from './mirror.ts'

export interface Origin {
  topic: string
  partition: number
  offset: number
}

export interface AppliedOffsets {
  /** Whether `origin` is at or below what the file has applied: a duplicate to skip. */
  applied(origin: Origin): boolean
  /** Records the batch's last origins (inside its transaction), as they apply. */
  record(origins: ReadonlyMap<string, Origin>): void
  /** Reads the positions back from the file, after a rollback undid some. */
  readBack(): void
}

/** The key `origins` maps are kept under: one per topic partition. */
export function partitionKey(origin: Origin): string {
  return `${origin.topic}\u0000${origin.partition}`
}

export function appliedOffsets(db: SqliteDatabase): AppliedOffsets {
  const read = db.prepare<[], Origin>('SELECT topic, partition, offset FROM applied_offsets')
  const write = db.prepare<[string, number, number]>(
    `INSERT INTO applied_offsets (topic, partition, offset) VALUES (?, ?, ?)
     ON CONFLICT (topic, partition) DO UPDATE SET offset = excluded.offset`,
  )
  const positions = new Map<string, number>()
  function readBack(): void {
    positions.clear()
    for (const row of read.all()) positions.set(partitionKey(row), row.offset)
  }
  readBack()
  return {
    applied(origin) {
      const at = positions.get(partitionKey(origin))
      return at !== undefined && origin.offset <= at
    },
    record(origins) {
      for (const [key, origin] of origins) {
        write.run(origin.topic, origin.partition, origin.offset)
        positions.set(key, origin.offset)
      }
    },
    readBack,
  }
}

/** Counts one event's outcome, by source table. */
export type Tally = (table: string, outcome: ApplyOutcome | 'duplicate') => void

/**
 * Applies each event not yet applied (with `guard`: a replayed file source applies everything)
 * and records the batch's positions, inside the caller's transaction.
 */
export function applyOnce<E extends { origin: Origin; change: { table: string } }>(
  events: readonly E[],
  offsets: AppliedOffsets,
  guard: boolean,
  tally: Tally,
  apply: (event: E) => ApplyOutcome,
): void {
  const origins = new Map<string, Origin>()
  for (const event of events) {
    if (guard) {
      if (offsets.applied(event.origin)) {
        tally(event.change.table, 'duplicate')
        continue
      }
      origins.set(partitionKey(event.origin), event.origin)
    }
    tally(event.change.table, apply(event))
  }
  offsets.record(origins)
}
