// How many organization files a process may keep open, from its limit on file descriptors.
import { readFileSync } from 'node:fs'

/**
 * The soft limit on open files in Linux's /proc/self/limits (Node raises it to the hard limit as
 * it starts), or undefined where that file says nothing. Pure.
 */
export function parseOpenFileLimit(limits: string): number | undefined {
  const match = /^Max open files\s+(\d+|unlimited)\s/m.exec(limits)
  if (match === null) return undefined
  return match[1] === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(match[1])
}

/** This process's limit on open files; undefined off Linux. */
export function openFileLimit(): number | undefined {
  try {
    return parseOpenFileLimit(readFileSync('/proc/self/limits', 'utf8'))
  } catch {
    return undefined
  }
}

/**
 * OPEN_FILES_MAX's default. An open organization file holds up to three descriptors (the file, its
 * WAL and the WAL's index), and one handle at a time per process (the projector's lanes close
 * theirs while its main thread builds documents): a quarter of the limit keeps a quarter of it for
 * sockets, control.db and the rest. A fixed 256 made thousands of small organizations reopen
 * their files on every batch in the projector and on most requests in the api. Without a known
 * limit, 256; never more than 8192 (memory: about 0.1 MB each besides the page cache, see
 * projector/storage/cache-budget.ts).
 */
export function defaultOpenFilesMax(limit: number | undefined): number {
  if (limit === undefined) return 256
  return Math.min(8192, Math.max(64, Math.floor(limit / 4)))
}
