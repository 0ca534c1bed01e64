// A PostgreSQL row read by verify must decode to exactly the row the projector stores from
// Debezium's event for it: otherwise verify would report drift that is only encoding.
import { describe, expect, it } from 'vitest'
import { decodeRecord } from '../../../projector/decode/decode.ts'
import { snapshotRecord } from '../../../projector/verify/records.ts'
import { lsnToNumber, timestampText } from '../../../projector/verify/source.ts'
import { identifierRow, ORG_A, providerRow, record, uuid } from '../../support/debezium.ts'

function decodedRow(rec: ReturnType<typeof record>) {
  const decoded = decodeRecord(rec, 'product')
  if (decoded.kind !== 'change' || decoded.change.kind !== 'upsert') {
    throw new Error(JSON.stringify(decoded))
  }
  return decoded.change.row
}

describe('verify reads rows as Debezium sends them', () => {
  it('timestamptz in UTC text becomes the ISO form Debezium writes', () => {
    expect(timestampText('2025-03-04 05:06:07.123456+00')).toBe('2025-03-04T05:06:07.123456Z')
    expect(timestampText('2025-03-04 05:06:07+00')).toBe('2025-03-04T05:06:07Z')
    expect(timestampText('2025-03-04 05:06:07.1+02')).toBe('2025-03-04T05:06:07.1+02')
  })

  it('WAL positions as numbers', () => {
    expect(lsnToNumber('0/16B3748')).toBe(0x16b3748)
    expect(lsnToNumber('1/0')).toBe(2 ** 32)
  })

  it('a provider and an identifier decode to the rows their Debezium events give', () => {
    const debeziumProvider = providerRow(uuid(1), ORG_A, {
      start_date: 18_321, // 2020-02-29
      date_of_birth: -56_000,
      updated_at: '2025-06-07T08:09:10.123456Z',
    })
    // What pg hands verify for the same row (source.ts's type parsers, TimeZone UTC).
    const { ssn: _s, internal_notes: _i, ...stored } = debeziumProvider
    const fromPostgres = {
      ...stored,
      start_date: '2020-02-29',
      date_of_birth: new Date(-56_000 * 86_400_000).toISOString().slice(0, 10),
      created_at: timestampText('2026-11-21 10:00:00.123456+00'),
      updated_at: timestampText('2025-06-07 08:09:10.123456+00'),
    }
    const position = { lsn: 5, tsMs: 1 }
    expect(decodedRow(snapshotRecord('product', 'providers', fromPostgres, position, 0))).toEqual(
      decodedRow(record({ table: 'providers', op: 'r', after: debeziumProvider })),
    )

    const debeziumIdentifier = identifierRow(uuid(2), uuid(1), ORG_A, {
      metadata: '{"state": "CA", "nested": {"b": [1, 2.5, null]}}',
    })
    const fromPostgresIdentifier = {
      ...debeziumIdentifier,
      issued_on: new Date(19_000 * 86_400_000).toISOString().slice(0, 10),
      expires_on: new Date(21_000 * 86_400_000).toISOString().slice(0, 10),
      created_at: timestampText('2026-11-21 10:00:00.123456+00'),
      updated_at: timestampText('2026-11-21 10:00:00.123456+00'),
    }
    expect(
      decodedRow(
        snapshotRecord('product', 'provider_identifiers', fromPostgresIdentifier, position, 1),
      ),
    ).toEqual(
      decodedRow(record({ table: 'provider_identifiers', op: 'r', after: debeziumIdentifier })),
    )
  })
})
