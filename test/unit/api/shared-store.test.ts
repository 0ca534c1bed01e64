// api/store.ts over a generation of files shared by organizations: the organizations of a file
// read through one connection, each in its own scope, with pages cached for each apart.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { collections, orderSql } from '../../../api/collections.ts'
import { READS_BEFORE_ORDER } from '../../../api/list-order.ts'
import { PageCache } from '../../../api/page-cache.ts'
import { OrganizationFiles, type OrganizationFile } from '../../../api/store.ts'
import { decodeRecord } from '../../../projector/decode/decode.ts'
import {
  createFromImage,
  openOrganizationFile,
  type OrganizationEvent,
} from '../../../projector/storage/organization-file.ts'
import { prepareGeneration } from '../../../src/layout.ts'
import { createLogger } from '../../../src/log.ts'
import { providerRow, record, uuid } from '../../support/debezium.ts'
import { recording } from '../../support/order-reader.ts'

const dir = mkdtempSync(join(tmpdir(), 'api-shared-store-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const [A, B, C] = [uuid(0xa), uuid(0xb), uuid(0xc)]
const FILE = 'shared-0000.db'

/** Providers written to the shared file as the projector writes them: created, or deleted. */
function writeProviders(
  generation: ReturnType<typeof prepareGeneration>,
  rows: ReadonlyArray<[id: string, organizationId: string, op: 'c' | 'd']>,
) {
  const file = openOrganizationFile(FILE, generation.sharedPath(FILE), { offsetGuard: false })
  const events = rows.map(([id, org, op]) => {
    const row = providerRow(id, org)
    const decoded = decodeRecord(
      record(
        op === 'c'
          ? { table: 'providers', op, after: row }
          : { table: 'providers', op, before: row },
      ),
      'product',
    )
    if (decoded.kind !== 'change') throw new Error('not a change')
    return { change: decoded.change, origin: { topic: 't', partition: 0, offset: 0 } }
  }) as OrganizationEvent[]
  file.apply(events, new Date(), () => {})
  file.close()
}

/** One shared file with a provider of A and two of B; C has no rows. */
function generationOfOneSharedFile() {
  const generation = prepareGeneration(dir, 'g1')
  createFromImage(generation.sharedPath(FILE), false, 'shared')
  writeProviders(generation, [
    [uuid(1), A, 'c'],
    [uuid(2), B, 'c'],
    [uuid(3), B, 'c'],
  ])
  return generation
}

const ids = (file: OrganizationFile) =>
  file.rows({ sql: 'SELECT id FROM doc_providers ORDER BY id', args: [] }).map((r) => r[0])

describe('the api over a shared file', () => {
  const generation = generationOfOneSharedFile()
  const files = new OrganizationFiles(
    generation,
    2,
    createLogger('test', 'silent'),
    new PageCache(1 << 20),
    () => 1,
  )
  const ref = (organizationId: string) => ({ organizationId, organizationFile: null })

  it('reads each organization through one connection, in its own scope', () => {
    expect(files.read(ref(A), ids)).toEqual([uuid(1)])
    expect(files.read(ref(B), ids)).toEqual([uuid(2), uuid(3)])
    // A again after B: the connection is scoped back to A.
    expect(files.read(ref(A), ids)).toEqual([uuid(1)])
    expect(files.size).toBe(1)
  })

  it('shows an organization with no rows there nothing, and does not keep its handle', () => {
    expect(files.read(ref(C), ids)).toEqual([])
    expect(files.read(ref(B), ids)).toEqual([uuid(2), uuid(3)])
  })

  it('keeps the connection while one of its organizations is held, and closes it after the last', () => {
    // Two handles at most: C's would not be kept, a third organization's evicts the oldest (A).
    files.read(ref(B), ids)
    files.read(ref(A), ids)
    expect(files.size).toBe(1)
    files.close()
    expect(files.size).toBe(0)
    expect(files.read(ref(B), ids)).toEqual([uuid(2), uuid(3)])
    files.close()
  })

  it('holds each organization’s order of a list apart, of its own rows only', () => {
    const order = (file: OrganizationFile) => file.order(orderSql(collections.providers, 'base'))
    const paged = (organizationId: string) =>
      files.read(ref(organizationId), (file) => {
        let rows
        for (let i = 0; i < READS_BEFORE_ORDER; i++) rows = order(file).rowsAfter(file, ['', ''], 5)
        return rows?.map((row) => row.id)
      })
    expect(paged(B)).toEqual([uuid(2), uuid(3)])
    expect(paged(A)).toEqual([uuid(1)])
    expect(files.read(ref(B), (file) => order(file).rowsAfter(file, ['', ''], 5))?.length).toBe(2)
    files.close()
  })

  it('finds a deleted row of one organization in its own scope, and leaves the other’s order', () => {
    const sql = orderSql(collections.providers, 'base')
    const statementsOf: Record<string, string[]> = { [A]: [], [B]: [] }
    const wholeReads = (organizationId: string) =>
      statementsOf[organizationId]!.filter((text) => text === sql.all.sql).length
    const held = (organizationId: string) =>
      files.read(ref(organizationId), (file) => {
        const { reader } = recording(file, statementsOf[organizationId])
        let rows
        for (let i = 0; i < READS_BEFORE_ORDER; i++) {
          rows = file.order(sql).rowsAfter(reader, ['', ''], 20)
        }
        return rows?.map((row) => row.id)
      })
    writeProviders(
      generation,
      Array.from({ length: 8 }, (_, i) => [uuid(0x40 + i), B, 'c'] as [string, string, 'c']),
    )
    const before = held(B)!
    expect(before).toHaveLength(10)
    expect(held(A)).toEqual([uuid(1)])
    expect([wholeReads(B), wholeReads(A)]).toEqual([1, 1])
    writeProviders(generation, [[uuid(0x45), B, 'd']])
    // Found by counting B's rows alone, in its scope (A's row in the same file counts for nothing):
    // neither order is read whole again.
    expect(held(B)).toEqual(before.filter((id) => id !== uuid(0x45)))
    expect(held(A)).toEqual([uuid(1)])
    expect([wholeReads(B), wholeReads(A)]).toEqual([1, 1])
    files.close()
  })

  it('refuses to read another organization inside an organization’s snapshot', () => {
    files.read(ref(B), (b) =>
      b.snapshot(() => {
        expect(() => files.read(ref(A), ids)).toThrow()
      }),
    )
    files.close()
  })
})
