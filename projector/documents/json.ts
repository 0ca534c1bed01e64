// Serialization helpers: stored documents are JSON text, hashed without their `updatedAt`.
import { hash } from 'node:crypto'

/**
 * Hash of a document's content (its JSON without `updatedAt`): sha256, base64. SHA-256 because
 * it is the fastest of node's digests on CPUs with SHA extensions and collisions are not a concern.
 */
export function contentHash(json: string): string {
  return hash('sha256', json, 'base64')
}

/**
 * Appends `updatedAt` as the last key of a serialized object. Every resource ends with
 * `updatedAt`, so the content is serialized (and hashed) once, and stamped without re-serializing.
 */
export function withUpdatedAt(json: string, updatedAt: string): string {
  return `${json.slice(0, -1)},"updatedAt":${JSON.stringify(updatedAt)}}`
}

/** `{"a":1}` + `{"b":2}` -> `{"a":1,"b":2}`: builds two variants of a document from shared parts. */
export function joinJsonObjects(...objects: readonly string[]): string {
  const members = objects.map((json) => json.slice(1, -1)).filter((inner) => inner !== '')
  return `{${members.join(',')}}`
}

/**
 * A `text[]` column, stored in the mirror as a JSON array. PostgreSQL arrays may hold NULL
 * elements; the API's arrays hold strings, so those are dropped.
 */
export function parseStringArray(json: string): string[] {
  const items = JSON.parse(json) as (string | null)[]
  return items.includes(null) ? items.filter((item) => item !== null) : (items as string[])
}
