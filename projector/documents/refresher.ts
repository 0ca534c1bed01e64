// Rebuilds the documents a batch touched, and writes only those whose content changed.
//
// Each document is serialized once without `updatedAt` and hashed. Same hash as stored: nothing is
// written and the stamp stays (duplicates, replays and invisible columns never move updatedAt).
// New hash: the body is written with the batch's stamp, or with the previous generation's stamp
// when a rebuild finds the same content there. Source row gone: the document row is deleted.
import type Database from 'better-sqlite3'
import {
  documentExpirable,
  groupIdentifierExpirable,
  parseExpirableId,
  providerIdentifierExpirable,
  type ExpirableContent,
} from './builders.ts'
import {
  touchedDocuments,
  type MirrorChange,
  type MirrorRowOf,
  type MirrorTable,
  type RelatedDocuments,
  type TouchedDocuments,
} from './changes.ts'
import {
  prepareBulkReads,
  prepareDocumentStore,
  prepareMirrorReads,
  type BulkReads,
  type MirrorReads,
} from './queries.ts'
import {
  OWN_ORGANIZATION,
  scopeConnection,
  type OrganizationScope,
} from '../../src/organization-scope.ts'
import { inOpenTransaction } from '../../src/sqlite.ts'
import { addStats, count, emptyStats, type DetailedRefreshStats, type Outcome } from './stats.ts'
import { buildEveryDocument } from './whole-build.ts'
import {
  writeDocument,
  writeEnrollment,
  writeExpirable,
  writeGroupEnrollment,
  writeProvider,
  writeProviderGroup,
  type DocumentTarget,
  type PriorStamp,
} from './write.ts'

export type { DetailedRefreshStats, DocumentKind, RefreshStats, ResourceKind } from './stats.ts'
export type { PriorStamp } from './write.ts'

export interface DocumentRefresher {
  /**
   * Rebuilds what `changes` touch. Call after the batch's mirror rows are written, inside the
   * file's write transaction (it joins it). `stamp`: the batch's visibility stamp.
   */
  refresh(changes: readonly MirrorChange[], stamp: string): DetailedRefreshStats
  /**
   * Rebuilds every document from the mirror and drops orphans (the catch-up build, after a
   * truncate, to verify). Reads the mirror a page of parents at a time (`buildPageRows`) and each
   * child list once per page, not per document; the documents are those `refresh` builds.
   */
  refreshAll(stamp: string): DetailedRefreshStats
}

/**
 * Parents per page of `refreshAll`. A page and its child lists are well under a MB. Larger pages
 * read no faster (a page's reads cost per row, not per statement, from a few hundred rows on)
 * and keep more rows alive across young-generation collections: at 1000, GC time tripled.
 */
export const BUILD_PAGE_ROWS = 250

/** Documents listed by kind: a batch's touched ones, or a whole build's orphans. */
type ListedDocuments = { [K in keyof TouchedDocuments]: Iterable<string> }

export interface RefresherOptions {
  priorStamp?: PriorStamp
  /** Parents per page of `refreshAll` (BUILD_PAGE_ROWS; tests use small pages). */
  buildPageRows?: number
  /**
   * The connection's organization scope (src/organization-scope.ts) and the keys of the file's
   * organizations: each organization's documents are built in its own scope. Default: a file of
   * its own, read unscoped.
   */
  organizations?: { scope: OrganizationScope; keys: () => Iterable<number> }
}

export function createDocumentRefresher(
  db: Database.Database,
  options: RefresherOptions = {},
): DocumentRefresher {
  const { scope, keys } = options.organizations ?? {
    scope: scopeConnection(db, 'own'),
    keys: () => [OWN_ORGANIZATION],
  }
  const read = prepareMirrorReads(db)
  const store = prepareDocumentStore(db, scope)
  const target: DocumentTarget = { store, priorStamp: options.priorStamp }
  const pageRows = options.buildPageRows ?? BUILD_PAGE_ROWS
  // Rows the batch being refreshed changed, keyed by table and id, as the mirror now stores them
  // (undefined: deleted): a document built from its own changed row need not read it back.
  const latest = new Map<string, MirrorChange['current']>()
  const refreshListed = listedRefresher(read, target, latest)
  const related = relatedDocuments(read)
  // Prepared on the first whole build: most opens of a file only ever refresh batches.
  let bulkReads: BulkReads | undefined

  // Part of the caller's transaction when one is open (the normal case: a live batch's, the
  // catch-up build's), a transaction otherwise. Not a savepoint: a live batch's document pages
  // then went to a sub-journal file first, about 6% of a lane's time; a failure here fails the
  // caller's transaction, which rolls all of it back.
  const refreshInTransaction = inOpenTransaction(
    db,
    (changes: readonly MirrorChange[], stamp: string) => {
      // The batch's own rows as the mirror now stores them: the last version each change left.
      for (const change of changes) latest.set(`${change.table}\u0000${change.id}`, change.current)
      try {
        const stats = emptyStats()
        for (const [key, ofOrganization] of byOrganization(changes)) {
          scope.enter(key)
          addStats(stats, refreshListed(touchedDocuments(ofOrganization, related), stamp))
        }
        return stats
      } finally {
        latest.clear()
      }
    },
  )
  const refreshAllInTransaction = inOpenTransaction(db, (stamp: string) => {
    const stats = emptyStats()
    for (const key of keys()) {
      scope.enter(key)
      addStats(stats, refreshOrganization(stamp))
    }
    return stats
  })
  /** Every document of the organization in scope. */
  function refreshOrganization(stamp: string): DetailedRefreshStats {
    const bulk = (bulkReads ??= prepareBulkReads(db))
    // Stored documents whose source is gone (a truncate, say): refreshing each removes it. Before
    // writing: then the catch-up build's document tables are empty, and the check is free.
    const { orphans } = bulk
    const stats = refreshListed(
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
    buildEveryDocument({ target, bulk, pageRows, stamp, stats })
    return stats
  }

  return {
    refresh: (changes, stamp) =>
      changes.length === 0 ? emptyStats() : refreshInTransaction(changes, stamp),
    refreshAll: (stamp) => refreshAllInTransaction(stamp),
  }
}

/**
 * A batch's changes by the organization of their rows, in the order each first appears (a file
 * of its own: all of them, under its one key).
 */
function byOrganization(changes: readonly MirrorChange[]): Map<number, MirrorChange[]> {
  const groups = new Map<number, MirrorChange[]>()
  for (const change of changes) {
    const row = (change.current ?? change.previous) as { organizationKey?: number } | undefined
    const key = row?.organizationKey ?? OWN_ORGANIZATION
    let group = groups.get(key)
    if (group === undefined) groups.set(key, (group = []))
    group.push(change)
  }
  return groups
}

function relatedDocuments(read: MirrorReads): RelatedDocuments {
  return {
    enrollmentsOfProvider: (providerId) => ids(read.enrollmentsOfProvider.all(providerId)),
    membersOfGroup: (groupId) => ids(read.membersOfGroup.all(groupId)),
    groupEnrollmentsOfGroup: (groupId) => ids(read.groupEnrollmentsOfGroup.all(groupId)),
    enrollmentsAtLocation: (locationId) => ids(read.enrollmentsAtLocation.all(locationId)),
  }
}

/**
 * Refreshes listed documents one by one from the mirror: each is rewritten from its rows, or
 * removed when its source row is gone. `latest` holds the batch's own rows (read before the
 * mirror).
 */
function listedRefresher(
  read: MirrorReads,
  target: DocumentTarget,
  latest: ReadonlyMap<string, MirrorChange['current']>,
): (listed: ListedDocuments, stamp: string) => DetailedRefreshStats {
  const { store } = target

  /** The mirror row: the batch's version when it changed it, else read. */
  function stored<T extends MirrorTable>(
    table: T,
    id: string,
    query: { get(id: string): MirrorRowOf<T> | undefined },
  ): MirrorRowOf<T> | undefined {
    const key = `${table}\u0000${id}`
    return latest.has(key) ? (latest.get(key) as MirrorRowOf<T> | undefined) : query.get(id)
  }

  function provider(id: string, stamp: string): Outcome {
    const row = stored('providers', id, read.provider)
    if (row === undefined) return store.provider.remove(id) ? 'removed' : 'absent'
    const memberships = read.providerMemberships.all(id)
    return writeProvider(target, row, memberships, read.providerIdentifiers.all(id), stamp)
  }

  function providerGroup(id: string, stamp: string): Outcome {
    const row = stored('provider_groups', id, read.providerGroup)
    if (row === undefined) return store.providerGroup.remove(id) ? 'removed' : 'absent'
    const locations = read.groupServiceLocations.all(id)
    return writeProviderGroup(target, row, locations, read.groupIdentifiers.all(id), stamp)
  }

  function enrollment(id: string, stamp: string): Outcome {
    const row = stored('enrollments', id, read.enrollment)
    if (row === undefined) return store.enrollment.remove(id) ? 'removed' : 'absent'
    const children = {
      provider: read.embeddedProvider.get(row.providerId),
      requirements: read.enrollmentRequirements.all(id),
      linesOfBusiness: read.enrollmentLinesOfBusiness.all(id),
      locations: read.enrollmentLocations.all(id),
    }
    return writeEnrollment(target, row, children, stamp)
  }

  function groupEnrollment(id: string, stamp: string): Outcome {
    const row = stored('group_enrollments', id, read.groupEnrollment)
    if (row === undefined) return store.groupEnrollment.remove(id) ? 'removed' : 'absent'
    const group = read.embeddedGroup.get(row.providerGroupId)
    const linesOfBusiness = read.groupEnrollmentLinesOfBusiness.all(id)
    return writeGroupEnrollment(target, row, group, linesOfBusiness, stamp)
  }

  function document(id: string, stamp: string): Outcome {
    const row = stored('documents', id, read.document)
    if (row === undefined) return store.document.remove(id) ? 'removed' : 'absent'
    return writeDocument(target, row, stamp)
  }

  function expirable(id: string, stamp: string): Outcome {
    const content = expirableSource(id)
    // No source, or no expiration date any more: no expirable.
    if (content === undefined) return store.expirable.remove(id) ? 'removed' : 'absent'
    return writeExpirable(target, id, content, stamp)
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

  return (listed, stamp) => {
    const stats = emptyStats()
    for (const id of listed.providers) count(stats, 'provider', provider(id, stamp))
    for (const id of listed.providerGroups) count(stats, 'providerGroup', providerGroup(id, stamp))
    for (const id of listed.enrollments) count(stats, 'enrollment', enrollment(id, stamp))
    for (const id of listed.groupEnrollments) {
      count(stats, 'groupEnrollment', groupEnrollment(id, stamp))
    }
    for (const id of listed.documents) count(stats, 'document', document(id, stamp))
    for (const id of listed.expirables) count(stats, 'expirable', expirable(id, stamp))
    return stats
  }
}

function ids(rows: readonly { id: string }[]): string[] {
  return rows.map((row) => row.id)
}
