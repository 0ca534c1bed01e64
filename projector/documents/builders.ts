// Pure builders: mirror rows in, response content out (every resource without its `updatedAt`,
// which the refresher appends when it stamps a new version).
//
// Object literals here are written in the key order of schema/resources.ts: JSON.stringify keeps
// insertion order, and that order is the order of every response. Child rows arrive already
// sorted by the queries (queries.ts), so equal mirror content always yields identical text.
import type {
  documents,
  enrollments,
  groupEnrollments,
  groupIdentifiers,
  providerGroups,
  providerIdentifiers,
  providers,
} from '../../schema/organization-db.ts'
import type {
  DocumentMetadata,
  Enrollment,
  EnrollmentStatus,
  Expirable,
  ExpirableSourceType,
  GroupEnrollment,
  Provider,
  ProviderGroup,
  SensitiveProvider,
} from '../../schema/resources.ts'
import { joinJsonObjects, parseStringArray } from './json.ts'

type ProviderRow = typeof providers.$inferSelect
type ProviderGroupRow = typeof providerGroups.$inferSelect
type EnrollmentRow = typeof enrollments.$inferSelect
type GroupEnrollmentRow = typeof groupEnrollments.$inferSelect
/** size_bytes is a bigint: its decimal text where a double would round it (queries.ts). */
export type DocumentRow = Omit<typeof documents.$inferSelect, 'sizeBytes'> & {
  sizeBytes: number | string
}

/** A response without `updatedAt`: what is hashed. */
export type Content<T> = Omit<T, 'updatedAt'>

export type Identifier = Provider['providerIds'][number]
export type IdentifierRow = Pick<
  typeof providerIdentifiers.$inferSelect | typeof groupIdentifiers.$inferSelect,
  'id' | 'type' | 'value' | 'issuedOn' | 'expiresOn' | 'metadata'
>
export type Membership = Provider['groupMemberships'][number]
export type ServiceLocation = ProviderGroup['serviceLocations'][number]
export type Requirement = Enrollment['requirements'][number]
export type LineOfBusiness = Enrollment['linesOfBusiness'][number]
export type EnrollmentLocation = Enrollment['locations'][number]
export type NameParts = Pick<ProviderRow, 'firstName' | 'middleName' | 'lastName' | 'suffix'>
export type EmbeddedProviderRow = NameParts & Pick<ProviderRow, 'id' | 'npi'>
export type EmbeddedGroup = NonNullable<GroupEnrollment['group']>

/**
 * First, middle and last name joined by single spaces, then `, <suffix>` when one is set.
 * Empty strings are skipped like nulls: joining them would put two spaces in a row.
 */
export function providerName(parts: NameParts): string {
  let name = ''
  for (const part of [parts.firstName, parts.middleName, parts.lastName]) {
    if (part === null || part === '') continue
    name = name === '' ? part : `${name} ${part}`
  }
  return parts.suffix === null || parts.suffix === '' ? name : `${name}, ${parts.suffix}`
}

/** An identifier entry (provider `providerIds`, group `groupIds`); metadata is the jsonb value. */
export function identifierEntry(row: IdentifierRow): Identifier {
  return {
    id: row.id,
    type: row.type,
    value: row.value,
    issuedOn: row.issuedOn,
    expiresOn: row.expiresOn,
    metadata: JSON.parse(row.metadata) as Identifier['metadata'],
  }
}

type ProviderHead = Omit<Provider, keyof ProviderTail | 'updatedAt'>
type ProviderSensitiveFields = Omit<SensitiveProvider, keyof Provider>
type ProviderTail = Pick<Provider, 'groupMemberships' | 'providerIds' | 'createdAt'>

/**
 * The two variants of a provider, as JSON without `updatedAt`: `base` for keys without
 * providers:read:sensitive, `sensitive` with the six sensitive fields between `medicareStates`
 * and `groupMemberships`. The shared parts are serialized once and joined.
 */
export function providerJson(
  row: ProviderRow,
  memberships: Membership[],
  identifiers: readonly IdentifierRow[],
): { base: string; sensitive: string } {
  const head: ProviderHead = {
    id: row.id,
    name: providerName(row),
    npi: row.npi,
    firstName: row.firstName,
    middleName: row.middleName,
    lastName: row.lastName,
    suffix: row.suffix,
    isActive: row.isActive,
    telehealthServices: row.telehealthServices,
    type: row.type,
    caqhId: row.caqhId,
    startDate: row.startDate,
    termedDate: row.termedDate,
    taxonomyCode: row.taxonomyCode,
    specialty: row.specialty,
    specialtyTaxonomyCode: row.specialtyTaxonomyCode,
    secondarySpecialty: row.secondarySpecialty,
    secondarySpecialtyTaxonomyCode: row.secondarySpecialtyTaxonomyCode,
    additionalSpecialty1: row.additionalSpecialty1,
    additionalSpecialty1TaxonomyCode: row.additionalSpecialty1TaxonomyCode,
    additionalSpecialty2: row.additionalSpecialty2,
    additionalSpecialty2TaxonomyCode: row.additionalSpecialty2TaxonomyCode,
    additionalSpecialty3: row.additionalSpecialty3,
    additionalSpecialty3TaxonomyCode: row.additionalSpecialty3TaxonomyCode,
    additionalSpecialty4: row.additionalSpecialty4,
    additionalSpecialty4TaxonomyCode: row.additionalSpecialty4TaxonomyCode,
    additionalSpecialty5: row.additionalSpecialty5,
    additionalSpecialty5TaxonomyCode: row.additionalSpecialty5TaxonomyCode,
    billingAddress: row.billingAddress,
    billingAddressLine2: row.billingAddressLine2,
    billingCity: row.billingCity,
    billingState: row.billingState,
    billingZip: row.billingZip,
    personalAddress: row.personalAddress,
    personalAddressLine2: row.personalAddressLine2,
    personalCity: row.personalCity,
    personalCounty: row.personalCounty,
    personalState: row.personalState,
    personalZip: row.personalZip,
    personalEmail: row.personalEmail,
    personalFax: row.personalFax,
    personalPhone: row.personalPhone,
    otherEmails: parseStringArray(row.otherEmails),
    languages: parseStringArray(row.languages),
    medicaidParticipation: row.medicaidParticipation,
    medicareParticipation: row.medicareParticipation,
    medicaidStates: parseStringArray(row.medicaidStates),
    medicareStates: parseStringArray(row.medicareStates),
  }
  const sensitive: ProviderSensitiveFields = {
    birthCity: row.birthCity,
    birthCountry: row.birthCountry,
    dateOfBirth: row.dateOfBirth,
    ethnicity: row.ethnicity,
    ethnicityDetail: row.ethnicityDetail,
    gender: row.gender,
  }
  const tail: ProviderTail = {
    groupMemberships: memberships,
    providerIds: identifiers.map(identifierEntry),
    createdAt: row.createdAt,
  }
  const headJson = JSON.stringify(head)
  const tailJson = JSON.stringify(tail)
  return {
    base: joinJsonObjects(headJson, tailJson),
    sensitive: joinJsonObjects(headJson, JSON.stringify(sensitive), tailJson),
  }
}

export function providerGroupContent(
  row: ProviderGroupRow,
  serviceLocations: ServiceLocation[],
  identifiers: readonly IdentifierRow[],
): Content<ProviderGroup> {
  return {
    id: row.id,
    name: row.name,
    legalName: row.legalName,
    npi: row.npi,
    tin: row.tin,
    taxonomyCode: row.taxonomyCode,
    serviceLocations,
    groupIds: identifiers.map(identifierEntry),
    createdAt: row.createdAt,
  }
}

/** `provider` is undefined until the provider row has reached the mirror: then it is null. */
export function enrollmentContent(
  row: EnrollmentRow,
  provider: EmbeddedProviderRow | undefined,
  requirements: Requirement[],
  linesOfBusiness: LineOfBusiness[],
  locations: EnrollmentLocation[],
): Content<Enrollment> {
  return {
    id: row.id,
    providerId: row.providerId,
    provider:
      provider === undefined
        ? null
        : { id: provider.id, name: providerName(provider), npi: provider.npi },
    providerGroupId: row.providerGroupId,
    payer: row.payer,
    state: row.state,
    status: row.status as EnrollmentStatus,
    payerProviderId: row.payerProviderId,
    submittedOn: row.submittedOn,
    approvedOn: row.approvedOn,
    effectiveDate: row.effectiveDate,
    requirements,
    linesOfBusiness,
    locations,
    createdAt: row.createdAt,
  }
}

/** `group` is undefined until the group row has reached the mirror: then it is null. */
export function groupEnrollmentContent(
  row: GroupEnrollmentRow,
  group: EmbeddedGroup | undefined,
  linesOfBusiness: LineOfBusiness[],
): Content<GroupEnrollment> {
  return {
    id: row.id,
    providerGroupId: row.providerGroupId,
    group:
      group === undefined
        ? null
        : { id: group.id, name: group.name, npi: group.npi, tin: group.tin },
    payer: row.payer,
    state: row.state,
    status: row.status as EnrollmentStatus,
    payerGroupId: row.payerGroupId,
    submittedOn: row.submittedOn,
    approvedOn: row.approvedOn,
    effectiveDate: row.effectiveDate,
    linesOfBusiness,
    createdAt: row.createdAt,
  }
}

/**
 * A document's JSON. sizeBytes is a JSON integer written with every digit, past 2^53 too (the
 * column is a bigint; JSON numbers have no limit, a double would round it): the one value that
 * is text here is spliced in as a number.
 */
export function documentMetadataJson(row: DocumentRow): string {
  const size = row.sizeBytes
  const json = JSON.stringify(documentMetadataContent({ ...row, sizeBytes: 0 }))
  return json.replace('"sizeBytes":0', `"sizeBytes":${String(size)}`)
}

/** Metadata only: the mirror never holds the storage key, and nothing here locates the file. */
export function documentMetadataContent(
  row: Omit<DocumentRow, 'sizeBytes'> & { sizeBytes: number },
): Content<DocumentMetadata> {
  return {
    id: row.id,
    providerId: row.providerId,
    providerGroupId: row.providerGroupId,
    type: row.type,
    fileName: row.fileName,
    contentType: row.contentType,
    sizeBytes: row.sizeBytes,
    expiresOn: row.expiresOn,
    uploadedAt: row.uploadedAt,
    createdAt: row.createdAt,
  }
}

// ---- Expirables --------------------------------------------------------------------------------

/** What is stored of an expirable: `daysUntilExpiration` and `updatedAt` are added when served. */
export type ExpirableContent = Omit<Expirable, 'daysUntilExpiration' | 'updatedAt'>

export function expirableId(sourceType: ExpirableSourceType, sourceId: string): string {
  return `${sourceType}:${sourceId}`
}

export function parseExpirableId(id: string): {
  sourceType: ExpirableSourceType
  sourceId: string
} {
  const colon = id.indexOf(':')
  return {
    sourceType: id.slice(0, colon) as ExpirableSourceType,
    sourceId: id.slice(colon + 1),
  }
}

type ExpiringRow = { id: string; type: string; expiresOn: string | null }

function expirable(
  sourceType: ExpirableSourceType,
  row: ExpiringRow,
  owner: { providerId: string | null; providerGroupId: string | null },
  description: string,
): ExpirableContent | undefined {
  if (row.expiresOn === null) return undefined
  return {
    id: expirableId(sourceType, row.id),
    sourceType,
    sourceId: row.id,
    providerId: owner.providerId,
    providerGroupId: owner.providerGroupId,
    type: row.type,
    description,
    expiresOn: row.expiresOn,
  }
}

/** undefined when the identifier has no expiration date: then it has no expirable. */
export function providerIdentifierExpirable(
  row: ExpiringRow & { providerId: string; value: string },
): ExpirableContent | undefined {
  return expirable(
    'provider_identifier',
    row,
    { providerId: row.providerId, providerGroupId: null },
    row.value,
  )
}

export function groupIdentifierExpirable(
  row: ExpiringRow & { providerGroupId: string; value: string },
): ExpirableContent | undefined {
  return expirable(
    'group_identifier',
    row,
    { providerId: null, providerGroupId: row.providerGroupId },
    row.value,
  )
}

export function documentExpirable(
  row: ExpiringRow & {
    providerId: string | null
    providerGroupId: string | null
    fileName: string
  },
): ExpirableContent | undefined {
  return expirable('document', row, row, row.fileName)
}

/** The stored expirable body: the object without its closing brace (the api appends the rest). */
export function expirableBody(content: ExpirableContent): string {
  return JSON.stringify(content).slice(0, -1)
}
