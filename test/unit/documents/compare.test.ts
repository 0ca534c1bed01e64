// Comparing two organization files by served content: what a dry run and `verify` report.
import Database from 'better-sqlite3'
import { rmSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { compareDocumentFiles, hasDifferences } from '../../../projector/documents/compare.ts'
import { testApplier } from '../../support/applier.ts'
import { identifierRow, ORG_A, providerRow, record, uuid } from '../../support/debezium.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** An organization file of ORG_A holding the providers given, built at `at`. */
function fileWith(rows: Record<string, unknown>[], at: string): string {
  const { applier, generation } = testApplier(
    { offsetGuard: false, clock: () => new Date(at) },
    undefined,
    (made) => dirs.push(made),
  )
  applier.applyBatch(
    rows.map((row, i) =>
      record({
        table: row.provider_id === undefined ? 'providers' : 'provider_identifiers',
        op: 'c',
        after: row,
        lsn: i + 1,
      }),
    ),
  )
  applier.close()
  return generation.organizationPath(ORG_A)
}

const byResource = (diffs: ReturnType<typeof compareDocumentFiles>) =>
  Object.fromEntries(diffs.map((d) => [d.resource, d]))

describe('compareDocumentFiles', () => {
  it('names the changed, appeared and disappeared documents, and ignores stamps', () => {
    const live = fileWith(
      [providerRow(uuid(1), ORG_A), providerRow(uuid(2), ORG_A), providerRow(uuid(3), ORG_A)],
      '2026-01-01T00:00:00.000Z',
    )
    // Built a day later: every stamp differs, only provider 2's content and the set do.
    const rebuilt = fileWith(
      [
        providerRow(uuid(1), ORG_A),
        providerRow(uuid(2), ORG_A, { last_name: 'Changed' }),
        providerRow(uuid(4), ORG_A),
        identifierRow(uuid(9), uuid(4), ORG_A),
      ],
      '2026-01-02T00:00:00.000Z',
    )
    const diffs = byResource(compareDocumentFiles(rebuilt, live))
    expect(diffs.providers).toEqual({
      resource: 'providers',
      equal: 1,
      changed: { count: 1, ids: [uuid(2)] },
      appeared: { count: 1, ids: [uuid(4)] },
      disappeared: { count: 1, ids: [uuid(3)] },
    })
    expect(diffs.expirables!.appeared.count).toBe(1)
    expect(diffs.enrollments!.equal).toBe(0)
    expect(hasDifferences(Object.values(diffs))).toBe(true)
  })

  it('counts a change to a sensitive field only keys with the scope see', () => {
    const live = fileWith([providerRow(uuid(1), ORG_A)], '2026-01-01T00:00:00.000Z')
    const rebuilt = fileWith(
      [providerRow(uuid(1), ORG_A, { date_of_birth: '1970-01-01' })],
      '2026-01-01T00:00:00.000Z',
    )
    const db = new Database(rebuilt, { readonly: true })
    const live1 = new Database(live, { readonly: true })
    // The base variants are equal; only the sensitive ones differ.
    expect(db.prepare('SELECT hash FROM doc_providers').pluck().get()).toBe(
      live1.prepare('SELECT hash FROM doc_providers').pluck().get(),
    )
    db.close()
    live1.close()
    expect(byResource(compareDocumentFiles(rebuilt, live)).providers!.changed.ids).toEqual([
      uuid(1),
    ])
  })

  it('compares the served body, not its stored hash: a body changed under an unchanged hash differs', () => {
    const live = fileWith(
      [providerRow(uuid(1), ORG_A), providerRow(uuid(2), ORG_A)],
      '2026-01-01T00:00:00.000Z',
    )
    const rebuilt = fileWith(
      [providerRow(uuid(1), ORG_A), providerRow(uuid(2), ORG_A)],
      '2026-01-02T00:00:00.000Z',
    )
    const db = new Database(live)
    db.prepare(
      `UPDATE doc_providers SET sensitive_body = replace(sensitive_body, '"id"', '"Id"') WHERE id = ?`,
    ).run(uuid(1))
    db.prepare(`UPDATE doc_providers SET body = replace(body, '"id"', '"Id"') WHERE id = ?`).run(
      uuid(2),
    )
    db.close()
    expect(byResource(compareDocumentFiles(rebuilt, live)).providers).toMatchObject({
      equal: 0,
      changed: { count: 2, ids: [uuid(1), uuid(2)] },
    })
  })

  it("finds a served stamp that is not its row's, and a filter column that lies", () => {
    const rows = [
      providerRow(uuid(1), ORG_A),
      providerRow(uuid(2), ORG_A),
      identifierRow(uuid(9), uuid(1), ORG_A),
    ]
    const live = fileWith(rows, '2026-01-01T00:00:00.000Z')
    const rebuilt = fileWith(rows, '2026-01-01T00:00:00.000Z')
    expect(hasDifferences(compareDocumentFiles(rebuilt, live))).toBe(false)
    const db = new Database(live)
    // Same length, other instant: a poller's cursor would disagree with what it was sent.
    db.prepare(
      `UPDATE doc_providers SET body = replace(body, '2026-01-01T', '2026-01-09T') WHERE id = ?`,
    ).run(uuid(1))
    db.prepare(`UPDATE doc_providers SET is_active = 1 - is_active WHERE id = ?`).run(uuid(2))
    db.prepare(`UPDATE doc_expirables SET expires_on = '1999-01-01'`).run()
    db.close()
    const diffs = byResource(compareDocumentFiles(rebuilt, live))
    expect(diffs.providers!.changed.ids).toEqual([uuid(1), uuid(2)])
    expect(diffs.expirables!.changed.count).toBe(1)
  })

  it('finds nothing between a file and itself, and everything appears against no file', () => {
    const file = fileWith([providerRow(uuid(1), ORG_A)], '2026-01-01T00:00:00.000Z')
    expect(hasDifferences(compareDocumentFiles(file, file))).toBe(false)
    const appeared = byResource(compareDocumentFiles(file, undefined)).providers!
    expect(appeared.appeared).toEqual({ count: 1, ids: [uuid(1)] })
  })

  it('lists at most idsPerList ids of a kind, the first in id order, with the full count', () => {
    const live = fileWith([providerRow(uuid(9), ORG_A)], '2026-01-01T00:00:00.000Z')
    const rebuilt = fileWith(
      [5, 3, 1, 4, 2].map((n) => providerRow(uuid(n), ORG_A)),
      '2026-01-01T00:00:00.000Z',
    )
    expect(
      byResource(compareDocumentFiles(rebuilt, live, { idsPerList: 2 })).providers!.appeared,
    ).toEqual({ count: 5, ids: [uuid(1), uuid(2)] })
  })
})
