// The document builders against spec/resources.md, on a real organization file: insert mirror
// rows, refresh as the projector does after a batch, read the served documents.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  documentMetadata,
  enrollment as enrollmentSchema,
  expirable as expirableSchema,
  groupEnrollment as groupEnrollmentSchema,
  provider as providerSchema,
  providerGroup as providerGroupSchema,
  sensitiveProvider as sensitiveProviderSchema,
} from '../../../schema/resources.ts'
import {
  contentHash,
  priorStampsFrom,
  priorStampsScanned,
} from '../../../projector/documents/index.ts'
import { DOCUMENT_TABLES } from '../../support/applier.ts'
import {
  document,
  enrollment,
  enrollmentLine,
  groupEnrollment,
  groupEnrollmentLine,
  groupIdentifier,
  membership,
  openTestFile,
  participation,
  provider,
  providerGroup,
  providerIdentifier,
  requirement,
  serviceLocation,
  T1,
  T2,
  T3,
  T4,
  type TestFile,
} from './fixtures.ts'

let f: TestFile
beforeEach(() => {
  f = openTestFile()
})
afterEach(() => {
  f.close()
})

const names = (items: unknown) => (items as { name: string | null }[]).map((item) => item.name)
const ids = (items: unknown) => (items as { id: string }[]).map((item) => item.id)

describe('provider', () => {
  it('maps every field in the schema key order, both variants valid', () => {
    f.put('providers', provider({ id: 'p1', middleName: 'King', suffix: 'PhD' }))
    f.put('provider_groups', providerGroup({ id: 'g1', name: 'North', npi: '111', tin: '22' }))
    f.put('group_memberships', membership({ id: 'm1', providerId: 'p1', providerGroupId: 'g1' }))
    f.put(
      'provider_identifiers',
      providerIdentifier({ id: 'i1', providerId: 'p1', metadata: '{"state": "CA", "n": [1]}' }),
    )
    expect(f.refresh(T1)).toMatchObject({
      rewritten: 2, // the provider and its group
      byKind: { provider: { rewritten: 1, unchanged: 0, removed: 0 } },
    })

    const base = f.body('doc_providers', 'p1')
    expect(Object.keys(base)).toEqual(Object.keys(providerSchema.shape))
    expect(providerSchema.parse(base)).toEqual(base)
    const sensitive = f.body('doc_providers', 'p1', 'sensitive')
    expect(Object.keys(sensitive)).toEqual(Object.keys(sensitiveProviderSchema.shape))
    expect(sensitiveProviderSchema.parse(sensitive)).toEqual(sensitive)
    expect(base).not.toHaveProperty('birthCity')

    expect(base).toMatchObject({
      id: 'p1',
      name: 'Ada King Lovelace, PhD',
      npi: '1234567890',
      isActive: true,
      telehealthServices: false,
      otherEmails: [],
      languages: ['en', 'es'],
      medicareStates: ['IL'],
      termedDate: null,
      groupMemberships: [{ providerGroupId: 'g1', name: 'North', npi: '111', tin: '22' }],
      providerIds: [
        {
          id: 'i1',
          type: 'state_license',
          value: 'A-1',
          issuedOn: '2020-01-01',
          expiresOn: null,
          metadata: { state: 'CA', n: [1] },
        },
      ],
      createdAt: '2024-01-02T03:04:05.678Z',
      updatedAt: T1,
    })
    expect(sensitive).toMatchObject({ birthCity: 'London', gender: 'F', dateOfBirth: '1815-12-10' })
    expect(f.doc('doc_providers', 'p1')).toMatchObject({
      updatedAt: T1,
      sensitiveUpdatedAt: T1,
      isActive: true,
    })
  })

  it('stores the hash of the body without updatedAt', () => {
    f.put('providers', provider({ id: 'p1' }))
    f.refresh(T1)
    const row = f.doc('doc_providers', 'p1')!
    const withoutStamp = row.body.replace(`,"updatedAt":"${T1}"}`, '}')
    expect(row.hash).toBe(contentHash(withoutStamp))
    expect(row.sensitiveHash).toBe(
      contentHash(row.sensitiveBody.replace(`,"updatedAt":"${T1}"}`, '}')),
    )
  })

  it('orders memberships by group name then group id, leaving out unknown groups', () => {
    f.put('providers', provider({ id: 'p1' }))
    f.put('provider_groups', providerGroup({ id: 'g2', name: 'Beta' }))
    f.put('provider_groups', providerGroup({ id: 'g1', name: 'Beta' }))
    f.put('provider_groups', providerGroup({ id: 'g0', name: 'Alpha' }))
    for (const [m, g] of [
      ['m1', 'g2'],
      ['m2', 'g1'],
      ['m3', 'g0'],
      ['m4', 'unknown'],
    ] as const) {
      f.put('group_memberships', membership({ id: m, providerId: 'p1', providerGroupId: g }))
    }
    f.refresh(T1)
    const memberships = f.body('doc_providers', 'p1').groupMemberships as {
      providerGroupId: string
    }[]
    expect(memberships.map((m) => m.providerGroupId)).toEqual(['g0', 'g1', 'g2'])
  })

  it('orders identifiers by type then id', () => {
    f.put('providers', provider({ id: 'p1' }))
    f.put('provider_identifiers', providerIdentifier({ id: 'i3', providerId: 'p1', type: 'dea' }))
    f.put('provider_identifiers', providerIdentifier({ id: 'i2', providerId: 'p1', type: 'npi' }))
    f.put('provider_identifiers', providerIdentifier({ id: 'i1', providerId: 'p1', type: 'npi' }))
    f.refresh(T1)
    expect(ids(f.body('doc_providers', 'p1').providerIds)).toEqual(['i3', 'i1', 'i2'])
  })

  it('moves updatedAt on identifier insert, update and delete', () => {
    f.put('providers', provider({ id: 'p1' }))
    f.refresh(T1)
    f.put('provider_identifiers', providerIdentifier({ id: 'i1', providerId: 'p1' }))
    f.refresh(T2)
    expect(f.body('doc_providers', 'p1')).toMatchObject({ updatedAt: T2 })
    f.put('provider_identifiers', providerIdentifier({ id: 'i1', providerId: 'p1', value: 'B' }))
    f.refresh(T3)
    expect(f.body('doc_providers', 'p1')).toMatchObject({ updatedAt: T3 })
    f.remove('provider_identifiers', 'i1')
    f.refresh(T4)
    expect(f.body('doc_providers', 'p1')).toMatchObject({ updatedAt: T4, providerIds: [] })
  })

  it('follows a membership added, moved to another provider, and removed', () => {
    f.put('providers', provider({ id: 'pa' }))
    f.put('providers', provider({ id: 'pb' }))
    f.put('provider_groups', providerGroup({ id: 'g1', name: 'North' }))
    f.refresh(T1)
    f.put('group_memberships', membership({ id: 'm1', providerId: 'pa', providerGroupId: 'g1' }))
    f.refresh(T2)
    expect(f.body('doc_providers', 'pa').groupMemberships).toHaveLength(1)

    f.put('group_memberships', membership({ id: 'm1', providerId: 'pb', providerGroupId: 'g1' }))
    expect(f.refresh(T3)).toMatchObject({ rewritten: 2 })
    expect(f.body('doc_providers', 'pa')).toMatchObject({ groupMemberships: [], updatedAt: T3 })
    expect(f.body('doc_providers', 'pb').groupMemberships).toHaveLength(1)

    f.remove('group_memberships', 'm1')
    f.refresh(T4)
    expect(f.body('doc_providers', 'pb')).toMatchObject({ groupMemberships: [], updatedAt: T4 })
  })

  it('fills in a membership when its group arrives, and follows group renames', () => {
    f.put('providers', provider({ id: 'p1' }))
    f.put('group_memberships', membership({ id: 'm1', providerId: 'p1', providerGroupId: 'g1' }))
    f.refresh(T1)
    expect(f.body('doc_providers', 'p1').groupMemberships).toEqual([])

    f.put('provider_groups', providerGroup({ id: 'g1', name: 'North' }))
    f.refresh(T2)
    expect(f.body('doc_providers', 'p1')).toMatchObject({
      groupMemberships: [{ providerGroupId: 'g1', name: 'North', npi: null, tin: null }],
      updatedAt: T2,
    })

    f.put('provider_groups', providerGroup({ id: 'g1', name: 'North', tin: '99' }))
    f.refresh(T3)
    expect(f.body('doc_providers', 'p1')).toMatchObject({
      groupMemberships: [{ name: 'North', tin: '99' }],
      updatedAt: T3,
    })

    // A group column the membership does not show: the provider is left alone.
    f.put('provider_groups', providerGroup({ id: 'g1', name: 'North', tin: '99', legalName: 'X' }))
    expect(f.refresh(T4).byKind.provider).toEqual({ rewritten: 0, unchanged: 0, removed: 0 })
    expect(f.body('doc_providers', 'p1')).toMatchObject({ updatedAt: T3 })
  })

  it('keeps updatedAt when the same content is refreshed again', () => {
    f.put('providers', provider({ id: 'p1' }))
    f.refresh(T1)
    const before = f.doc('doc_providers', 'p1')
    f.put('providers', provider({ id: 'p1' }))
    expect(f.refresh(T2)).toMatchObject({ rewritten: 0, unchanged: 1 })
    expect(f.doc('doc_providers', 'p1')).toEqual(before)
  })

  it('ignores columns the api never shows (source updated_at, position)', () => {
    f.put('providers', provider({ id: 'p1' }))
    f.refresh(T1)
    f.put('providers', provider({ id: 'p1', updatedAt: '2024-06-01T00:00:00.000Z', sourceLsn: 9 }))
    expect(f.refresh(T2)).toMatchObject({ rewritten: 0, unchanged: 1 })
    expect(f.doc('doc_providers', 'p1')).toMatchObject({ updatedAt: T1, sensitiveUpdatedAt: T1 })
  })

  it('moves only sensitiveUpdatedAt on a sensitive-only change', () => {
    f.put('providers', provider({ id: 'p1' }))
    f.refresh(T1)
    const before = f.doc('doc_providers', 'p1')!
    f.put('providers', provider({ id: 'p1', ethnicity: 'Other' }))
    expect(f.refresh(T2)).toMatchObject({ rewritten: 1 })
    const after = f.doc('doc_providers', 'p1')!
    expect(after).toMatchObject({ updatedAt: T1, sensitiveUpdatedAt: T2 })
    expect(after.body).toBe(before.body)
    expect(after.hash).toBe(before.hash)
    expect(f.body('doc_providers', 'p1', 'sensitive')).toMatchObject({
      ethnicity: 'Other',
      updatedAt: T2,
    })
  })

  it('moves both stamps on a change both variants show, and updates the isActive filter', () => {
    f.put('providers', provider({ id: 'p1' }))
    f.refresh(T1)
    f.put('providers', provider({ id: 'p1', isActive: false }))
    f.refresh(T2)
    expect(f.doc('doc_providers', 'p1')).toMatchObject({
      updatedAt: T2,
      sensitiveUpdatedAt: T2,
      isActive: false,
    })
  })

  it('removes the document when the provider is deleted', () => {
    f.put('providers', provider({ id: 'p1' }))
    f.refresh(T1)
    f.remove('providers', 'p1')
    expect(f.refresh(T2)).toMatchObject({ removed: 1 })
    expect(f.doc('doc_providers', 'p1')).toBeUndefined()
  })
})

describe('provider group', () => {
  it('maps fields in key order; locations primary first then by name, id; ids by type, id', () => {
    f.put('provider_groups', providerGroup({ id: 'g1', name: 'North', legalName: 'North LLC' }))
    f.put('service_locations', serviceLocation({ id: 's3', providerGroupId: 'g1', name: 'B' }))
    f.put('service_locations', serviceLocation({ id: 's2', providerGroupId: 'g1', name: 'A' }))
    f.put('service_locations', serviceLocation({ id: 's1', providerGroupId: 'g1', name: 'B' }))
    f.put(
      'service_locations',
      serviceLocation({ id: 's4', providerGroupId: 'g1', name: 'Z', isPrimary: true }),
    )
    f.put('group_identifiers', groupIdentifier({ id: 'x2', providerGroupId: 'g1', type: 'b' }))
    f.put('group_identifiers', groupIdentifier({ id: 'x1', providerGroupId: 'g1', type: 'c' }))
    f.put('group_identifiers', groupIdentifier({ id: 'x3', providerGroupId: 'g1', type: 'b' }))
    f.refresh(T1)

    const group = f.body('doc_provider_groups', 'g1')
    expect(Object.keys(group)).toEqual(Object.keys(providerGroupSchema.shape))
    expect(providerGroupSchema.parse(group)).toEqual(group)
    expect(ids(group.serviceLocations)).toEqual(['s4', 's2', 's1', 's3'])
    expect(ids(group.groupIds)).toEqual(['x2', 'x3', 'x1'])
    expect((group.serviceLocations as unknown[])[0]).toEqual({
      id: 's4',
      name: 'Z',
      address: null,
      addressLine2: null,
      city: null,
      state: null,
      zip: null,
      phone: null,
      isPrimary: true,
    })
    expect(group).toMatchObject({ name: 'North', legalName: 'North LLC', updatedAt: T1 })
    expect((group.groupIds as unknown[])[0]).toMatchObject({ metadata: {} })
  })

  it('follows a service location renamed, moved to another group, and deleted', () => {
    f.put('provider_groups', providerGroup({ id: 'g1' }))
    f.put('provider_groups', providerGroup({ id: 'g2' }))
    f.put('service_locations', serviceLocation({ id: 's1', providerGroupId: 'g1', name: 'A' }))
    f.refresh(T1)
    f.put('service_locations', serviceLocation({ id: 's1', providerGroupId: 'g1', name: 'B' }))
    f.refresh(T2)
    expect(f.body('doc_provider_groups', 'g1')).toMatchObject({ updatedAt: T2 })
    expect(names(f.body('doc_provider_groups', 'g1').serviceLocations)).toEqual(['B'])

    f.put('service_locations', serviceLocation({ id: 's1', providerGroupId: 'g2', name: 'B' }))
    f.refresh(T3)
    expect(f.body('doc_provider_groups', 'g1')).toMatchObject({
      serviceLocations: [],
      updatedAt: T3,
    })
    expect(f.body('doc_provider_groups', 'g2')).toMatchObject({ updatedAt: T3 })

    f.remove('service_locations', 's1')
    f.refresh(T4)
    expect(f.body('doc_provider_groups', 'g2')).toMatchObject({
      serviceLocations: [],
      updatedAt: T4,
    })
  })

  it('follows group identifiers and removes the group when deleted', () => {
    f.put('provider_groups', providerGroup({ id: 'g1' }))
    f.refresh(T1)
    f.put('group_identifiers', groupIdentifier({ id: 'x1', providerGroupId: 'g1' }))
    f.refresh(T2)
    expect(f.body('doc_provider_groups', 'g1')).toMatchObject({ updatedAt: T2 })
    f.remove('group_identifiers', 'x1')
    f.refresh(T3)
    expect(f.body('doc_provider_groups', 'g1')).toMatchObject({ groupIds: [], updatedAt: T3 })
    f.remove('provider_groups', 'g1')
    expect(f.refresh(T4).byKind.providerGroup).toEqual({ rewritten: 0, unchanged: 0, removed: 1 })
  })
})

describe('enrollment', () => {
  function seed() {
    f.put('providers', provider({ id: 'p1', firstName: 'Grace', lastName: 'Hopper' }))
    f.put('provider_groups', providerGroup({ id: 'g1' }))
    f.put(
      'enrollments',
      enrollment({ id: 'e1', providerId: 'p1', providerGroupId: 'g1', payer: 'Blue Shield' }),
    )
  }

  it('maps fields in key order, with the filter columns', () => {
    seed()
    f.put(
      'enrollment_requirements',
      requirement({
        id: 'r1',
        enrollmentId: 'e1',
        isComplete: true,
        completedAt: '2024-03-01T10:00:00.000Z',
      }),
    )
    f.put('enrollment_lines_of_business', enrollmentLine({ id: 'l1', enrollmentId: 'e1' }))
    f.put(
      'service_locations',
      serviceLocation({
        id: 's1',
        providerGroupId: 'g1',
        name: 'Main',
        city: 'Oakland',
        state: 'CA',
      }),
    )
    f.put(
      'enrollment_location_participations',
      participation({ id: 'lp1', enrollmentId: 'e1', serviceLocationId: 's1', isActive: true }),
    )
    f.refresh(T1)

    const body = f.body('doc_enrollments', 'e1')
    expect(Object.keys(body)).toEqual(Object.keys(enrollmentSchema.shape))
    expect(enrollmentSchema.parse(body)).toEqual(body)
    expect(body).toEqual({
      id: 'e1',
      providerId: 'p1',
      provider: { id: 'p1', name: 'Grace Hopper', npi: '1234567890' },
      providerGroupId: 'g1',
      payer: 'Blue Shield',
      state: 'CA',
      status: 'in_progress',
      payerProviderId: null,
      submittedOn: null,
      approvedOn: null,
      effectiveDate: null,
      requirements: [
        { id: 'r1', name: 'W-9', isComplete: true, completedAt: '2024-03-01T10:00:00.000Z' },
      ],
      linesOfBusiness: [
        { id: 'l1', lineOfBusiness: 'commercial', status: 'pending', effectiveDate: null },
      ],
      locations: [
        {
          id: 'lp1',
          serviceLocationId: 's1',
          name: 'Main',
          city: 'Oakland',
          state: 'CA',
          isActive: true,
          activatedOn: null,
        },
      ],
      createdAt: '2024-01-02T03:04:05.678Z',
      updatedAt: T1,
    })
    expect(f.doc('doc_enrollments', 'e1')).toMatchObject({
      providerId: 'p1',
      status: 'in_progress',
      payerKey: 'blue shield',
    })

    f.put(
      'enrollments',
      enrollment({ id: 'e1', providerId: 'p1', payer: 'AETNA', status: 'denied' }),
    )
    f.refresh(T2)
    expect(f.doc('doc_enrollments', 'e1')).toMatchObject({ status: 'denied', payerKey: 'aetna' })
  })

  it('embeds the provider as null until it arrives, then follows name and npi', () => {
    f.put('enrollments', enrollment({ id: 'e1', providerId: 'p1' }))
    f.refresh(T1)
    expect(f.body('doc_enrollments', 'e1')).toMatchObject({ provider: null, updatedAt: T1 })
    expect(enrollmentSchema.parse(f.body('doc_enrollments', 'e1'))).toBeTruthy()

    f.put('providers', provider({ id: 'p1', firstName: 'Grace', lastName: 'Hopper' }))
    f.refresh(T2)
    expect(f.body('doc_enrollments', 'e1')).toMatchObject({
      provider: { id: 'p1', name: 'Grace Hopper' },
      updatedAt: T2,
    })

    f.put('providers', provider({ id: 'p1', firstName: 'Grace', lastName: 'Murray' }))
    f.refresh(T3)
    expect(f.body('doc_enrollments', 'e1')).toMatchObject({
      provider: { name: 'Grace Murray' },
      updatedAt: T3,
    })

    // A provider column the enrollment does not show: no enrollment rebuilt.
    f.put('providers', provider({ id: 'p1', firstName: 'Grace', lastName: 'Murray', gender: 'X' }))
    expect(f.refresh(T4).byKind.enrollment).toEqual({ rewritten: 0, unchanged: 0, removed: 0 })

    f.remove('providers', 'p1')
    f.refresh('2025-01-01T00:00:00.005Z')
    expect(f.body('doc_enrollments', 'e1')).toMatchObject({ provider: null })
  })

  it('orders requirements by position and follows one being completed', () => {
    seed()
    f.put('enrollment_requirements', requirement({ id: 'r1', enrollmentId: 'e1', position: 3 }))
    f.put('enrollment_requirements', requirement({ id: 'r2', enrollmentId: 'e1', position: 1 }))
    f.put('enrollment_requirements', requirement({ id: 'r3', enrollmentId: 'e1', position: 2 }))
    f.refresh(T1)
    expect(ids(f.body('doc_enrollments', 'e1').requirements)).toEqual(['r2', 'r3', 'r1'])

    f.put(
      'enrollment_requirements',
      requirement({
        id: 'r3',
        enrollmentId: 'e1',
        position: 2,
        isComplete: true,
        completedAt: '2024-05-05T05:05:05.005Z',
      }),
    )
    f.refresh(T2)
    const body = f.body('doc_enrollments', 'e1')
    expect(body).toMatchObject({ updatedAt: T2 })
    expect((body.requirements as unknown[])[1]).toMatchObject({ id: 'r3', isComplete: true })
  })

  it('orders lines of business by line then id and follows an effective date', () => {
    seed()
    f.put(
      'enrollment_lines_of_business',
      enrollmentLine({ id: 'l2', enrollmentId: 'e1', lineOfBusiness: 'medicaid' }),
    )
    f.put(
      'enrollment_lines_of_business',
      enrollmentLine({ id: 'l1', enrollmentId: 'e1', lineOfBusiness: 'medicaid' }),
    )
    f.put(
      'enrollment_lines_of_business',
      enrollmentLine({ id: 'l0', enrollmentId: 'e1', lineOfBusiness: 'exchange' }),
    )
    f.refresh(T1)
    expect(ids(f.body('doc_enrollments', 'e1').linesOfBusiness)).toEqual(['l0', 'l1', 'l2'])

    f.put(
      'enrollment_lines_of_business',
      enrollmentLine({
        id: 'l1',
        enrollmentId: 'e1',
        lineOfBusiness: 'medicaid',
        status: 'active',
        effectiveDate: '2025-02-01',
      }),
    )
    f.refresh(T2)
    const body = f.body('doc_enrollments', 'e1')
    expect(body).toMatchObject({ updatedAt: T2 })
    expect((body.linesOfBusiness as unknown[])[1]).toEqual({
      id: 'l1',
      lineOfBusiness: 'medicaid',
      status: 'active',
      effectiveDate: '2025-02-01',
    })
  })

  it('orders locations by name then id, unknown locations last, filled in when they arrive', () => {
    seed()
    f.put('service_locations', serviceLocation({ id: 's1', providerGroupId: 'g1', name: 'B' }))
    f.put('service_locations', serviceLocation({ id: 's2', providerGroupId: 'g1', name: 'A' }))
    const at = (id: string, serviceLocationId: string) =>
      f.put(
        'enrollment_location_participations',
        participation({ id, enrollmentId: 'e1', serviceLocationId }),
      )
    at('lp4', 'unknown-2')
    at('lp3', 's1')
    at('lp2', 'unknown-1')
    at('lp1', 's2')
    f.refresh(T1)
    const body = f.body('doc_enrollments', 'e1')
    expect(ids(body.locations)).toEqual(['lp1', 'lp3', 'lp2', 'lp4'])
    expect((body.locations as unknown[])[2]).toEqual({
      id: 'lp2',
      serviceLocationId: 'unknown-1',
      name: null,
      city: null,
      state: null,
      isActive: false,
      activatedOn: null,
    })

    f.put(
      'service_locations',
      serviceLocation({
        id: 'unknown-1',
        providerGroupId: 'g1',
        name: 'C',
        city: 'Reno',
        state: 'NV',
      }),
    )
    f.refresh(T2)
    const filled = f.body('doc_enrollments', 'e1')
    expect(filled).toMatchObject({ updatedAt: T2 })
    expect(ids(filled.locations)).toEqual(['lp1', 'lp3', 'lp2', 'lp4'])
    expect((filled.locations as unknown[])[2]).toMatchObject({ name: 'C', city: 'Reno' })
  })

  it('follows a location renamed (group and enrollment) and a participation activated', () => {
    seed()
    f.put('service_locations', serviceLocation({ id: 's1', providerGroupId: 'g1', name: 'A' }))
    f.put(
      'enrollment_location_participations',
      participation({ id: 'lp1', enrollmentId: 'e1', serviceLocationId: 's1' }),
    )
    f.refresh(T1)

    f.put(
      'service_locations',
      serviceLocation({ id: 's1', providerGroupId: 'g1', name: 'A', city: 'Fresno' }),
    )
    expect(f.refresh(T2).byKind).toMatchObject({
      providerGroup: { rewritten: 1 },
      enrollment: { rewritten: 1 },
    })
    expect(f.body('doc_enrollments', 'e1')).toMatchObject({
      locations: [{ city: 'Fresno' }],
      updatedAt: T2,
    })

    // A location column enrollments do not show: only the group is rebuilt.
    f.put(
      'service_locations',
      serviceLocation({ id: 's1', providerGroupId: 'g1', name: 'A', city: 'Fresno', zip: '9' }),
    )
    expect(f.refresh(T3).byKind).toMatchObject({
      providerGroup: { rewritten: 1 },
      enrollment: { rewritten: 0, unchanged: 0 },
    })

    f.put(
      'enrollment_location_participations',
      participation({
        id: 'lp1',
        enrollmentId: 'e1',
        serviceLocationId: 's1',
        isActive: true,
        activatedOn: '2025-03-01',
      }),
    )
    f.refresh(T4)
    expect(f.body('doc_enrollments', 'e1')).toMatchObject({
      locations: [{ isActive: true, activatedOn: '2025-03-01' }],
      updatedAt: T4,
    })
  })

  it('removes the document when the enrollment is deleted', () => {
    seed()
    f.refresh(T1)
    f.remove('enrollments', 'e1')
    expect(f.refresh(T2).byKind.enrollment).toEqual({ rewritten: 0, unchanged: 0, removed: 1 })
    expect(f.doc('doc_enrollments', 'e1')).toBeUndefined()
  })
})

describe('group enrollment', () => {
  it('maps fields in key order; group null until it arrives, then follows its rename', () => {
    f.put(
      'group_enrollments',
      groupEnrollment({ id: 'ge1', providerGroupId: 'g1', payer: 'Cigna', payerGroupId: 'C-9' }),
    )
    f.put(
      'group_enrollment_lines_of_business',
      groupEnrollmentLine({ id: 'gl2', groupEnrollmentId: 'ge1', lineOfBusiness: 'medicare' }),
    )
    f.put(
      'group_enrollment_lines_of_business',
      groupEnrollmentLine({ id: 'gl1', groupEnrollmentId: 'ge1', lineOfBusiness: 'medicare' }),
    )
    f.refresh(T1)
    const body = f.body('doc_group_enrollments', 'ge1')
    expect(Object.keys(body)).toEqual(Object.keys(groupEnrollmentSchema.shape))
    expect(groupEnrollmentSchema.parse(body)).toEqual(body)
    expect(body).toMatchObject({ group: null, payer: 'Cigna', payerGroupId: 'C-9' })
    expect(ids(body.linesOfBusiness)).toEqual(['gl1', 'gl2'])
    expect(f.doc('doc_group_enrollments', 'ge1')).toMatchObject({
      providerGroupId: 'g1',
      status: 'submitted',
      payerKey: 'cigna',
    })

    f.put('provider_groups', providerGroup({ id: 'g1', name: 'North', npi: '1', tin: '2' }))
    f.refresh(T2)
    expect(f.body('doc_group_enrollments', 'ge1')).toMatchObject({
      group: { id: 'g1', name: 'North', npi: '1', tin: '2' },
      updatedAt: T2,
    })

    f.put('provider_groups', providerGroup({ id: 'g1', name: 'South', npi: '1', tin: '2' }))
    f.refresh(T3)
    expect(f.body('doc_group_enrollments', 'ge1')).toMatchObject({
      group: { name: 'South' },
      updatedAt: T3,
    })
  })

  it('follows its lines of business', () => {
    f.put('group_enrollments', groupEnrollment({ id: 'ge1', providerGroupId: 'g1' }))
    f.refresh(T1)
    f.put(
      'group_enrollment_lines_of_business',
      groupEnrollmentLine({ id: 'gl1', groupEnrollmentId: 'ge1' }),
    )
    f.refresh(T2)
    f.put(
      'group_enrollment_lines_of_business',
      groupEnrollmentLine({ id: 'gl1', groupEnrollmentId: 'ge1', effectiveDate: '2025-07-01' }),
    )
    f.refresh(T3)
    expect(f.body('doc_group_enrollments', 'ge1')).toMatchObject({
      linesOfBusiness: [{ id: 'gl1', effectiveDate: '2025-07-01' }],
      updatedAt: T3,
    })
    f.remove('group_enrollment_lines_of_business', 'gl1')
    f.refresh(T4)
    expect(f.body('doc_group_enrollments', 'ge1')).toMatchObject({
      linesOfBusiness: [],
      updatedAt: T4,
    })
  })
})

describe('document metadata', () => {
  it('maps the metadata fields in key order, with the filter columns', () => {
    f.put('documents', document({ id: 'd1', providerId: 'p1', sizeBytes: 2048 }))
    f.refresh(T1)
    const body = f.body('doc_documents', 'd1')
    expect(Object.keys(body)).toEqual(Object.keys(documentMetadata.shape))
    expect(documentMetadata.parse(body)).toEqual(body)
    expect(body).toEqual({
      id: 'd1',
      providerId: 'p1',
      providerGroupId: null,
      type: 'license',
      fileName: 'license.pdf',
      contentType: 'application/pdf',
      sizeBytes: 2048,
      expiresOn: null,
      uploadedAt: '2024-01-02T03:04:05.678Z',
      createdAt: '2024-01-02T03:04:05.678Z',
      updatedAt: T1,
    })
    expect(f.doc('doc_documents', 'd1')).toMatchObject({ providerId: 'p1', providerGroupId: null })

    f.remove('documents', 'd1')
    expect(f.refresh(T2)).toMatchObject({ removed: 1 })
  })
})

describe('expirable', () => {
  /** The served object: the stored body completed the way the api completes it. */
  function served(id: string): Record<string, unknown> {
    const row = f.doc('doc_expirables', id)!
    return JSON.parse(
      `${row.body},"daysUntilExpiration":3,"updatedAt":"${row.updatedAt}"}`,
    ) as Record<string, unknown>
  }

  it('exists while a provider identifier has an expiration date', () => {
    f.put('provider_identifiers', providerIdentifier({ id: 'i1', providerId: 'p1' }))
    f.refresh(T1)
    expect(f.doc('doc_expirables', 'provider_identifier:i1')).toBeUndefined()

    f.put(
      'provider_identifiers',
      providerIdentifier({ id: 'i1', providerId: 'p1', value: 'A-1', expiresOn: '2026-01-31' }),
    )
    expect(f.refresh(T2).byKind.expirable).toEqual({ rewritten: 1, unchanged: 0, removed: 0 })
    const row = f.doc('doc_expirables', 'provider_identifier:i1')!
    expect(row).toMatchObject({
      sourceType: 'provider_identifier',
      sourceId: 'i1',
      expiresOn: '2026-01-31',
      updatedAt: T2,
      hash: contentHash(row.body),
    })
    expect(row.body.endsWith('}')).toBe(false)
    const item = served('provider_identifier:i1')
    expect(Object.keys(item)).toEqual(Object.keys(expirableSchema.shape))
    expect(expirableSchema.parse(item)).toEqual({
      id: 'provider_identifier:i1',
      sourceType: 'provider_identifier',
      sourceId: 'i1',
      providerId: 'p1',
      providerGroupId: null,
      type: 'state_license',
      description: 'A-1',
      expiresOn: '2026-01-31',
      daysUntilExpiration: 3,
      updatedAt: T2,
    })

    f.put(
      'provider_identifiers',
      providerIdentifier({ id: 'i1', providerId: 'p1', value: 'A-1', expiresOn: null }),
    )
    expect(f.refresh(T3).byKind.expirable).toEqual({ rewritten: 0, unchanged: 0, removed: 1 })
    expect(f.doc('doc_expirables', 'provider_identifier:i1')).toBeUndefined()
  })

  it('is removed with its source, and keeps its stamp when nothing it shows changed', () => {
    f.put(
      'group_identifiers',
      groupIdentifier({ id: 'x1', providerGroupId: 'g1', expiresOn: '2026-02-01' }),
    )
    f.put('documents', document({ id: 'd1', providerGroupId: 'g1', expiresOn: '2026-03-01' }))
    f.refresh(T1)
    expect(served('group_identifier:x1')).toMatchObject({
      providerId: null,
      providerGroupId: 'g1',
      type: 'clia',
      description: 'C-1',
    })
    expect(served('document:d1')).toMatchObject({
      sourceType: 'document',
      providerGroupId: 'g1',
      type: 'license',
      description: 'license.pdf',
    })
    expect(expirableSchema.parse(served('document:d1'))).toBeTruthy()

    f.put(
      'group_identifiers',
      groupIdentifier({ id: 'x1', providerGroupId: 'g1', expiresOn: '2026-02-01', metadata: '[]' }),
    )
    expect(f.refresh(T2).byKind.expirable).toEqual({ rewritten: 0, unchanged: 1, removed: 0 })
    expect(f.doc('doc_expirables', 'group_identifier:x1')).toMatchObject({ updatedAt: T1 })

    f.remove('group_identifiers', 'x1')
    f.remove('documents', 'd1')
    expect(f.refresh(T3).byKind.expirable).toEqual({ rewritten: 0, unchanged: 0, removed: 2 })
  })
})

describe('determinism and rebuilds', () => {
  function seed(file: TestFile, reversed: boolean) {
    const puts: (() => void)[] = [
      () => file.put('providers', provider({ id: 'p1' })),
      () => file.put('provider_groups', providerGroup({ id: 'g1', name: 'A' })),
      () => file.put('provider_groups', providerGroup({ id: 'g2', name: 'A' })),
      () =>
        file.put(
          'group_memberships',
          membership({ id: 'm1', providerId: 'p1', providerGroupId: 'g2' }),
        ),
      () =>
        file.put(
          'group_memberships',
          membership({ id: 'm2', providerId: 'p1', providerGroupId: 'g1' }),
        ),
      () =>
        file.put(
          'provider_identifiers',
          providerIdentifier({ id: 'i1', providerId: 'p1', expiresOn: '2026-01-01' }),
        ),
      () => file.put('provider_identifiers', providerIdentifier({ id: 'i2', providerId: 'p1' })),
      () =>
        file.put(
          'service_locations',
          serviceLocation({ id: 's1', providerGroupId: 'g1', name: 'X' }),
        ),
      () =>
        file.put(
          'service_locations',
          serviceLocation({ id: 's2', providerGroupId: 'g1', name: 'X' }),
        ),
      () => file.put('enrollments', enrollment({ id: 'e1', providerId: 'p1' })),
      () =>
        file.put(
          'enrollment_location_participations',
          participation({ id: 'lp1', enrollmentId: 'e1', serviceLocationId: 's2' }),
        ),
      () =>
        file.put(
          'enrollment_location_participations',
          participation({ id: 'lp2', enrollmentId: 'e1', serviceLocationId: 's1' }),
        ),
      () => file.put('group_enrollments', groupEnrollment({ id: 'ge1', providerGroupId: 'g1' })),
      () =>
        file.put('documents', document({ id: 'd1', providerId: 'p1', expiresOn: '2026-01-01' })),
    ]
    if (reversed) puts.reverse()
    // One batch per row: every intermediate state is refreshed on the way.
    for (const put of puts) {
      put()
      file.refresh(T1)
    }
  }

  const dump = (file: TestFile) =>
    DOCUMENT_TABLES.map((table) => file.db.prepare(`SELECT * FROM ${table} ORDER BY id`).all())

  it('yields byte-identical documents whatever order rows arrived in', () => {
    seed(f, false)
    const other = openTestFile()
    try {
      seed(other, true)
      expect(dump(other)).toEqual(dump(f))
    } finally {
      other.close()
    }
  })

  // Looked up one document at a time (large files), or read in one scan (small ones).
  it.each([
    ['looked up', priorStampsFrom],
    ['scanned', priorStampsScanned],
  ])(
    'keeps the previous generation stamp of unchanged documents on a rebuild (%s)',
    (_, stamps) => {
      seed(f, false)
      f.put('providers', provider({ id: 'p1', gender: 'M' })) // sensitive variant only
      f.refresh(T2)
      const rebuilt = openTestFile({ priorStamp: stamps(f.db) })
      try {
        seed(rebuilt, true)
        rebuilt.put('providers', provider({ id: 'p1', gender: 'M' }))
        rebuilt.put('enrollments', enrollment({ id: 'e1', providerId: 'p1', status: 'approved' }))
        rebuilt.refresh(T3)
        expect(rebuilt.doc('doc_providers', 'p1')).toMatchObject({
          updatedAt: T1,
          sensitiveUpdatedAt: T2,
        })
        expect(rebuilt.doc('doc_provider_groups', 'g1')).toMatchObject({ updatedAt: T1 })
        expect(rebuilt.doc('doc_expirables', 'document:d1')).toMatchObject({ updatedAt: T1 })
        expect(rebuilt.doc('doc_enrollments', 'e1')).toMatchObject({ updatedAt: T3 })
      } finally {
        rebuilt.close()
      }
    },
  )

  it('refreshAll rebuilds every document and drops orphans', () => {
    seed(f, false)
    const before = dump(f)
    expect(f.refresh(T2)).toMatchObject({ rewritten: 0 })
    // Rows cleared behind the refresher's back, as a truncate does.
    f.db.exec('DELETE FROM group_memberships; DELETE FROM documents')
    const stats = refreshAll(f, T2)
    expect(stats.byKind.document).toEqual({ rewritten: 0, unchanged: 0, removed: 1 })
    expect(stats.byKind.expirable).toEqual({ rewritten: 0, unchanged: 1, removed: 1 })
    expect(stats.byKind.provider).toEqual({ rewritten: 1, unchanged: 0, removed: 0 })
    expect(f.body('doc_providers', 'p1')).toMatchObject({ groupMemberships: [], updatedAt: T2 })
    expect(dump(f)[1]).toEqual(before[1])
  })
})

function refreshAll(file: TestFile, stamp: string) {
  return file.db.transaction(() => file.refresher.refreshAll(stamp))()
}
