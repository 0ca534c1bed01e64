// The public API's resources (spec/api-v1.md, decided further in spec/resources.md), as zod
// schemas. The projector types the documents it builds with them; the api generates its OpenAPI
// document from them. Key order here is the key order of every response.
import { z } from 'zod'

const date = z.string().regex(/^\d{4}-\d{2}-\d{2}$/)
const timestamp = z.iso.datetime({ offset: false, precision: 3 })
const nullableString = z.string().nullable()

export const scopes = [
  'providers:read',
  'providers:read:sensitive',
  'groups:read',
  'enrollments:read',
  'documents:read',
] as const
export type Scope = (typeof scopes)[number]

export const enrollmentStatuses = [
  'not_started',
  'in_progress',
  'submitted',
  'approved',
  'denied',
  'withdrawn',
] as const
export type EnrollmentStatus = (typeof enrollmentStatuses)[number]

export const membership = z
  .strictObject({
    providerGroupId: z.string(),
    name: z.string(),
    npi: nullableString,
    tin: nullableString,
  })
  .meta({ id: 'GroupMembership' })

export const identifier = z
  .strictObject({
    id: z.string(),
    type: z.string(),
    value: z.string(),
    issuedOn: date.nullable(),
    expiresOn: date.nullable(),
    metadata: z.json().describe('Free-form JSON kept as the product stored it.'),
  })
  .meta({ id: 'Identifier' })

/** Released only to keys holding providers:read:sensitive; omitted (not null) otherwise. */
export const sensitiveProviderFields = {
  birthCity: nullableString,
  birthCountry: nullableString,
  dateOfBirth: date.nullable(),
  ethnicity: nullableString,
  ethnicityDetail: nullableString,
  gender: nullableString,
}

const providerFields = {
  id: z.string(),
  name: z.string(),
  npi: z.string(),
  firstName: nullableString,
  middleName: nullableString,
  lastName: nullableString,
  suffix: nullableString,
  isActive: z.boolean(),
  telehealthServices: z.boolean(),
  type: nullableString,
  caqhId: nullableString,
  startDate: date.nullable(),
  termedDate: date.nullable(),
  taxonomyCode: nullableString,
  specialty: nullableString,
  specialtyTaxonomyCode: nullableString,
  secondarySpecialty: nullableString,
  secondarySpecialtyTaxonomyCode: nullableString,
  additionalSpecialty1: nullableString,
  additionalSpecialty1TaxonomyCode: nullableString,
  additionalSpecialty2: nullableString,
  additionalSpecialty2TaxonomyCode: nullableString,
  additionalSpecialty3: nullableString,
  additionalSpecialty3TaxonomyCode: nullableString,
  additionalSpecialty4: nullableString,
  additionalSpecialty4TaxonomyCode: nullableString,
  additionalSpecialty5: nullableString,
  additionalSpecialty5TaxonomyCode: nullableString,
  billingAddress: nullableString,
  billingAddressLine2: nullableString,
  billingCity: nullableString,
  billingState: nullableString,
  billingZip: nullableString,
  personalAddress: nullableString,
  personalAddressLine2: nullableString,
  personalCity: nullableString,
  personalCounty: nullableString,
  personalState: nullableString,
  personalZip: nullableString,
  personalEmail: nullableString,
  personalFax: nullableString,
  personalPhone: nullableString,
  otherEmails: z.array(z.string()),
  languages: z.array(z.string()),
  medicaidParticipation: nullableString,
  medicareParticipation: nullableString,
  medicaidStates: z.array(z.string()),
  medicareStates: z.array(z.string()),
}

const providerTail = {
  groupMemberships: z.array(membership),
  providerIds: z.array(identifier),
  createdAt: timestamp,
  updatedAt: timestamp,
}

/** A provider as a key without providers:read:sensitive sees it. */
export const provider = z
  .strictObject({ ...providerFields, ...providerTail })
  .meta({ id: 'Provider' })

/** A provider as a key with providers:read:sensitive sees it. */
export const sensitiveProvider = z
  .strictObject({ ...providerFields, ...sensitiveProviderFields, ...providerTail })
  .meta({ id: 'ProviderWithSensitiveFields' })

export const serviceLocation = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    address: nullableString,
    addressLine2: nullableString,
    city: nullableString,
    state: nullableString,
    zip: nullableString,
    phone: nullableString,
    isPrimary: z.boolean(),
  })
  .meta({ id: 'ServiceLocation' })

export const providerGroup = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    legalName: nullableString,
    npi: nullableString,
    tin: nullableString,
    taxonomyCode: nullableString,
    serviceLocations: z.array(serviceLocation),
    groupIds: z.array(identifier),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'ProviderGroup' })

const lineOfBusiness = z
  .strictObject({
    id: z.string(),
    lineOfBusiness: z.string(),
    status: z.string(),
    effectiveDate: date.nullable(),
  })
  .meta({ id: 'LineOfBusiness' })

export const enrollment = z
  .strictObject({
    id: z.string(),
    providerId: z.string(),
    provider: z
      .strictObject({ id: z.string(), name: z.string(), npi: z.string() })
      .nullable()
      .describe('null until the provider row has reached the replica'),
    providerGroupId: nullableString,
    payer: z.string(),
    state: nullableString,
    status: z.enum(enrollmentStatuses),
    payerProviderId: nullableString,
    submittedOn: date.nullable(),
    approvedOn: date.nullable(),
    effectiveDate: date.nullable(),
    requirements: z.array(
      z.strictObject({
        id: z.string(),
        name: z.string(),
        isComplete: z.boolean(),
        completedAt: timestamp.nullable(),
      }),
    ),
    linesOfBusiness: z.array(lineOfBusiness),
    locations: z.array(
      z.strictObject({
        id: z.string(),
        serviceLocationId: z.string(),
        name: nullableString,
        city: nullableString,
        state: nullableString,
        isActive: z.boolean(),
        activatedOn: date.nullable(),
      }),
    ),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'Enrollment' })

export const groupEnrollment = z
  .strictObject({
    id: z.string(),
    providerGroupId: z.string(),
    group: z
      .strictObject({ id: z.string(), name: z.string(), npi: nullableString, tin: nullableString })
      .nullable()
      .describe('null until the group row has reached the replica'),
    payer: z.string(),
    state: nullableString,
    status: z.enum(enrollmentStatuses),
    payerGroupId: nullableString,
    submittedOn: date.nullable(),
    approvedOn: date.nullable(),
    effectiveDate: date.nullable(),
    linesOfBusiness: z.array(lineOfBusiness),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'GroupEnrollment' })

export const documentMetadata = z
  .strictObject({
    id: z.string(),
    providerId: nullableString,
    providerGroupId: nullableString,
    type: z.string(),
    fileName: z.string(),
    contentType: z.string(),
    sizeBytes: z.number().int(),
    expiresOn: date.nullable(),
    uploadedAt: timestamp,
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'Document' })

export const expirableSourceTypes = ['provider_identifier', 'group_identifier', 'document'] as const
export type ExpirableSourceType = (typeof expirableSourceTypes)[number]

export const expirable = z
  .strictObject({
    id: z.string().describe('<sourceType>:<sourceId>'),
    sourceType: z.enum(expirableSourceTypes),
    sourceId: z.string(),
    providerId: nullableString,
    providerGroupId: nullableString,
    type: z.string(),
    description: z.string().describe('identifier: its value; document: its file name'),
    expiresOn: date,
    daysUntilExpiration: z
      .number()
      .int()
      .describe('days from the current UTC date, computed when served'),
    updatedAt: timestamp,
  })
  .meta({ id: 'Expirable' })

export type Provider = z.infer<typeof provider>
export type SensitiveProvider = z.infer<typeof sensitiveProvider>
export type ProviderGroup = z.infer<typeof providerGroup>
export type Enrollment = z.infer<typeof enrollment>
export type GroupEnrollment = z.infer<typeof groupEnrollment>
export type DocumentMetadata = z.infer<typeof documentMetadata>
export type Expirable = z.infer<typeof expirable>
