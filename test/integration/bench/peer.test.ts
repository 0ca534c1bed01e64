// bench:peer compares the replica with a route on PostgreSQL; its figures mean something only if
// both serve the same documents from the same data. Here, on a small generated dataset loaded
// both ways (a real PostgreSQL, the real projector): every page of every organization, walked by
// cursor, is the same JSON on both; a difference in PostgreSQL is seen; and the bench itself runs
// to its line of JSON.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { benchDataset } from '../../../bench/dataset.ts'
import { canonicalJson, loadBothSides } from '../../../bench/peer-load.ts'
import { buildPeerRoute } from '../../../bench/peer-route.ts'
import type { DatasetSummary } from '../../../scripts/dataset/generate.ts'
import { repoRoot } from '../../harness/paths.ts'
import { startPostgres, type StartedPostgres } from '../../harness/postgres.ts'
import { startApi, type RunningApi } from '../api/server.ts'

const EVENTS = 20_000
const SECRET = 'peer-test-cursor-secret'

describe('bench:peer', () => {
  let postgres: StartedPostgres
  let dataDir: string
  let api: RunningApi
  let pool: pg.Pool
  let route: FastifyInstance
  let routeUrl: string
  let providers: number
  let organizations: DatasetSummary['organizations']
  /** Keys the route on PostgreSQL serves: those without providers:read:sensitive. */
  let baseKeys: string[]

  beforeAll(async () => {
    const dataset = await benchDataset(EVENTS, () => undefined)
    organizations = dataset.organizations
    baseKeys = organizations.flatMap((o) =>
      o.keys.filter((k) => !k.scopes.includes('providers:read:sensitive')).map((k) => k.rawKey),
    )
    postgres = await startPostgres()
    dataDir = mkdtempSync(join(tmpdir(), 'peer-test-'))
    ;({ providers } = await loadBothSides(
      dataset.path,
      postgres.url,
      dataDir,
      organizations.map((o) => o.id),
    ))
    api = await startApi(dataDir, {
      env: {
        CURSOR_SECRET: SECRET,
        RATE_LIMIT_PER_KEY: '1000000',
        RATE_LIMIT_PER_ORGANIZATION: '1000000',
      },
    })
    pool = new pg.Pool({ connectionString: postgres.url, max: 2 })
    route = buildPeerRoute(pool, SECRET)
    routeUrl = await route.listen({ host: '127.0.0.1', port: 0 })
  })

  afterAll(async () => {
    await route?.close()
    await pool?.end()
    await api?.close()
    await postgres?.stop()
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true })
  })

  const fromReplica = async (path: string, key: string) => {
    const response = await api.get(path, key)
    return { status: response.status, body: await response.text() }
  }
  const fromPostgres = async (path: string, key: string) => {
    const response = await fetch(`${routeUrl}${path}`, {
      headers: { authorization: `Bearer ${key}` },
    })
    return { status: response.status, body: await response.text() }
  }

  it('serves every page of every organization as the replica does, and refuses the same keys', async () => {
    const counts = await postgres.query<{ organization_id: string; n: string }>(
      'select organization_id, count(*) as n from providers group by organization_id',
    )
    const inPostgres = new Map(counts.rows.map((r) => [r.organization_id, Number(r.n)]))
    let walked = 0
    for (const organization of organizations) {
      for (const { rawKey: key, scopes } of organization.keys) {
        if (scopes.includes('providers:read:sensitive')) continue
        let path = '/providers?limit=37'
        let documents = 0
        for (;;) {
          const replica = await fromReplica(path, key)
          const postgresPage = await fromPostgres(path, key)
          expect(postgresPage.status, path).toBe(replica.status)
          if (replica.status !== 200) break
          expect(canonicalJson(postgresPage.body)).toBe(canonicalJson(replica.body))
          const page = JSON.parse(replica.body) as { data: unknown[]; nextCursor: string | null }
          documents += page.data.length
          if (page.nextCursor === null) {
            // The whole list, both ways: every provider the product database holds.
            expect(documents).toBe(inPostgres.get(organization.id))
            walked++
            break
          }
          path = `/providers?limit=37&cursor=${page.nextCursor}`
        }
      }
    }
    // Some keys of the dataset are revoked or lack the scope; most walk their whole list.
    expect(walked).toBeGreaterThan(0)
    expect(providers).toBe([...inPostgres.values()].reduce((a, b) => a + b, 0))
  })

  it('tells the two apart when PostgreSQL holds another name', async () => {
    let key: string | undefined
    for (const k of baseKeys) {
      if ((await fromReplica('/providers?limit=1', k)).status === 200) {
        key = k
        break
      }
    }
    const first = await fromReplica('/providers?limit=5', key as string)
    expect(first.status).toBe(200)
    const [{ id }] = (JSON.parse(first.body) as { data: { id: string }[] }).data as [{ id: string }]
    expect(canonicalJson((await fromPostgres('/providers?limit=5', key as string)).body)).toBe(
      canonicalJson(first.body),
    )
    await postgres.query(`update providers set last_name = last_name || '-changed' where id = $1`, [
      id,
    ])
    try {
      const changed = await fromPostgres('/providers?limit=5', key as string)
      expect(changed.status).toBe(200)
      expect(canonicalJson(changed.body)).not.toBe(canonicalJson(first.body))
      expect(changed.body).toContain('-changed')
    } finally {
      await postgres.query(
        `update providers set last_name = left(last_name, -length('-changed')) where id = $1`,
        [id],
      )
    }
  })

  it('runs, checks the pages both ways, and ends with its line of JSON', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'bench/peer.ts', '--events', String(EVENTS), '--pool', '2'],
      {
        cwd: repoRoot,
        env: { ...process.env, BENCH_DURATION_SECONDS: '1', BENCH_CONNECTIONS: '2' },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    )
    const lines: string[] = []
    createInterface({ input: child.stdout }).on('line', (line) => lines.push(line))
    const code = await new Promise((resolve) => child.on('close', resolve))
    expect(code, lines.join('\n')).toBe(0)
    expect(lines.join('\n')).toContain('pages equal both ways')
    const figures = JSON.parse(lines.at(-1) as string) as Record<string, unknown>
    expect(Object.keys(figures).sort()).toEqual(
      ['postgresP99Ms', 'postgresRps', 'replicaP99Ms', 'replicaRps', 'replicaUncachedRps'].sort(),
    )
    for (const value of Object.values(figures)) expect(value).toEqual(expect.any(Number))
    expect(figures.replicaRps).toBeGreaterThan(0)
    expect(figures.postgresRps).toBeGreaterThan(0)
    expect(figures.replicaUncachedRps).toBeGreaterThan(0)
  }, 300_000)
})
