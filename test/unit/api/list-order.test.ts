// A list's order held in memory gives the rows the file holds in its current state, whatever the
// projector (another connection) committed since it was read: inserts, changes that move a row
// to the end, deletions. It is held only once the list is paged, and only within the budget.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  collections,
  orderSql,
  type OrderReader,
  type PageOrder,
  pageSql,
  readPage,
} from '../../../api/collections.ts'
import type { Position } from '../../../api/cursor.ts'
import { ListOrder, ORDER_ROWS_MAX, READS_BEFORE_ORDER } from '../../../api/list-order.ts'
import { idKey } from '../../../api/document-bodies.ts'
import { PageCache } from '../../../api/page-cache.ts'
import { OrganizationFile } from '../../../api/store.ts'
import { openForReading, openForWriting, type SqliteDatabase } from '../../../src/sqlite.ts'
import { recording } from '../../support/order-reader.ts'

const groups = collections['provider-groups']
const sql = orderSql(groups, 'base')
const stampOf = (n: number) => new Date(Date.UTC(2026, 0, 1) + n * 1000).toISOString()

/** The projector's side of a file of provider groups: every write gets a later stamp. */
function organizationFile(cache: PageCache) {
  const dir = mkdtempSync(join(tmpdir(), 'api-list-order-'))
  const path = join(dir, 'organization.db')
  const writer = openForWriting(path, 'organization')
  const upsert = writer.prepare(
    `INSERT OR REPLACE INTO doc_provider_groups (id, updated_at, hash, body) VALUES (?, ?, ?, ?)`,
  )
  const remove = writer.prepare(`DELETE FROM doc_provider_groups WHERE id = ?`)
  let clock = 0
  const put = (id: string) => {
    clock++
    upsert.run(id, stampOf(clock), `h${clock}`, JSON.stringify({ id, version: clock }))
  }
  const file = new OrganizationFile(openForReading(path), cache.forFile())
  return { dir, writer, file, put, remove: (id: string) => void remove.run(id) }
}

/** The rows after `from` as the file holds them, read by SQL. */
function positionsAfter(file: OrganizationFile, from: Position, count: number): string[] {
  return file
    .rows({
      sql:
        'SELECT updated_at, id FROM doc_provider_groups WHERE (updated_at, id) > (?, ?) ' +
        'ORDER BY updated_at, id LIMIT ?',
      args: [...from, count],
    })
    .map(([stamp, id]) => `${id as string} ${stamp as string}`)
}

/** Pages the order into memory: it is read on the READS_BEFORE_ORDER-th page. */
function holdOrder(order: ListOrder, file: OrderReader) {
  for (let i = 0; i < READS_BEFORE_ORDER; i++) order.rowsAfter(file, ['', ''], 1)
  expect(order.held).toBe(true)
}

describe('ListOrder', () => {
  let dir: string
  let writer: SqliteDatabase
  let file: OrganizationFile
  let put: (id: string) => void
  let remove: (id: string) => void
  let cache: PageCache

  beforeEach(() => {
    cache = new PageCache(1 << 20)
    ;({ dir, writer, file, put, remove } = organizationFile(cache))
  })

  afterEach(() => {
    file.close()
    writer.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const rowsAfter = (order: ListOrder, from: Position, count: number) =>
    order.rowsAfter(file, from, count)?.map((row) => row.row)

  it('is read only once the list has been paged', () => {
    for (const id of ['a', 'b', 'c']) put(id)
    const order = new ListOrder(cache, sql)
    for (let i = 1; i < READS_BEFORE_ORDER; i++) {
      expect(order.rowsAfter(file, ['', ''], 2)).toBeUndefined()
    }
    expect(cache.bytes).toBe(0)
    expect(rowsAfter(order, ['', ''], 2)).toEqual(positionsAfter(file, ['', ''], 2))
    expect(order.held).toBe(true)
    expect(cache.bytes).toBeGreaterThan(0)
  })

  it('follows the file through inserts, changes and deletions committed after it was read', () => {
    for (const id of ['a', 'b', 'c', 'd']) put(id)
    const order = new ListOrder(cache, sql)
    holdOrder(order, file)
    // A changed row moves to the end; a new one comes after it.
    put('b')
    put('e')
    expect(rowsAfter(order, ['', ''], 10)).toEqual(positionsAfter(file, ['', ''], 10))
    expect(rowsAfter(order, ['', ''], 10)?.map((row) => row.split(' ')[0])).toEqual([
      'a',
      'c',
      'd',
      'b',
      'e',
    ])
    // A deletion leaves nothing after the last position: the count tells.
    remove('c')
    expect(rowsAfter(order, ['', ''], 10)).toEqual(positionsAfter(file, ['', ''], 10))
    // A deletion and a change in one commit.
    writer.transaction(() => {
      remove('a')
      put('d')
    })()
    expect(rowsAfter(order, ['', ''], 10)).toEqual(positionsAfter(file, ['', ''], 10))
  })

  it('gives the rows the file holds after any position, for any change committed', () => {
    const ids = ['a', 'b', 'c', 'd', 'e', 'f']
    const change = fc.oneof(
      fc.record({ put: fc.subarray(ids, { minLength: 1 }) }),
      fc.record({ remove: fc.constantFrom(...ids) }),
    )
    fc.assert(
      fc.property(fc.array(fc.array(change, { maxLength: 3 }), { maxLength: 8 }), (commits) => {
        writer.exec('DELETE FROM doc_provider_groups')
        for (const id of ids.slice(0, 3)) put(id)
        const order = new ListOrder(new PageCache(1 << 20), sql)
        holdOrder(order, file)
        for (const commit of commits) {
          writer.transaction(() => {
            for (const step of commit) {
              if ('put' in step) step.put.forEach(put)
              else remove(step.remove)
            }
          })()
          const every = positionsAfter(file, ['', ''], 100)
          // From the start, from each row's position, and from between two positions.
          const froms: Position[] = [['', ''], ...every.map((row) => row.split(' ').reverse())]
          froms.push(...every.map((row) => [row.split(' ')[1]!, '']))
          for (const from of froms) {
            for (const count of [1, 2, 7]) {
              const held = order.rowsAfter(file, from, count)?.map((row) => row.row)
              expect(held).toEqual(positionsAfter(file, from, count))
            }
          }
        }
        order.clear()
      }),
      { numRuns: 60 },
    )
  })

  it('finds rows deleted since it was read by counting, without reading the list again', () => {
    const ids = Array.from({ length: 1000 }, (_, i) => `g${String(i).padStart(4, '0')}`)
    const { reader, statements } = recording(file)
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            removed: fc.uniqueArray(fc.constantFrom(...ids), { minLength: 1, maxLength: 4 }),
            changed: fc.subarray(ids, { maxLength: 3 }),
          }),
          { minLength: 1, maxLength: 4 },
        ),
        (commits) => {
          writer.exec('DELETE FROM doc_provider_groups')
          writer.transaction(() => ids.forEach(put))()
          const order = new ListOrder(new PageCache(16 << 20), sql)
          holdOrder(order, reader)
          statements.length = 0
          for (const { removed, changed } of commits) {
            writer.transaction(() => {
              removed.forEach(remove)
              changed.filter((id) => !removed.includes(id)).forEach(put)
            })()
            const every = positionsAfter(file, ['', ''], ids.length)
            expect(order.rowsAfter(reader, ['', ''], ids.length)?.map((row) => row.row)).toEqual(
              every,
            )
            const middle = every[every.length >> 1]!.split(' ').reverse()
            expect(order.rowsAfter(reader, middle, 50)?.map((row) => row.row)).toEqual(
              positionsAfter(file, middle, 50),
            )
          }
          // Never read whole again: a few counts of index ranges, not a read of every row.
          expect(statements.filter((text) => text === sql.all.sql)).toEqual([])
          order.clear()
        },
      ),
      { numRuns: 40 },
    )
  })

  it('moves only the changed row when another id has the same numeric key', () => {
    // Two ids of one key (idKey folds FNV-1a to 30 bits): found among generated ones.
    const seen = new Map<number, string>()
    let pair: [string, string] | undefined
    for (let i = 0; pair === undefined; i++) {
      const id = `g${i}`
      const other = seen.get(idKey(id, 0))
      if (other !== undefined) pair = [other, id]
      else seen.set(idKey(id, 0), id)
    }
    const [first, second] = pair
    for (const id of [first, 'b', second, 'd']) put(id)
    const { reader, statements } = recording(file)
    const order = new ListOrder(cache, sql)
    holdOrder(order, reader)
    statements.length = 0
    put(first)
    const held = order.rowsAfter(reader, ['', ''], 10)?.map((row) => row.row)
    expect(held).toEqual(positionsAfter(file, ['', ''], 10))
    expect(held?.map((row) => row.split(' ')[0])).toEqual(['b', second, 'd', first])
    // Caught up in place: the other id's row was never taken for the changed one.
    expect(statements.filter((text) => text === sql.all.sql)).toEqual([])
  })

  it('is read again whole when more rows went than counting would be worth', () => {
    const ids = Array.from({ length: 64 }, (_, i) => `g${String(i).padStart(4, '0')}`)
    writer.transaction(() => ids.forEach(put))()
    const { reader, statements } = recording(file)
    const order = new ListOrder(cache, sql)
    holdOrder(order, reader)
    statements.length = 0
    // Every other row: counting them out would count the list over and over.
    writer.transaction(() => ids.filter((_, i) => i % 2 === 0).forEach(remove))()
    expect(order.rowsAfter(reader, ['', ''], 64)?.map((row) => row.row)).toEqual(
      positionsAfter(file, ['', ''], 64),
    )
    expect(statements.filter((text) => text === sql.all.sql)).toHaveLength(1)
  })

  it('is held on the budget, dropped when the budget needs the room, and read again later', () => {
    for (const id of ['a', 'b', 'c']) put(id)
    const order = new ListOrder(cache, sql)
    holdOrder(order, file)
    const bytes = cache.bytes
    expect(bytes).toBeGreaterThan(0)
    // Pages of others fill the budget: the order, least recently used, goes.
    const pages = cache.forFile()
    pages.set(1, 'a page', Buffer.alloc(cache.maxBytes - bytes + 1))
    expect(order.held).toBe(false)
    expect(order.rowsAfter(file, ['', ''], 3)).toBeUndefined()
    pages.clear()
    holdOrder(order, file)
    order.clear()
    expect(order.held).toBe(false)
    expect(cache.bytes).toBe(0)
  })

  it('is never read whole when the list is larger than the budget', () => {
    for (const id of ['a', 'b', 'c']) put(id)
    const small = new PageCache(512)
    const order = new ListOrder(small, sql)
    for (let i = 0; i < READS_BEFORE_ORDER * 2; i++) {
      expect(order.rowsAfter(file, ['', ''], 3)).toBeUndefined()
    }
    expect(small.bytes).toBe(0)
    // And nothing at all when the page cache is off.
    const off = new ListOrder(new PageCache(0), sql)
    for (let i = 0; i < READS_BEFORE_ORDER * 2; i++) {
      expect(off.rowsAfter(file, ['', ''], 3)).toBeUndefined()
    }
  })

  it('is never read for a list longer than ORDER_ROWS_MAX, and dropped when one grows past it', () => {
    const ids = Array.from({ length: ORDER_ROWS_MAX }, (_, i) => `g${String(i).padStart(6, '0')}`)
    writer.transaction(() => ids.forEach(put))()
    const budget = new PageCache(64 << 20)
    const order = new ListOrder(budget, sql)
    holdOrder(order, file)
    put('one more')
    expect(order.rowsAfter(file, ['', ''], 1)).toBeUndefined()
    expect(order.held).toBe(false)
    expect(budget.bytes).toBe(0)
    for (let i = 0; i < READS_BEFORE_ORDER * 2; i++) {
      expect(order.rowsAfter(file, ['', ''], 1)).toBeUndefined()
    }
    remove('one more')
    holdOrder(order, file)
  })

  it('serves the pages the file holds, joined from memory once their bodies are known', () => {
    for (const id of ['a', 'b', 'c', 'd', 'e']) put(id)
    const known = file.bodies('doc_provider_groups.body')
    const order = file.order(sql)
    const walk = () => {
      const pages = []
      let after: Position | undefined
      do {
        const page = pageSql(groups, 'base', {}, after, 2)
        const read = readPage(file, page, known, order)
        const fromFile = readPage(file, page)
        const bytes = Buffer.isBuffer(read.bodies)
          ? read.bodies.toString()
          : read.bodies.map((b) => b.toString()).join(',')
        expect(bytes).toBe(fromFile.bodies.toString())
        expect(read.versions).toBe(fromFile.versions)
        expect(read.next).toEqual(fromFile.next)
        pages.push(read)
        after = read.next
      } while (after !== undefined)
      return pages
    }
    for (let i = 0; i < READS_BEFORE_ORDER; i++) walk()
    expect(order.held).toBe(true)
    expect(walk().every((page) => Array.isArray(page.bodies))).toBe(true)
    put('a')
    remove('c')
    // The changed row is read from the file once (its body at the new stamp is not known yet).
    walk()
    expect(walk().every((page) => Array.isArray(page.bodies))).toBe(true)
  })

  it('is never asked for the rows of a filtered list, which its order does not hold', () => {
    const asked: Position[] = []
    const order: PageOrder = {
      rowsAfter: (_file, from) => {
        asked.push(from)
        return []
      },
    }
    const known = file.bodies('doc_providers.body')
    const active = pageSql(collections.providers, 'base', { active: true }, undefined, 2)
    readPage(file, active, known, order)
    expect(asked).toEqual([])
    // The same list unfiltered is taken from it.
    readPage(file, pageSql(collections.providers, 'base', {}, undefined, 2), known, order)
    expect(asked).toEqual([['', '']])
  })
})
