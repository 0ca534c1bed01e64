// From the mirror changes of a batch to the set of documents to rebuild (DESIGN.md, "Which source
// changes touch which documents"). Pure: the few fan-outs that need the mirror (a renamed group's
// members, ...) go through `RelatedDocuments`, asked once per distinct row.
import type * as mirror from '../../schema/organization-db.ts'
import { providerName, expirableId, type DocumentRow } from './builders.ts'

/** Mirror rows as drizzle selects them: camelCase keys, booleans, JSON text for text[]/jsonb. */
export interface MirrorRows {
  providers: typeof mirror.providers.$inferSelect
  provider_identifiers: typeof mirror.providerIdentifiers.$inferSelect
  provider_groups: typeof mirror.providerGroups.$inferSelect
  group_memberships: typeof mirror.groupMemberships.$inferSelect
  service_locations: typeof mirror.serviceLocations.$inferSelect
  group_identifiers: typeof mirror.groupIdentifiers.$inferSelect
  enrollments: typeof mirror.enrollments.$inferSelect
  enrollment_requirements: typeof mirror.enrollmentRequirements.$inferSelect
  enrollment_lines_of_business: typeof mirror.enrollmentLinesOfBusiness.$inferSelect
  enrollment_location_participations: typeof mirror.enrollmentLocationParticipations.$inferSelect
  group_enrollments: typeof mirror.groupEnrollments.$inferSelect
  group_enrollment_lines_of_business: typeof mirror.groupEnrollmentLinesOfBusiness.$inferSelect
  documents: DocumentRow
}

export type MirrorTable = keyof MirrorRows
export type MirrorRowOf<T extends MirrorTable> = MirrorRows[T]

/**
 * One mirror row changed by a batch: `previous` before the batch changed it (undefined if it did
 * not exist), `current` after (undefined if deleted). Discriminated by `table`.
 */
export type MirrorChange = {
  [T in MirrorTable]: {
    table: T
    id: string
    previous: MirrorRows[T] | undefined
    current: MirrorRows[T] | undefined
  }
}[MirrorTable]

/** Ids of the documents to rebuild, deduplicated; expirables by their `<sourceType>:<id>` id. */
export interface TouchedDocuments {
  providers: Set<string>
  providerGroups: Set<string>
  enrollments: Set<string>
  groupEnrollments: Set<string>
  documents: Set<string>
  expirables: Set<string>
}

/** The mirror lookups the fan-outs need (indexed queries in queries.ts). */
export interface RelatedDocuments {
  enrollmentsOfProvider(providerId: string): Iterable<string>
  membersOfGroup(providerGroupId: string): Iterable<string>
  groupEnrollmentsOfGroup(providerGroupId: string): Iterable<string>
  enrollmentsAtLocation(serviceLocationId: string): Iterable<string>
}

export function emptyTouched(): TouchedDocuments {
  return {
    providers: new Set(),
    providerGroups: new Set(),
    enrollments: new Set(),
    groupEnrollments: new Set(),
    documents: new Set(),
    expirables: new Set(),
  }
}

type Row<T extends MirrorTable> = MirrorRows[T] | undefined

// The fan-out predicates: a change elsewhere is worth rebuilding a document only when what that
// document embeds differs (or the row appeared or disappeared: null <-> object).

/** Enrollments embed the provider's `{id, name, npi}`. */
export function embeddedProviderChanged(
  before: Row<'providers'>,
  after: Row<'providers'>,
): boolean {
  if (before === undefined || after === undefined) return before !== after
  return before.npi !== after.npi || providerName(before) !== providerName(after)
}

/** Member providers embed the group's name, npi and tin; group enrollments its id too. */
export function embeddedGroupChanged(
  before: Row<'provider_groups'>,
  after: Row<'provider_groups'>,
): boolean {
  if (before === undefined || after === undefined) return before !== after
  return before.name !== after.name || before.npi !== after.npi || before.tin !== after.tin
}

/** Enrollment locations show the service location's name, city and state. */
export function embeddedLocationChanged(
  before: Row<'service_locations'>,
  after: Row<'service_locations'>,
): boolean {
  if (before === undefined || after === undefined) return before !== after
  return before.name !== after.name || before.city !== after.city || before.state !== after.state
}

/** An expirable exists only while its source has an expiration date. */
function mayHaveExpirable(
  before: { expiresOn: string | null } | undefined,
  after: { expiresOn: string | null } | undefined,
): boolean {
  return (before?.expiresOn ?? null) !== null || (after?.expiresOn ?? null) !== null
}

function addBoth(into: Set<string>, before: string | undefined, after: string | undefined): void {
  if (before !== undefined) into.add(before)
  if (after !== undefined && after !== before) into.add(after)
}

/**
 * Expands a batch's mirror changes into the documents to rebuild. Both sides of a change count:
 * a membership moved from provider A to B touches A and B.
 */
export function touchedDocuments(
  changes: readonly MirrorChange[],
  related: RelatedDocuments,
): TouchedDocuments {
  const touched = emptyTouched()
  // Rows whose embedded summary changed: fanned out once each after the loop.
  const renamedProviders = new Set<string>()
  const renamedGroups = new Set<string>()
  const renamedLocations = new Set<string>()

  for (const change of changes) {
    switch (change.table) {
      case 'providers':
        touched.providers.add(change.id)
        if (embeddedProviderChanged(change.previous, change.current)) {
          renamedProviders.add(change.id)
        }
        break
      case 'provider_identifiers':
        addBoth(touched.providers, change.previous?.providerId, change.current?.providerId)
        if (mayHaveExpirable(change.previous, change.current)) {
          touched.expirables.add(expirableId('provider_identifier', change.id))
        }
        break
      case 'group_memberships':
        addBoth(touched.providers, change.previous?.providerId, change.current?.providerId)
        break
      case 'provider_groups':
        touched.providerGroups.add(change.id)
        if (embeddedGroupChanged(change.previous, change.current)) renamedGroups.add(change.id)
        break
      case 'service_locations':
        addBoth(
          touched.providerGroups,
          change.previous?.providerGroupId,
          change.current?.providerGroupId,
        )
        if (embeddedLocationChanged(change.previous, change.current)) {
          renamedLocations.add(change.id)
        }
        break
      case 'group_identifiers':
        addBoth(
          touched.providerGroups,
          change.previous?.providerGroupId,
          change.current?.providerGroupId,
        )
        if (mayHaveExpirable(change.previous, change.current)) {
          touched.expirables.add(expirableId('group_identifier', change.id))
        }
        break
      case 'enrollments':
        touched.enrollments.add(change.id)
        break
      case 'enrollment_requirements':
      case 'enrollment_lines_of_business':
      case 'enrollment_location_participations':
        addBoth(touched.enrollments, change.previous?.enrollmentId, change.current?.enrollmentId)
        break
      case 'group_enrollments':
        touched.groupEnrollments.add(change.id)
        break
      case 'group_enrollment_lines_of_business':
        addBoth(
          touched.groupEnrollments,
          change.previous?.groupEnrollmentId,
          change.current?.groupEnrollmentId,
        )
        break
      case 'documents':
        touched.documents.add(change.id)
        if (mayHaveExpirable(change.previous, change.current)) {
          touched.expirables.add(expirableId('document', change.id))
        }
        break
    }
  }

  for (const providerId of renamedProviders) {
    addAll(touched.enrollments, related.enrollmentsOfProvider(providerId))
  }
  for (const groupId of renamedGroups) {
    addAll(touched.providers, related.membersOfGroup(groupId))
    addAll(touched.groupEnrollments, related.groupEnrollmentsOfGroup(groupId))
  }
  for (const locationId of renamedLocations) {
    addAll(touched.enrollments, related.enrollmentsAtLocation(locationId))
  }
  return touched
}

function addAll(into: Set<string>, ids: Iterable<string>): void {
  for (const id of ids) into.add(id)
}
