import Database from 'better-sqlite3'
import { fileURLToPath } from 'node:url'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { describe, expect, it } from 'vitest'
import { collections, expirablesSql, pageSql, rowsToRead } from '../../../api/collections.ts'

function organizationFile() {
  const db = new Database(':memory:')
  migrate(drizzle(db), {
    migrationsFolder: fileURLToPath(
      new URL('../../../schema/migrations/organization', import.meta.url),
    ),
  })
  return db
}

const plan = (db: Database.Database, sql: string, args: readonly unknown[]) =>
  db
    .prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .all(...args)
    .map((r) => (r as { detail: string }).detail)
    .join(' | ')

describe('pageSql', () => {
  it('starts after the later of updated_since and the cursor', () => {
    const since = '2026-01-02T00:00:00.000Z'
    const early = pageSql(
      collections.providers,
      'base',
      { updatedSince: since },
      ['2026-01-01T00:00:00.000Z', 'z'],
      50,
    )
    expect(early.edge.args).toEqual([since, '', 49])
    expect(early.tail.args).toEqual([since, ''])
    const late = pageSql(
      collections.providers,
      'base',
      { updatedSince: since },
      ['2026-01-03T00:00:00.000Z', 'b'],
      50,
    )
    expect(late.edge.args).toEqual(['2026-01-03T00:00:00.000Z', 'b', 49])
    expect(late.bodies(['2026-01-04T00:00:00.000Z', 'c']).args).toEqual([
      '2026-01-03T00:00:00.000Z',
      'b',
      '2026-01-04T00:00:00.000Z',
      'c',
    ])
  })

  it('tests each filter on its column and reads the sensitive variant by its own stamp', () => {
    const page = pageSql(collections.providers, 'sensitive', { active: false }, undefined, 10)
    expect(page.edge.sql).toContain('is_active = ?')
    expect(page.edge.sql).toContain('ORDER BY sensitive_updated_at, id')
    expect(page.edge.args).toEqual([0, '', '', 9])
    expect(page.bodies(['x', 'y']).sql).toContain('group_concat(sensitive_body')
    const enrollments = pageSql(
      collections['group-enrollments'],
      'base',
      { status: 'approved', payerKey: 'aetna', groupId: 'g' },
      undefined,
      5,
    )
    expect(enrollments.edge.sql).toMatch(
      /status = \? AND payer_key = \? AND provider_group_id = \?/,
    )
  })

  it('reads through the page indexes, without sorting', () => {
    const db = organizationFile()
    for (const collection of Object.values(collections)) {
      for (const view of ['base', 'sensitive'] as const) {
        const page = pageSql(collection, view, {}, undefined, 5)
        for (const { sql, args } of [page.edge, page.tail, page.bodies(['z', 'z'])]) {
          const text = plan(db, sql, args)
          expect(text).toMatch(/USING (COVERING )?INDEX/)
          expect(text).not.toMatch(/TEMP B-TREE/)
        }
        // The rows' ids and stamps, for a page whose bodies are known: from the index alone.
        const stamps = plan(db, page.stamps.sql, page.stamps.args)
        expect(stamps).toMatch(/USING COVERING INDEX/)
        expect(stamps).not.toMatch(/TEMP B-TREE/)
      }
    }
    const { sql, args } = expirablesSql('2026-01-01', '2027-01-01', undefined, 5)
    expect(plan(db, sql, args)).toContain('doc_expirables_page')
    db.close()
  })

  it('reads the ids and stamps of a page and the row after it in a few statements whatever the limit', () => {
    expect([1, 2, 3, 49, 50, 63, 64, 199, 200].map(rowsToRead)).toEqual([
      2, 4, 4, 64, 64, 64, 128, 256, 256,
    ])
    const stampsSql = (limit: number) =>
      pageSql(collections.providers, 'base', {}, undefined, limit).stamps.sql
    const texts = new Set(Array.from({ length: 200 }, (_, i) => stampsSql(i + 1)))
    expect(texts.size).toBe(8)
    expect(() => rowsToRead(0)).toThrow()
    expect(() => rowsToRead(1.5)).toThrow()
  })

  it('joins the bodies of a page in page order, whatever order they were written in', () => {
    const db = organizationFile()
    const insert = db.prepare(
      `INSERT INTO doc_documents (id, updated_at, hash, body, provider_id, provider_group_id)
       VALUES (?, ?, 'h', ?, ?, NULL)`,
    )
    const rows = Array.from({ length: 40 }, (_, i) => ({
      id: `id-${String((i * 7919) % 40).padStart(2, '0')}`,
      stamp: `2026-01-01T00:00:${String(i % 6).padStart(2, '0')}.000Z`,
      provider: i % 2 === 0 ? 'p' : 'q',
    }))
    for (const r of [...rows].sort(() => Math.random() - 0.5)) {
      insert.run(r.id, r.stamp, JSON.stringify({ id: r.id }), r.provider)
    }
    for (const filters of [{}, { providerId: 'p' }]) {
      const expected = rows
        .filter((r) => !('providerId' in filters) || r.provider === 'p')
        .sort((a, b) => (a.stamp + a.id < b.stamp + b.id ? -1 : 1))
      const page = pageSql(collections.documents, 'base', filters, undefined, 15)
      const all = (sql: { sql: string; args: readonly unknown[] }) =>
        db
          .prepare(sql.sql)
          .raw(true)
          .all(...sql.args) as [string, string][]
      const position = (r: { stamp: string; id: string }) => [r.stamp, r.id]
      expect(all(page.edge)).toEqual(expected.slice(14, 16).map(position))
      expect(all(page.tail)).toEqual(expected.slice(-1).map(position))
      const last = all(page.edge)[0] as [string, string]
      const bodies = page.bodies(last)
      const joined = db
        .prepare(bodies.sql)
        .pluck()
        .get(...bodies.args) as Buffer
      expect(JSON.parse(`[${joined.toString()}]`)).toEqual(
        expected.slice(0, 15).map((r) => ({ id: r.id })),
      )
    }
    db.close()
  })
})
