// The pure core of the rebuilds built aside, and the swap of a rebuilt file in the applier.
import Database from 'better-sqlite3'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { restampBody } from '../../../projector/documents/restamp.ts'
import { handoverSeeks, type HandoverRequest } from '../../../projector/storage/handover.ts'
import { acquireRebuildLock, rebuildLockPath } from '../../../projector/rebuild/lock.ts'
import { rebuildReport, reportTable } from '../../../projector/rebuild/report.ts'
import { diskSpaceProblem } from '../../../projector/rebuild/run.ts'
import { organizationFileName } from '../../../src/layout.ts'
import { testApplier } from '../../support/applier.ts'
import { ORG_A, ORG_B, providerRow, record, uuid } from '../../support/debezium.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const request = (position: HandoverRequest['position']): HandoverRequest => ({
  fileKey: ORG_A,
  file: organizationFileName(ORG_A, 'r1'),
  organizations: [ORG_A],
  position,
  requestedAt: '2026-01-01T00:00:00.000Z',
  requestedBy: 'pid 1',
})

describe('handoverSeeks', () => {
  it('goes back only where the live projector read past the rebuilt file, to the lowest position', () => {
    const next = new Map([
      ['t1\u00000', 10n],
      ['t2\u00000', 5n],
    ])
    const seeks = handoverSeeks(
      [
        request([
          { topic: 't1', partition: 0, offset: '7' },
          { topic: 't2', partition: 0, offset: '5' },
          { topic: 't3', partition: 0, offset: '3' },
        ]),
        request([{ topic: 't1', partition: 0, offset: '4' }]),
      ],
      next,
    )
    // t2: read exactly to the rebuilt file's end; t3: never read, it starts from its beginning.
    expect(seeks).toEqual([{ topic: 't1', partition: 0, offset: '4' }])
  })
})

describe('restampBody', () => {
  it('replaces the trailing updatedAt, and refuses a body that does not end with it', () => {
    const body = '{"id":"x","name":"a","updatedAt":"2026-01-01T00:00:00.000Z"}'
    expect(restampBody(body, '2026-01-01T00:00:00.000Z', '2026-02-02T00:00:00.000Z')).toBe(
      '{"id":"x","name":"a","updatedAt":"2026-02-02T00:00:00.000Z"}',
    )
    expect(() => restampBody(body, '2026-03-03T00:00:00.000Z', 'x')).toThrow(/updatedAt/)
  })
})

describe('replaceFile', () => {
  it('keeps the stamps of unchanged documents and stamps the others after every stamp handed out', () => {
    let now = new Date('2026-01-01T00:00:00.000Z')
    const { applier, generation } = testApplier(
      { offsetGuard: false, clock: () => now },
      undefined,
      (made) => dirs.push(made),
    )
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(1), ORG_A), lsn: 1 }),
      record({ table: 'providers', op: 'c', after: providerRow(uuid(2), ORG_A), lsn: 2 }),
    ])
    // The rebuilt file: a copy, then built differently (provider 2 changed, 3 new), stamped
    // earlier than the live file's later change.
    now = new Date('2026-01-03T00:00:00.000Z')
    applier.applyBatch([
      record({
        table: 'providers',
        op: 'u',
        after: providerRow(uuid(1), ORG_A, { suffix: 'Jr' }),
        lsn: 3,
      }),
    ])
    const liveStamps = stamps(generation.organizationPath(ORG_A))
    const rebuiltName = organizationFileName(ORG_A, 'r1')
    const rebuiltPath = generation.organizationPath(ORG_A, rebuiltName)
    const source = new Database(generation.organizationPath(ORG_A), { readonly: true })
    source.prepare('VACUUM INTO ?').run(rebuiltPath)
    source.close()
    const db = new Database(rebuiltPath)
    db.prepare(
      `UPDATE doc_providers SET hash = 'other', sensitive_hash = 'other' WHERE id = ?`,
    ).run(uuid(2))
    db.prepare(
      `UPDATE doc_providers SET updated_at = '2025-12-31T00:00:00.000Z', body = replace(body, ?, '2025-12-31T00:00:00.000Z') WHERE id = ?`,
    ).run(liveStamps[uuid(1)], uuid(1))
    db.close()

    now = new Date('2026-01-02T00:00:00.000Z') // the clock stepped back: stamps must not
    expect(applier.replaceFile(ORG_A, rebuiltName)).toBe(2) // provider 2, both variants
    expect(applier.control.organizationFile(ORG_A)).toBe(rebuiltName)
    const after = stamps(rebuiltPath)
    expect(after[uuid(1)]).toBe(liveStamps[uuid(1)])
    expect(after[uuid(2)]! > liveStamps[uuid(1)]!).toBe(true)
    const body = new Database(rebuiltPath, { readonly: true })
      .prepare('SELECT body FROM doc_providers WHERE id = ?')
      .pluck()
      .get(uuid(1)) as string
    expect(body.endsWith(`"updatedAt":"${liveStamps[uuid(1)]}"}`)).toBe(true)

    // The applier goes on in the new file.
    now = new Date('2026-01-04T00:00:00.000Z')
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(3), ORG_A), lsn: 4 }),
    ])
    applier.close()
    expect(Object.keys(stamps(rebuiltPath)).sort()).toEqual([uuid(1), uuid(2), uuid(3)].sort())
  })
})

describe('replaceFile, of a shared file', () => {
  it('swaps the file of every organization it holds, restamping only what changed, and goes on in it', () => {
    let now = new Date('2026-01-01T00:00:00.000Z')
    const { applier, generation } = testApplier(
      { offsetGuard: false, clock: () => now, organizationFiles: 1 },
      undefined,
      (made) => dirs.push(made),
    )
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(1), ORG_A), lsn: 1 }),
      record({ table: 'providers', op: 'c', after: providerRow(uuid(2), ORG_B), lsn: 2 }),
    ])
    const key = 'shared-0000.db'
    const livePath = generation.filePath(key)
    const liveStamps = stamps(livePath)
    // The rebuilt file: a copy whose provider of B is built differently.
    const rebuilt = 'shared-0000.r1.db'
    const source = new Database(livePath, { readonly: true })
    source.prepare('VACUUM INTO ?').run(generation.filePath(key, rebuilt))
    source.close()
    const db = new Database(generation.filePath(key, rebuilt))
    db.prepare(`UPDATE doc_providers SET hash = 'other' WHERE id = ?`).run(uuid(2))
    db.close()

    now = new Date('2026-01-02T00:00:00.000Z')
    expect(applier.replaceFile(key, rebuilt)).toBe(1) // B's provider, its public variant
    expect(applier.control.organizationFile(key)).toBe(rebuilt)
    const after = stamps(generation.filePath(key, rebuilt))
    expect(after[uuid(1)]).toBe(liveStamps[uuid(1)])
    expect(after[uuid(2)]! > liveStamps[uuid(2)]!).toBe(true)
    // An organization's own file is no key of this generation.
    expect(() => applier.replaceFile(ORG_A, `${ORG_A}.r1.db`)).toThrow(/not a file key/)

    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(3), ORG_A), lsn: 3 }),
    ])
    applier.close()
    expect(Object.keys(stamps(generation.filePath(key, rebuilt))).sort()).toEqual(
      [uuid(1), uuid(2), uuid(3)].sort(),
    )
    expect(Object.keys(stamps(livePath)).sort()).toEqual([uuid(1), uuid(2)].sort())
  })
})

function stamps(path: string): Record<string, string> {
  const db = new Database(path, { readonly: true })
  try {
    const rows = db.prepare('SELECT id, updated_at FROM doc_providers').all() as Array<{
      id: string
      updated_at: string
    }>
    return Object.fromEntries(rows.map((r) => [r.id, r.updated_at]))
  } finally {
    db.close()
  }
}

describe('the rebuild lock', () => {
  it('names a live holder, and takes over from a dead one', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'replica-lock-'))
    dirs.push(dataDir)
    const now = new Date('2026-01-01T00:00:00.000Z')
    const first = acquireRebuildLock(dataDir, 'rebuild --org x', now)
    expect(first.held).toBe(true)
    const second = acquireRebuildLock(dataDir, 'rebuild', now)
    expect(second).toEqual({
      held: false,
      holder: {
        pid: process.pid,
        host: hostname(),
        command: 'rebuild --org x',
        since: now.toISOString(),
      },
    })
    if (first.held) first.release()
    // A holder that is gone (a pid no process has).
    writeFileSync(
      rebuildLockPath(dataDir),
      JSON.stringify({ pid: 2 ** 22 + 17, host: hostname(), command: 'rebuild', since: 'then' }),
    )
    expect(acquireRebuildLock(dataDir, 'rebuild', now).held).toBe(true)
  })
})

describe('the dry-run report', () => {
  it('lists what differs per organization and resource, and says when nothing does', () => {
    const none = { count: 0, ids: [] }
    const report = rebuildReport(
      true,
      [
        {
          organizationId: ORG_A,
          resources: [
            {
              resource: 'providers',
              equal: 8,
              changed: { count: 3, ids: [uuid(1), uuid(2)] },
              appeared: none,
              disappeared: { count: 1, ids: [uuid(9)] },
            },
            { resource: 'documents', equal: 4, changed: none, appeared: none, disappeared: none },
          ],
        },
      ],
      120,
      1.234,
    )
    expect(report.changed).toBe(true)
    const table = reportTable(report)
    expect(table).toContain(`${ORG_A}  providers      8        3    0        1`)
    expect(table).toContain(`${ORG_A} providers changed: ${uuid(1)} ${uuid(2)} (+1)`)
    expect(table).toContain(`${ORG_A} providers removed: ${uuid(9)}`)
    expect(table).not.toContain('documents')
    expect(table).toContain('1 of 1 organizations would change (120 events replayed in 1.2 s).')
    expect(reportTable(rebuildReport(true, [], 0, 0))).toBe(
      'No served document would change in 0 organizations (0 events replayed in 0 s).\n',
    )
  })

  it('refuses to start without room for the files built aside, saying how much it needs', () => {
    expect(diskSpaceProblem('/data', 100 * 1024 * 1024, 10 * 1024 * 1024)).toBe(
      'not enough disk space in /data: the rebuild needs 264 MB free, there are 10 MB',
    )
    expect(diskSpaceProblem('/data', 100 * 1024 * 1024, 300 * 1024 * 1024)).toBeUndefined()
  })
})
