// The list-page cache over real HTTP, on a generation the projector's own applier writes and keeps
// writing while the api serves it: a repeated request is a hit; a committed change is served at
// once; the sensitive and base views, and two organizations, never get each other's pages; and
// every check before the page (key, revocation, scope) still runs on a hit.
import { rmSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashKey } from '../../../api/auth.ts'
import type { Applier } from '../../../projector/lanes/apply.ts'
import { publishGeneration } from '../../../src/layout.ts'
import { testApplier } from '../../support/applier.ts'
import { ORG_A, ORG_B, organizationRow, providerRow, record, uuid } from '../../support/debezium.ts'
import { allScopes, baseScopes } from './fixtures.ts'
import { type RunningApi, startApi } from './server.ts'

/** Rate limits out of the way: these tests count page-cache lookups, not requests. */
const UNLIMITED = { RATE_LIMIT_PER_KEY: '1000000', RATE_LIMIT_PER_ORGANIZATION: '1000000' }

const PROVIDERS_A = [1, 2, 3, 4, 5].map(uuid)
const PROVIDERS_B = [101, 102, 103].map(uuid)

interface Key {
  id: string
  raw: string
}

let lsn = 1

function keyRecord(key: Key, organizationId: string, scopes: readonly string[], revoked = false) {
  return record({
    table: 'api_keys',
    op: 'c',
    lsn: lsn++,
    after: {
      id: key.id,
      organization_id: organizationId,
      name: 'page cache test key',
      key_hash: hashKey(key.raw),
      scopes,
      created_at: '2026-01-01T00:00:00Z',
      expires_at: null,
      revoked_at: revoked ? '2026-01-01T00:00:01Z' : null,
    },
  })
}

function providerRecord(id: string, organizationId: string, overrides = {}) {
  return record({
    table: 'providers',
    op: 'c',
    lsn: lsn++,
    after: providerRow(id, organizationId, overrides),
  })
}

describe('page cache', () => {
  let dataDir: string
  let applier: Applier
  let api: RunningApi
  const keys = {
    base: { id: uuid(901), raw: 'ck_page_cache_base_key_of_organization_a' },
    sensitive: { id: uuid(902), raw: 'ck_page_cache_sensitive_key_of_organization_a' },
    noProviders: { id: uuid(903), raw: 'ck_page_cache_groups_only_key_of_organization_a' },
    other: { id: uuid(904), raw: 'ck_page_cache_base_key_of_organization_b' },
  } satisfies Record<string, Key>

  beforeAll(async () => {
    const made = testApplier({ offsetGuard: false })
    dataDir = made.dataDir
    applier = made.applier
    applier.applyBatch([
      record({ table: 'organizations', op: 'c', lsn: lsn++, after: organizationRow(ORG_A) }),
      record({ table: 'organizations', op: 'c', lsn: lsn++, after: organizationRow(ORG_B) }),
      keyRecord(keys.base, ORG_A, baseScopes),
      keyRecord(keys.sensitive, ORG_A, allScopes),
      keyRecord(keys.noProviders, ORG_A, ['groups:read']),
      keyRecord(keys.other, ORG_B, baseScopes),
      ...PROVIDERS_A.map((id) => providerRecord(id, ORG_A)),
      ...PROVIDERS_B.map((id) => providerRecord(id, ORG_B, { last_name: 'Babbage' })),
    ])
    await applier.markCaughtUp()
    publishGeneration(dataDir, made.generation.name)
    api = await startApi(dataDir, { env: UNLIMITED })
  })

  afterAll(async () => {
    await api?.close()
    applier?.close()
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true })
  })

  /** The page cache's lookups so far, from the metrics endpoint. */
  async function lookups(): Promise<{ hit: number; miss: number }> {
    const text = await (await fetch(`${api.adminUrl}/metrics`)).text()
    const count = (result: string) => {
      const match = new RegExp(
        `^api_page_cache_lookups_total\\{result="${result}"\\} (\\d+)$`,
        'm',
      ).exec(text)
      if (match === null) throw new Error(`no ${result} count in the metrics`)
      return Number(match[1])
    }
    return { hit: count('hit'), miss: count('miss') }
  }

  /** A 200 list response's body, as text. */
  async function page(path: string, key: Key): Promise<string> {
    const response = await api.get(path, key.raw)
    const text = await response.text()
    expect({ status: response.status, text }).toMatchObject({ status: 200 })
    return text
  }

  const idsOf = (text: string) =>
    (JSON.parse(text) as { data: { id: string }[] }).data.map((p) => p.id)

  it('keeps a page asked for twice, and answers the next identical request from the cache', async () => {
    const before = await lookups()
    const first = await page('/providers?limit=2', keys.base)
    const again = await page('/providers?limit=2', keys.base)
    const between = await lookups()
    const second = await page('/providers?limit=2', keys.base)
    const after = await lookups()

    expect(between).toEqual({ hit: before.hit, miss: before.miss + 2 })
    expect(after).toEqual({ hit: between.hit + 1, miss: between.miss })
    expect(again).toBe(first)
    expect(second).toBe(first)
    // The cached page carries a cursor that works like the one of a page read from the file.
    const { nextCursor } = JSON.parse(second) as { nextCursor: string }
    expect(idsOf(await page(`/providers?limit=2&cursor=${nextCursor}`, keys.base))).toEqual(
      PROVIDERS_A.slice(2, 4),
    )
  })

  it('serves the new body as soon as the projector has committed a change', async () => {
    const path = '/providers?limit=10'
    const old = await page(path, keys.base)
    expect(await page(path, keys.base)).toBe(old)

    applier.applyBatch([providerRecord(uuid(1), ORG_A, { last_name: 'Byron' })])
    const before = await lookups()
    const fresh = await page(path, keys.base)
    expect(await lookups()).toEqual({ hit: before.hit, miss: before.miss + 1 })
    expect(fresh).not.toBe(old)
    expect(fresh).toContain('"lastName":"Byron"')
    // The changed provider moved to the end of the list (its updatedAt is the latest).
    expect(idsOf(fresh)).toEqual([...PROVIDERS_A.slice(1), uuid(1)])

    // A commit to another list of the file, here a provider no page above shows, drops the
    // cached pages too: any commit may change any page.
    expect(await page(path, keys.base)).toBe(fresh)
    applier.applyBatch([providerRecord(uuid(6), ORG_A)])
    expect(idsOf(await page(path, keys.base))).toContain(uuid(6))
  })

  it('keeps a cached page intact whatever responses follow it', async () => {
    const path = '/providers?limit=1'
    const cached = await page(path, keys.base)
    // Kept on its second read.
    expect(await page(path, keys.base)).toBe(cached)
    // Other pages read meanwhile: had the cached body been built in a reused response buffer,
    // they would be written over it.
    for (let limit = 190; limit < 200; limit++) {
      await page(`/providers?limit=${limit}`, keys.sensitive)
    }
    expect(await page(path, keys.base)).toBe(cached)
  })

  it('never gives a page of one view to a key of the other', async () => {
    const path = '/providers?limit=3'
    for (let round = 0; round < 2; round++) {
      const base = await page(path, keys.base)
      const sensitive = await page(path, keys.sensitive)
      expect(base).not.toContain('"birthCity"')
      expect(sensitive).toContain('"birthCity":"London"')
      // The same providers, each view from its own entry.
      expect(idsOf(sensitive)).toEqual(idsOf(base))
    }
    // Sensitive first this time, on a page neither view has cached yet.
    const other = '/providers?limit=4'
    expect(await page(other, keys.sensitive)).toContain('"birthCity"')
    expect(await page(other, keys.base)).not.toContain('"birthCity"')
  })

  it('never gives a page of one organization to another', async () => {
    const path = '/providers?limit=7'
    const a = await page(path, keys.base)
    expect(await page(path, keys.base)).toBe(a)
    const before = await lookups()
    const b = await page(path, keys.other)
    // The same request, but organization B's file: its own cache, empty so far.
    expect(await lookups()).toEqual({ hit: before.hit, miss: before.miss + 1 })
    expect(idsOf(b)).toEqual(PROVIDERS_B)
    expect(b).not.toContain('"lastName":"Lovelace"')
    expect(idsOf(await page(path, keys.other))).toEqual(PROVIDERS_B)
    // B's requests neither replaced nor dropped A's entry: A's page is still a hit, and A's.
    const beforeA = await lookups()
    expect(await page(path, keys.base)).toBe(a)
    expect(await lookups()).toEqual({ hit: beforeA.hit + 1, miss: beforeA.miss })
  })

  it('answers a poll past the end of its list without reading a page, as the file would, and serves the next change at once', async () => {
    const uncached = await startApi(dataDir, { env: { ...UNLIMITED, PAGE_CACHE_MB: '0' } })
    try {
      const stamps = (
        JSON.parse(await page('/providers?limit=200', keys.base)) as {
          data: { updatedAt: string }[]
        }
      ).data.map((p) => Date.parse(p.updatedAt))
      const past = (ms: number) => new Date(Math.max(...stamps) + ms).toISOString()

      const before = await lookups()
      const quiet = await api.get(`/providers?updated_since=${past(1)}`, keys.base.raw)
      // Another watermark, so another URL: no page of it was ever read, yet nothing is read.
      const again = await api.get(`/providers?updated_since=${past(2)}`, keys.base.raw)
      expect(await lookups()).toEqual({ hit: before.hit + 1, miss: before.miss + 1 })
      // The same bytes and tag as the empty page an api without the cache reads from the file.
      const fromFile = await uncached.get(`/providers?updated_since=${past(1)}`, keys.base.raw)
      const quietBody = await quiet.text()
      expect(quietBody).toBe(await fromFile.text())
      expect(JSON.parse(quietBody)).toEqual({ data: [], nextCursor: null })
      expect(quiet.headers.get('etag')).toBe(fromFile.headers.get('etag'))
      expect(await again.text()).toBe(quietBody)

      // Inclusive: a poll from the list's last stamp has its last row.
      expect(idsOf(await page(`/providers?updated_since=${past(0)}`, keys.base))).toHaveLength(1)
      const sensitivePoll = `/providers?updated_since=${past(1)}`
      expect(await page(sensitivePoll, keys.sensitive)).toBe(
        await (await uncached.get(sensitivePoll, keys.sensitive.raw)).text(),
      )

      // A provider committed after the watermark is in the very next poll of it.
      applier.applyBatch([providerRecord(uuid(7), ORG_A)])
      // Where a list ends depends on its filters: an empty list (no inactive provider), asked
      // first at this state of the file, says nothing of the active ones.
      expect(
        idsOf(await page(`/providers?active=false&updated_since=${past(-1e9)}`, keys.base)),
      ).toEqual([])
      expect(
        idsOf(await page(`/providers?active=true&updated_since=${past(1)}`, keys.base)),
      ).toEqual([uuid(7)])
      expect(idsOf(await page(`/providers?updated_since=${past(1)}`, keys.base))).toEqual([uuid(7)])
      expect(idsOf(await page(`/providers?updated_since=${past(1)}`, keys.sensitive))).toEqual([
        uuid(7),
      ])
    } finally {
      await uncached.close()
    }
  })

  it('still checks the key, its scope and its revocation on a cached page', async () => {
    const path = '/providers?limit=5'
    await page(path, keys.base)
    await page(path, keys.base)

    expect((await api.get(path)).status).toBe(401)
    expect((await api.get(path, 'ck_not_a_key_of_anyone')).status).toBe(401)
    expect((await api.get(path, keys.noProviders.raw)).status).toBe(403)

    const before = await lookups()
    applier.applyBatch([keyRecord(keys.base, ORG_A, baseScopes, true)])
    const revoked = await api.get(path, keys.base.raw)
    expect(revoked.status).toBe(401)
    expect(((await revoked.json()) as { error: { code: string } }).error.code).toBe('invalid_key')
    // Refused before the cache was consulted.
    expect(await lookups()).toEqual(before)
  })
  // Last: it moves providers that the tests above expect in their first order.
  it('joins pages from the bodies it knows only as the file holds them, tag included', async () => {
    // Keys of their own: the test above revokes one.
    const own = {
      base: { id: uuid(905), raw: 'ck_page_cache_known_bodies_base_key' },
      sensitive: { id: uuid(906), raw: 'ck_page_cache_known_bodies_sensitive_key' },
    }
    applier.applyBatch([
      keyRecord(own.base, ORG_A, baseScopes),
      keyRecord(own.sensitive, ORG_A, allScopes),
    ])
    // An api that keeps nothing reads every page whole from the file: the reference.
    const reference = await startApi(dataDir, { env: { ...UNLIMITED, PAGE_CACHE_MB: '0' } })
    try {
      /** Every page of the list, walked by cursor, with its ETag. */
      const walk = async (server: RunningApi, key: Key) => {
        const pages: { body: string; etag: string | null }[] = []
        let path: string | undefined = '/providers?limit=2'
        while (path !== undefined) {
          const response = await server.get(path, key.raw)
          const body = await response.text()
          expect(response.status).toBe(200)
          pages.push({ body, etag: response.headers.get('etag') })
          const { nextCursor } = JSON.parse(body) as { nextCursor: string | null }
          path = nextCursor === null ? undefined : `/providers?limit=2&cursor=${nextCursor}`
        }
        return pages
      }
      const bodiesBytes = async () => {
        const text = await (await fetch(`${api.adminUrl}/metrics`)).text()
        return Number(/^api_page_cache_bytes (\d+)$/m.exec(text)?.[1])
      }
      for (const key of [own.base, own.sensitive]) {
        // Read once each: pages are kept on their second read, the bodies on their first.
        await walk(api, key)
        expect(await walk(api, key)).toEqual(await walk(reference, key))
      }
      expect(await bodiesBytes()).toBeGreaterThan(0)
      // Renamed (a new stamp, moved to the end), and a sensitive field changed (only the
      // sensitive view's stamp moves): the known bodies of the other rows are joined around them.
      applier.applyBatch([
        providerRecord(uuid(3), ORG_A, { last_name: 'Hopper' }),
        providerRecord(uuid(4), ORG_A, { birth_city: 'Paris' }),
      ])
      for (const key of [own.base, own.sensitive]) {
        const pages = await walk(api, key)
        expect(pages).toEqual(await walk(reference, key))
        expect(pages.map((p) => p.body).join()).toContain('"lastName":"Hopper"')
      }
    } finally {
      await reference.close()
    }
  })

  it('pages a list from its order in memory in step with the projector, deletions included', async () => {
    const own = { id: uuid(907), raw: 'ck_page_cache_list_order_base_key' }
    applier.applyBatch([keyRecord(own, ORG_A, baseScopes)])
    const reference = await startApi(dataDir, { env: { ...UNLIMITED, PAGE_CACHE_MB: '0' } })
    try {
      /** Pages from distinct starts (each one a miss): every `updated_since` in the list's span. */
      const polls = async (server: RunningApi) => {
        const pages: { body: string; etag: string | null }[] = []
        for (let ms = 0; ms < 20; ms++) {
          const since = new Date(Date.UTC(2026, 0, 1) + ms).toISOString()
          const response = await server.get(`/providers?limit=2&updated_since=${since}`, own.raw)
          expect(response.status).toBe(200)
          pages.push({ body: await response.text(), etag: response.headers.get('etag') })
        }
        const walked = await server.get('/providers?limit=50', own.raw)
        pages.push({ body: await walked.text(), etag: walked.headers.get('etag') })
        return pages
      }
      // Twenty misses read the order into memory (api/list-order.ts); from then on it is caught up
      // with each commit: a change, a new provider, a deletion, and a deletion with a change.
      expect(await polls(api)).toEqual(await polls(reference))
      const batches = [
        [providerRecord(uuid(2), ORG_A, { last_name: 'Lovelace' })],
        [providerRecord(uuid(6), ORG_A)],
        [record({ table: 'providers', op: 'd', lsn: lsn++, before: providerRow(uuid(1), ORG_A) })],
        [
          record({ table: 'providers', op: 'd', lsn: lsn++, before: providerRow(uuid(5), ORG_A) }),
          providerRecord(uuid(6), ORG_A, { last_name: 'Curie' }),
        ],
      ]
      for (const batch of batches) {
        applier.applyBatch(batch)
        expect(await polls(api)).toEqual(await polls(reference))
      }
      const listed = idsOf((await polls(api)).at(-1)!.body)
      expect(listed).not.toContain(uuid(1))
      expect(listed).not.toContain(uuid(5))
      expect(listed.at(-1)).toBe(uuid(6))
    } finally {
      await reference.close()
    }
  })
})
