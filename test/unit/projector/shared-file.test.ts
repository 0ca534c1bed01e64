// A file shared by several organizations (src/organization-scope.ts,
// projector/storage/shared-layout.ts): each organization's documents in it are byte for byte the
// ones it gets in a file of its own, a connection scoped to one sees nothing of the others, and a
// file written before organizations had keys opens as its one organization's.
import Database from 'better-sqlite3'
import { readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { decodeRecord, type SourceRecord } from '../../../projector/decode/decode.ts'
import { documentDifferences } from '../../../projector/documents/index.ts'
import {
  createFromImage,
  openOrganizationFile,
  type OrganizationEvent,
} from '../../../projector/storage/organization-file.ts'
import {
  organizationKeyIn,
  organizationScopedTables,
  scopeConnection,
} from '../../../src/organization-scope.ts'
import { openForReading, openForWriting } from '../../../src/sqlite.ts'
import { DOCUMENT_TABLES } from '../../support/applier.ts'
import {
  groupRow,
  identifierRow,
  membershipRow,
  providerRow,
  record,
  uuid,
} from '../../support/debezium.ts'

const dir = mkdtempSync(join(tmpdir(), 'replica-shared-file-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const ORGS = [uuid(0xa1), uuid(0xa2), uuid(0xa3)]
const provider = (o: number) => uuid(0x100 + o)
const group = (o: number) => uuid(0x200 + o)

/** Each organization's records: a provider with an expiring licence, a group, and a membership
 * of its provider in the next organization's group (foreign keys allow it). */
function recordsOf(o: number, name: string, lsn: number): SourceRecord[] {
  const org = ORGS[o]!
  const next = (o + 1) % ORGS.length
  return [
    record({ table: 'providers', op: 'c', lsn, after: providerRow(provider(o), org) }),
    record({
      table: 'provider_identifiers',
      op: 'c',
      lsn,
      after: identifierRow(uuid(0x300 + o), provider(o), org),
    }),
    record({ table: 'provider_groups', op: 'c', lsn, after: groupRow(group(o), org, { name }) }),
    record({
      table: 'group_memberships',
      op: 'c',
      lsn,
      after: membershipRow(uuid(0x400 + o), provider(o), group(next), org),
    }),
  ]
}

function eventsOf(records: SourceRecord[]): OrganizationEvent[] {
  return records.map((r) => {
    const decoded = decodeRecord(r, 'product')
    if (decoded.kind !== 'change') throw new Error('not a change')
    return {
      change: decoded.change as OrganizationEvent['change'],
      origin: { topic: r.topic, partition: r.partition, offset: Number(r.offset) },
    }
  })
}

const at = new Date('2026-11-28T10:00:00.000Z')
const tally = () => {}

/** The documents a connection reads, every table, in id order. */
function documentsRead(db: Database.Database): Record<string, unknown[]> {
  return Object.fromEntries(
    DOCUMENT_TABLES.map((t) => [
      t,
      db.prepare(`SELECT * FROM ${t} ORDER BY id`).all() as Record<string, unknown>[],
    ]),
  )
}

/** An organization's documents in the shared file, read as the api reads them: scoped. */
function scopedDocuments(path: string, organizationId: string): Record<string, unknown[]> {
  const db = openForReading(path)
  try {
    const scope = scopeConnection(db)
    scope.enter(organizationKeyIn(db, organizationId) ?? -1)
    return withoutKeys(documentsRead(db))
  } finally {
    db.close()
  }
}

function ownDocuments(path: string): Record<string, unknown[]> {
  const db = openForReading(path)
  try {
    return withoutKeys(documentsRead(db))
  } finally {
    db.close()
  }
}

/** Documents without the organization key, which numbers the organization in its file. */
function withoutKeys(docs: Record<string, unknown[]>): Record<string, unknown[]> {
  return Object.fromEntries(
    Object.entries(docs).map(([t, rows]) => [
      t,
      rows.map((row) => {
        const { organization_key: _, ...rest } = row as Record<string, unknown>
        return rest
      }),
    ]),
  )
}

describe('a file shared by organizations', () => {
  for (const deferred of [false, true]) {
    it(`holds each one's documents as its own file would${deferred ? ', built at the end of a load' : ''}`, () => {
      const sharedPath = join(dir, `shared-${deferred}.db`)
      createFromImage(sharedPath, deferred, 'shared')
      const shared = openOrganizationFile('shared', sharedPath, {
        offsetGuard: false,
        deferDocuments: deferred,
      })
      // Interleaved, as a batch over several organizations arrives; then B's group renamed.
      const first = ORGS.flatMap((_, o) => recordsOf(o, `Group ${o}`, 10))
      const renamed = record({
        table: 'provider_groups',
        op: 'u',
        lsn: 20,
        after: groupRow(group(1), ORGS[1]!, { name: 'Renamed' }),
      })
      shared.apply(eventsOf(first), at, tally)
      shared.apply(eventsOf([renamed]), at, tally)
      shared.buildDocuments(at)
      shared.close()

      ORGS.forEach((org, o) => {
        const ownPath = join(dir, `own-${deferred}-${o}.db`)
        createFromImage(ownPath, deferred)
        const own = openOrganizationFile(org, ownPath, {
          offsetGuard: false,
          deferDocuments: deferred,
        })
        const mine = recordsOf(o, `Group ${o}`, 10)
        own.apply(eventsOf(mine), at, tally)
        if (o === 1) own.apply(eventsOf([renamed]), at, tally)
        own.buildDocuments(at)
        own.close()
        expect(scopedDocuments(sharedPath, org)).toEqual(ownDocuments(ownPath))
      })
      // Each organization's provider is there, and embeds no other organization's group.
      const a = scopedDocuments(sharedPath, ORGS[0]!)
      expect(a.doc_providers).toHaveLength(1)
      expect(JSON.parse((a.doc_providers![0] as { body: string }).body)).toMatchObject({
        id: provider(0),
        groupMemberships: [],
      })
      expect(a.doc_provider_groups).toHaveLength(1)
      expect(a.doc_expirables).toHaveLength(1)
    })
  }

  it("is compared by verify an organization at a time: the others' documents are not extra", () => {
    const sharedPath = join(dir, 'verify-shared.db')
    createFromImage(sharedPath, false, 'shared')
    const shared = openOrganizationFile('shared', sharedPath, { offsetGuard: false })
    shared.apply(eventsOf(ORGS.flatMap((_, o) => recordsOf(o, `G${o}`, 10))), at, tally)
    shared.close()
    const ownPath = join(dir, 'verify-own.db')
    const own = openOrganizationFile(ORGS[1]!, ownPath, { offsetGuard: false })
    own.apply(eventsOf(recordsOf(1, 'G1', 10)), at, tally)
    own.close()

    const same = documentDifferences(ownPath, sharedPath, ORGS[1])
    for (const r of same.resources)
      expect([r.resource, r.missing, r.extra, r.differing]).toEqual([r.resource, [], [], []])
    expect(same.resources.find((r) => r.resource === 'providers')!.equal).toBe(1)
    // The same own file against another organization's scope: nothing of B, only C.
    const other = documentDifferences(ownPath, sharedPath, ORGS[2])
    const providers = other.resources.find((r) => r.resource === 'providers')!
    expect(providers.missing).toEqual([provider(1)])
    expect(providers.extra.map((e) => e.id)).toEqual([provider(2)])
  })

  it('scopes a connection: nothing until entered, one organization after, and no writes through it', () => {
    const path = join(dir, 'scope.db')
    createFromImage(path, false, 'shared')
    const file = openOrganizationFile('shared', path, { offsetGuard: false })
    file.apply(eventsOf(ORGS.flatMap((_, o) => recordsOf(o, `G${o}`, 10))), at, tally)
    file.close()

    const db = new Database(path)
    try {
      const scope = scopeConnection(db)
      expect(scope.layout).toBe('shared')
      const count = (table: string) =>
        db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number
      for (const table of organizationScopedTables) expect(count(table)).toBe(0)
      scope.enter(organizationKeyIn(db, ORGS[2]!)!)
      expect(count('providers')).toBe(1)
      expect(count('doc_providers')).toBe(1)
      expect(count('main.doc_providers')).toBe(3)
      expect(db.prepare('SELECT id FROM doc_providers').pluck().get()).toBe(provider(2))
      expect(() => db.prepare(`DELETE FROM doc_providers WHERE id = ?`).run(provider(2))).toThrow(
        /view/,
      )
    } finally {
      db.close()
    }
  })

  it('leads its page indexes with the organization, so a page is one range of the index', () => {
    const path = join(dir, 'plan.db')
    createFromImage(path, false, 'shared')
    const db = openForReading(path)
    try {
      scopeConnection(db).enter(1)
      const plan = db
        .prepare(
          `EXPLAIN QUERY PLAN SELECT body FROM doc_providers WHERE updated_at > ? ORDER BY updated_at, id LIMIT 50`,
        )
        .all('2026') as { detail: string }[]
      const details = plan.map((p) => p.detail).join('\n')
      expect(details).toMatch(
        /USING INDEX doc_providers_page \(organization_key=\? AND updated_at>\?\)/,
      )
      expect(details).not.toMatch(/TEMP B-TREE/)
    } finally {
      db.close()
    }
  })
})

describe('a file written before organizations had keys', () => {
  it('opens with every row its organization’s, numbered 1', () => {
    const path = join(dir, 'before.db')
    const org = ORGS[0]!
    // The first migration only, as the version before this one left files.
    const before = new Database(path)
    const migration = new URL(
      '../../../schema/migrations/organization/0000_organic_marvel_apes.sql',
      import.meta.url,
    )
    for (const statement of readFileSync(migration, 'utf8').split('--> statement-breakpoint')) {
      before.exec(statement)
    }
    const journal = JSON.parse(
      readFileSync(
        new URL('../../../schema/migrations/organization/meta/_journal.json', import.meta.url),
        'utf8',
      ),
    ) as { entries: { when: number }[] }
    before.exec(
      'CREATE TABLE __drizzle_migrations (id INTEGER PRIMARY KEY, hash text NOT NULL, created_at numeric)',
    )
    before
      .prepare('INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)')
      .run('before', journal.entries[0]!.when)
    before.prepare(`INSERT INTO replica_meta (key, value) VALUES ('organization_id', ?)`).run(org)
    before
      .prepare(
        `INSERT INTO doc_providers (id, updated_at, hash, body, sensitive_updated_at, sensitive_hash, sensitive_body, is_active)
         VALUES ('p', 't', 'h', '{}', 't', 'h', '{}', 1)`,
      )
      .run()
    before.close()

    openForWriting(path, 'organization').close()
    const db = openForReading(path)
    try {
      expect(organizationKeyIn(db, org)).toBe(1)
      expect(db.prepare('SELECT organization_key FROM doc_providers').pluck().all()).toEqual([1])
      expect(scopeConnection(db).layout).toBe('own')
    } finally {
      db.close()
    }
  })
})
