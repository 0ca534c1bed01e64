// A PostgreSQL row as the change Debezium's snapshot would send for it: a read (`op: r`) whose
// `after` holds the row in Debezium's encoding. `verify` feeds these to the projector's own
// applier, so the documents it compares are built by exactly the code that built the replica's,
// from the same decoded values: nothing of the document SQL or the column decoding is repeated.
//
// source.ts already asks PostgreSQL for Debezium's text forms where pg's defaults differ
// (timestamptz as ISO 8601 UTC, jsonb as its text, date as 'YYYY-MM-DD', which the decoder takes
// as well as Debezium's days since the epoch, int8 as a number); arrays of text arrive as arrays.
import type { SourceRecord } from '../decode/decode.ts'

export interface SnapshotPosition {
  /** The snapshot's WAL position: Debezium gives its snapshot reads the slot's position. */
  lsn: number
  tsMs: number
}

/** The change record of one row read in the snapshot. */
export function snapshotRecord(
  topicPrefix: string,
  table: string,
  row: Record<string, unknown>,
  position: SnapshotPosition,
  offset: number,
): SourceRecord {
  // A plain object (pg's rows may not be), as the decoder's fast path wants a JSON-like value.
  const after: Record<string, unknown> = {}
  for (const key of Object.keys(row)) after[key] = row[key]
  return {
    topic: `${topicPrefix}.public.${table}`,
    partition: 0,
    offset: String(offset),
    key: null,
    value: {
      op: 'r',
      before: null,
      after,
      source: {
        table,
        schema: 'public',
        lsn: position.lsn,
        ts_ms: position.tsMs,
        snapshot: 'true',
      },
      ts_ms: position.tsMs,
    },
  }
}
