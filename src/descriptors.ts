// Defaults that follow the machine: how many organization files a process may keep open, from its
// limits on file descriptors and on memory, and how much of that memory the api's page cache takes.
import { readFileSync } from 'node:fs'
import { totalmem } from 'node:os'

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
 * What one open organization file costs a process, about: its SQLite connection (68 KB), the
 * schema parsed at its first statement (156 KB), the statements prepared on it (about 10 KB each,
 * 15-30 of them) and its page cache's share (64 KB and up), measured on 1,000 files of a
 * 3,000-organization load (docs/many-organizations.md).
 */
export const OPEN_FILE_BYTES = 512 * 1024

/**
 * A cgroup's memory limit as its file says it (v2 `memory.max`, v1 `memory.limit_in_bytes`), or
 * undefined where it sets none ("max", or v1's page-rounded 2^63). Pure.
 */
export function parseMemoryLimit(text: string): number | undefined {
  const value = text.trim()
  if (!/^\d+$/.test(value)) return undefined
  const bytes = Number(value)
  return bytes >= 2 ** 62 ? undefined : bytes
}

/** The memory this process may use: the machine's, or its container's limit when lower. */
export function memoryLimit(): number {
  let limit = totalmem()
  for (const path of ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes']) {
    try {
      limit = Math.min(limit, parseMemoryLimit(readFileSync(path, 'utf8')) ?? limit)
    } catch {
      // Not this cgroup version, or no cgroup: the machine's memory stands.
    }
  }
  return limit
}

/**
 * OPEN_FILES_MAX's default. An open organization file holds up to three descriptors (the file, its
 * WAL and the WAL's index), and one handle at a time per process (the projector's lanes close
 * theirs while its main thread builds documents): a quarter of the limit keeps a quarter of it for
 * sockets, control.db and the rest. A fixed 256 made thousands of small organizations reopen
 * their files on every batch in the projector and on most requests in the api. And at most a
 * quarter of `memoryBytes` in open files (`OPEN_FILE_BYTES` each): a container of 2 GB keeps 1,024
 * open where its descriptors alone would allow 5,000, which would need 2.5 GB. Without a known
 * descriptor limit, 256; never fewer than 64, never more than 8192.
 */
export function defaultOpenFilesMax(limit: number | undefined, memoryBytes?: number): number {
  const byDescriptors = limit === undefined ? 256 : Math.floor(limit / 4)
  const byMemory =
    memoryBytes === undefined ? Infinity : Math.floor(memoryBytes / 4 / OPEN_FILE_BYTES)
  return Math.min(8192, Math.max(64, Math.min(byDescriptors, byMemory)))
}

const MiB = 1024 * 1024

/**
 * PAGE_CACHE_MB's default, in bytes: a thirty-second of `memoryBytes`, at least 64 MB and at most
 * 1 GB. The pages worth keeping are each served organization's first pages (a first page of 20
 * providers is about 50 KB): a fixed 64 MB held 1,300 of them, so with 3,000 organizations the
 * first-page walks evicted each other and were built again from SQLite, which doubled the p99 at
 * half saturation (docs/many-organizations.md). The bodies are counted in full, so this bounds the
 * cache's share of memory; the open files' own share (above) is at most a quarter.
 */
export function defaultPageCacheBytes(memoryBytes: number): number {
  return Math.min(1024 * MiB, Math.max(64 * MiB, Math.floor(memoryBytes / 32 / MiB) * MiB))
}
