// Assembling response bodies from the stored JSON text: joined, never parsed and re-serialized.
// Pure functions.

const DAY_MS = 86_400_000

const LIST_HEAD = Buffer.from('{"data":[')
const DETAIL_HEAD = Buffer.from('{"data":')
const CLOSE = Buffer.from('}')

// Bodies are sent as bytes: a large string written to a socket costs more than its encoding here.

/**
 * `{"data":[...],"nextCursor":...}` around the stored bodies of one page, already joined with
 * commas (by SQLite's group_concat, or by `bodies.join(',')`).
 */
export function listBody(joinedBodies: string, nextCursor: string | null): Buffer {
  const cursor = nextCursor === null ? 'null' : JSON.stringify(nextCursor)
  const tail = Buffer.from(`],"nextCursor":${cursor}}`)
  return Buffer.concat([LIST_HEAD, Buffer.from(joinedBodies), tail])
}

/** `{"data":...}` around one stored body. */
export function detailBody(body: string): Buffer {
  return Buffer.concat([DETAIL_HEAD, Buffer.from(body), CLOSE])
}

/**
 * Completes a stored expirable body, which lacks its last two keys and its closing brace
 * (the day count depends on the day it is served).
 */
export function expirableBody(partial: string, daysUntilExpiration: number, updatedAt: string) {
  return `${partial},"daysUntilExpiration":${daysUntilExpiration},"updatedAt":${JSON.stringify(updatedAt)}}`
}

/** The UTC calendar date (`YYYY-MM-DD`) of an instant. */
export function utcDate(epochMs: number): string {
  return new Date(epochMs).toISOString().slice(0, 10)
}

/** `date` plus `days` days (`YYYY-MM-DD`). */
export function addDays(date: string, days: number): string {
  return utcDate(Date.parse(`${date}T00:00:00Z`) + days * DAY_MS)
}

/** Whole days from `today` to `date` (negative when `date` is past). */
export function daysBetween(today: string, date: string): number {
  return Math.round((Date.parse(`${date}T00:00:00Z`) - Date.parse(`${today}T00:00:00Z`)) / DAY_MS)
}

/** Tuple order of two positions of ASCII strings (stamps, uuids), as SQLite orders them. */
export function comparePositions(a: readonly string[], b: readonly string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i] as string
    const y = b[i] as string
    if (x !== y) return x < y ? -1 : 1
  }
  return a.length - b.length
}
