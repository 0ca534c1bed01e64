import { closeSync, fdatasyncSync, openSync, statSync } from 'node:fs'
import type { SqliteDatabase } from '../../src/sqlite.ts'
import { syncFiles } from './durable.ts'

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

/**
 * Makes a write-ahead log's committed frames durable: what an organization file's commits
 * (synchronous=NORMAL, src/sqlite.ts) leave to their writer (`checkpointedAway`: one gone).
 */
export function syncWal(walPath: string): void {
  let fd: number
  try {
    fd = openSync(walPath, 'r')
  } catch (error) {
    if (checkpointedAway(error)) return
    throw error
  }
  try {
    fdatasyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** `syncWal` for the logs a batch wrote, several at once (durable.ts). */
export async function syncWals(walPaths: readonly string[]): Promise<void> {
  await syncFiles(walPaths)
}

/**
 * A log that is gone was checkpointed into its file, and a checkpoint syncs both before it
 * removes the log: nothing is left to sync. Any other failure to open it is the caller's.
 */
function checkpointedAway(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT'
}

/**
 * Whether a file's write-ahead log holds commits not yet synced or handed over to whoever syncs
 * it before the batch is reported applied (`takeUnsyncedWal`).
 */
export function unsyncedLog(path: string) {
  const walPath = `${path}-wal`
  let unsynced = false
  return {
    appended: (): void => {
      unsynced = true
    },
    sync: (): void => {
      if (!unsynced) return
      syncWal(walPath)
      unsynced = false
    },
    take: (): string | undefined => {
      if (!unsynced) return undefined
      unsynced = false
      return walPath
    },
  }
}
