import { describe, expect, it } from 'vitest'
import { exitCode, reportTable, type VerifyReport } from '../../../projector/verify/report.ts'

const ORG = '0a000000-0000-4000-8000-00000000000a'
const OTHER = '0b000000-0000-4000-8000-00000000000b'
const none = { count: 0, ids: [] }

function report(overrides: Partial<VerifyReport> = {}): VerifyReport {
  return {
    drift: false,
    unsettled: [],
    rowsRead: 120,
    refused: [],
    passes: 1,
    seconds: 1.5,
    lag: {
      snapshotLsn: '0/16B3748',
      snapshotAt: '2026-11-23T19:00:00.000Z',
      eventsBehind: 3,
      waitedSeconds: 0.4,
      debezium: 'slot',
    },
    organizations: [],
    control: {
      status: 'equal',
      tables: [
        { table: 'organizations', equal: 2, differing: none, missing: none, extra: none },
        { table: 'api_keys', equal: 3, differing: none, missing: none, extra: none },
      ],
    },
    ...overrides,
  }
}

describe('verify report', () => {
  it('a table: one row per equal organization, every resource of a drifted one, then the ids', () => {
    const drifted = report({
      drift: true,
      organizations: [
        {
          organizationId: ORG,
          status: 'drifted',
          resources: [
            {
              resource: 'providers',
              equal: 5,
              differing: { count: 22, ids: ['p1', 'p2'] },
              missing: none,
              extra: none,
              changing: none,
            },
            {
              resource: 'documents',
              equal: 2,
              differing: none,
              missing: none,
              extra: none,
              changing: none,
            },
          ],
        },
        {
          organizationId: OTHER,
          status: 'equal',
          resources: [
            {
              resource: 'providers',
              equal: 7,
              differing: none,
              missing: none,
              extra: none,
              changing: none,
            },
            {
              resource: 'documents',
              equal: 1,
              differing: none,
              missing: none,
              extra: none,
              changing: none,
            },
          ],
        },
      ],
    })
    const text = reportTable(drifted)
    expect(text).toMatch(new RegExp(`^${ORG} +providers +5 +22 +0 +0$`, 'm'))
    expect(text).toMatch(new RegExp(`^${OTHER} +\\(all\\) +8 +0 +0 +0$`, 'm'))
    expect(text).toMatch(/^control\.db +\(all\) +5 +0 +0 +0$/m)
    expect(text).toContain(`${ORG} providers differing: p1 p2 (+20 more)`)
    expect(text).toContain('Drift: 1 of 2 organizations differs from PostgreSQL')
    expect(text).toContain('The replica was 3 change events behind')
    expect(exitCode(drifted)).toBe(1)
  })

  it("names control.db's rows that differ, and says what mends them", () => {
    const revoked = report({
      drift: true,
      organizations: [
        {
          organizationId: ORG,
          status: 'equal',
          resources: [
            {
              resource: 'providers',
              equal: 7,
              differing: none,
              missing: none,
              extra: none,
              changing: none,
            },
          ],
        },
      ],
      control: {
        status: 'drifted',
        tables: [
          { table: 'organizations', equal: 1, differing: none, missing: none, extra: none },
          {
            table: 'api_keys',
            equal: 2,
            differing: { count: 1, ids: ['k1'] },
            missing: none,
            extra: { count: 1, ids: ['k9'] },
          },
        ],
      },
    })
    const text = reportTable(revoked)
    expect(text).toMatch(/^control\.db +api_keys +2 +1 +0 +1$/m)
    expect(text).toContain('control.db api_keys differing: k1')
    expect(text).toContain('control.db api_keys extra in replica: k9')
    expect(text).toContain(
      'Drift: control.db differs from PostgreSQL; the documents of 1 organization do not',
    )
    expect(text).toContain("--repair replaces control.db's organizations and API keys")
    const repaired = reportTable({
      ...revoked,
      repair: { rebuilt: [], control: true, after: report() },
    })
    expect(repaired).toContain(
      "Repair: replaced control.db's organizations and API keys with their topics' rows; checked again:",
    )
    expect(exitCode(revoked)).toBe(1)
    const unsettled = report({ control: { ...revoked.control, status: 'unsettled' } })
    expect(reportTable(unsettled)).toContain('control.db: changed after every snapshot taken')
    expect(exitCode(unsettled)).toBe(1)
  })

  it('lists each row PostgreSQL holds that the replica refuses, and exits 1 for it', () => {
    const refused = report({
      refused: [
        { organizationId: ORG, table: 'documents', id: 'd1', reason: 'size_bytes: too big' },
      ],
    })
    const text = reportTable(refused)
    expect(text).toContain(`${ORG} documents refused by the replica: d1 (size_bytes: too big)`)
    expect(text).toContain('1 row PostgreSQL holds refused by the replica')
    expect(exitCode(refused)).toBe(1)
    expect(exitCode(report())).toBe(0)
  })

  it('counts one organization in the singular', () => {
    const one = {
      organizationId: ORG,
      status: 'equal' as const,
      resources: [
        {
          resource: 'providers' as const,
          equal: 7,
          differing: none,
          missing: none,
          extra: none,
          changing: none,
        },
      ],
    }
    expect(reportTable(report({ organizations: [one] }))).toContain(
      'Checked 1 organization: no drift',
    )
    expect(
      reportTable(report({ organizations: [one, { ...one, organizationId: OTHER }] })),
    ).toContain('Checked 2 organizations: no drift')
  })

  it('exit codes: 0 without drift, 1 with drift left after a repair or an unsettled organization', () => {
    const clean = report()
    expect(exitCode(clean)).toBe(0)
    expect(exitCode(report({ unsettled: [ORG] }))).toBe(1)
    expect(
      exitCode(report({ drift: true, repair: { rebuilt: [ORG], control: false, after: clean } })),
    ).toBe(0)
    expect(
      exitCode(
        report({
          drift: true,
          repair: { rebuilt: [ORG], control: false, after: report({ drift: true }) },
        }),
      ),
    ).toBe(1)
  })
})
