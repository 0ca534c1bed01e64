// Which documents a batch of mirror changes touches (DESIGN.md's table), without a database.
import { describe, expect, it } from 'vitest'
import {
  touchedDocuments,
  type MirrorChange,
  type RelatedDocuments,
  type TouchedDocuments,
} from '../../../projector/documents/index.ts'
import {
  document,
  enrollment,
  enrollmentLine,
  groupEnrollmentLine,
  groupIdentifier,
  membership,
  participation,
  provider,
  providerGroup,
  providerIdentifier,
  requirement,
  serviceLocation,
} from './fixtures.ts'

/** The mirror's related rows, as fixed lists; records which lookups were asked. */
function related(): RelatedDocuments & { asked: string[] } {
  const asked: string[] = []
  const lookup = (name: string, result: string[]) => (id: string) => {
    asked.push(`${name}(${id})`)
    return result
  }
  return {
    asked,
    enrollmentsOfProvider: lookup('enrollmentsOfProvider', ['e1', 'e2']),
    membersOfGroup: lookup('membersOfGroup', ['p1', 'p2']),
    groupEnrollmentsOfGroup: lookup('groupEnrollmentsOfGroup', ['ge1']),
    enrollmentsAtLocation: lookup('enrollmentsAtLocation', ['e3']),
  }
}

function touched(changes: MirrorChange[], lookups = related()) {
  const result: TouchedDocuments = touchedDocuments(changes, lookups)
  return Object.fromEntries(
    Object.entries(result)
      .filter(([, ids]) => (ids as Set<string>).size > 0)
      .map(([kind, ids]) => [kind, [...(ids as Set<string>)].sort()]),
  )
}

describe('touchedDocuments', () => {
  it('provider: itself, and its enrollments when its name or npi changes', () => {
    const before = provider({ id: 'p1' })
    expect(
      touched([{ table: 'providers', id: 'p1', previous: undefined, current: before }]),
    ).toEqual({ providers: ['p1'], enrollments: ['e1', 'e2'] })
    const renamed = { ...before, lastName: 'Byron' }
    expect(touched([{ table: 'providers', id: 'p1', previous: before, current: renamed }])).toEqual(
      {
        providers: ['p1'],
        enrollments: ['e1', 'e2'],
      },
    )
    const otherColumn = { ...before, specialty: 'Oncology' }
    expect(
      touched([{ table: 'providers', id: 'p1', previous: before, current: otherColumn }]),
    ).toEqual({ providers: ['p1'] })
    expect(
      touched([{ table: 'providers', id: 'p1', previous: before, current: undefined }]),
    ).toEqual({ providers: ['p1'], enrollments: ['e1', 'e2'] })
  })

  it('identifiers: the owner (before and after), and the expirable when there is a date', () => {
    const before = providerIdentifier({ id: 'i1', providerId: 'pa' })
    const moved = { ...before, providerId: 'pb' }
    expect(
      touched([{ table: 'provider_identifiers', id: 'i1', previous: before, current: moved }]),
    ).toEqual({ providers: ['pa', 'pb'] })
    const expiring = { ...before, expiresOn: '2026-01-01' }
    expect(
      touched([
        { table: 'provider_identifiers', id: 'i1', previous: expiring, current: undefined },
      ]),
    ).toEqual({ providers: ['pa'], expirables: ['provider_identifier:i1'] })

    const group = groupIdentifier({ id: 'x1', providerGroupId: 'g1', expiresOn: '2026-01-01' })
    expect(
      touched([{ table: 'group_identifiers', id: 'x1', previous: undefined, current: group }]),
    ).toEqual({ providerGroups: ['g1'], expirables: ['group_identifier:x1'] })
  })

  it('membership moved: both providers, and nothing else', () => {
    const before = membership({ id: 'm1', providerId: 'pa', providerGroupId: 'g1' })
    const moved = { ...before, providerId: 'pb' }
    expect(
      touched([{ table: 'group_memberships', id: 'm1', previous: before, current: moved }]),
    ).toEqual({ providers: ['pa', 'pb'] })
  })

  it('group: itself; members and group enrollments only when name, npi or tin change', () => {
    const before = providerGroup({ id: 'g1', name: 'North' })
    const lookups = related()
    expect(
      touched(
        [
          {
            table: 'provider_groups',
            id: 'g1',
            previous: before,
            current: { ...before, tin: '1' },
          },
        ],
        lookups,
      ),
    ).toEqual({ providerGroups: ['g1'], providers: ['p1', 'p2'], groupEnrollments: ['ge1'] })
    expect(lookups.asked).toEqual(['membersOfGroup(g1)', 'groupEnrollmentsOfGroup(g1)'])
    expect(
      touched([
        {
          table: 'provider_groups',
          id: 'g1',
          previous: before,
          current: { ...before, taxonomyCode: 'T' },
        },
      ]),
    ).toEqual({ providerGroups: ['g1'] })
  })

  it('service location: its groups; enrollments there when name, city or state change', () => {
    const before = serviceLocation({ id: 's1', providerGroupId: 'g1' })
    expect(
      touched([
        {
          table: 'service_locations',
          id: 's1',
          previous: before,
          current: { ...before, providerGroupId: 'g2', city: 'Reno' },
        },
      ]),
    ).toEqual({ providerGroups: ['g1', 'g2'], enrollments: ['e3'] })
    expect(
      touched([
        {
          table: 'service_locations',
          id: 's1',
          previous: before,
          current: { ...before, zip: '1' },
        },
      ]),
    ).toEqual({ providerGroups: ['g1'] })
  })

  it('enrollment parts touch their enrollment; group enrollment lines theirs', () => {
    expect(
      touched([
        {
          table: 'enrollments',
          id: 'e9',
          previous: undefined,
          current: enrollment({ id: 'e9', providerId: 'p1' }),
        },
        {
          table: 'enrollment_requirements',
          id: 'r1',
          previous: requirement({ id: 'r1', enrollmentId: 'e1' }),
          current: undefined,
        },
        {
          table: 'enrollment_lines_of_business',
          id: 'l1',
          previous: undefined,
          current: enrollmentLine({ id: 'l1', enrollmentId: 'e2' }),
        },
        {
          table: 'enrollment_location_participations',
          id: 'lp1',
          previous: participation({ id: 'lp1', enrollmentId: 'e3', serviceLocationId: 's1' }),
          current: participation({ id: 'lp1', enrollmentId: 'e4', serviceLocationId: 's1' }),
        },
        {
          table: 'group_enrollment_lines_of_business',
          id: 'gl1',
          previous: undefined,
          current: groupEnrollmentLine({ id: 'gl1', groupEnrollmentId: 'ge7' }),
        },
      ]),
    ).toEqual({ enrollments: ['e1', 'e2', 'e3', 'e4', 'e9'], groupEnrollments: ['ge7'] })
  })

  it('documents: the document, and its expirable when there is a date', () => {
    expect(
      touched([
        { table: 'documents', id: 'd1', previous: undefined, current: document({ id: 'd1' }) },
        {
          table: 'documents',
          id: 'd2',
          previous: document({ id: 'd2', expiresOn: '2026-01-01' }),
          current: document({ id: 'd2' }),
        },
      ]),
    ).toEqual({ documents: ['d1', 'd2'], expirables: ['document:d2'] })
  })

  it('asks the mirror once per renamed row, however many changes name it', () => {
    const before = providerGroup({ id: 'g1', name: 'A' })
    const lookups = related()
    touched(
      [
        { table: 'provider_groups', id: 'g1', previous: before, current: { ...before, name: 'B' } },
        { table: 'provider_groups', id: 'g1', previous: { ...before, name: 'B' }, current: before },
      ],
      lookups,
    )
    expect(lookups.asked).toEqual(['membersOfGroup(g1)', 'groupEnrollmentsOfGroup(g1)'])
  })
})
