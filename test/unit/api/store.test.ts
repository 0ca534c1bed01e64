// A list page is read from an organization file in several statements while the projector, a
// separate connection, commits batches: the statements must all see one state of the file.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { collections, type PageReader, pageSql, readPage } from '../../../api/collections.ts'
import { PageCache } from '../../../api/page-cache.ts'
import { OrganizationFile } from '../../../api/store.ts'
import { openForReading, openForWriting, type SqliteDatabase } from '../../../src/sqlite.ts'

const stamp = (second: number) => `2026-01-01T00:00:0${second}.000Z`

/**
 * An organization file with the projector's connection (`writer`, `write` a provider group) and
 * the api's (`file`, with `pages` when given).
 */
function organizationFile(pages?: PageCache) {
  const dir = mkdtempSync(join(tmpdir(), 'api-store-'))
  const path = join(dir, 'organization.db')
  const writer = openForWriting(path, 'organization')
  const insert = writer.prepare(
    `INSERT INTO doc_provider_groups (id, updated_at, hash, body) VALUES (?, ?, 'h', ?)`,
  )
  const write = (id: string, at: string) => void insert.run(id, at, JSON.stringify({ id }))
  const reader = openForReading(path)
  const file =
    pages === undefined
      ? new OrganizationFile(reader)
      : new OrganizationFile(reader, pages.forFile())
  return { dir, writer, write, file }
}

describe('readPage', () => {
  let dir: string
  let writer: SqliteDatabase
  let file: OrganizationFile
  let write: (id: string, at: string) => void

  beforeEach(() => {
    ;({ dir, writer, write, file } = organizationFile())
    for (const [id, at] of [
      ['g1', stamp(1)],
      ['g2', stamp(1)],
      ['g3', stamp(1)],
      ['g5', stamp(2)],
    ] as const) {
      write(id, at)
    }
  })

  afterEach(() => {
    file.close()
    writer.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const ids = (bodies: Buffer) =>
    (JSON.parse(`[${bodies.toString()}]`) as { id: string }[]).map((b) => b.id)

  it('never holds more than limit rows when the projector commits between its statements', () => {
    // A row committed right after the first statement, tied on the page's last stamp with an id
    // before its last row. The projector stamps each batch strictly later
    // (projector/storage/stamp.ts); a page holds at most limit rows whatever the writer does.
    let committed = false
    const racing: PageReader = {
      snapshot: (read) => file.snapshot(read),
      value: (query) => file.value(query),
      rows(query) {
        const rows = file.rows(query)
        if (!committed) {
          committed = true
          write('g4', stamp(2))
        }
        return rows
      },
    }
    const page = pageSql(collections['provider-groups'], 'base', {}, undefined, 4)
    const read = readPage(racing, page)
    expect(committed).toBe(true)
    expect(ids(read.bodies)).toEqual(['g1', 'g2', 'g3', 'g5'])
    expect(read.next).toBeUndefined()

    // The snapshot ended with the page: the next read sees the batch.
    expect(ids(readPage(file, page).bodies)).toEqual(['g1', 'g2', 'g3', 'g4'])
  })

  it('answers the same SQL as rows and as a value, in either order', () => {
    const sql = { sql: 'SELECT id, updated_at FROM doc_provider_groups ORDER BY id', args: [] }
    expect(file.value(sql)).toBe('g1')
    expect(file.rows(sql)[0]).toEqual(['g1', stamp(1)])
    expect(file.value(sql)).toBe('g1')
  })

  it('gives the position of the last row when another page follows', () => {
    const page = pageSql(collections['provider-groups'], 'base', {}, undefined, 2)
    const read = readPage(file, page)
    expect(read.bodies.toString()).toBe('{"id":"g1"},{"id":"g2"}')
    expect(read.next).toEqual([stamp(1), 'g2'])
    const empty = pageSql(collections['provider-groups'], 'base', {}, [stamp(2), 'g5'], 2)
    const none = readPage(file, empty)
    expect(none.bodies.length).toBe(0)
    expect(none.next).toBeUndefined()
  })
})

describe('cachedPage', () => {
  let dir: string
  let writer: SqliteDatabase
  let file: OrganizationFile
  let write: (id: string) => void

  beforeEach(() => {
    const made = organizationFile(new PageCache(1 << 20))
    ;({ dir, writer, file } = made)
    write = (id) => made.write(id, stamp(1))
    write('g1')
  })

  afterEach(() => {
    file.close()
    writer.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const page = pageSql(collections['provider-groups'], 'base', {}, undefined, 50)
  /** The page as the file holds it now, as a new buffer (what the route builds on a miss). */
  const read = () => Buffer.from(readPage(file, page).bodies)

  it('reads the version of the snapshot it runs in, moved by another connection committing', () => {
    const before = file.snapshot(() => file.dataVersion())
    expect(file.snapshot(() => file.dataVersion())).toBe(before)
    file.snapshot(() => {
      const inside = file.dataVersion()
      write('g2')
      // Committed meanwhile by another connection: this snapshot keeps its state and version.
      expect(file.dataVersion()).toBe(inside)
      expect(read().toString()).toBe('{"id":"g1"}')
    })
    expect(file.snapshot(() => file.dataVersion())).not.toBe(before)
  })

  it('keeps a page asked for twice, and serves it until the file changes, then the new one', () => {
    const kept: boolean[] = []
    const reading = (keep: boolean) => {
      kept.push(keep)
      return read()
    }
    expect(file.cachedPage('page', reading)).toMatchObject({ hit: false })
    expect(file.cachedPage('page', reading)).toMatchObject({ hit: false })
    expect(file.cachedPage('page', reading)).toMatchObject({ hit: true })
    expect(kept).toEqual([false, true])
    write('g2')
    const after = file.cachedPage('page', reading)
    expect(after.hit).toBe(false)
    expect(after.body.toString()).toBe('{"id":"g1"},{"id":"g2"}')
    // The change forgot the read before it: this one, the first of the new state, is not kept.
    expect(kept).toEqual([false, true, false])
  })

  it('never serves a page cached from a state the projector had already moved past', () => {
    // The projector commits while the page is being read: the page is of the old state, and is
    // stored under the old state's version, so the next request reads the file again.
    file.cachedPage('page', read)
    const racing = file.cachedPage('page', () => {
      const body = read()
      write('g2')
      return body
    })
    expect(racing).toMatchObject({ hit: false })
    expect(racing.body.toString()).toBe('{"id":"g1"}')
    const next = file.cachedPage('page', read)
    expect(next.hit).toBe(false)
    expect(next.body.toString()).toBe('{"id":"g1"},{"id":"g2"}')
  })

  it('drops its pages when the file is closed', () => {
    const cache = new PageCache(1 << 20)
    const other = new OrganizationFile(
      openForReading(join(dir, 'organization.db')),
      cache.forFile(),
    )
    other.cachedPage('page', () => Buffer.from('{"id":"g1"}'))
    other.cachedPage('page', () => Buffer.from('{"id":"g1"}'))
    expect(cache.entries).toBe(1)
    other.close()
    expect(cache.bytes).toBe(0)
  })
})

describe('readPage with the bodies known', () => {
  let dir: string
  let writer: SqliteDatabase
  let file: OrganizationFile
  let put: (id: string, second: number, name: string) => void

  beforeEach(() => {
    ;({ dir, writer, file } = organizationFile(new PageCache(1 << 20)))
    const upsert = writer.prepare(
      `INSERT OR REPLACE INTO doc_provider_groups (id, updated_at, hash, body) VALUES (?, ?, ?, ?)`,
    )
    put = (id, second, name) =>
      void upsert.run(id, stamp(second), `h-${name}`, JSON.stringify({ id, name }))
    for (const id of ['g1', 'g2', 'g3']) put(id, 1, 'first')
  })

  afterEach(() => {
    file.close()
    writer.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const page = pageSql(collections['provider-groups'], 'base', {}, undefined, 2)
  const known = () => file.bodies('doc_provider_groups.body')
  const bytes = (bodies: Buffer | readonly Buffer[]) =>
    Buffer.isBuffer(bodies) ? bodies.toString() : bodies.map((b) => b.toString()).join(',')

  it('joins the page the file holds, with the same versions and next position', () => {
    const fromFile = readPage(file, page)
    // The first read learns the bodies; the second reads only the rows' ids and stamps.
    expect(Buffer.isBuffer(readPage(file, page, known()).bodies)).toBe(true)
    const joined = readPage(file, page, known())
    expect(Array.isArray(joined.bodies)).toBe(true)
    expect(bytes(joined.bodies)).toBe(fromFile.bodies.toString())
    expect(joined.versions).toBe(fromFile.versions)
    expect(joined.next).toEqual(fromFile.next)
  })

  it('serves a changed document as the file now holds it, never the body it knew', () => {
    const all = pageSql(collections['provider-groups'], 'base', {}, undefined, 3)
    readPage(file, all, known())
    // The projector writes a changed body with a stamp later than any in the file.
    put('g1', 2, 'renamed')
    const read = readPage(file, all, known())
    expect(bytes(read.bodies)).toBe(readPage(file, all).bodies.toString())
    expect(bytes(read.bodies)).toContain('{"id":"g1","name":"renamed"}')
    expect(bytes(read.bodies)).not.toContain('{"id":"g1","name":"first"}')
    // Learned: the next read joins it from memory.
    const again = readPage(file, all, known())
    expect(Array.isArray(again.bodies)).toBe(true)
    expect(bytes(again.bodies)).toBe(bytes(read.bodies))
  })

  it('reads an empty page without a body', () => {
    const past = pageSql(collections['provider-groups'], 'base', {}, [stamp(9), 'z'], 2)
    expect(readPage(file, past, known()).bodies.length).toBe(0)
  })
})
