import { describe, expect, it } from 'vitest'
import { supersedes } from '../../../projector/storage/mirror.ts'
import { nextStamp } from '../../../projector/storage/stamp.ts'
import { coalesce } from '../../../projector/storage/coalesce.ts'

describe('supersedes (the older-never-wins guard)', () => {
  it('orders versions of a row by source position', () => {
    expect(supersedes({ lsn: 10, snapshot: false }, { lsn: 9, snapshot: false })).toBe(true)
    expect(supersedes({ lsn: 9, snapshot: false }, { lsn: 10, snapshot: false })).toBe(false)
  })
  it('at an equal position, lets a streamed change win over a snapshot read, never the reverse', () => {
    expect(supersedes({ lsn: 5, snapshot: false }, { lsn: 5, snapshot: true })).toBe(true)
    expect(supersedes({ lsn: 5, snapshot: true }, { lsn: 5, snapshot: false })).toBe(false)
  })
  it('re-applies a duplicate (same position, same kind) so it is idempotent, not rejected', () => {
    expect(supersedes({ lsn: 5, snapshot: false }, { lsn: 5, snapshot: false })).toBe(true)
    expect(supersedes({ lsn: 5, snapshot: true }, { lsn: 5, snapshot: true })).toBe(true)
  })
})

describe('nextStamp', () => {
  it('is the clock when the clock is past the last stamp', () => {
    expect(nextStamp(new Date('2026-11-21T10:00:00.000Z'), undefined)).toBe(
      '2026-11-21T10:00:00.000Z',
    )
    expect(nextStamp(new Date('2026-11-21T10:00:00.005Z'), '2026-11-21T10:00:00.004Z')).toBe(
      '2026-11-21T10:00:00.005Z',
    )
  })

  it('is strictly after the last stamp when the clock stands still or steps back', () => {
    expect(nextStamp(new Date('2026-11-21T10:00:00.000Z'), '2026-11-21T10:00:00.000Z')).toBe(
      '2026-11-21T10:00:00.001Z',
    )
    expect(nextStamp(new Date('2026-11-21T10:00:00.000Z'), '2026-11-21T11:00:00.999Z')).toBe(
      '2026-11-21T11:00:01.000Z',
    )
  })
})

describe('coalesce', () => {
  it('keeps the first previous and the last current of each row, and drops rows that came and went', () => {
    const a1 = { id: 'a', v: 1 }
    const a2 = { id: 'a', v: 2 }
    const out = coalesce([
      { table: 'providers', id: 'a', previous: undefined, current: a1 },
      { table: 'providers', id: 'b', previous: undefined, current: { id: 'b' } },
      { table: 'providers', id: 'a', previous: a1, current: a2 },
      { table: 'providers', id: 'b', previous: { id: 'b' }, current: undefined },
    ])
    expect(out).toEqual([{ table: 'providers', id: 'a', previous: undefined, current: a2 }])
  })
})
