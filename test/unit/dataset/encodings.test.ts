import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { decodeRecord } from '../../../projector/decode/decode.ts'
import { optionsFromArgs } from '../../../scripts/dataset/cli.ts'
import {
  deaNumber,
  isValidDea,
  isValidNpi,
  luhnCheckDigit,
  npiFor,
  npiFromBase,
} from '../../../scripts/dataset/check-digits.ts'
import {
  TABLES,
  TABLE_NAMES,
  type TableName,
  jsonbText,
  keySchema,
  tableCodec,
  valueSchema,
  zonedTimestamp,
} from '../../../scripts/dataset/debezium.ts'
import { generateRecords } from '../../../scripts/dataset/generate.ts'
import { recordLine } from '../../../scripts/dataset/emitter.ts'
import { Rng, uuidFor } from '../../../scripts/dataset/prng.ts'

const root = (path: string) => fileURLToPath(new URL(`../../../${path}`, import.meta.url))

describe('the source tables', () => {
  it('match schema/source.sql: names, types, NOT NULL, in order', () => {
    const sql = readFileSync(root('schema/source.sql'), 'utf8').replace(/--[^\n]*/g, '')
    // The product's tables; replica_heartbeat (docs/freshness.md) and debezium_signal
    // (verify --repair's signals to Debezium) are the replica's own.
    const replicaOwn = new Set(['replica_heartbeat', 'debezium_signal'])
    const tables = [...sql.matchAll(/create table (\w+) \(([\s\S]*?)\n\);/g)].filter(
      (t) => !replicaOwn.has(t[1]!),
    )
    expect(tables.map((t) => t[1])).toEqual(TABLE_NAMES)
    for (const [, name, body] of tables) {
      const columns = body!
        .split(/,\s*\n|\n/)
        .flatMap((line) =>
          line.split(/,\s+(?=\w+\s+(?:uuid|text|boolean|integer|bigint|date|timestamptz|jsonb))/),
        )
        .map((c) => c.trim())
        .filter((c) => c !== '')
        .map((c) => {
          const [column, type] = c.split(/\s+/)
          return { name: column, type, notNull: /not null|primary key/.test(c) }
        })
      const ours = TABLES[name as TableName].map((c) => ({
        name: c.name,
        type: c.type,
        notNull: c.notNull,
      }))
      expect(columns, name).toEqual(ours)
    }
  })
})

// Captured from a real PostgreSQL -> Debezium -> Kafka pipeline by another part of the project,
// and committed: missing means broken, never "nothing to compare against".
const FIXTURES = root('test/fixtures/debezium/changes.ndjson')

describe('shapes against real Debezium events', () => {
  if (!existsSync(FIXTURES)) {
    throw new Error(
      `${FIXTURES} is missing: it is committed (git checkout test/fixtures/debezium), or ` +
        `regenerate it with npx tsx test/harness/capture-fixtures.ts`,
    )
  }
  const real = readFileSync(FIXTURES, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { key: { schema: unknown } | null; value: RealValue | null })
  type RealValue = {
    schema: unknown
    payload: {
      op: string
      before: { id: string } | null
      source: Record<string, unknown> & { table: string }
    }
  }
  const byTable = new Map<string, RealValue>()
  for (const r of real)
    if (r.value !== null && !byTable.has(r.value.payload.source.table))
      byTable.set(r.value.payload.source.table, r.value)

  it('writes the same value and key schemas, field for field', () => {
    expect(byTable.size).toBeGreaterThan(0)
    for (const [table, value] of byTable) {
      expect(valueSchema('product', table as TableName), table).toEqual(value.schema)
    }
    for (const r of real) {
      if (r.key !== null && r.value !== null) {
        expect(keySchema('product', r.value.payload.source.table as TableName)).toEqual(
          r.key.schema,
        )
      }
    }
  })

  it('writes the same delete before-images', () => {
    const deletes = real.filter((r) => r.value?.payload.op === 'd').map((r) => r.value!.payload)
    expect(deletes.length).toBeGreaterThan(0)
    for (const d of deletes) {
      const mine = tableCodec('product', d.source.table as TableName).deleteBefore(d.before!.id)
      expect(JSON.parse(mine)).toEqual(d.before)
    }
  })

  it('writes payload and source keys in the same order', () => {
    const sample = real.find((r) => r.value?.payload.op === 'u')!.value!.payload
    const [first] = generateRecords({ organizations: 1, providersPerOrganization: 1 })
    const mine = JSON.parse(recordLine(first!)) as { value: { payload: { source: object } } }
    expect(Object.keys(mine.value.payload)).toEqual(Object.keys(sample))
    expect(Object.keys(mine.value.payload.source)).toEqual(Object.keys(sample.source))
  })
})

describe('the projector', () => {
  it('decodes every generated record: changes, tombstones, and portal logins it must skip', () => {
    const kinds = new Map<string, number>()
    for (const parts of generateRecords({ organizations: 2, providersPerOrganization: 60 })) {
      const record = JSON.parse(recordLine(parts)) as {
        topic: string
        partition: number
        offset: string
        key: unknown
        value: unknown
      }
      const decoded = decodeRecord(record, 'product')
      const kind =
        decoded.kind === 'skipped'
          ? `skipped:${decoded.reason}`
          : decoded.kind === 'change' &&
              decoded.change.kind === 'delete' &&
              decoded.change.tombstone === true
            ? 'change:tombstone'
            : decoded.kind
      if (decoded.kind === 'bad')
        throw new Error(`${record.topic}@${record.offset}: ${decoded.message}`)
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1)
    }
    // A tombstone is a delete by key (on a compacted topic it may be all a delete leaves).
    expect([...kinds.keys()].sort()).toEqual(['change', 'change:tombstone', 'skipped:never_stored'])
  })
})

describe('encodings', () => {
  it('writes timestamptz with six fractional digits, in UTC', () => {
    expect(zonedTimestamp(Date.UTC(2026, 10, 21, 10) * 1000 + 123_456)).toBe(
      '2026-11-21T10:00:00.123456Z',
    )
    expect(zonedTimestamp(0)).toBe('1970-01-01T00:00:00.000000Z')
    expect(zonedTimestamp(Date.UTC(2024, 1, 29, 23, 59, 59) * 1000 + 999_999)).toBe(
      '2024-02-29T23:59:59.999999Z',
    )
  })

  it('prints jsonb the way PostgreSQL does', () => {
    expect(jsonbText({ status: 'active', state: 'CA' })).toBe('{"state": "CA", "status": "active"}')
    expect(jsonbText({ coverage: '1M/3M', carrier: 'X', status: 'a' })).toBe(
      '{"status": "a", "carrier": "X", "coverage": "1M/3M"}',
    )
    expect(jsonbText({})).toBe('{}')
  })
})

describe('check digits', () => {
  it('computes NPI check digits per the CMS rule (Luhn over 80840 + nine digits)', () => {
    // The example from the CMS NPI check-digit document.
    expect(npiFromBase('123456789')).toBe('1234567893')
    expect(isValidNpi('1234567893')).toBe(true)
    expect(isValidNpi('1234567890')).toBe(false)
    expect(luhnCheckDigit('7992739871')).toBe(3)
  })

  it('gives distinct, valid NPIs per index', () => {
    const npis = Array.from({ length: 5000 }, (_, i) => npiFor(1, i * 7919, 3))
    expect(new Set(npis).size).toBe(npis.length)
    expect(npis.every(isValidNpi)).toBe(true)
    expect(isValidNpi(npiFor(2, 12, 3))).toBe(true)
    expect(npiFor(2, 12, 3).startsWith('2')).toBe(true)
  })

  it('computes DEA check digits', () => {
    expect(deaNumber('A', 'Smith', '123456')).toBe('AS1234563')
    expect(isValidDea('AS1234563')).toBe(true)
    expect(isValidDea('AS1234564')).toBe(false)
  })
})

describe('randomness', () => {
  it('repeats a stream for the same seed', () => {
    const a = new Rng(9, 1)
    const b = new Rng(9, 1)
    expect(Array.from({ length: 5 }, () => a.u32())).toEqual(
      Array.from({ length: 5 }, () => b.u32()),
    )
    const c = new Rng(9, 2)
    expect(c.u32()).not.toBe(new Rng(9, 1).u32())
  })

  it('makes unique v4-shaped uuids for distinct coordinates', () => {
    const ids = new Set<string>()
    for (let table = 0; table < 3; table++)
      for (let org = 0; org < 3; org++)
        for (let a = 0; a < 300; a++)
          for (let b = 0; b < 5; b++) ids.add(uuidFor(1, table, org, a, b))
    expect(ids.size).toBe(3 * 3 * 300 * 5)
    for (const id of [...ids].slice(0, 50))
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  })
})

describe('the CLI', () => {
  it('parses sizes, or picks them from an event count', () => {
    expect(
      optionsFromArgs(['--out', 'x', '--organizations', '3', '--providers', '100', '--seed', '5']),
    ).toEqual({
      out: 'x',
      options: {
        organizations: 3,
        providersPerOrganization: 100,
        seed: 5,
        updateRounds: undefined,
        now: undefined,
        topicPrefix: undefined,
      },
    })
    expect(
      optionsFromArgs(['--out', 'x', '--events', '1000000']).options.organizations,
    ).toBeGreaterThan(1)
    expect(() => optionsFromArgs(['--out', 'x'])).toThrow(/usage/)
    expect(() =>
      optionsFromArgs(['--out', 'x', '--organizations', '-1', '--providers', '1']),
    ).toThrow()
  })
})
