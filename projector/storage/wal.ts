import { statSync } from 'node:fs'
import type { SqliteDatabase } from '../../src/sqlite.ts'

/**
 * Keeps a file's write-ahead log bounded. With the api reading constantly, SQLite's automatic
 * (PASSIVE) checkpoints never find a moment to reset the WAL, which was seen growing to 32 MB in
 * 14 s. Once it passes `maxBytes`, a TRUNCATE checkpoint waits (busy_timeout) for readers of old
 * snapshots and resets it to zero bytes. Returns true if it checkpointed. Inside a transaction
 * (an initial load holds one across batches) it waits for the commit: the log cannot reset then.
 */
export function boundWal(db: SqliteDatabase, path: string, maxBytes: number): boolean {
  if (db.inTransaction) return false
  let size: number
  try {
    size = statSync(`${path}-wal`).size
  } catch {
    return false
  }
  if (size <= maxBytes) return false
  db.pragma('wal_checkpoint(TRUNCATE)')
  return true
}
