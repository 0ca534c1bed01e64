import { describe, expect, it } from 'vitest'
import {
  RESUME_MARGIN_BYTES,
  isDiskFull,
  spaceReturned,
} from '../../../projector/storage/disk-space.ts'
import { LaneFailure } from '../../../projector/lanes/lanes.ts'

describe('a full disk', () => {
  it("is SQLite's SQLITE_FULL or Node's ENOSPC, also as a lane's failure", () => {
    expect(
      isDiskFull(Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' })),
    ).toBe(true)
    expect(
      isDiskFull(Object.assign(new Error('no space left on device'), { code: 'ENOSPC' })),
    ).toBe(true)
    expect(isDiskFull(new LaneFailure(1, 'database or disk is full', 'SQLITE_FULL'))).toBe(true)
    expect(
      isDiskFull(new LaneFailure(1, 'database disk image is malformed', 'SQLITE_CORRUPT')),
    ).toBe(false)
    expect(isDiskFull(new Error('database or disk is full'))).toBe(false)
    expect(isDiskFull(undefined)).toBe(false)
  })

  it('has space again once some grew back since the failure, not before', () => {
    expect(spaceReturned(1_000, 1_000 + RESUME_MARGIN_BYTES - 1)).toBe(false)
    expect(spaceReturned(1_000, 1_000 + RESUME_MARGIN_BYTES)).toBe(true)
    expect(spaceReturned(50_000_000, 10_000)).toBe(false)
  })
})
