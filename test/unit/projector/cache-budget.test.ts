import { describe, expect, it } from 'vitest'
import {
  cacheShares,
  MIN_CACHE_KIB,
  MIN_ORGANIZATION_CACHE_KIB,
} from '../../../projector/storage/cache-budget.ts'

const MB = 1024 * 1024

describe('cacheShares', () => {
  it('gives control.db a quarter and splits the rest among the organization files', () => {
    expect(cacheShares(128 * MB, 4)).toEqual({ controlKiB: 32 * 1024, organizationKiB: 24 * 1024 })
  })

  it('stays within the budget as files open, until each file is at its floor', () => {
    for (const files of [1, 2, 7, 20, 48, 256, 1500]) {
      const { controlKiB, organizationKiB } = cacheShares(128 * MB, files)
      expect(controlKiB + organizationKiB * files).toBeLessThanOrEqual(128 * 1024)
    }
    expect(cacheShares(128 * MB, 3000).organizationKiB).toBe(MIN_ORGANIZATION_CACHE_KIB)
  })

  it('never gives control.db less than SQLite default, nor a file less than its floor', () => {
    expect(cacheShares(1 * MB, 0)).toEqual({
      controlKiB: MIN_CACHE_KIB,
      organizationKiB: MIN_ORGANIZATION_CACHE_KIB,
    })
  })
})
