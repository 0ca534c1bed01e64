import Database from 'better-sqlite3'
import { fileURLToPath } from 'node:url'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { describe, expect, it } from 'vitest'
import { collections, expirablesSql, pageSql } from '../../../api/collections.ts'

function organizationFile() {
  const db = new Database(':memory:')
  migrate(drizzle(db), {
    migrationsFolder: fileURLToPath(
      new URL('../../../schema/migrations/organization', import.meta.url),
    ),
  })
  return db
}

describe('pageSql', () => {
  it('resumes from the later of updated_since and the cursor', () => {
    const since = '2026-01-02T00:00:00.000Z'
    const early = pageSql(
      collections.providers,
      'base',
      { updatedSince: since },
      ['2026-01-01T00:00:00.000Z', 'z'],
      51,
    )
    expect(early.args).toEqual([since, '', 51])
    const late = pageSql(
      collections.providers,
      'base',
      { updatedSince: since },
      ['2026-01-03T00:00:00.000Z', 'b'],
      51,
    )
    expect(late.args).toEqual(['2026-01-03T00:00:00.000Z', 'b', 51])
  })

  it('tests each filter on its column and reads the sensitive variant by its own stamp', () => {
    const sql = pageSql(collections.providers, 'sensitive', { active: false }, undefined, 10)
    expect(sql.sql).toContain('is_active = ?')
    expect(sql.sql).toContain('ORDER BY sensitive_updated_at, id')
    expect(sql.args).toEqual([0, '', '', 10])
    const enrollments = pageSql(
      collections['group-enrollments'],
      'base',
      { status: 'approved', payerKey: 'aetna', groupId: 'g' },
      undefined,
      5,
    )
    expect(enrollments.sql).toMatch(/status = \? AND payer_key = \? AND provider_group_id = \?/)
  })

  it('prepares against the real schema and walks through the page index', () => {
    const db = organizationFile()
    for (const collection of Object.values(collections)) {
      for (const view of ['base', 'sensitive'] as const) {
        const { sql, args } = pageSql(collection, view, {}, undefined, 5)
        const plan = db
          .prepare(`EXPLAIN QUERY PLAN ${sql}`)
          .all(...args)
          .map((r) => (r as { detail: string }).detail)
          .join(' ')
        expect(plan).toMatch(/USING (COVERING )?INDEX/)
        expect(plan).not.toMatch(/TEMP B-TREE/)
      }
    }
    const { sql, args } = expirablesSql('2026-01-01', '2027-01-01', undefined, 5)
    const plan = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args)
    expect(JSON.stringify(plan)).toContain('doc_expirables_page')
    db.close()
  })
})
