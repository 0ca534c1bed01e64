// The whole-file build (the catch-up build, after a truncate, verify): pages of parents, each
// child list read once per page rather than once per document, each document written as a
// batch's refresh writes it (write.ts).
import {
  documentExpirable,
  groupIdentifierExpirable,
  providerIdentifierExpirable,
} from './builders.ts'
import type { ExpirableContent } from './builders.ts'
import type { BulkReads } from './queries.ts'
import { count, type DetailedRefreshStats } from './stats.ts'
import {
  writeDocument,
  writeEnrollment,
  writeExpirable,
  writeGroupEnrollment,
  writeProvider,
  writeProviderGroup,
  type DocumentTarget,
} from './write.ts'

/** One build's fixed parts: where it writes, what it reads, its stamp and what it counted. */
interface Build {
  target: DocumentTarget
  bulk: BulkReads
  pageRows: number
  stamp: string
  stats: DetailedRefreshStats
}

/** Builds every document from the mirror into `stats` (the orphans are the caller's). */
export function buildEveryDocument(build: Build): void {
  buildProviders(build)
  buildProviderGroups(build)
  buildEnrollments(build)
  buildGroupEnrollments(build)
  buildDocumentsWithExpirables(build)
  buildIdentifierExpirables(build)
}

function buildProviders({ target, bulk, pageRows, stamp, stats }: Build): void {
  for (const page of bulk.providers(pageRows)) {
    const { first, last } = idRange(page)
    const memberships = bulk.providerMemberships(first, last)
    const identifiers = bulk.providerIdentifiers(first, last)
    for (const row of page) {
      const memberOf = memberships.get(row.id) ?? []
      const outcome = writeProvider(target, row, memberOf, identifiers.get(row.id) ?? [], stamp)
      count(stats, 'provider', outcome)
    }
  }
}

function buildProviderGroups({ target, bulk, pageRows, stamp, stats }: Build): void {
  for (const page of bulk.providerGroups(pageRows)) {
    const { first, last } = idRange(page)
    const serviceLocations = bulk.groupServiceLocations(first, last)
    const identifiers = bulk.groupIdentifiers(first, last)
    for (const row of page) {
      const outcome = writeProviderGroup(
        target,
        row,
        serviceLocations.get(row.id) ?? [],
        identifiers.get(row.id) ?? [],
        stamp,
      )
      count(stats, 'providerGroup', outcome)
    }
  }
}

function buildEnrollments({ target, bulk, pageRows, stamp, stats }: Build): void {
  for (const page of bulk.enrollments(pageRows)) {
    const { first, last } = idRange(page)
    const providers = bulk.embeddedProviders(page.map((row) => row.providerId))
    const requirements = bulk.enrollmentRequirements(first, last)
    const linesOfBusiness = bulk.enrollmentLinesOfBusiness(first, last)
    const locations = bulk.enrollmentLocations(first, last)
    for (const row of page) {
      const children = {
        provider: providers.get(row.providerId),
        requirements: requirements.get(row.id) ?? [],
        linesOfBusiness: linesOfBusiness.get(row.id) ?? [],
        locations: locations.get(row.id) ?? [],
      }
      count(stats, 'enrollment', writeEnrollment(target, row, children, stamp))
    }
  }
}

function buildGroupEnrollments({ target, bulk, pageRows, stamp, stats }: Build): void {
  for (const page of bulk.groupEnrollments(pageRows)) {
    const { first, last } = idRange(page)
    const groups = bulk.embeddedGroups(page.map((row) => row.providerGroupId))
    const linesOfBusiness = bulk.groupEnrollmentLinesOfBusiness(first, last)
    for (const row of page) {
      const outcome = writeGroupEnrollment(
        target,
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
function buildDocumentsWithExpirables(build: Build): void {
  for (const page of build.bulk.documents(build.pageRows)) {
    for (const row of page) {
      count(build.stats, 'document', writeDocument(build.target, row, build.stamp))
      buildExpirable(build, documentExpirable(row))
    }
  }
}

function buildIdentifierExpirables(build: Build): void {
  for (const page of build.bulk.expiringGroupIdentifiers(build.pageRows)) {
    for (const row of page) buildExpirable(build, groupIdentifierExpirable(row))
  }
  for (const page of build.bulk.expiringProviderIdentifiers(build.pageRows)) {
    for (const row of page) buildExpirable(build, providerIdentifierExpirable(row))
  }
}

/** undefined: the source has no expiration date, so no expirable (nor a stored one to remove). */
function buildExpirable(build: Build, content: ExpirableContent | undefined): void {
  if (content === undefined) return
  count(build.stats, 'expirable', writeExpirable(build.target, content.id, content, build.stamp))
}

/** The first and last id of a page of rows in id order: the range its child lists are read for. */
function idRange(page: readonly { id: string }[]): { first: string; last: string } {
  return { first: page[0]!.id, last: page[page.length - 1]!.id }
}
