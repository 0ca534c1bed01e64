import { describe, expect, it } from 'vitest'
import { decodeCursor } from '../../../api/cursor.ts'
import { ApiError } from '../../../api/errors.ts'
import { cursorBinding, parseListQuery, rawQueryOf } from '../../../api/params.ts'
import { distinctPaths } from '../../../bench/distinct-pages.ts'
import { isSnapshotLine } from '../../../bench/live-org.ts'
import { chunksOf } from '../../../bench/live-writer.ts'

const organizationId = '00000000-0000-4000-8000-000000000001'
const cursorSecret = 'a-secret-of-sixteen-chars'
const stampAt = (seconds: number) => new Date(Date.UTC(2026, 0, 1) + seconds * 1000).toISOString()
// 20 rows a second, as bench:api's organization has them.
const positions = Array.from({ length: 300 }, (_, i) => [
  stampAt(Math.floor(i / 20)),
  `id-${String(i).padStart(4, '0')}`,
])

describe('distinctPaths', () => {
  const paths = distinctPaths({ organizationId, cursorSecret, positions, limit: 50 })

  it('gives two distinct, valid paths per row that a whole page follows', () => {
    expect(paths).toHaveLength(2 * (positions.length - 50))
    expect(new Set(paths).size).toBe(paths.length)
    for (const path of paths) {
      expect(path.startsWith('/api/v1/providers?limit=50&')).toBe(true)
      expect(parseListQuery('providers', rawQueryOf(path))).not.toBeInstanceOf(ApiError)
    }
  })

  it('signs cursors the api accepts, positioned on their rows', () => {
    const query = parseListQuery('providers', 'limit=50')
    if (query instanceof ApiError) throw query
    const binding = cursorBinding(organizationId, 'providers', 'base', query.filters)
    const cursor = new URLSearchParams(rawQueryOf(paths[2]!)).get('cursor')!
    expect(decodeCursor(cursorSecret, binding, cursor, 2)).toEqual(positions[1])
  })

  it('asks updated_since just before its row, so the page starts at its stamp', () => {
    const since = new URLSearchParams(rawQueryOf(paths[41]!)).get('updated_since')!
    expect(since < positions[20]![0]!).toBe(true)
    expect(since > positions[19]![0]!).toBe(true)
  })
})

describe('the live writer', () => {
  it('cuts the stream into chunks in order, the last one shorter', () => {
    expect(chunksOf(['a', 'b', 'c', 'd', 'e'], 2)).toEqual([['a', 'b'], ['c', 'd'], ['e']])
  })

  it("tells a snapshot read from a streamed change by the payload's op", () => {
    expect(isSnapshotLine('{"topic":"t","value":{"payload":{"op":"r","after":{}}}}')).toBe(true)
    expect(
      isSnapshotLine(
        '{"topic":"t","value":{"payload":{"op":"u","after":{"x":"\\"op\\":\\"r\\""}}}}',
      ),
    ).toBe(false)
  })
})
