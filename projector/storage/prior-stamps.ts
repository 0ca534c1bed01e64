// The stamps of a generation being replaced, for a rebuild: a document whose content is unchanged
// keeps its `updatedAt`, so pollers are not sent it again. Read-only handles on its organization
// files, opened on first use and at most `PRIOR_FILES_OPEN` at once; `close` lets the generation go
// (it may then be removed).
import Database from 'better-sqlite3'
import { statSync } from 'node:fs'
import type { Generation } from '../../src/layout.ts'
import { fileKeyOf } from '../../src/organization-files.ts'
import { readOrganizationFiles, readSharedFiles } from './control-file.ts'
import { priorStampsFrom, priorStampsScanned, type PriorStamp } from '../documents/index.ts'

export interface PriorGeneration {
  priorStamp(organizationId: string, ...rest: Parameters<PriorStamp>): string | undefined
  /** Closes every handle; from then on nothing has a prior stamp. */
  close(): void
}

/**
 * How many of the previous generation's files a rebuild keeps open. An organization's documents
 * are built once, together, so its file is wanted for a while and then seldom again. Every file
 * held to the end, a rebuild of 3,000 small organizations peaked at 1.5 GB (0.64 GB over seven);
 * the least recently used one is closed instead.
 */
export const PRIOR_FILES_OPEN = 64

/**
 * Files up to this size have their stamps read in one scan (documents/prior-stamps.ts
 * `priorStampsScanned`): a few MB of file hold a few thousand documents, well under 1 MB in
 * memory, and at most `PRIOR_FILES_OPEN` are held.
 */
export const PRIOR_FILE_SCANNED_BYTES = 4 << 20

interface PriorFile {
  db: Database.Database
  stamp: PriorStamp
}

export function openPriorGeneration(previous: Generation): PriorGeneration {
  /** Open files, least recently used first (a Map keeps insertion order). */
  const open = new Map<string, PriorFile>()
  /** Organizations the previous generation has no file of. */
  const absent = new Set<string>()
  const files = readOrganizationFiles(previous.controlPath)
  const sharedFiles = readSharedFiles(previous.controlPath)
  let closed = false

  /** The previous file of an organization: its own, or the one it shared (ids are unique). */
  const fileOf = (organizationId: string): PriorFile | undefined => {
    const key = fileKeyOf(organizationId, sharedFiles)
    const held = open.get(key)
    if (held !== undefined) {
      open.delete(key)
      open.set(key, held)
      return held
    }
    if (absent.has(key)) return undefined
    // The file its key is served from: a rebuild of its organizations may have replaced it.
    const path = previous.filePath(key, files.get(key))
    const bytes = statSync(path, { throwIfNoEntry: false })?.size
    if (bytes === undefined) {
      absent.add(key)
      return undefined
    }
    if (open.size >= PRIOR_FILES_OPEN) {
      const [oldest, file] = open.entries().next().value as [string, PriorFile]
      open.delete(oldest)
      file.db.close()
    }
    const db = new Database(path, { readonly: true, fileMustExist: true })
    const stamp = bytes <= PRIOR_FILE_SCANNED_BYTES ? priorStampsScanned(db) : priorStampsFrom(db)
    const file = { db, stamp }
    open.set(key, file)
    return file
  }

  return {
    priorStamp(organizationId, ...rest) {
      if (closed) return undefined
      return fileOf(organizationId)?.stamp(...rest)
    },
    close() {
      closed = true
      for (const { db } of open.values()) db.close()
      open.clear()
      absent.clear()
    },
  }
}
