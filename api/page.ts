// Assembling response bodies from the stored JSON text: joined, never parsed and re-serialized.
// Pure functions.

import type { Allocate } from './buffers.ts'

const DAY_MS = 86_400_000

const fresh: Allocate = (size) => Buffer.allocUnsafe(size)

/** Stored bodies: one text or buffer, or buffers to be joined with commas. */
type Content = string | Buffer | readonly Buffer[]

function isParts(content: Content): content is readonly Buffer[] {
  return Array.isArray(content)
}

function byteLength(content: Content): number {
  if (typeof content === 'string') return Buffer.byteLength(content)
  if (!isParts(content)) return content.length
  let length = Math.max(content.length - 1, 0)
  for (const part of content) length += part.length
  return length
}

// Bodies are sent as bytes, encoded once straight into the response buffer: a large string
// written to a socket, or an extra copy, costs more than the encoding itself.
function wrap(head: string, content: Content, tail: string, allocate: Allocate): Buffer {
  const headLength = Buffer.byteLength(head)
  const contentLength = byteLength(content)
  const out = allocate(headLength + contentLength + Buffer.byteLength(tail))
  out.write(head, 0)
  if (typeof content === 'string') out.write(content, headLength)
  else if (!isParts(content)) content.copy(out, headLength)
  else {
    let at = headLength
    for (let i = 0; i < content.length; i++) {
      if (i > 0) out[at++] = COMMA
      at += content[i]!.copy(out, at)
    }
  }
  out.write(tail, headLength + contentLength)
  return out
}

const COMMA = 0x2c

/**
 * `{"data":[...],"nextCursor":...}` around the stored bodies of one page: already joined with
 * commas (by SQLite's group_concat, or by `bodies.join(',')`), or each row's, joined here.
 */
export function listBody(
  joinedBodies: Content,
  nextCursor: string | null,
  allocate: Allocate = fresh,
): Buffer {
  const cursor = nextCursor === null ? 'null' : JSON.stringify(nextCursor)
  return wrap('{"data":[', joinedBodies, `],"nextCursor":${cursor}}`, allocate)
}

/** `{"data":...}` around one stored body. */
export function detailBody(body: string, allocate: Allocate = fresh): Buffer {
  return wrap('{"data":', body, '}', allocate)
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
