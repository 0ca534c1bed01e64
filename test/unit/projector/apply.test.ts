// The applier across organizations: what one batch does to several organization files.
import Database from 'better-sqlite3'
import { rmSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { testApplier } from '../../support/applier.ts'
import {
  groupRow,
  membershipRow,
  ORG_A,
  ORG_B,
  providerRow,
  record,
  uuid,
} from '../../support/debezium.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function applierIn(deferDocumentsUntilCaughtUp = false) {
  const { applier, generation } = testApplier(
    {
      offsetGuard: true,
      deferDocumentsUntilCaughtUp,
      clock: () => new Date('2026-11-22T10:00:00.000Z'),
    },
    undefined,
    (made) => dirs.push(made),
  )
  const stamps = (organizationId: string): Record<string, string> => {
    const db = new Database(generation.organizationPath(organizationId), { readonly: true })
    try {
      const rows = db.prepare('SELECT id, updated_at FROM doc_providers').all() as {
        id: string
        updated_at: string
      }[]
      return Object.fromEntries(rows.map((r) => [r.id, r.updated_at]))
    } finally {
      db.close()
    }
  }
  const providerIds = (organizationId: string): string[] => {
    const db = new Database(generation.organizationPath(organizationId), { readonly: true })
    try {
      return db.prepare('SELECT id FROM doc_providers ORDER BY id').pluck().all() as string[]
    } finally {
      db.close()
    }
  }
  const providerBody = (organizationId: string, providerId: string): string => {
    const db = new Database(generation.organizationPath(organizationId), { readonly: true })
    try {
      return db
        .prepare('SELECT sensitive_body FROM doc_providers WHERE id = ?')
        .pluck()
        .get(providerId) as string
    } finally {
      db.close()
    }
  }
  return { applier, providerIds, stamps, providerBody }
}

describe('applyBatch', () => {
  it('a truncate clears every organization, also one whose first rows came earlier in the batch', () => {
    const { applier, providerIds } = applierIn()
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(1), ORG_A) }),
    ])
    expect(providerIds(ORG_A)).toEqual([uuid(1)])

    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(2), ORG_B), lsn: 2 }),
      record({ table: 'providers', op: 't', lsn: 3 }),
      record({ table: 'providers', op: 'c', after: providerRow(uuid(3), ORG_B), lsn: 4 }),
    ])
    applier.close()
    expect(providerIds(ORG_A)).toEqual([])
    // Inserted before the truncate: gone; after it: kept.
    expect(providerIds(ORG_B)).toEqual([uuid(3)])
  })

  it('a tombstone without its delete (compacted away) deletes by key; one for a row never seen, or right after its delete, does nothing', () => {
    const { applier, providerIds } = applierIn()
    const tombstone = (id: string) => ({
      ...record({ table: 'providers', op: 'd', before: { id } }),
      value: null,
    })
    const first = applier.applyBatch([
      // Stored at a high position: a tombstone is not guarded by positions (it has none).
      record({ table: 'providers', op: 'c', after: providerRow(uuid(1), ORG_A), lsn: 900 }),
      record({ table: 'providers', op: 'c', after: providerRow(uuid(2), ORG_A), lsn: 901 }),
      record({ table: 'providers', op: 'c', after: providerRow(uuid(3), ORG_B), lsn: 902 }),
    ])
    expect(first.events.get('providers')).toEqual({ applied: 3 })
    const outcome = applier.applyBatch([
      tombstone(uuid(1)),
      // Its delete first, as on a topic not yet compacted.
      record({ table: 'providers', op: 'd', before: { id: uuid(3) }, lsn: 903 }),
      tombstone(uuid(3)),
      tombstone(uuid(99)),
    ])
    expect(outcome.events.get('providers')).toEqual({ applied: 2, tombstone: 1, absent: 1 })
    expect(outcome.skipped).toBe(0)
    // A replayed older version of the row the tombstone removed does not come back; a newer does.
    applier.applyBatch([
      record({ table: 'providers', op: 'u', after: providerRow(uuid(1), ORG_A), lsn: 899 }),
    ])
    expect(providerIds(ORG_A)).toEqual([uuid(2)])
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(1), ORG_A), lsn: 1000 }),
    ])
    applier.close()
    expect(providerIds(ORG_A)).toEqual([uuid(1), uuid(2)])
    expect(providerIds(ORG_B)).toEqual([])
  })

  it('stamps a later batch strictly later, even within the same millisecond', () => {
    // The clock stands still: both batches run at 10:00:00.000.
    const { applier, stamps } = applierIn()
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(2), ORG_A) }),
    ])
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(1), ORG_A) }),
    ])
    applier.close()
    // A walk whose cursor stopped after provider 2 still meets provider 1, though its id sorts first.
    const s = stamps(ORG_A)
    expect(s[uuid(2)]).toBe('2026-11-22T10:00:00.000Z')
    expect(s[uuid(1)]).toBe('2026-11-22T10:00:00.001Z')
  })

  it('moves no stamp for a batch that changes no response', () => {
    const { applier, stamps } = applierIn()
    const row = providerRow(uuid(1), ORG_A)
    applier.applyBatch([record({ table: 'providers', op: 'c', after: row, lsn: 1 })])
    // Same content again (a no-op UPDATE), then a new provider: stamped by the clock alone.
    applier.applyBatch([record({ table: 'providers', op: 'u', after: row, lsn: 2 })])
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(2), ORG_A) }),
    ])
    applier.close()
    expect(stamps(ORG_A)).toEqual({
      [uuid(1)]: '2026-11-22T10:00:00.000Z',
      [uuid(2)]: '2026-11-22T10:00:00.001Z',
    })
  })

  it("never embeds another organization's row, even when a source row references it", () => {
    // PostgreSQL's foreign keys do not stop a membership of organization A from naming a group of
    // organization B. A's documents must not show B's group, nor change when it does.
    const { applier, stamps, providerBody } = applierIn()
    const group = uuid(10)
    const membership = (id: string, providerId: string, organizationId: string, lsn: number) =>
      record({
        table: 'group_memberships',
        op: 'c',
        after: membershipRow(id, providerId, group, organizationId),
        lsn,
      })
    applier.applyBatch([
      record({ table: 'provider_groups', op: 'c', after: groupRow(group, ORG_B), lsn: 1 }),
      record({ table: 'providers', op: 'c', after: providerRow(uuid(1), ORG_A), lsn: 2 }),
      membership(uuid(11), uuid(1), ORG_A, 3),
      record({ table: 'providers', op: 'c', after: providerRow(uuid(2), ORG_B), lsn: 4 }),
      membership(uuid(12), uuid(2), ORG_B, 5),
    ])
    const before = { body: providerBody(ORG_A, uuid(1)), stamps: stamps(ORG_A) }
    expect(before.body).not.toContain(group)
    expect(providerBody(ORG_B, uuid(2))).toContain('Bay Clinic')

    applier.applyBatch([
      record({
        table: 'provider_groups',
        op: 'u',
        after: groupRow(group, ORG_B, { name: 'Renamed Clinic' }),
        lsn: 6,
      }),
    ])
    applier.close()
    expect(providerBody(ORG_B, uuid(2))).toContain('Renamed Clinic')
    expect(providerBody(ORG_A, uuid(1))).toBe(before.body)
    expect(stamps(ORG_A)).toEqual(before.stamps)
  })

  it('defers documents until the replica first catches up, then keeps them live', async () => {
    const { applier, providerIds } = applierIn(true)
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(1), ORG_A) }),
    ])
    // Nothing is served before catching up, so nothing is built yet.
    expect(providerIds(ORG_A)).toEqual([])
    expect(await applier.markCaughtUp()).toEqual({ rewritten: 1, unchanged: 0, removed: 0 })
    expect(providerIds(ORG_A)).toEqual([uuid(1)])
    expect(applier.control.caughtUpAt()).toBeDefined()

    // From then on, each batch's documents with it, also in an organization new since.
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(2), ORG_A) }),
      record({ table: 'providers', op: 'c', after: providerRow(uuid(3), ORG_B) }),
    ])
    expect(providerIds(ORG_A)).toEqual([uuid(1), uuid(2)])
    expect(providerIds(ORG_B)).toEqual([uuid(3)])
    expect(await applier.markCaughtUp()).toEqual({ rewritten: 0, unchanged: 0, removed: 0 })
    applier.close()
  })

  describe('an initial load holding its transactions over batches', () => {
    function loading(
      loadEventsPerHeldFile?: number,
      more: { maxOpenFiles?: number; loadCommitEvents?: number } = {},
    ) {
      const made = testApplier(
        {
          offsetGuard: true,
          deferDocumentsUntilCaughtUp: true,
          loadCommitEvents: 3,
          ...(loadEventsPerHeldFile === undefined ? {} : { loadEventsPerHeldFile }),
          ...more,
          clock: () => new Date('2026-11-22T10:00:00.000Z'),
        },
        undefined,
        (dir) => dirs.push(dir),
      )
      /** Mirror rows another connection sees: what is committed. */
      const committedProviders = (organizationId: string): string[] => {
        const db = new Database(made.generation.organizationPath(organizationId), {
          readonly: true,
        })
        try {
          return db.prepare('SELECT id FROM providers ORDER BY id').pluck().all() as string[]
        } finally {
          db.close()
        }
      }
      const committedRoutes = (): number => {
        const db = new Database(made.generation.routesPath, { readonly: true })
        try {
          return db.prepare('SELECT count(*) FROM routes').pluck().get() as number
        } finally {
          db.close()
        }
      }
      return { ...made, committedProviders, committedRoutes }
    }
    const provider = (n: number, organizationId = ORG_A) =>
      record({ table: 'providers', op: 'c', after: providerRow(uuid(n), organizationId), lsn: n })

    it('commits every file together once the batches reach the threshold, or when asked', () => {
      const { applier, committedProviders, committedRoutes } = loading()
      expect(applier.applyBatch([provider(1), provider(2, ORG_B)]).committed).toBe(false)
      expect(committedProviders(ORG_A)).toEqual([])
      expect(committedProviders(ORG_B)).toEqual([])
      expect(committedRoutes()).toBe(0)

      expect(applier.applyBatch([provider(3)]).committed).toBe(true)
      expect(committedProviders(ORG_A)).toEqual([uuid(1), uuid(3)])
      expect(committedProviders(ORG_B)).toEqual([uuid(2)])
      expect(committedRoutes()).toBe(3)

      expect(applier.applyBatch([provider(4)]).committed).toBe(false)
      applier.commit()
      expect(committedProviders(ORG_A)).toEqual([uuid(1), uuid(3), uuid(4)])
      applier.close()
    })

    it('carries a round on while it holds many files: its commit syncs each of them', () => {
      const { applier, committedProviders } = loading(2)
      // Two files held: the round ends at 2 x 2 = 4 events, not at loadCommitEvents' 3.
      expect(applier.applyBatch([provider(1), provider(2, ORG_B)]).committed).toBe(false)
      expect(applier.applyBatch([provider(3)]).committed).toBe(false)
      expect(committedProviders(ORG_A)).toEqual([])
      expect(applier.applyBatch([provider(4)]).committed).toBe(true)
      expect(committedProviders(ORG_A)).toEqual([uuid(1), uuid(3), uuid(4)])
      expect(committedProviders(ORG_B)).toEqual([uuid(2)])
      applier.close()
    })

    it('rolls back every batch held when one fails, and goes on from what was committed', () => {
      const { applier, generation, committedProviders, committedRoutes } = loading()
      applier.applyBatch([provider(1), provider(2), provider(3)])
      // A write SQLite refuses, as a full disk would: a trigger on one row.
      const db = new Database(generation.organizationPath(ORG_A))
      db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON providers WHEN NEW.id = '${uuid(6)}'
               BEGIN SELECT RAISE(ABORT, 'refused'); END`)
      db.close()
      expect(applier.applyBatch([provider(4), provider(5, ORG_B)]).committed).toBe(false)
      expect(() => applier.applyBatch([provider(7), provider(6)])).toThrow('refused')
      applier.commit()
      expect(committedProviders(ORG_A)).toEqual([uuid(1), uuid(2), uuid(3)])
      expect(committedProviders(ORG_B)).toEqual([])
      expect(committedRoutes()).toBe(3)

      // Redelivered, the batches apply whole.
      applier.applyBatch([provider(4), provider(5, ORG_B)])
      applier.commit()
      expect(committedProviders(ORG_A)).toEqual([uuid(1), uuid(2), uuid(3), uuid(4)])
      expect(committedProviders(ORG_B)).toEqual([uuid(5)])
      applier.close()
    })

    describe('past the files a lane holds open: the spool', () => {
      // One file held open: ORG_A's (first seen) is written as batches come, the others' events
      // are spooled and applied at the round's commit, organization by organization.
      const spooling = () => loading(undefined, { maxOpenFiles: 1, loadCommitEvents: 100 })
      const rename = (n: number, organizationId: string, lsn: number, name: string) =>
        record({
          table: 'providers',
          op: 'u',
          after: providerRow(uuid(n), organizationId, { last_name: name }),
          lsn,
        })
      const lastNames = (generation: { organizationPath(id: string): string }, org: string) => {
        const db = new Database(generation.organizationPath(org), { readonly: true })
        try {
          return db.prepare('SELECT last_name FROM providers ORDER BY id').pluck().all()
        } finally {
          db.close()
        }
      }

      it('applies them at the commit, in their order, and counts their outcomes then', () => {
        const { applier, generation, committedProviders } = spooling()
        const first = applier.applyBatch([
          provider(1),
          provider(2, ORG_B),
          rename(2, ORG_B, 20, 'Byron'),
        ])
        expect(first.committed).toBe(false)
        // Only what was applied is counted: ORG_B's two events wait in the spool.
        expect(first.events.get('providers')).toEqual({ applied: 1 })
        // An older version of ORG_B's row, after the rename: it loses once applied.
        applier.applyBatch([rename(2, ORG_B, 10, 'Older')])
        // Its file is there from the first (a truncate reaches every organization with a file).
        expect(committedProviders(ORG_B)).toEqual([])

        expect(applier.commit()).toEqual({ providers: { applied: 2, older: 1 } })
        expect(committedProviders(ORG_A)).toEqual([uuid(1)])
        expect(committedProviders(ORG_B)).toEqual([uuid(2)])
        expect(lastNames(generation, ORG_B)).toEqual(['Byron'])
        // Reported once.
        expect(applier.commit()).toEqual({})
        applier.close()
      })

      it('lets a truncate in a later batch reach an organization whose events wait in the spool', () => {
        const { applier, committedProviders } = spooling()
        applier.applyBatch([provider(1), provider(2, ORG_B)])
        applier.applyBatch([record({ table: 'providers', op: 't', lsn: 30 })])
        applier.applyBatch([provider(40, ORG_B)])
        applier.commit()
        expect(committedProviders(ORG_A)).toEqual([])
        expect(committedProviders(ORG_B)).toEqual([uuid(40)])
        applier.close()
      })

      it('reports what a round applied at its end with the batch that ended it', () => {
        const { applier } = loading(undefined, { maxOpenFiles: 1 })
        expect(applier.applyBatch([provider(1), provider(2, ORG_B)]).committed).toBe(false)
        const last = applier.applyBatch([provider(3, ORG_B)])
        expect(last.committed).toBe(true)
        expect(last.events.get('providers')).toEqual({ applied: 2 })
        applier.close()
      })

      it('forgets the spool with the round when a batch fails, and goes on from what was committed', () => {
        const { applier, generation, committedProviders } = spooling()
        applier.applyBatch([provider(1), provider(2, ORG_B)])
        applier.commit()
        const db = new Database(generation.organizationPath(ORG_A))
        db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON providers WHEN NEW.id = '${uuid(6)}'
                 BEGIN SELECT RAISE(ABORT, 'refused'); END`)
        db.close()
        applier.applyBatch([provider(4), provider(3, ORG_B)])
        expect(() => applier.applyBatch([provider(6)])).toThrow('refused')
        expect(applier.commit()).toEqual({})
        expect(committedProviders(ORG_A)).toEqual([uuid(1)])
        expect(committedProviders(ORG_B)).toEqual([uuid(2)])

        // Redelivered from the last committed position, the round applies whole.
        applier.applyBatch([provider(4), provider(3, ORG_B)])
        expect(applier.commit()).toEqual({ providers: { applied: 1 } })
        expect(committedProviders(ORG_A)).toEqual([uuid(1), uuid(4)])
        expect(committedProviders(ORG_B)).toEqual([uuid(2), uuid(3)])
        applier.close()
      })

      it('builds documents byte-identical to a load that held every file open', async () => {
        const organizations = [ORG_A, ORG_B, uuid(900), uuid(901), uuid(902)]
        const batches = [0, 1, 2].map((round) =>
          organizations.flatMap((org, o) => [
            provider(100 * o + round, org),
            rename(100 * o, org, 1000 + 10 * round + o, `Name ${round}`),
          ]),
        )
        const documents = async (maxOpenFiles: number, commitFirst: boolean) => {
          const { applier, generation } = loading(undefined, { maxOpenFiles, loadCommitEvents: 7 })
          for (const batch of batches) applier.applyBatch(batch)
          // Committed first, the catch-up build opens each file again; not, the commit builds
          // each file it commits.
          if (commitFirst) applier.commit()
          const built = await applier.markCaughtUp()
          applier.close()
          const rows = organizations.map((org) => {
            const db = new Database(generation.organizationPath(org), { readonly: true })
            try {
              return db.prepare('SELECT id, updated_at, body FROM doc_providers ORDER BY id').all()
            } finally {
              db.close()
            }
          })
          return { built, rows }
        }
        const held = await documents(64, true)
        expect(held.rows.flat()).toHaveLength(15)
        expect(held.built.rewritten).toBe(15)
        expect(await documents(1, true)).toEqual(held)
        expect(await documents(1, false)).toEqual(held)
        expect(await documents(64, false)).toEqual(held)
      })
    })

    it('commits before building at catch-up, and from then on every batch', async () => {
      const { applier } = loading()
      expect(applier.applyBatch([provider(1)]).committed).toBe(false)
      expect(await applier.markCaughtUp()).toEqual({ rewritten: 1, unchanged: 0, removed: 0 })
      expect(applier.applyBatch([provider(2)]).committed).toBe(true)
      applier.close()
    })
  })
})
