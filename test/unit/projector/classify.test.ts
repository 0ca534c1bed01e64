import { describe, expect, it } from 'vitest'
import { classifyRecord } from '../../../projector/routing/classify.ts'
import { ORG_A, organizationRow, providerRow, record, uuid } from '../../support/debezium.ts'

describe('classifyRecord', () => {
  it("sends organizations' rows to control.db and tenant rows to a file, with where they came from", () => {
    const org = classifyRecord(
      record({ table: 'organizations', op: 'c', after: organizationRow(ORG_A), offset: 7 }),
      'product',
    )
    expect(org).toMatchObject({
      kind: 'control',
      event: {
        change: { kind: 'upsert', table: 'organizations', id: ORG_A },
        origin: { topic: 'product.public.organizations', partition: 0, offset: 7 },
      },
      committedAtMs: 1_763_719_200_000,
    })
    const provider = classifyRecord(
      record({ table: 'providers', op: 'd', before: providerRow(uuid(1), ORG_A), partition: 2 }),
      'product',
    )
    expect(provider).toMatchObject({
      kind: 'organization',
      event: {
        change: { kind: 'delete', table: 'providers', id: uuid(1) },
        origin: { partition: 2 },
      },
    })
  })

  it('names the table of a dead letter, and skips what is not a change', () => {
    const bad = classifyRecord(
      record({ table: 'providers', op: 'c', after: { ...providerRow(uuid(2), ORG_A), npi: 7 } }),
      'product',
    )
    expect(bad).toMatchObject({ kind: 'bad', reason: 'schema_mismatch', table: 'providers' })
    const heartbeat = {
      topic: '__debezium-heartbeat.product',
      partition: 0,
      offset: '1',
      key: null,
    }
    expect(classifyRecord({ ...heartbeat, value: { ts_ms: 1 } }, 'product')).toEqual({
      kind: 'skipped',
    })
  })

  it('a tombstone is a delete of its key for the organization files; without a key, a dead letter', () => {
    const tombstone = { topic: 'product.public.providers', partition: 0, offset: '1' }
    expect(
      classifyRecord({ ...tombstone, key: { id: uuid(3) }, value: null }, 'product'),
    ).toMatchObject({
      kind: 'organization',
      event: { change: { kind: 'delete', table: 'providers', id: uuid(3), tombstone: true } },
    })
    // Kafka never keeps a keyless record on a compacted topic; one on another is not a change.
    expect(classifyRecord({ ...tombstone, key: null, value: null }, 'product')).toMatchObject({
      kind: 'bad',
      table: 'providers',
    })
  })
})
