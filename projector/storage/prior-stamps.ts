// The stamps of a generation being replaced, for a rebuild: a document whose content is unchanged
// keeps its `updatedAt`, so pollers are not sent it again. One read-only handle per organization
// file, opened on first use; `close` lets the generation go (it may then be removed).
import Database from 'better-sqlite3'
import { existsSync } from 'node:fs'
import type { Generation } from '../../src/layout.ts'
import { readOrganizationFiles } from './control-file.ts'
import { priorStampsFrom, type PriorStamp } from '../documents/index.ts'

export interface PriorGeneration {
  priorStamp(organizationId: string, ...rest: Parameters<PriorStamp>): string | undefined
  /** Closes every handle; from then on nothing has a prior stamp. */
  close(): void
}

export function openPriorGeneration(previous: Generation): PriorGeneration {
  const stamps = new Map<string, PriorStamp | null>()
  const handles: Database.Database[] = []
  const files = readOrganizationFiles(previous.controlPath)
  let closed = false
  return {
    priorStamp(organizationId, ...rest) {
      if (closed) return undefined
      let stamp = stamps.get(organizationId)
      if (stamp === undefined) {
        const path = previous.organizationPath(organizationId, files.get(organizationId))
        if (existsSync(path)) {
          const db = new Database(path, { readonly: true, fileMustExist: true })
          handles.push(db)
          stamp = priorStampsFrom(db)
        } else stamp = null
        stamps.set(organizationId, stamp)
      }
      return stamp === null ? undefined : stamp(...rest)
    },
    close() {
      closed = true
      for (const db of handles.splice(0)) db.close()
      stamps.clear()
    },
  }
}
