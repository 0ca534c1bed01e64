// The distinct list pages of bench:api's uncached and live runs: every request a URL the api has
// not been asked for since long before, so that none is answered from its page cache, as under
// live writes, where every commit empties the cache. Pure.
import { encodeCursor, type Position } from '../api/cursor.ts'
import { cursorBinding, parseListQuery } from '../api/params.ts'
import { ApiError } from '../api/errors.ts'

/** A list's rows, `[stamp, id]` in list order, and how to sign cursors for it. */
export interface DistinctSource {
  organizationId: string
  cursorSecret: string
  positions: readonly Position[]
  limit: number
}

/**
 * `/api/v1/providers` paths, two per row that a whole page follows: a cursor positioned on the
 * row (signed as the api signs its own), and an `updated_since` a few milliseconds before the
 * row's stamp (the page starting at its stamp; each value distinct, so each page-cache key is).
 * Alternated, so that a run of any length reads both kinds.
 */
export function distinctPaths(source: DistinctSource): string[] {
  const { organizationId, cursorSecret, positions, limit } = source
  const query = parseListQuery('providers', `limit=${limit}`)
  if (query instanceof ApiError) throw new Error(query.message)
  const binding = cursorBinding(organizationId, 'providers', 'base', query.filters)
  const base = `/api/v1/providers?limit=${limit}`
  const paths: string[] = []
  const whole = Math.max(0, positions.length - limit)
  for (let i = 0; i < whole; i++) {
    const position = positions[i] as Position
    paths.push(`${base}&cursor=${encodeCursor(cursorSecret, binding, position)}`)
    const since = new Date(Date.parse(position[0] as string) - 1 - (i % 997)).toISOString()
    paths.push(`${base}&updated_since=${encodeURIComponent(since)}`)
  }
  return paths
}
