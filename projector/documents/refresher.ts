// Rebuilds the documents a batch touched, and writes only those whose content changed.
//
// Each document is serialized once without `updatedAt` and hashed. Same hash as stored: nothing is
// written and the stamp stays (duplicates, replays and invisible columns never move updatedAt).
// New hash: the body is written with the batch's stamp, or with the previous generation's stamp
// when a rebuild finds the same content there. Source row gone: the document row is deleted.
import type Database from 'better-sqlite3'
import { organizationDb } from '../../src/sqlite.ts'
import {
  documentExpirable,
  documentMetadataContent,
  enrollmentContent,
  expirableBody,
  groupEnrollmentContent,
  groupIdentifierExpirable,
  parseExpirableId,
  providerGroupContent,
  providerIdentifierExpirable,
  providerJson,
  type ExpirableContent,
} from './builders.ts'
import {
  emptyTouched,
  touchedDocuments,
  type MirrorChange,
  type MirrorRowOf,
  type MirrorTable,
  type RelatedDocuments,
  type TouchedDocuments,
} from './changes.ts'
import { contentHash, withUpdatedAt } from './json.ts'
import { prepareDocumentStore, prepareMirrorReads } from './queries.ts'

/** A served document variant with its own hash and stamp (providers have two). */
export type DocumentKind =
  | 'provider'
  | 'sensitiveProvider'
  | 'providerGroup'
  | 'enrollment'
  | 'groupEnrollment'
  | 'document'
  | 'expirable'

/** One row per resource: counts are per document row (a provider counts once). */
export type ResourceKind = Exclude<DocumentKind, 'sensitiveProvider'>

export interface RefreshStats {
  rewritten: number
  unchanged: number
  removed: number
}

export interface DetailedRefreshStats extends RefreshStats {
  byKind: Record<ResourceKind, RefreshStats>
}

/** The previous generation's stamp of a document variant, if it has this exact content. */
export type PriorStamp = (kind: DocumentKind, id: string, hash: string) => string | undefined

export interface DocumentRefresher {
  /**
   * Rebuilds what `changes` touch. Call after the batch's mirror rows are written, inside the
   * file's write transaction (it runs in a savepoint of it). `stamp`: the batch's visibility stamp.
   */
  refresh(changes: readonly MirrorChange[], stamp: string): DetailedRefreshStats
  /** Rebuilds every document from the mirror and drops orphans (after a truncate, to verify). */
  refreshAll(stamp: string): DetailedRefreshStats
}

type Outcome = 'rewritten' | 'unchanged' | 'removed' | 'absent'

const resourceKinds: readonly ResourceKind[] = [
  'provider',
  'providerGroup',
  'enrollment',
  'groupEnrollment',
  'document',
  'expirable',
]

function emptyStats(): DetailedRefreshStats {
  const byKind = {} as Record<ResourceKind, RefreshStats>
  for (const kind of resourceKinds) byKind[kind] = { rewritten: 0, unchanged: 0, removed: 0 }
  return { rewritten: 0, unchanged: 0, removed: 0, byKind }
}

function count(stats: DetailedRefreshStats, kind: ResourceKind, outcome: Outcome): void {
  if (outcome === 'absent') return
  stats[outcome]++
  stats.byKind[kind][outcome]++
}

export function createDocumentRefresher(
  db: Database.Database,
  options: { priorStamp?: PriorStamp } = {},
): DocumentRefresher {
  const orm = organizationDb(db)
  const read = prepareMirrorReads(orm, db)
  const store = prepareDocumentStore(db)
  const priorStamp = options.priorStamp

  const related: RelatedDocuments = {
    enrollmentsOfProvider: (providerId) => ids(read.enrollmentsOfProvider.all(providerId)),
    membersOfGroup: (groupId) => ids(read.membersOfGroup.all(groupId)),
    groupEnrollmentsOfGroup: (groupId) => ids(read.groupEnrollmentsOfGroup.all(groupId)),
    enrollmentsAtLocation: (locationId) => ids(read.enrollmentsAtLocation.all(locationId)),
  }

  // Rows the batch being refreshed changed, keyed by table and id, as the mirror now stores them
  // (undefined: deleted): a document built from its own changed row need not read it back.
  const latest = new Map<string, MirrorChange['current']>()

  /** The mirror row: the batch's version when it changed it, else read. */
  function stored<T extends MirrorTable>(
    table: T,
    id: string,
    query: { get(id: string): MirrorRowOf<T> | undefined },
  ): MirrorRowOf<T> | undefined {
    const key = `${table}\u0000${id}`
    return latest.has(key) ? (latest.get(key) as MirrorRowOf<T> | undefined) : query.get(id)
  }

  /** The stamp of a new version: the prior generation's for the same content, else the batch's. */
  function stampOf(kind: DocumentKind, id: string, hash: string, stamp: string): string {
    return priorStamp?.(kind, id, hash) ?? stamp
  }

  function refreshProvider(id: string, stamp: string): Outcome {
    const row = stored('providers', id, read.provider)
    if (row === undefined) return store.provider.remove(id) ? 'removed' : 'absent'
    const json = providerJson(
      row,
      read.providerMemberships.all(id),
      read.providerIdentifiers.all(id),
    )
    const hash = contentHash(json.base)
    const sensitiveHash = contentHash(json.sensitive)
    // Nothing is written when both hashes are the stored ones; otherwise each variant keeps its
    // stored stamp and body unless its own content changed (queries.ts).
    const updatedAt = stampOf('provider', id, hash, stamp)
    const sensitiveUpdatedAt = stampOf('sensitiveProvider', id, sensitiveHash, stamp)
    const written = store.provider.write({
      id,
      updatedAt,
      hash,
      body: withUpdatedAt(json.base, updatedAt),
      sensitiveUpdatedAt,
      sensitiveHash,
      sensitiveBody: withUpdatedAt(json.sensitive, sensitiveUpdatedAt),
      isActive: row.isActive,
    })
    return written ? 'rewritten' : 'unchanged'
  }

  function refreshProviderGroup(id: string, stamp: string): Outcome {
    const row = stored('provider_groups', id, read.providerGroup)
    if (row === undefined) return store.providerGroup.remove(id) ? 'removed' : 'absent'
    const json = JSON.stringify(
      providerGroupContent(row, read.groupServiceLocations.all(id), read.groupIdentifiers.all(id)),
    )
    const hash = contentHash(json)
    const updatedAt = stampOf('providerGroup', id, hash, stamp)
    const written = store.providerGroup.write({
      id,
      updatedAt,
      hash,
      body: withUpdatedAt(json, updatedAt),
    })
    return written ? 'rewritten' : 'unchanged'
  }

  function refreshEnrollment(id: string, stamp: string): Outcome {
    const row = stored('enrollments', id, read.enrollment)
    if (row === undefined) return store.enrollment.remove(id) ? 'removed' : 'absent'
    const json = JSON.stringify(
      enrollmentContent(
        row,
        read.embeddedProvider.get(row.providerId),
        read.enrollmentRequirements.all(id),
        read.enrollmentLinesOfBusiness.all(id),
        read.enrollmentLocations.all(id),
      ),
    )
    const hash = contentHash(json)
    const updatedAt = stampOf('enrollment', id, hash, stamp)
    const written = store.enrollment.write({
      id,
      updatedAt,
      hash,
      body: withUpdatedAt(json, updatedAt),
      providerId: row.providerId,
      status: row.status,
      payerKey: row.payer.toLowerCase(),
    })
    return written ? 'rewritten' : 'unchanged'
  }

  function refreshGroupEnrollment(id: string, stamp: string): Outcome {
    const row = stored('group_enrollments', id, read.groupEnrollment)
    if (row === undefined) return store.groupEnrollment.remove(id) ? 'removed' : 'absent'
    const json = JSON.stringify(
      groupEnrollmentContent(
        row,
        read.embeddedGroup.get(row.providerGroupId),
        read.groupEnrollmentLinesOfBusiness.all(id),
      ),
    )
    const hash = contentHash(json)
    const updatedAt = stampOf('groupEnrollment', id, hash, stamp)
    const written = store.groupEnrollment.write({
      id,
      updatedAt,
      hash,
      body: withUpdatedAt(json, updatedAt),
      providerGroupId: row.providerGroupId,
      status: row.status,
      payerKey: row.payer.toLowerCase(),
    })
    return written ? 'rewritten' : 'unchanged'
  }

  function refreshDocument(id: string, stamp: string): Outcome {
    const row = stored('documents', id, read.document)
    if (row === undefined) return store.document.remove(id) ? 'removed' : 'absent'
    const json = JSON.stringify(documentMetadataContent(row))
    const hash = contentHash(json)
    const updatedAt = stampOf('document', id, hash, stamp)
    const written = store.document.write({
      id,
      updatedAt,
      hash,
      body: withUpdatedAt(json, updatedAt),
      providerId: row.providerId,
      providerGroupId: row.providerGroupId,
    })
    return written ? 'rewritten' : 'unchanged'
  }

  function expirableSource(id: string): ExpirableContent | undefined {
    const { sourceType, sourceId } = parseExpirableId(id)
    switch (sourceType) {
      case 'provider_identifier': {
        const row = stored('provider_identifiers', sourceId, read.providerIdentifier)
        return row && providerIdentifierExpirable(row)
      }
      case 'group_identifier': {
        const row = stored('group_identifiers', sourceId, read.groupIdentifier)
        return row && groupIdentifierExpirable(row)
      }
      case 'document': {
        const row = stored('documents', sourceId, read.document)
        return row && documentExpirable(row)
      }
    }
  }

  function refreshExpirable(id: string, stamp: string): Outcome {
    const content = expirableSource(id)
    // No source, or no expiration date any more: no expirable.
    if (content === undefined) return store.expirable.remove(id) ? 'removed' : 'absent'
    const body = expirableBody(content)
    const hash = contentHash(body)
    const written = store.expirable.write({
      id,
      sourceType: content.sourceType,
      sourceId: content.sourceId,
      expiresOn: content.expiresOn,
      updatedAt: stampOf('expirable', id, hash, stamp),
      hash,
      body,
    })
    return written ? 'rewritten' : 'unchanged'
  }

  function rebuild(touched: TouchedDocuments, stamp: string): DetailedRefreshStats {
    const stats = emptyStats()
    for (const id of touched.providers) count(stats, 'provider', refreshProvider(id, stamp))
    for (const id of touched.providerGroups) {
      count(stats, 'providerGroup', refreshProviderGroup(id, stamp))
    }
    for (const id of touched.enrollments) count(stats, 'enrollment', refreshEnrollment(id, stamp))
    for (const id of touched.groupEnrollments) {
      count(stats, 'groupEnrollment', refreshGroupEnrollment(id, stamp))
    }
    for (const id of touched.documents) count(stats, 'document', refreshDocument(id, stamp))
    for (const id of touched.expirables) count(stats, 'expirable', refreshExpirable(id, stamp))
    return stats
  }

  // A savepoint when the caller's transaction is open (the normal case), a transaction otherwise.
  const refreshInTransaction = db.transaction((changes: readonly MirrorChange[], stamp: string) => {
    // The batch's own rows as the mirror now stores them: the last version each change left.
    for (const change of changes) latest.set(`${change.table}\u0000${change.id}`, change.current)
    try {
      return rebuild(touchedDocuments(changes, related), stamp)
    } finally {
      latest.clear()
    }
  })
  const refreshAllInTransaction = db.transaction((stamp: string) =>
    rebuild(everyDocument(db), stamp),
  )

  return {
    refresh: (changes, stamp) =>
      changes.length === 0 ? emptyStats() : refreshInTransaction(changes, stamp),
    refreshAll: (stamp) => refreshAllInTransaction(stamp),
  }
}

function ids(rows: readonly { id: string }[]): string[] {
  return rows.map((row) => row.id)
}

/** Every document the mirror implies, plus every stored one (to delete orphans). Not hot. */
function everyDocument(db: Database.Database): TouchedDocuments {
  const touched = emptyTouched()
  const collect = (into: Set<string>, query: string) => {
    for (const id of db.prepare<[], string>(query).pluck().all()) into.add(id)
  }
  collect(touched.providers, 'SELECT id FROM providers UNION SELECT id FROM doc_providers')
  collect(
    touched.providerGroups,
    'SELECT id FROM provider_groups UNION SELECT id FROM doc_provider_groups',
  )
  collect(touched.enrollments, 'SELECT id FROM enrollments UNION SELECT id FROM doc_enrollments')
  collect(
    touched.groupEnrollments,
    'SELECT id FROM group_enrollments UNION SELECT id FROM doc_group_enrollments',
  )
  collect(touched.documents, 'SELECT id FROM documents UNION SELECT id FROM doc_documents')
  collect(
    touched.expirables,
    `SELECT 'provider_identifier:' || id FROM provider_identifiers WHERE expires_on IS NOT NULL
     UNION SELECT 'group_identifier:' || id FROM group_identifiers WHERE expires_on IS NOT NULL
     UNION SELECT 'document:' || id FROM documents WHERE expires_on IS NOT NULL
     UNION SELECT id FROM doc_expirables`,
  )
  return touched
}
