// Rebuilds the documents a batch touched, and writes only those whose content changed.
//
// Each document is serialized once without `updatedAt` and hashed. Same hash as stored: nothing is
// written and the stamp stays (duplicates, replays and invisible columns never move updatedAt).
// New hash: the body is written with the batch's stamp, or with the previous generation's stamp
// when a rebuild finds the same content there. Source row gone: the document row is deleted.
import type Database from 'better-sqlite3'
import {
  documentExpirable,
  documentMetadataJson,
  enrollmentContent,
  expirableBody,
  groupEnrollmentContent,
  groupIdentifierExpirable,
  parseExpirableId,
  providerGroupContent,
  providerIdentifierExpirable,
  providerJson,
  type EmbeddedGroup,
  type EmbeddedProviderRow,
  type EnrollmentLocation,
  type ExpirableContent,
  type IdentifierRow,
  type LineOfBusiness,
  type Membership,
  type Requirement,
  type ServiceLocation,
} from './builders.ts'
import {
  touchedDocuments,
  type MirrorChange,
  type MirrorRowOf,
  type MirrorTable,
  type RelatedDocuments,
  type TouchedDocuments,
} from './changes.ts'
import { contentHash, withUpdatedAt } from './json.ts'
import {
  prepareBulkReads,
  prepareDocumentStore,
  prepareMirrorReads,
  type BulkReads,
} from './queries.ts'

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
  /**
   * Rebuilds every document from the mirror and drops orphans (the catch-up build, after a
   * truncate, to verify). Reads the mirror a page of parents at a time (`buildPageRows`) and each
   * child list once per page, not per document; the documents are those `refresh` builds.
   */
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

/**
 * Parents per page of `refreshAll`. A page and its child lists are well under a MB. Larger pages
 * read no faster (a page's reads cost per row, not per statement, from a few hundred rows on)
 * and keep more rows alive across young-generation collections: at 1000, GC time tripled.
 */
export const BUILD_PAGE_ROWS = 250

export function createDocumentRefresher(
  db: Database.Database,
  options: {
    priorStamp?: PriorStamp
    /** Parents per page of `refreshAll` (BUILD_PAGE_ROWS; tests use small pages). */
    buildPageRows?: number
  } = {},
): DocumentRefresher {
  const read = prepareMirrorReads(db)
  const store = prepareDocumentStore(db)
  const priorStamp = options.priorStamp
  const pageRows = options.buildPageRows ?? BUILD_PAGE_ROWS
  // Prepared on the first whole build: most opens of a file only ever refresh batches.
  let bulkReads: BulkReads | undefined

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
    return writeProvider(
      row,
      read.providerMemberships.all(id),
      read.providerIdentifiers.all(id),
      stamp,
    )
  }

  function writeProvider(
    row: MirrorRowOf<'providers'>,
    memberships: Membership[],
    identifiers: IdentifierRow[],
    stamp: string,
  ): Outcome {
    const id = row.id
    const json = providerJson(row, memberships, identifiers)
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
    return writeProviderGroup(
      row,
      read.groupServiceLocations.all(id),
      read.groupIdentifiers.all(id),
      stamp,
    )
  }

  function writeProviderGroup(
    row: MirrorRowOf<'provider_groups'>,
    serviceLocations: ServiceLocation[],
    identifiers: IdentifierRow[],
    stamp: string,
  ): Outcome {
    const id = row.id
    const json = JSON.stringify(providerGroupContent(row, serviceLocations, identifiers))
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
    return writeEnrollment(
      row,
      read.embeddedProvider.get(row.providerId),
      read.enrollmentRequirements.all(id),
      read.enrollmentLinesOfBusiness.all(id),
      read.enrollmentLocations.all(id),
      stamp,
    )
  }

  function writeEnrollment(
    row: MirrorRowOf<'enrollments'>,
    provider: EmbeddedProviderRow | undefined,
    requirements: Requirement[],
    linesOfBusiness: LineOfBusiness[],
    locations: EnrollmentLocation[],
    stamp: string,
  ): Outcome {
    const id = row.id
    const json = JSON.stringify(
      enrollmentContent(row, provider, requirements, linesOfBusiness, locations),
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
    return writeGroupEnrollment(
      row,
      read.embeddedGroup.get(row.providerGroupId),
      read.groupEnrollmentLinesOfBusiness.all(id),
      stamp,
    )
  }

  function writeGroupEnrollment(
    row: MirrorRowOf<'group_enrollments'>,
    group: EmbeddedGroup | undefined,
    linesOfBusiness: LineOfBusiness[],
    stamp: string,
  ): Outcome {
    const id = row.id
    const json = JSON.stringify(groupEnrollmentContent(row, group, linesOfBusiness))
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
    return writeDocument(row, stamp)
  }

  function writeDocument(row: MirrorRowOf<'documents'>, stamp: string): Outcome {
    const id = row.id
    const json = documentMetadataJson(row)
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
    return writeExpirable(id, content, stamp)
  }

  function writeExpirable(id: string, content: ExpirableContent, stamp: string): Outcome {
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

  /** Refreshes each listed document: a batch's touched ones, or a whole build's orphans. */
  function rebuild(
    touched: { [K in keyof TouchedDocuments]: Iterable<string> },
    stamp: string,
  ): DetailedRefreshStats {
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

  // ---- The whole-file build: pages of parents, each child list read once per page ----------------

  function buildAll(stamp: string): DetailedRefreshStats {
    const bulk = (bulkReads ??= prepareBulkReads(db))
    // Stored documents whose source is gone (a truncate, say): refreshing each removes it. Before
    // writing: then the catch-up build's document tables are empty, and the check is free.
    const { orphans } = bulk
    const stats = rebuild(
      {
        providers: orphans.providers(),
        providerGroups: orphans.providerGroups(),
        enrollments: orphans.enrollments(),
        groupEnrollments: orphans.groupEnrollments(),
        documents: orphans.documents(),
        expirables: orphans.expirables(),
      },
      stamp,
    )
    buildProviders(bulk, stamp, stats)
    buildProviderGroups(bulk, stamp, stats)
    buildEnrollments(bulk, stamp, stats)
    buildGroupEnrollments(bulk, stamp, stats)
    buildDocumentsWithExpirables(bulk, stamp, stats)
    buildIdentifierExpirables(bulk, stamp, stats)
    return stats
  }

  function buildProviders(bulk: BulkReads, stamp: string, stats: DetailedRefreshStats): void {
    for (const page of bulk.providers(pageRows)) {
      const { first, last } = idRange(page)
      const memberships = bulk.providerMemberships(first, last)
      const identifiers = bulk.providerIdentifiers(first, last)
      for (const row of page) {
        const outcome = writeProvider(
          row,
          memberships.get(row.id) ?? [],
          identifiers.get(row.id) ?? [],
          stamp,
        )
        count(stats, 'provider', outcome)
      }
    }
  }

  function buildProviderGroups(bulk: BulkReads, stamp: string, stats: DetailedRefreshStats): void {
    for (const page of bulk.providerGroups(pageRows)) {
      const { first, last } = idRange(page)
      const serviceLocations = bulk.groupServiceLocations(first, last)
      const identifiers = bulk.groupIdentifiers(first, last)
      for (const row of page) {
        const outcome = writeProviderGroup(
          row,
          serviceLocations.get(row.id) ?? [],
          identifiers.get(row.id) ?? [],
          stamp,
        )
        count(stats, 'providerGroup', outcome)
      }
    }
  }

  function buildEnrollments(bulk: BulkReads, stamp: string, stats: DetailedRefreshStats): void {
    for (const page of bulk.enrollments(pageRows)) {
      const { first, last } = idRange(page)
      const providers = bulk.embeddedProviders(page.map((row) => row.providerId))
      const requirements = bulk.enrollmentRequirements(first, last)
      const linesOfBusiness = bulk.enrollmentLinesOfBusiness(first, last)
      const locations = bulk.enrollmentLocations(first, last)
      for (const row of page) {
        const outcome = writeEnrollment(
          row,
          providers.get(row.providerId),
          requirements.get(row.id) ?? [],
          linesOfBusiness.get(row.id) ?? [],
          locations.get(row.id) ?? [],
          stamp,
        )
        count(stats, 'enrollment', outcome)
      }
    }
  }

  function buildGroupEnrollments(
    bulk: BulkReads,
    stamp: string,
    stats: DetailedRefreshStats,
  ): void {
    for (const page of bulk.groupEnrollments(pageRows)) {
      const { first, last } = idRange(page)
      const groups = bulk.embeddedGroups(page.map((row) => row.providerGroupId))
      const linesOfBusiness = bulk.groupEnrollmentLinesOfBusiness(first, last)
      for (const row of page) {
        const outcome = writeGroupEnrollment(
          row,
          groups.get(row.providerGroupId),
          linesOfBusiness.get(row.id) ?? [],
          stamp,
        )
        count(stats, 'groupEnrollment', outcome)
      }
    }
  }

  /** A document row is the source of its metadata and of its expirable: read once for both. */
  function buildDocumentsWithExpirables(
    bulk: BulkReads,
    stamp: string,
    stats: DetailedRefreshStats,
  ): void {
    for (const page of bulk.documents(pageRows)) {
      for (const row of page) {
        count(stats, 'document', writeDocument(row, stamp))
        buildExpirable(documentExpirable(row), stamp, stats)
      }
    }
  }

  function buildIdentifierExpirables(
    bulk: BulkReads,
    stamp: string,
    stats: DetailedRefreshStats,
  ): void {
    for (const page of bulk.expiringGroupIdentifiers(pageRows)) {
      for (const row of page) buildExpirable(groupIdentifierExpirable(row), stamp, stats)
    }
    for (const page of bulk.expiringProviderIdentifiers(pageRows)) {
      for (const row of page) buildExpirable(providerIdentifierExpirable(row), stamp, stats)
    }
  }

  /** undefined: the source has no expiration date, so no expirable (nor a stored one to remove). */
  function buildExpirable(
    content: ExpirableContent | undefined,
    stamp: string,
    stats: DetailedRefreshStats,
  ): void {
    if (content !== undefined) count(stats, 'expirable', writeExpirable(content.id, content, stamp))
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
  const refreshAllInTransaction = db.transaction((stamp: string) => buildAll(stamp))

  return {
    refresh: (changes, stamp) =>
      changes.length === 0 ? emptyStats() : refreshInTransaction(changes, stamp),
    refreshAll: (stamp) => refreshAllInTransaction(stamp),
  }
}

function ids(rows: readonly { id: string }[]): string[] {
  return rows.map((row) => row.id)
}

/** The first and last id of a page of rows in id order: the range its child lists are read for. */
function idRange(page: readonly { id: string }[]): { first: string; last: string } {
  return { first: page[0]!.id, last: page[page.length - 1]!.id }
}
