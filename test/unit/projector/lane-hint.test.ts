// Reading an event's organization from its bytes (projector/routing/lane-hint.ts): right for the
// shapes Debezium writes, and silent (the main thread then decodes) for anything it cannot be sure
// of.
import { describe, expect, it } from 'vitest'
import { decodeRecord } from '../../../projector/decode/decode.ts'
import { LaneAssignment, laneHint } from '../../../projector/routing/lane-hint.ts'
import {
  ORG_A,
  ORG_B,
  debeziumValue,
  organizationRow,
  providerRow,
  record,
  uuid,
} from '../../support/debezium.ts'

const bytes = (value: unknown) => Buffer.from(JSON.stringify(value))

describe('laneHint', () => {
  it('names the table, id and organization of an upsert, wrapped or not, as the decoder does', () => {
    for (const wrapped of [true, false]) {
      for (const op of ['c', 'u', 'r'] as const) {
        const r = record({ table: 'providers', op, after: providerRow(uuid(7), ORG_A), wrapped })
        const value = bytes(r.value)
        const hint = laneHint(value)
        expect(hint).toMatchObject({ table: 'providers', id: uuid(7), organizationId: ORG_A })
        expect(value.toString('latin1', hint!.idAt, hint!.idAt + 36)).toBe(uuid(7))
        const decoded = decodeRecord({ ...r, value }, 'product')
        expect(decoded).toMatchObject({ kind: 'change', change: { id: hint!.id } })
      }
    }
  })

  it('finds the same in long values (searched from their end: the schema comes first)', () => {
    // Past 3 KB a value is searched from its end; a column's text that mimics the key is escaped.
    const notes = `${'x'.repeat(5000)}"after":{"id":"${uuid(9)}"`
    for (const wrapped of [true, false]) {
      const r = record({
        table: 'providers',
        op: 'u',
        after: { ...providerRow(uuid(8), ORG_A), notes },
        wrapped,
      })
      const value = bytes(r.value)
      expect(value.length).toBeGreaterThan(5000)
      expect(laneHint(value)).toMatchObject({ id: uuid(8), organizationId: ORG_A })
      const deleted = bytes(
        record({
          table: 'providers',
          op: 'd',
          before: { ...providerRow(uuid(8), ORG_A), notes },
          wrapped,
        }).value,
      )
      expect(laneHint(deleted)).toBeUndefined()
    }
  })

  it('takes the row’s last organization key, as JSON.parse does, never the old row’s', () => {
    for (const wrapped of [true, false]) {
      // A row that moved: its old organization comes first, in `before`.
      const moved = record({
        table: 'providers',
        op: 'u',
        before: providerRow(uuid(7), ORG_B),
        after: providerRow(uuid(7), ORG_A),
        wrapped,
      })
      const text = JSON.stringify(moved.value)
      expect(laneHint(Buffer.from(text))).toMatchObject({ organizationId: ORG_A })
      // The key written twice in `after` (the first of ORG_A's is the row's): the last counts.
      const twice = text.replace(
        `"organization_id":"${ORG_A}"`,
        `"organization_id":"${ORG_A}","organization_id":"${ORG_B}"`,
      )
      const decoded = decodeRecord({ ...moved, value: Buffer.from(twice) }, 'product')
      expect(decoded).toMatchObject({ change: { row: { organization_id: ORG_B } } })
      expect(laneHint(Buffer.from(twice))).toMatchObject({ organizationId: ORG_B })
    }
  })

  it('lower-cases ids as the decoder does', () => {
    const value = bytes(
      debeziumValue({
        table: 'providers',
        op: 'c',
        after: providerRow(uuid(10).toUpperCase(), ORG_A.toUpperCase()),
      }),
    )
    expect(laneHint(value)).toMatchObject({ id: uuid(10), organizationId: ORG_A })
  })

  it('is silent on deletes, truncates, control tables, other layouts and strings that mimic keys', () => {
    const silent = [
      debeziumValue({ table: 'providers', op: 'd', before: providerRow(uuid(1), ORG_A) }),
      debeziumValue({ table: 'providers', op: 't' }),
      debeziumValue({ table: 'organizations', op: 'c', after: organizationRow(ORG_A) }),
      // A column holding text that looks like a key is escaped in JSON: no match.
      debeziumValue({
        table: 'providers',
        op: 'c',
        after: { id: uuid(2), notes: `"organization_id":"${ORG_A}"` },
      }),
    ].map(bytes)
    // Pretty-printed: the patterns need Debezium's compact JSON.
    silent.push(
      Buffer.from(
        JSON.stringify(
          debeziumValue({ table: 'providers', op: 'c', after: providerRow(uuid(3), ORG_A) }),
          null,
          2,
        ),
      ),
    )
    for (const value of silent) expect(laneHint(value)).toBeUndefined()
  })

  it('reads only the slice it is given (a line of a file)', () => {
    const line = Buffer.from(
      `xx${JSON.stringify(record({ table: 'providers', op: 'c', after: providerRow(uuid(4), ORG_A) }))}yy`,
    )
    expect(laneHint(line, 2, line.length - 2)).toMatchObject({ id: uuid(4) })
    expect(laneHint(line, 2, 40)).toBeUndefined()
  })
})

describe('LaneAssignment', () => {
  it('gives each organization the next lane in turn, and keeps it', () => {
    const lanes = new LaneAssignment(2)
    const ids = [uuid(1), uuid(2), uuid(3), uuid(4), uuid(5)]
    expect(ids.map((id) => lanes.laneOf(id))).toEqual([0, 1, 0, 1, 0])
    expect(ids.map((id) => lanes.laneOf(id))).toEqual([0, 1, 0, 1, 0])
  })
})
