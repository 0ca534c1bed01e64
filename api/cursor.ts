// Opaque paging cursors. A cursor is the exact position of the last row of a page (for example
// [updatedAt, id]) plus a MAC over that position AND the binding: the endpoint, the view and the
// filters the page was asked with. A cursor that was altered, made up, or issued for another
// endpoint or filter set fails the MAC check and is refused as a value, never thrown.
//
// The MAC uses a configured secret (every api process behind one load balancer shares it) so
// that cursors survive restarts and move between processes. A cursor never grants anything: the
// organization comes from the key, so a forged position can only point into the caller's own file.
import { createHmac, timingSafeEqual } from 'node:crypto'

export type Position = readonly string[]

const MAC_BYTES = 16
/** Longest cursor accepted; real ones are far shorter. */
export const MAX_CURSOR_LENGTH = 1024

function mac(secret: string, binding: string, payload: string): Buffer {
  return createHmac('sha256', secret)
    .update(`${binding}\0${payload}`)
    .digest()
    .subarray(0, MAC_BYTES)
}

export function encodeCursor(secret: string, binding: string, position: Position): string {
  const payload = Buffer.from(JSON.stringify(position)).toString('base64url')
  return `${payload}.${mac(secret, binding, payload).toString('base64url')}`
}

/**
 * The position of a cursor issued for `binding`, or undefined when the cursor is malformed,
 * tampered with or foreign. `arity` is the number of strings a position of this list holds.
 */
export function decodeCursor(
  secret: string,
  binding: string,
  cursor: string,
  arity: number,
): Position | undefined {
  if (cursor.length > MAX_CURSOR_LENGTH) return undefined
  const match = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(cursor)
  if (match === null) return undefined
  const [, payload = '', tag = ''] = match
  // Compared as text: base64url has several spellings of the same bytes, a cursor has one.
  const given = Buffer.from(tag)
  const expected = Buffer.from(mac(secret, binding, payload).toString('base64url'))
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined
  let position: unknown
  try {
    position = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))
  } catch {
    return undefined
  }
  if (
    !Array.isArray(position) ||
    position.length !== arity ||
    !position.every((part) => typeof part === 'string')
  ) {
    return undefined
  }
  return position
}
