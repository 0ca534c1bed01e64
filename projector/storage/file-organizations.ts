// The organizations whose rows a file holds, each numbered by the key its rows carry
// (`file_organizations`; src/organization-scope.ts reads through it). A file of its own numbers
// its one organization 1 in its first write; a shared file numbers each organization as its first
// row arrives, inside the batch's transaction, so a rollback forgets it (`readBack`).
import { OWN_ORGANIZATION, type FileLayout } from '../../src/organization-scope.ts'
import type { SqliteDatabase } from '../../src/sqlite.ts'

export interface FileOrganizations {
  /** The key of `organizationId`, numbered now if the file has none for it yet. */
  keyOf(organizationId: string): number
  /** Every organization of the file, by key. */
  readonly keys: ReadonlyMap<number, string>
  /** Forgets what a rolled-back transaction numbered. */
  readBack(): void
}

export function fileOrganizations(db: SqliteDatabase, layout: FileLayout): FileOrganizations {
  const readAll = db.prepare<[], { key: number; organization_id: string }>(
    'SELECT key, organization_id FROM main.file_organizations',
  )
  const insert = db.prepare<[number, string]>(
    'INSERT INTO main.file_organizations (key, organization_id) VALUES (?, ?)',
  )
  const byId = new Map<string, number>()
  const byKey = new Map<number, string>()

  function readBack(): void {
    byId.clear()
    byKey.clear()
    for (const row of readAll.all()) {
      byId.set(row.organization_id, row.key)
      byKey.set(row.key, row.organization_id)
    }
  }
  readBack()

  return {
    keyOf(organizationId) {
      const known = byId.get(organizationId)
      if (known !== undefined) return known
      // A file of its own is one organization's, whatever numbering a shared file would give.
      if (layout === 'own' && byKey.size > 0) {
        throw new Error(`organization ${organizationId} has rows routed to another's own file`)
      }
      const key = layout === 'own' ? OWN_ORGANIZATION : Math.max(0, ...byKey.keys()) + 1
      insert.run(key, organizationId)
      byId.set(organizationId, key)
      byKey.set(key, organizationId)
      return key
    },
    get keys() {
      return byKey
    },
    readBack,
  }
}
