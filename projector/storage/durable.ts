// Making what was written durable, many files at once. The lanes sync the logs a batch wrote
// (wal.ts); a rebuild syncs its whole generation before publishing it (`syncGeneration`), and a
// per-organization rebuild the folder it moved its files into before handing them over.
import { readdirSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import type { Generation } from '../../src/layout.ts'

/**
 * How many files `syncFiles` has open at once: more than libuv's threads (4) keep them busy, and a
 * bound keeps a batch over thousands of files from spending the descriptors OPEN_FILES_MAX leaves
 * to everything else (src/descriptors.ts).
 */
const SYNCS_IN_FLIGHT = 32

/**
 * Syncs each file's data, several at once: fsyncs issued together on libuv's threads share the
 * filesystem's journal commits, where one after another each paid its own
 * (docs/many-organizations.md has the figures). A file that is gone is skipped: a log
 * checkpointed away was synced into its file first.
 */
export async function syncFiles(paths: readonly string[]): Promise<number> {
  let next = 0
  let synced = 0
  const syncing = async (): Promise<void> => {
    while (next < paths.length) if (await syncOne(paths[next++]!, 'data')) synced++
  }
  await Promise.all(Array.from({ length: Math.min(SYNCS_IN_FLIGHT, paths.length) }, syncing))
  return synced
}

/** Makes a folder's entries durable: the files created, renamed or removed in it. */
export async function syncDirectory(path: string): Promise<void> {
  await syncOne(path, 'directory')
}

/** False: the file is gone. */
async function syncOne(path: string, what: 'data' | 'directory'): Promise<boolean> {
  let handle
  try {
    handle = await open(path, 'r')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw error
  }
  try {
    // A folder's entries (files created, renamed) need a full fsync; a file's content, its data.
    if (what === 'directory') await handle.sync()
    else await handle.datasync()
  } finally {
    await handle.close()
  }
  return true
}

/**
 * Makes a rebuild's generation durable before CURRENT names it. Its deferred files committed
 * without a sync each (src/sqlite.ts `atPublish`), and every file it created is a new entry in a
 * folder: each database file and log, control.db and the routing index, then the folders, are
 * synced. After this a power cut leaves the generation as the api is about to serve it. Returns
 * how many files (not folders) it synced.
 */
export async function syncGeneration(generation: Generation): Promise<number> {
  const files = readdirSync(generation.organizationsDir)
    .filter((name) => name.endsWith('.db') || name.endsWith('.db-wal'))
    .map((name) => join(generation.organizationsDir, name))
  for (const path of generation.indexPaths) files.push(path, `${path}-wal`)
  const synced = await syncFiles(files)
  await syncDirectory(generation.organizationsDir)
  await syncDirectory(generation.dir)
  await syncDirectory(join(generation.dir, '..'))
  return synced
}
