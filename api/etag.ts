// Conditional requests for pollers (RFC 9110 §8.8.3, §13.1.2): every 200 carries an ETag made
// from what its body's bytes are, so it changes exactly when the body does (a rebuild's swap that
// keeps every document and stamp keeps it too), and `If-None-Match` with a current tag is answered
// 304 without a body. The tag is never a file's version: a commit that leaves a page as it was
// (another provider changed) must not turn a poller's 304 into a 200.
//
// A body is hashed whole, except a page of a document list: its tag is a hash of its rows' ids,
// stamps and stored hashes and of its cursor (`listPageTag`), which name its bytes as exactly
// (a stored body changes only with its hash) at a twentieth of the hashing; hashing the 130 KB of
// a page read from SQLite was a tenth of its cost.
import { hash } from 'node:crypto'

/**
 * Tags of bodies that are sent again and again unchanged (the page cache's, the OpenAPI
 * document), by identity: hashing a 130 KB page costs about as much as the rest of a cached hit.
 */
const kept = new WeakMap<Buffer, string>()

export function etagOf(body: Buffer | string, keep: boolean): string {
  if (keep && typeof body !== 'string') {
    const tag = kept.get(body)
    if (tag !== undefined) return tag
  }
  // SHA-1 is enough for telling versions of one URL's body apart; it is not a secret.
  const tag = `"${hash('sha1', body, 'base64url')}"`
  if (keep && typeof body !== 'string') kept.set(body, tag)
  return tag
}

/**
 * The tag of a list page: `{"data":[` + the rows' stored bodies + `],"nextCursor":` + cursor
 * + `}`, made of what those bytes are made of: the body column (the view), each row's
 * `versions` (api/collections.ts: id, stamp and stored hash, in page order) and the cursor. A page
 * of the same rows in the same state has the same tag whether it was read from SQLite or from the
 * page cache, in this process or another.
 */
export function listPageTag(
  bodyColumn: string,
  versions: string,
  nextCursor: string | null,
): string {
  return `"${hash('sha1', `${bodyColumn}\0${versions}\0${nextCursor ?? ''}`, 'base64url')}"`
}

/**
 * Whether an If-None-Match header value names `tag`: `*`, or a list of entity tags compared
 * weakly (a `W/` prefix is ignored), as RFC 9110 §13.1.2 has it for GET.
 */
export function noneMatch(header: string | string[] | undefined, tag: string): boolean {
  if (header === undefined) return false
  const value = Array.isArray(header) ? header.join(',') : header
  for (const part of value.split(',')) {
    const candidate = part.trim()
    if (candidate === '*') return true
    if ((candidate.startsWith('W/') ? candidate.slice(2) : candidate) === tag) return true
  }
  return false
}
