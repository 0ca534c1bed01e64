import { describe, expect, it } from 'vitest'
import { exitCode, reportTable, type VerifyReport } from '../../../projector/verify/report.ts'
import { sourceScope } from '../../../projector/verify/run.ts'
import {
  rowsToDelete,
  snapshotSignal,
  tombstoneFor,
} from '../../../projector/verify/source-repair.ts'
import { sourceTables } from '../../../schema/events.ts'

const ORG = '0a000000-0000-4000-8000-00000000000a'
const OTHER = '0b000000-0000-4000-8000-00000000000b'
const none = { count: 0, ids: [] }

describe("verify --repair from the source: Debezium's incremental snapshot signal", () => {
  it('re-reads every table, each restricted to the organizations by one condition', () => {
    const signal = snapshotSignal({ organizations: [OTHER, ORG, ORG], controlTablesWhole: false })!
    expect(signal.type).toBe('incremental')
    expect(signal['data-collections']).toEqual(sourceTables.map((t) => `public.${t}`))
    expect(signal['data-collections']).not.toContain('public.payer_portal_logins')
    expect(signal['additional-conditions']).toHaveLength(sourceTables.length)
    const filter = (table: string) =>
      signal['additional-conditions'].find((c) => c['data-collection'] === `public.${table}`)
        ?.filter
    // Sorted and deduplicated; organizations by their own id, every other table by its owner.
    expect(filter('organizations')).toBe(`id IN ('${ORG}', '${OTHER}')`)
    expect(filter('provider_identifiers')).toBe(`organization_id IN ('${ORG}', '${OTHER}')`)
    expect(filter('api_keys')).toBe(`organization_id IN ('${ORG}', '${OTHER}')`)
  })

  it('control.db drifted in a whole-replica check: its two tables whole, with no condition', () => {
    expect(snapshotSignal({ organizations: [], controlTablesWhole: true })).toEqual({
      type: 'incremental',
      'data-collections': ['public.organizations', 'public.api_keys'],
      'additional-conditions': [],
    })
    const both = snapshotSignal({ organizations: [ORG], controlTablesWhole: true })!
    expect(both['additional-conditions'].map((c) => c['data-collection'])).not.toContain(
      'public.api_keys',
    )
    expect(snapshotSignal({ organizations: [], controlTablesWhole: false })).toBeUndefined()
  })

  it('refuses anything but a canonical uuid: the ids become SQL Debezium runs', () => {
    for (const bad of [`${ORG}') OR ('1'='1`, 'acme', ORG.toUpperCase(), `${ORG} `]) {
      expect(() => snapshotSignal({ organizations: [bad], controlTablesWhole: false })).toThrow(
        /not an organization id/,
      )
    }
  })
})

describe('verify --repair from the source: rows PostgreSQL lacks', () => {
  it('are the replica rows the later snapshot does not hold, table by table, sorted', () => {
    const replica = new Map([
      ['providers', new Set(['p2', 'p1', 'p3'])],
      ['provider_identifiers', new Set(['i1'])],
      ['documents', new Set(['d1'])],
    ] as const)
    const source = new Map([
      ['providers', new Set(['p1', 'p4'])],
      ['documents', new Set(['d1'])],
    ] as const)
    expect(rowsToDelete(replica, source)).toEqual([
      { table: 'providers', id: 'p2' },
      { table: 'providers', id: 'p3' },
      { table: 'provider_identifiers', id: 'i1' },
    ])
  })

  it("are deleted by a tombstone with Debezium's key bytes, on the table's topic", () => {
    expect(tombstoneFor('product', { table: 'providers', id: ORG })).toEqual({
      topic: 'product.public.providers',
      key: `{"id":"${ORG}"}`,
      value: null,
    })
  })
})

function report(overrides: Partial<VerifyReport> = {}): VerifyReport {
  return {
    drift: false,
    unsettled: [],
    rowsRead: 10,
    refused: [],
    passes: 1,
    seconds: 1,
    lag: {
      snapshotLsn: '0/16B3748',
      snapshotAt: '2026-11-23T19:00:00.000Z',
      eventsBehind: 0,
      waitedSeconds: 0.1,
      debezium: 'slot',
    },
    organizations: [],
    control: { status: 'equal', tables: [] },
    ...overrides,
  }
}

const drifted = (organizationId: string) => ({
  organizationId,
  status: 'drifted' as const,
  resources: [
    {
      resource: 'providers' as const,
      equal: 1,
      differing: { count: 1, ids: ['p1'] },
      missing: none,
      extra: none,
      changing: none,
    },
  ],
})

describe('verify --repair from the source: when, and the report', () => {
  it('only what the replay left: the drifted organizations, and control.db by scope', () => {
    expect(sourceScope(report(), undefined)).toBeUndefined()
    expect(
      sourceScope(
        report({ drift: true, organizations: [drifted(OTHER), drifted(ORG)] }),
        undefined,
      ),
    ).toEqual({ organizations: [ORG, OTHER], controlTablesWhole: false })
    const control = report({ drift: true, control: { status: 'drifted', tables: [] } })
    expect(sourceScope(control, undefined)).toEqual({
      organizations: [],
      controlTablesWhole: true,
    })
    expect(sourceScope(control, [OTHER])).toEqual({
      organizations: [OTHER],
      controlTablesWhole: false,
    })
  })

  it('the exit code is the last check, and the table says what was re-read and deleted', () => {
    const before = report({ drift: true, organizations: [drifted(ORG)] })
    const after = report({ drift: true, organizations: [drifted(ORG)] })
    const clean = report({ organizations: [{ ...drifted(ORG), status: 'equal', resources: [] }] })
    const repaired: VerifyReport = {
      ...before,
      repair: {
        rebuilt: [ORG],
        control: false,
        after,
        source: {
          organizations: [ORG],
          controlTablesWhole: false,
          signalId: 'e6b0c7de-0000-4000-8000-000000000001',
          tombstones: [{ table: 'providers', id: 'p9' }],
          waitedSeconds: 3.2,
          after: clean,
        },
      },
    }
    expect(exitCode(repaired)).toBe(0)
    expect(exitCode({ ...repaired, repair: { ...repaired.repair!, source: undefined } })).toBe(1)
    const text = reportTable(repaired)
    expect(text).toContain(
      `\nRepair from the source: Debezium re-read ${ORG} (incremental snapshot e6b0c7de-0000-4000-8000-000000000001, completed in 3.2 s); 1 row PostgreSQL lacks deleted by tombstones (providers p9); checked again:\n`,
    )
    expect(text.trimEnd().split('\n').at(-1)).toMatch(/^Re-checked 1 organization: no drift/)
  })
})
