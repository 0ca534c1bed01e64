// Assembling response bodies from the stored JSON text: joined, never parsed and re-serialized.
// Pure functions.

const DAY_MS = 86_400_000

/** `{"data":[...],"nextCursor":...}` from the stored bodies of one page. */
export function listBody(bodies: readonly string[], nextCursor: string | null): string {
  const cursor = nextCursor === null ? 'null' : JSON.stringify(nextCursor)
  return `{"data":[${bodies.join(',')}],"nextCursor":${cursor}}`
}

/** `{"data":...}` from one stored body. */
export function detailBody(body: string): string {
  return `{"data":${body}}`
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
