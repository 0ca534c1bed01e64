import { describe, expect, it } from 'vitest'
import type { DeadLetter } from '../../../projector/lanes/apply.ts'
import {
  UNPARSEABLE_VALUE_OMITTED,
  deadLetterHeaders,
  deadLetterLine,
  deadLetterValue,
} from '../../../projector/sources/dead-letters.ts'
import { ORG_A, providerRow, record, uuid } from '../../support/debezium.ts'

function letter(value: unknown, wrapped = true): DeadLetter {
  const r = record({
    table: 'providers',
    op: 'u',
    after: providerRow(uuid(1), ORG_A),
    offset: 41,
    wrapped,
  })
  return {
    record: { ...r, value: value === 'event' ? r.value : value },
    reason: 'schema_mismatch',
    message: 'npi: expected string',
  }
}

describe('dead letters', () => {
  it('name their reason, error and origin in headers', () => {
    expect(deadLetterHeaders(letter('event'))).toEqual({
      'dlq.reason': 'schema_mismatch',
      'dlq.error': 'npi: expected string',
      'dlq.origin.topic': 'product.public.providers',
      'dlq.origin.partition': '0',
      'dlq.origin.offset': '41',
    })
  })

  it('never carry a never-stored column, wrapped or bare, from bytes or parsed JSON', () => {
    for (const wrapped of [true, false]) {
      const parsed = letter('event', wrapped)
      const bytes = { ...parsed, record: { ...parsed.record } }
      bytes.record.value = Buffer.from(JSON.stringify(letter('event', wrapped).record.value))
      for (const l of [bytes, parsed]) {
        const value = deadLetterValue(l)!
        expect(value).toContain('"npi"')
        expect(value).not.toMatch(/ssn|internal_notes|storage_key/)
        expect(deadLetterLine(l)).not.toMatch(/ssn|internal_notes|storage_key/)
      }
    }
  })

  it('leave out a value that is not JSON and say so, rather than copy what cannot be redacted', () => {
    const l = letter(Buffer.from('{"payload": {"after": {"ssn": "123-45-6789"'))
    expect(deadLetterValue(l)).toBeNull()
    expect(deadLetterHeaders(l)['dlq.value']).toBe(UNPARSEABLE_VALUE_OMITTED)
    const line = JSON.parse(deadLetterLine(l)) as Record<string, unknown>
    expect(line.value).toBeNull()
    expect(JSON.stringify(line)).not.toContain('123-45-6789')
  })

  it('are lines the file source reads back: topic, partition, offset, key, value', () => {
    const line = JSON.parse(deadLetterLine(letter('event'))) as Record<string, unknown>
    expect(line).toMatchObject({ topic: 'product.public.providers', partition: 0, offset: '41' })
    expect(line.key).toEqual({ schema: { type: 'struct' }, payload: { id: uuid(1) } })
    expect((line.value as { payload: { op: string } }).payload.op).toBe('u')
  })
})
