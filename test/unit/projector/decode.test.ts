import { describe, expect, it } from 'vitest'
import { decodeRecord, laterCommit, type Decoded } from '../../../projector/decode/decode.ts'
import { unavailable } from '../../../schema/events.ts'
import { ORG_A, identifierRow, providerRow, record, uuid } from '../../support/debezium.ts'

function change(d: Decoded) {
  if (d.kind !== 'change') throw new Error(`expected a change, got ${JSON.stringify(d)}`)
  return d.change
}

describe('decodeRecord', () => {
  it('decodes a wrapped insert into the mirror form, dropping never-stored columns', () => {
    const c = change(
      decodeRecord(
        record({ table: 'providers', op: 'c', after: providerRow(uuid(1), ORG_A), lsn: 42 }),
        'product',
      ),
    )
    expect(c.kind).toBe('upsert')
    if (c.kind !== 'upsert' || c.table !== 'providers') throw new Error('unreachable')
    expect(c.id).toBe(uuid(1))
    expect(c.position).toEqual({ lsn: 42, snapshot: false, committedAtMs: 1_763_719_200_000 })
    expect(c.row.start_date).toBe('2024-10-04')
    expect(c.row.created_at).toBe('2026-11-21T10:00:00.123Z')
    expect(c.row.languages).toBe('["en"]')
    expect(c.row).not.toHaveProperty('ssn')
    expect(c.row).not.toHaveProperty('internal_notes')
  })

  it('drops storage_key from documents: where the file lives is never stored', () => {
    const after = {
      id: uuid(7),
      organization_id: ORG_A,
      provider_id: uuid(1),
      provider_group_id: null,
      type: 'license',
      file_name: 'license.pdf',
      content_type: 'application/pdf',
      size_bytes: 52_431,
      expires_on: 20_800,
      uploaded_at: '2026-11-21T10:00:00.123456Z',
      storage_key: 's3://bucket/org/license.pdf',
      created_at: '2026-11-21T10:00:00.123456Z',
      updated_at: '2026-11-21T10:00:00.123456Z',
    }
    const c = change(decodeRecord(record({ table: 'documents', op: 'c', after }), 'product'))
    if (c.kind !== 'upsert' || c.table !== 'documents') throw new Error('unreachable')
    expect(c.row.file_name).toBe('license.pdf')
    expect(c.row).not.toHaveProperty('storage_key')
    expect(JSON.stringify(c)).not.toContain('s3://bucket')
  })

  it('keeps every digit of a bigint past 2^53, as Debezium writes it in bytes, both encodings', () => {
    const after = (size: string) => ({
      id: uuid(7),
      organization_id: ORG_A,
      provider_id: uuid(1),
      provider_group_id: null,
      type: 'license',
      // A key-like text inside a string is a string, not a key.
      file_name: `"size_bytes":12345678901234567890.pdf`,
      content_type: 'application/pdf',
      size_bytes: `@${size}@`,
      expires_on: null,
      uploaded_at: '2026-11-21T10:00:00.123456Z',
      created_at: '2026-11-21T10:00:00.123456Z',
      updated_at: '2026-11-21T10:00:00.123456Z',
    })
    const decode = (size: string, wrapped: boolean) => {
      const r = record({ table: 'documents', op: 'c', after: after(size), wrapped })
      // The number as Debezium writes it: digits, unquoted (JSON.stringify cannot make them).
      const text = JSON.stringify(r.value).replace(`"@${size}@"`, size)
      return decodeRecord({ ...r, value: Buffer.from(text) }, 'product')
    }
    for (const wrapped of [true, false]) {
      for (const size of ['9007199254740993', '9223372036854775807', '-9007199254740993']) {
        const c = change(decode(size, wrapped))
        if (c.kind !== 'upsert' || c.table !== 'documents') throw new Error('unreachable')
        expect(c.row.size_bytes).toBe(size)
        expect(c.row.file_name).toBe('"size_bytes":12345678901234567890.pdf')
      }
      const small = change(decode('9007199254740991', wrapped))
      if (small.kind !== 'upsert' || small.table !== 'documents') throw new Error('unreachable')
      expect(small.row.size_bytes).toBe(9_007_199_254_740_991)
      // Past int64, as PostgreSQL's bigint refuses it too.
      expect(decode('9223372036854775808', wrapped).kind).toBe('bad')
    }
  })

  it('accepts the bare envelope (schemas disabled) the same way', () => {
    const wrapped = decodeRecord(
      record({ table: 'providers', op: 'u', after: providerRow(uuid(1), ORG_A) }),
      'product',
    )
    const bare = decodeRecord(
      record({ table: 'providers', op: 'u', after: providerRow(uuid(1), ORG_A), wrapped: false }),
      'product',
    )
    expect(bare).toEqual(wrapped)
  })

  it('parses raw bytes as Kafka delivers them', () => {
    const r = record({ table: 'providers', op: 'c', after: providerRow(uuid(1), ORG_A) })
    const bytes = { ...r, value: Buffer.from(JSON.stringify(r.value)) }
    expect(decodeRecord(bytes, 'product')).toEqual(decodeRecord(r, 'product'))
  })

  it('dispatches on source.table, not on the topic', () => {
    const r = record({
      table: 'provider_identifiers',
      op: 'c',
      after: identifierRow(uuid(2), uuid(1), ORG_A),
      topic: 'rerouted.everything',
    })
    expect(change(decodeRecord(r, 'product')).table).toBe('provider_identifiers')
  })

  it('normalizes jsonb text so equal values are stored identically', () => {
    const c = change(
      decodeRecord(
        record({
          table: 'provider_identifiers',
          op: 'c',
          after: identifierRow(uuid(2), uuid(1), ORG_A, { metadata: '{ "state" : "CA" }' }),
        }),
        'product',
      ),
    )
    if (c.kind !== 'upsert' || c.table !== 'provider_identifiers') throw new Error('unreachable')
    expect(c.row.metadata).toBe('{"state":"CA"}')
  })

  it('marks unchanged TOASTed columns, text and arrays, as unavailable', () => {
    const after = providerRow(uuid(1), ORG_A, {
      personal_address: '__debezium_unavailable_value',
      languages: ['__debezium_unavailable_value'],
    })
    const c = change(decodeRecord(record({ table: 'providers', op: 'u', after }), 'product'))
    if (c.kind !== 'upsert' || c.table !== 'providers') throw new Error('unreachable')
    expect(c.row.personal_address).toBe(unavailable)
    expect(c.row.languages).toBe(unavailable)
  })

  it('ignores columns it does not know, and reads a missing nullable column as null', () => {
    const after: Record<string, unknown> = {
      ...providerRow(uuid(1), ORG_A),
      favourite_colour: 'blue',
    }
    delete after.middle_name
    const c = change(decodeRecord(record({ table: 'providers', op: 'u', after }), 'product'))
    if (c.kind !== 'upsert' || c.table !== 'providers') throw new Error('unreachable')
    expect(c.row).not.toHaveProperty('favourite_colour')
    expect(c.row.middle_name).toBeNull()
  })

  it('rejects an event missing a NOT NULL column, naming it but not its values', () => {
    const after: Record<string, unknown> = providerRow(uuid(1), ORG_A)
    delete after.npi
    const d = decodeRecord(record({ table: 'providers', op: 'c', after }), 'product')
    expect(d).toMatchObject({ kind: 'bad', reason: 'schema_mismatch', table: 'providers' })
    if (d.kind === 'bad') {
      expect(d.message).toContain('npi')
      expect(d.message).not.toContain('123-45-6789')
    }
  })

  it('calls a row without a usable organization_id a missing organization', () => {
    const d = decodeRecord(
      record({ table: 'providers', op: 'c', after: providerRow(uuid(1), '') }),
      'product',
    )
    expect(d).toMatchObject({ kind: 'bad', reason: 'missing_organization' })
  })

  it('takes a delete by its key alone: the zero-filled organization_id of before is not used', () => {
    const before = { ...providerRow(uuid(1), ''), npi: '', is_active: false }
    const c = change(
      decodeRecord(record({ table: 'providers', op: 'd', before, lsn: 9 }), 'product'),
    )
    expect(c).toEqual({
      kind: 'delete',
      table: 'providers',
      id: uuid(1),
      position: { lsn: 9, snapshot: false, committedAtMs: 1_763_719_200_000 },
    })
  })

  it('falls back to the record key for a delete without before', () => {
    const r = {
      ...record({ table: 'providers', op: 'd', before: null }),
      key: { payload: { id: uuid(7) }, schema: {} },
    }
    expect(change(decodeRecord(r, 'product'))).toMatchObject({ kind: 'delete', id: uuid(7) })
  })

  it('decodes truncates, snapshot reads and every snapshot marker', () => {
    expect(change(decodeRecord(record({ table: 'documents', op: 't' }), 'product'))).toMatchObject({
      kind: 'truncate',
      table: 'documents',
    })
    for (const snapshot of [
      'true',
      'first',
      'first_in_data_collection',
      'last_in_data_collection',
      'last',
      'incremental',
    ]) {
      const c = change(
        decodeRecord(
          record({ table: 'providers', op: 'r', snapshot, after: providerRow(uuid(1), ORG_A) }),
          'product',
        ),
      )
      expect(c.position.snapshot).toBe(true)
    }
  })

  it("positions an incremental snapshot's read by source.sequence: its lsn is null", () => {
    // As Debezium 3.2.3 writes one (captured in test/integration/e2e/verify.test.ts).
    const read = (source: Record<string, unknown>) =>
      change(
        decodeRecord(
          {
            topic: 'product.public.providers',
            partition: 0,
            offset: '18',
            key: { id: uuid(1) },
            value: {
              op: 'r',
              before: null,
              after: providerRow(uuid(1), ORG_A),
              source: { table: 'providers', snapshot: 'incremental', ts_ms: 1, ...source },
            },
          },
          'product',
        ),
      ).position
    expect(read({ lsn: null, sequence: '["27416560","27416570"]' })).toMatchObject({
      lsn: 27416570,
      snapshot: true,
    })
    expect(read({ lsn: null, sequence: '["27416560",null]' }).lsn).toBe(27416560)
    // An lsn, when there is one, is the position; nothing usable is 0, as before.
    expect(read({ lsn: 5, sequence: '["27416560","27416570"]' }).lsn).toBe(5)
    for (const sequence of [null, 'not json', '{"a":1}', '["-1"]', '[1]']) {
      expect(read({ lsn: null, sequence }).lsn, String(sequence)).toBe(0)
    }
  })

  it('decodes a tombstone as a delete by its key, of the table its topic names', () => {
    const key = { schema: { type: 'struct' }, payload: { id: uuid(5).toUpperCase() } }
    for (const k of [key, JSON.stringify(key), Buffer.from(JSON.stringify(key.payload))]) {
      expect(
        decodeRecord(
          { topic: 'product.public.providers', partition: 0, offset: '1', key: k, value: null },
          'product',
        ),
      ).toEqual({
        kind: 'change',
        change: {
          kind: 'delete',
          table: 'providers',
          id: uuid(5),
          position: { lsn: 0, snapshot: false, committedAtMs: undefined },
          tombstone: true,
        },
      })
    }
    const tombstone = (topic: string, k: unknown) =>
      decodeRecord({ topic, partition: 0, offset: '1', key: k, value: null }, 'product')
    // Not a change topic of this prefix, or a table the replica does not have: nothing to do.
    expect(tombstone('other.public.providers', key)).toEqual({
      kind: 'skipped',
      reason: 'tombstone',
    })
    expect(tombstone('product.public.unknown', key)).toEqual({
      kind: 'skipped',
      reason: 'tombstone',
    })
    expect(tombstone('product.public.payer_portal_logins', key)).toEqual({
      kind: 'skipped',
      reason: 'never_stored',
    })
    // A key that is not a row's id cannot be applied: a dead letter, not a silent skip.
    expect(tombstone('product.public.providers', null)).toMatchObject({
      kind: 'bad',
      reason: 'schema_mismatch',
      table: 'providers',
    })
  })

  it('skips heartbeats, transaction topics and never-stored tables', () => {
    expect(
      decodeRecord(
        {
          topic: '__debezium-heartbeat.product',
          partition: 0,
          offset: '1',
          key: null,
          value: { ts_ms: 1 },
        },
        'product',
      ),
    ).toEqual({ kind: 'skipped', reason: 'not_a_change_topic' })
    expect(
      decodeRecord(
        {
          topic: 'product.transaction',
          partition: 0,
          offset: '1',
          key: null,
          value: { status: 'BEGIN' },
        },
        'product',
      ),
    ).toEqual({ kind: 'skipped', reason: 'not_a_change_topic' })
    const portal = record({
      table: 'payer_portal_logins',
      op: 'c',
      after: { id: uuid(3), organization_id: ORG_A, password_cipher: 'secret' },
    })
    expect(decodeRecord(portal, 'product')).toEqual({ kind: 'skipped', reason: 'never_stored' })
  })

  it('classifies bad events: unparseable, unknown table, broken envelope', () => {
    const base = { topic: 'product.public.providers', partition: 0, offset: '1', key: null }
    expect(decodeRecord({ ...base, value: Buffer.from('{nope') }, 'product')).toMatchObject({
      kind: 'bad',
      reason: 'unparseable',
    })
    expect(
      decodeRecord(record({ table: 'mystery', op: 'c', after: { id: uuid(1) } }), 'product'),
    ).toMatchObject({ kind: 'bad', reason: 'unknown_table' })
    expect(
      decodeRecord({ ...base, value: { payload: { op: 'x' }, schema: {} } }, 'product'),
    ).toMatchObject({ kind: 'bad', reason: 'schema_mismatch' })
    expect(
      decodeRecord(record({ table: 'providers', op: 'c', after: null }), 'product'),
    ).toMatchObject({ kind: 'bad', reason: 'schema_mismatch' })
  })
})

describe('laterCommit', () => {
  it('keeps the latest source commit time of a batch, ignoring events without one', () => {
    expect(laterCommit(undefined, 1_000)).toBe(1_000)
    expect(laterCommit(1_000, 2_000)).toBe(2_000)
    expect(laterCommit(2_000, 1_000)).toBe(2_000)
    expect(laterCommit(2_000, undefined)).toBe(2_000)
    expect(laterCommit(undefined, undefined)).toBeUndefined()
  })
})
