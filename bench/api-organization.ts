// The organization bench:api serves, and bench/page-read.ts reads: 10,000 providers with stored
// bodies of 2-3 KB, written the way the projector writes them, in a published generation of a
// temporary data directory.
import { randomUUID } from 'node:crypto'
import { allScopes, ReplicaFixture, stamp } from '../test/integration/api/fixtures.ts'

export const PROVIDERS = 10_000

export function buildOrganization(): {
  replica: ReplicaFixture
  key: string
  ids: string[]
  organizationId: string
} {
  const replica = ReplicaFixture.create()
  const org = replica.organization()
  const ids: string[] = []
  const insert = org.db.transaction(() => {
    for (let i = 0; i < PROVIDERS; i++) {
      const { sensitive } = org.provider(
        {
          lastName: `Provider${i}`,
          secondarySpecialty: i % 2 === 0 ? 'Internal Medicine' : null,
          secondarySpecialtyTaxonomyCode: i % 2 === 0 ? '207R00000X' : null,
          groupMemberships: Array.from({ length: 1 + (i % 3) }, (_, g) => ({
            providerGroupId: randomUUID(),
            name: `Regional Medical Group ${g}`,
            npi: '1999999984',
            tin: '123456789',
          })),
          providerIds: Array.from({ length: 3 + (i % 3) }, (_, n) => ({
            id: randomUUID(),
            type: ['dea', 'state_license', 'board_certification', 'cds', 'malpractice'][
              n
            ] as string,
            value: `ID-${i}-${n}-${randomUUID().slice(0, 8)}`,
            issuedOn: '2021-03-01',
            expiresOn: '2027-03-01',
            metadata: { state: 'IL', verifiedBy: 'primary_source', note: 'verified annually' },
          })),
        },
        // 20 stamps share each second: ties are ordered by id, as in real bursts.
        { updatedAt: stamp(Math.floor(i / 20)) },
      )
      ids.push(sensitive.id)
    }
  })
  insert()
  const key = replica.key(org.id, {
    scopes: allScopes.filter((s) => s !== 'providers:read:sensitive'),
  }).raw
  // Recorded as the projector records it in every generation it makes (files of their own: 0).
  // Without it the api reads control.db for it on every request, as for a generation made before
  // files were shared: 1.4% of a distinct page's CPU that production does not spend.
  replica.setState('organization_files', '0')
  replica.publish()
  return { replica, key, ids, organizationId: org.id }
}
