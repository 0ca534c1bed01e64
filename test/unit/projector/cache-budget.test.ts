import { describe, expect, it } from 'vitest'
import {
  cacheShares,
  MIN_CACHE_KIB,
  MIN_ORGANIZATION_CACHE_KIB,
  shareStep,
} from '../../../projector/storage/cache-budget.ts'

const MB = 1024 * 1024

describe('cacheShares', () => {
  it('gives control.db a quarter and splits the rest among the organization files', () => {
    expect(cacheShares(128 * MB, 3)).toEqual({ routesKiB: 32 * 1024, organizationKiB: 32 * 1024 })
    // 24 MiB each, rounded down to a step: 2^14.5 KiB.
    expect(cacheShares(128 * MB, 4)).toEqual({ routesKiB: 32 * 1024, organizationKiB: 23_170 })
  })

  it('changes a few times for each doubling of the files open, not at every open', () => {
    // Each change is a pragma for every open file of the lane: changed at every open, 3,000 files
    // would cost millions of them.
    let changes = 0
    let previous = cacheShares(4096 * MB, 1).organizationKiB
    for (let files = 2; files <= 3000; files++) {
      const { organizationKiB } = cacheShares(4096 * MB, files)
      if (organizationKiB !== previous) changes++
      previous = organizationKiB
    }
    expect(changes).toBeLessThanOrEqual(4 * Math.ceil(Math.log2(3000)))
  })

  it('rounds a share down to a step, at most 19% below it', () => {
    for (const kib of [64, 100, 1000, 24_576, 65_535, 65_536, 1e6]) {
      const step = shareStep(kib)
      expect(step).toBeLessThanOrEqual(kib)
      expect(step).toBeGreaterThan(kib / 2 ** 0.25 - 1)
    }
    expect(shareStep(65_536)).toBe(65_536)
  })

  it('stays within the budget as files open, until each file is at its floor', () => {
    for (const files of [1, 2, 7, 20, 48, 256, 1500]) {
      const { routesKiB, organizationKiB } = cacheShares(128 * MB, files)
      expect(routesKiB + organizationKiB * files).toBeLessThanOrEqual(128 * 1024)
    }
    expect(cacheShares(128 * MB, 3000).organizationKiB).toBe(MIN_ORGANIZATION_CACHE_KIB)
  })

  it('never gives control.db less than SQLite default, nor a file less than its floor', () => {
    expect(cacheShares(1 * MB, 0)).toEqual({
      routesKiB: MIN_CACHE_KIB,
      organizationKiB: MIN_ORGANIZATION_CACHE_KIB,
    })
  })
})
