import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { isValidDea, isValidNpi, luhnValid } from '../../../scripts/dataset/check-digits.ts'
import {
  type Row,
  TABLE_NAMES,
  type TableName,
  rowShapeError,
  tableCodec,
} from '../../../scripts/dataset/debezium.ts'
import {
  DEFAULT_NOW,
  type DatasetOptions,
  type KafkaRecordLine,
  datasetOrganizations,
  datasetSizeFor,
  generateDataset,
  writeDataset,
} from '../../../scripts/dataset/generate.ts'

const SMALL: DatasetOptions = { organizations: 2, providersPerOrganization: 60, seed: 42 }
const lines = [...generateDataset(SMALL)]
const records = lines.map((line) => JSON.parse(line) as KafkaRecordLine)
const live = records.filter((r) => r.value !== null)
const tableOf = (r: KafkaRecordLine) => r.topic.replace('product.public.', '') as TableName
const rowsOf = (table: TableName) =>
  live
    .filter((r) => tableOf(r) === table && r.value!.payload.after !== null)
    .map((r) => r.value!.payload.after!)
const nowDay = Math.floor(DEFAULT_NOW.getTime() / 86_400_000)

const dir = mkdtempSync(join(tmpdir(), 'dataset-test-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('generateDataset', () => {
  it('is deterministic: same options, same lines; another seed, other lines', () => {
    expect([...generateDataset(SMALL)]).toEqual(lines)
    const other = [...generateDataset({ ...SMALL, seed: 43 })]
    expect(other[0]).not.toEqual(lines[0])
  })

  it('writes Kafka records wrapping JsonConverter envelopes', () => {
    for (const r of records) {
      expect(Object.keys(r)).toEqual(['topic', 'partition', 'offset', 'key', 'value'])
      expect(r.partition).toBe(0)
      expect(r.offset).toMatch(/^\d+$/)
      expect(TABLE_NAMES).toContain(tableOf(r))
      expect(r.key.schema).toMatchObject({ type: 'struct', name: `${r.topic}.Key` })
      expect(r.key.payload.id).toMatch(
        /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
      )
      if (r.value === null) continue
      const { schema, payload } = r.value
      expect(schema).toMatchObject({ type: 'struct', name: `${r.topic}.Envelope`, version: 2 })
      expect(Object.keys(payload)).toEqual([
        'before',
        'after',
        'source',
        'transaction',
        'op',
        'ts_ms',
        'ts_us',
        'ts_ns',
      ])
      expect(payload.source).toMatchObject({
        version: '3.1.2.Final',
        connector: 'postgresql',
        name: 'product',
        db: 'product',
        schema: 'public',
        table: tableOf(r),
        xmin: null,
      })
      expect((payload.after ?? payload.before)!.id).toBe(r.key.payload.id)
    }
  })

  it('numbers offsets from 0 per topic, one by one', () => {
    const next = new Map<string, number>()
    for (const r of records) {
      expect(Number(r.offset)).toBe(next.get(r.topic) ?? 0)
      next.set(r.topic, Number(r.offset) + 1)
    }
  })

  it('snapshots first, with Debezium 3 markers, then streams c/u/d with rising LSNs per topic', () => {
    const ops = live.map((r) => r.value!.payload.op)
    const firstStreamed = ops.findIndex((op) => op !== 'r')
    expect(firstStreamed).toBeGreaterThan(0)
    expect(ops.slice(firstStreamed)).not.toContain('r')
    expect(new Set(ops.slice(firstStreamed))).toEqual(new Set(['c', 'u', 'd']))
    const markers = live.slice(0, firstStreamed).map((r) => r.value!.payload.source.snapshot)
    expect(markers[0]).toBe('first')
    expect(markers.at(-1)).toBe('last')
    expect(markers.filter((m) => m === 'first' || m === 'last')).toHaveLength(2)
    const lastOfTable = live.filter(
      (r) => r.value!.payload.source.snapshot === 'last_in_data_collection',
    )
    expect(lastOfTable.length).toBe(TABLE_NAMES.length - 1)
    // Per topic: a transaction may list a child before its parent, but a topic is in WAL order.
    const lsns = new Map<string, number>()
    for (const r of live.slice(firstStreamed)) {
      expect(r.value!.payload.source.snapshot).toBe('false')
      expect(r.value!.payload.source.lsn).toBeGreaterThan(lsns.get(r.topic) ?? 0)
      lsns.set(r.topic, r.value!.payload.source.lsn)
    }
  })

  it('follows every delete with a tombstone, and deletes carry only the key', () => {
    records.forEach((r, n) => {
      if (r.value?.payload.op !== 'd') return
      expect(records[n + 1]).toMatchObject({
        topic: r.topic,
        key: { payload: r.key.payload },
        value: null,
      })
      expect(r.value.payload.after).toBeNull()
      expect(r.value.payload.before).toMatchObject({ id: r.key.payload.id, organization_id: '' })
    })
    expect(records.some((r) => r.value === null)).toBe(true)
  })

  it('writes every column of every row, in table order, in Debezium encodings', () => {
    const codecs = new Map(TABLE_NAMES.map((t) => [t, tableCodec('product', t)]))
    for (const r of live) {
      const after = r.value!.payload.after as Row | null
      if (after === null) continue
      expect(rowShapeError(tableOf(r), after)).toBeNull()
      // The generated serializers write what JSON.stringify would.
      expect(codecs.get(tableOf(r))!.serializeRow(after)).toBe(JSON.stringify(after))
    }
    const tricky = {
      ...rowsOf('organizations')[0]!,
      name: 'Quote " backslash \\ tab \t emoji 😀 lone \ud800',
    }
    expect(codecs.get('organizations')!.serializeRow(tricky as Row)).toBe(JSON.stringify(tricky))
  })

  it('gives providers unique NPIs with a valid check digit, and valid DEA numbers', () => {
    const npis = rowsOf('providers').map((p) => p.npi as string)
    expect(new Set(npis).size).toBe(new Set(rowsOf('providers').map((p) => p.id)).size)
    for (const npi of npis) expect(isValidNpi(npi) && luhnValid('80840' + npi)).toBe(true)
    for (const g of rowsOf('provider_groups'))
      if (g.npi !== null) expect(isValidNpi(g.npi as string)).toBe(true)
    const deas = rowsOf('provider_identifiers').filter((i) => i.type === 'dea')
    expect(deas.length).toBeGreaterThan(0)
    for (const dea of deas) expect(isValidDea(dea.value as string)).toBe(true)
  })

  it('hashes the raw API keys it hands out, and scopes them as documented', () => {
    const keys = rowsOf('api_keys')
    const orgs = datasetOrganizations(SMALL)
    expect(orgs).toHaveLength(2)
    for (const org of orgs) {
      const scopes = org.keys.map((k) => k.scopes.length)
      expect(scopes.slice(0, 2)).toEqual([5, 4])
      expect(org.keys[0]!.scopes).toContain('providers:read:sensitive')
      expect(org.keys[1]!.scopes).not.toContain('providers:read:sensitive')
      for (const key of org.keys) {
        expect(key.rawKey).toMatch(/^crk_live_[0-9a-f]{32}$/)
        const row = keys.find((k) => k.id === key.id)!
        expect(row.key_hash).toBe(createHash('sha256').update(key.rawKey).digest('hex'))
        expect(row.organization_id).toBe(org.id)
        expect(row.scopes).toEqual(key.scopes)
      }
    }
  })

  it('fills the columns the replica must drop, and never lets portal logins leak', () => {
    expect(rowsOf('providers').every((p) => typeof p.ssn === 'string')).toBe(true)
    expect(rowsOf('providers').some((p) => typeof p.internal_notes === 'string')).toBe(true)
    expect(rowsOf('documents').every((d) => String(d.storage_key).startsWith('s3://'))).toBe(true)
    const logins = rowsOf('payer_portal_logins')
    expect(logins.length).toBeGreaterThan(0)
    const secrets = logins.flatMap((l) => [l.username as string, l.password_cipher as string])
    for (const line of lines) {
      if (line.startsWith('{"topic":"product.public.payer_portal_logins"')) continue
      for (const secret of secrets) expect(line.includes(secret)).toBe(false)
    }
  })

  it('sends children before their parent now and then, but parents first mostly', () => {
    const seen = new Set<string>()
    let early = 0
    let total = 0
    for (const r of live) {
      const row = r.value!.payload.after
      if (row === null) continue
      seen.add(row.id as string)
      for (const ref of [
        'provider_id',
        'provider_group_id',
        'enrollment_id',
        'group_enrollment_id',
      ]) {
        if (typeof row[ref] !== 'string') continue
        total++
        if (!seen.has(row[ref])) early++
      }
    }
    expect(early).toBeGreaterThan(0)
    expect(early / total).toBeLessThan(0.05)
  })

  it('spreads expirations around now: some expired, most within two years, some none', () => {
    const expiries = rowsOf('provider_identifiers').map((i) => i.expires_on as number | null)
    expect(expiries.some((d) => d === null)).toBe(true)
    expect(expiries.some((d) => d !== null && d < nowDay)).toBe(true)
    const dated = expiries.filter((d): d is number => d !== null)
    expect(
      dated.filter((d) => d >= nowDay && d <= nowDay + 730).length / dated.length,
    ).toBeGreaterThan(0.7)
    const statuses = new Set(rowsOf('enrollments').map((e) => e.status))
    expect(statuses.size).toBeGreaterThanOrEqual(5)
  })

  it('scales with the options', () => {
    const count = (o: DatasetOptions) => [...generateDataset(o)].length
    const base = count({ organizations: 1, providersPerOrganization: 50 })
    const twiceTheProviders = count({ organizations: 1, providersPerOrganization: 100 })
    const twiceTheOrganizations = count({ organizations: 2, providersPerOrganization: 50 })
    expect(twiceTheProviders / base).toBeGreaterThan(1.7)
    expect(twiceTheOrganizations / base).toBeGreaterThan(1.7)
    expect(count({ organizations: 1, providersPerOrganization: 50, updateRounds: 0 })).toBeLessThan(
      base,
    )
    const orgIds = new Set(rowsOf('organizations').map((o) => o.id))
    expect(orgIds.size).toBe(2)
  })

  it('picks sizes for a target event count', () => {
    const size = datasetSizeFor(20_000)
    const events = [...generateDataset(size)].length
    expect(events / 20_000).toBeGreaterThan(0.8)
    expect(events / 20_000).toBeLessThan(1.2)
    expect(datasetSizeFor(1_000_000).organizations).toBeGreaterThan(1)
  })

  it('rejects options it cannot honour', () => {
    expect(() => [...generateDataset({ organizations: 0, providersPerOrganization: 1 })]).toThrow(
      RangeError,
    )
    expect(() => [...generateDataset({ organizations: 1, providersPerOrganization: 1.5 })]).toThrow(
      RangeError,
    )
    expect(() => [...generateDataset({ ...SMALL, topicPrefix: 'a b' })]).toThrow(RangeError)
  })
})

describe('writeDataset', () => {
  it('writes the same lines to disk and summarizes them', async () => {
    const path = join(dir, 'small.ndjson')
    const started = performance.now()
    const summary = await writeDataset(path, SMALL)
    const seconds = (performance.now() - started) / 1000
    // Informational only: speed is measured by the CLI on a big dataset, not asserted here.
    console.info(`dataset: ${summary.events} events in ${seconds.toFixed(2)} s`)
    expect(readFileSync(path, 'utf8')).toBe(lines.join('\n') + '\n')
    expect(summary.events).toBe(lines.length)
    expect(summary.organizations).toEqual(datasetOrganizations(SMALL))
    const total = Object.values(summary.topics)
      .flatMap((ops) => Object.values(ops))
      .reduce((a, b) => a + b, 0)
    expect(total).toBe(lines.length)
    expect(summary.topics['product.public.providers']?.r).toBe(2 * 60)
  })

  it('honours the topic prefix', async () => {
    const path = join(dir, 'prefixed.ndjson')
    await writeDataset(path, { ...SMALL, providersPerOrganization: 5, topicPrefix: 'staging' })
    const first = JSON.parse(readFileSync(path, 'utf8').split('\n')[0]!) as KafkaRecordLine
    expect(first.topic).toBe('staging.public.organizations')
    expect(first.value!.payload.source.name).toBe('staging')
    expect(first.value!.schema).toMatchObject({ name: 'staging.public.organizations.Envelope' })
  })
})

describe('schemas: false (the JsonConverter with schemas.enable=false)', () => {
  const bare = { ...SMALL, schemas: false }

  it('writes the same records with keys and values unwrapped', async () => {
    const path = join(dir, 'schemaless.ndjson')
    const summary = await writeDataset(path, bare)
    const written = readFileSync(path, 'utf8').split('\n').slice(0, -1)
    expect(written).toEqual([...generateDataset(bare)])
    expect(summary.events).toBe(lines.length)
    const unwrapped = records.map((r) => ({
      ...r,
      key: r.key.payload,
      value: r.value === null ? null : r.value.payload,
    }))
    expect(written.map((line) => JSON.parse(line) as unknown)).toEqual(unwrapped)
    // The point of the setting: a quarter of the bytes or less.
    expect(written.join('\n').length * 3).toBeLessThan(lines.join('\n').length)
  })
})
