// Freshness and conditional requests end to end (docs/freshness.md), from SQL through Debezium and
// Kafka to the api's headers: PostgreSQL commits synchronously, Debezium beats through the
// replica_heartbeat table, the projector and the api run as users run them.
//
// - No response claims a commit instant its body does not reflect, under random writes and polls.
// - A quiet organization's instant advances on heartbeats alone.
// - /readyz turns stale when the broker is away past MAX_STALENESS_MS, and ready once it is back,
//   while the api keeps serving with a header that grows honestly.
// - 304 round trips, and an ETag that changes exactly when the body does, across a rebuild's swap.
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  metricValue,
  Pipeline,
  startApi,
  TOPIC_PREFIX,
  type ApiProcess,
} from '../../support/e2e.ts'
import {
  insertApiKey,
  insertOrganization,
  insertProvider,
  type OrganizationRow,
} from '../../support/e2e-sql.ts'
import { runEntry } from '../../support/processes.ts'

interface Org {
  row: OrganizationRow
  key: string
  providers: string[]
}

interface Served {
  status: number
  completeThrough: string | null
  lagMs: string | null
  etag: string | null
  body: string
}

let pipeline: Pipeline
let busy: Org
let quiet: Org
/** Written now and then beside `busy`: often left alone by the group in hand (its claim). */
let sparse: Org
/** An api of its own with a short staleness bound, on the same files. */
let strictApi: ApiProcess

async function get(baseUrl: string, key: string, path: string, etag?: string): Promise<Served> {
  const response = await fetch(`${baseUrl}${path}`, {
    headers: {
      authorization: `Bearer ${key}`,
      ...(etag === undefined ? {} : { 'if-none-match': etag }),
    },
    signal: AbortSignal.timeout(10_000),
  })
  return {
    status: response.status,
    completeThrough: response.headers.get('replica-complete-through'),
    lagMs: response.headers.get('replica-lag-ms'),
    etag: response.headers.get('etag'),
    body: await response.text(),
  }
}

/** PostgreSQL's clock now, in epoch ms: later than the commit of anything that returned before. */
async function pgNowMs(): Promise<number> {
  const { rows } = await pipeline.postgres.query<{ ms: string }>(
    `select floor(extract(epoch from clock_timestamp()) * 1000)::bigint::text as ms`,
  )
  return Number(rows[0]!.ms)
}

beforeAll(async () => {
  pipeline = await Pipeline.start({
    beforeConnector: async (sql) => {
      const make = async (name: string, n: number): Promise<Org> => {
        const row = await insertOrganization(sql, { name })
        const key = (await insertApiKey(sql, row.id)).raw
        const providers: string[] = []
        for (let i = 0; i < n; i++) {
          providers.push((await insertProvider(sql, row.id, { last_name: `v0` })).id)
        }
        return { row, key, providers }
      }
      busy = await make('Busy Clinic', 4)
      quiet = await make('Quiet Clinic', 2)
      sparse = await make('Sparse Clinic', 2)
    },
  })
  await pipeline.caughtUp(pipeline.projector!)
  strictApi = await startApi({
    dataDir: pipeline.dataDir,
    logDir: pipeline.workDir,
    env: { MAX_STALENESS_MS: '5000' },
  })
}, 300_000)

afterAll(async () => {
  await strictApi?.stop()
  await pipeline?.stop()
})

describe('freshness end to end', { timeout: 300_000 }, () => {
  it('a quiet organization is stated fresh on heartbeats alone, and the projector measures it', async () => {
    const seen: number[] = []
    await pipeline.eventually(
      'the quiet organization instant to advance three times',
      async () => {
        const r = await get(pipeline.api.baseUrl, quiet.key, `/providers/${quiet.providers[0]}`)
        expect(r.status).toBe(200)
        if (r.completeThrough === null || r.completeThrough === 'unknown') return undefined
        const at = Date.parse(r.completeThrough)
        if (seen.at(-1) !== at) seen.push(at)
        // Heartbeats twice a second: never this far behind on a quiet pipeline.
        expect(Number(r.lagMs)).toBeLessThan(5_000)
        return seen.length >= 4 ? true : undefined
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    )
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1]!)
    const metrics = await pipeline.projector!.metrics()
    expect(
      metricValue(metrics, 'replica_projector_commit_to_applied_seconds_count'),
    ).toBeGreaterThan(0)
    const staleness = metricValue(metrics, 'replica_projector_staleness_seconds')
    expect(staleness).toBeGreaterThanOrEqual(0)
    expect(staleness).toBeLessThan(5)
  })

  it('no response states an instant its body does not reflect, under random writes and polls', async () => {
    // Per provider: every version written, with PostgreSQL's clock read after its COMMIT returned
    // (at or after the commit time Debezium reports). One write in five is the sparse
    // organization's: its instant is often the claim for organizations the group in hand leaves
    // alone, made before that group is applied.
    const providers = [...busy.providers, ...sparse.providers]
    const written = new Map<string, { version: number; committedBy: number }[]>(
      providers.map((id) => [id, []]),
    )
    const keyOf = (id: string) => (busy.providers.includes(id) ? busy.key : sparse.key)
    const pick = () => {
      const org = Math.random() < 0.2 ? sparse : busy
      return org.providers[Math.floor(Math.random() * org.providers.length)]!
    }
    let version = 0
    let writing = true
    const writer = (async () => {
      while (writing) {
        const id = pick()
        const v = ++version
        await pipeline.sql.query(`update providers set last_name = $2 where id = $1`, [id, `v${v}`])
        written.get(id)!.push({ version: v, committedBy: await pgNowMs() })
        await sleep(Math.random() * 60)
      }
    })()
    const checked = { responses: 0, claims: 0 }
    const deadline = Date.now() + 15_000
    try {
      while (Date.now() < deadline) {
        const id = providers[Math.floor(Math.random() * providers.length)]!
        // Half of the reads are list pages, each from an `updated_since` of its own (a page the
        // page cache has not seen): after sixteen of them the api serves the list from its order
        // in memory (api/list-order.ts), which must keep the same promise.
        const listed = Math.random() < 0.5
        const since = new Date(Date.UTC(2020, 0, 1) + checked.responses).toISOString()
        const path = listed ? `/providers?limit=100&updated_since=${since}` : `/providers/${id}`
        const r = await get(pipeline.api.baseUrl, keyOf(id), path)
        expect(r.status).toBe(200)
        checked.responses++
        if (r.completeThrough === 'unknown' || r.completeThrough === null) continue
        const through = Date.parse(r.completeThrough)
        const { data } = JSON.parse(r.body) as { data: unknown }
        const rows = (Array.isArray(data) ? data : [data]) as { id: string; lastName: string }[]
        if (listed) {
          const organization = keyOf(id) === busy.key ? busy : sparse
          expect(rows.map((row) => row.id).sort()).toEqual([...organization.providers].sort())
        }
        for (const row of rows) {
          const served = Number(/^v(\d+)$/.exec(row.lastName)![1])
          // The newest version committed at or before the stated instant must be served (or a
          // newer one): the header is never ahead of the body.
          const owed = written
            .get(row.id)!
            .filter((w) => w.committedBy <= through)
            .reduce((most, w) => Math.max(most, w.version), 0)
          if (owed > 0) checked.claims++
          expect(
            served,
            `${row.id} served v${served} under ${r.completeThrough}`,
          ).toBeGreaterThanOrEqual(owed)
        }
        await sleep(Math.random() * 20)
      }
    } finally {
      writing = false
      await writer
    }
    console.log(
      `freshness property: ${checked.responses} responses, ${checked.claims} claiming a write, ${version} writes`,
    )
    expect(checked.claims).toBeGreaterThan(20)
  })

  it('304 round trips; the ETag changes exactly when the body does, across a rebuild swap', async () => {
    const base = pipeline.api.baseUrl
    const [a, b] = quiet.providers as [string, string]
    const first = await get(base, quiet.key, `/providers/${a}`)
    const list = await get(base, quiet.key, '/providers')
    expect(first.etag).toMatch(/^"/)
    const notModified = await get(base, quiet.key, `/providers/${a}`, first.etag!)
    expect(notModified.status).toBe(304)
    expect(notModified.body).toBe('')
    expect(notModified.completeThrough).not.toBeNull()

    // The organization rebuilt from the topics and swapped in: same bodies, same tags.
    const run = await runEntry(
      'projector/main.ts',
      ['--rebuild', '--org', quiet.row.id, '--json'],
      {
        DATA_DIR: pipeline.dataDir,
        KAFKA_BROKERS: pipeline.kafka.brokers.join(','),
        KAFKA_GROUP_ID: 'e2e-replica',
        TOPIC_PREFIX,
        LOG_LEVEL: 'warn',
      },
      240_000,
    )
    expect(run.code, run.stderr).toBe(0)
    const afterSwap = await get(base, quiet.key, `/providers/${a}`, first.etag!)
    expect(afterSwap.status).toBe(304)
    expect((await get(base, quiet.key, '/providers', list.etag!)).status).toBe(304)
    // The swapped file is stated again once the projector has brought it up to an instant.
    await pipeline.eventually('the rebuilt file to be stated fresh again', async () => {
      const r = await get(base, quiet.key, `/providers/${a}`)
      return r.completeThrough !== 'unknown' ? true : undefined
    })

    // One provider renamed: its tag and the list's change, the other's does not.
    await pipeline.sql.query(`update providers set last_name = 'renamed' where id = $1`, [a])
    const changed = await pipeline.eventually('the rename to be served', async () => {
      const r = await get(base, quiet.key, `/providers/${a}`, first.etag!)
      return r.status === 200 ? r : undefined
    })
    expect(changed.etag).not.toBe(first.etag)
    expect(JSON.parse(changed.body)).toMatchObject({ data: { lastName: 'renamed' } })
    expect((await get(base, quiet.key, '/providers', list.etag!)).status).toBe(200)
    const other = await get(base, quiet.key, `/providers/${b}`)
    expect((await get(base, quiet.key, `/providers/${b}`, other.etag!)).status).toBe(304)
  })

  it('/readyz turns stale while the broker is away past MAX_STALENESS_MS, and ready when it is back', async () => {
    const readyz = async () => (await fetch(`${strictApi.adminUrl}/readyz`)).status
    await pipeline.eventually('the strict api to be ready', async () =>
      (await readyz()) === 200 ? true : undefined,
    )
    await pipeline.provisionTopics()
    await pipeline.kafka.stopBroker()
    try {
      await pipeline.eventually(
        'the strict api to turn stale',
        async () => ((await readyz()) === 503 ? true : undefined),
        { timeoutMs: 60_000, intervalMs: 250 },
      )
      // Still serving, and saying how old its data is.
      const r = await get(strictApi.baseUrl, busy.key, `/providers/${busy.providers[0]}`)
      expect(r.status).toBe(200)
      expect(Number(r.lagMs)).toBeGreaterThan(5_000)
      expect(await (await fetch(`${strictApi.adminUrl}/readyz`)).json()).toMatchObject({
        status: 'stale',
      })
    } finally {
      await pipeline.startBroker()
    }
    await pipeline.eventually(
      'the strict api to be ready again',
      async () => ((await readyz()) === 200 ? true : undefined),
      { timeoutMs: 180_000, intervalMs: 500 },
    )
    const r = await get(strictApi.baseUrl, busy.key, `/providers/${busy.providers[0]}`)
    expect(Number(r.lagMs)).toBeLessThan(5_000)
  })
})
