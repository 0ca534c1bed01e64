// OPEN_FILES_MAX's default follows the process's limits on open files and on memory.
import { totalmem } from 'node:os'
import { describe, expect, it } from 'vitest'
import {
  defaultOpenFilesMax,
  defaultPageCacheBytes,
  memoryLimit,
  parseMemoryLimit,
  parseOpenFileLimit,
} from '../../src/descriptors.ts'

const limits = (soft: string, hard: string) =>
  [
    'Limit                     Soft Limit           Hard Limit           Units     ',
    'Max cpu time              unlimited            unlimited            seconds   ',
    `Max open files            ${soft.padEnd(21)}${hard.padEnd(21)}files     `,
    'Max locked memory         8388608              8388608              bytes     ',
  ].join('\n')

describe('parseOpenFileLimit', () => {
  it('reads the soft limit', () => {
    expect(parseOpenFileLimit(limits('20000', '1048576'))).toBe(20_000)
  })

  it('reads unlimited as no limit, and a missing line as unknown', () => {
    expect(parseOpenFileLimit(limits('unlimited', 'unlimited'))).toBe(Number.MAX_SAFE_INTEGER)
    expect(parseOpenFileLimit('Max cpu time  unlimited  unlimited  seconds')).toBeUndefined()
  })
})

describe('defaultOpenFilesMax', () => {
  it('keeps a quarter of the descriptors for files, at least 64 and at most 8192', () => {
    expect(defaultOpenFilesMax(20_000)).toBe(5_000)
    expect(defaultOpenFilesMax(1_024)).toBe(256)
    expect(defaultOpenFilesMax(100)).toBe(64)
    expect(defaultOpenFilesMax(1_048_576)).toBe(8_192)
  })

  it('keeps 256 where the limit is unknown', () => {
    expect(defaultOpenFilesMax(undefined)).toBe(256)
  })
})

describe('defaultPageCacheBytes', () => {
  const MiB = 1024 ** 2
  it('takes a thirty-second of the memory, at least 64 MB and at most 1 GB', () => {
    expect(defaultPageCacheBytes(24 * 1024 * MiB)).toBe(768 * MiB)
    expect(defaultPageCacheBytes(4 * 1024 * MiB)).toBe(128 * MiB)
    expect(defaultPageCacheBytes(2 * 1024 * MiB)).toBe(64 * MiB)
    expect(defaultPageCacheBytes(512 * MiB)).toBe(64 * MiB)
    expect(defaultPageCacheBytes(256 * 1024 * MiB)).toBe(1024 * MiB)
  })
})

describe('the memory bound on open files', () => {
  const GiB = 1024 ** 3
  it('keeps at most a quarter of the memory in open files, half a MB each', () => {
    expect(defaultOpenFilesMax(20_000, 2 * GiB)).toBe(1_024)
    expect(defaultOpenFilesMax(20_000, 24 * GiB)).toBe(5_000) // the descriptors bind first
    expect(defaultOpenFilesMax(undefined, 64 * GiB)).toBe(256)
    expect(defaultOpenFilesMax(20_000, 64 * 1024 ** 2)).toBe(64)
  })

  it("reads a cgroup's limit, and none where it sets none", () => {
    expect(parseMemoryLimit('2147483648\n')).toBe(2 * GiB)
    expect(parseMemoryLimit('max\n')).toBeUndefined() // cgroup v2, no limit
    expect(parseMemoryLimit('9223372036854771712\n')).toBeUndefined() // cgroup v1, no limit
    expect(parseMemoryLimit('')).toBeUndefined()
  })

  it("is this machine's memory or less", () => {
    expect(memoryLimit()).toBeGreaterThan(0)
    expect(memoryLimit()).toBeLessThanOrEqual(totalmem())
  })
})
