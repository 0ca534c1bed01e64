// `npm run bench:peer`: the replica's list page against the status quo, the same page built by a
// query on the product's PostgreSQL, in the same run, on the same data.
//
//   npm run bench:peer [-- --events 1000000] [--pool 4]
//
// 1. The generated dataset of bench:projector (scripts/dataset, cached in .cache/bench) is loaded
//    into a real PostgreSQL 15 (the test harness's) with schema/source.sql and the indexes the
//    page needs (bench/peer-load.ts), and into the replica by the projector's own file path
//    (`projector --from-file`), side by side.
// 2. Each provider's `updated_at` in PostgreSQL is set to the replica's `updatedAt` of its
//    document (the replica's visibility stamp, which no source column holds), so that both order
//    the list alike.
// 3. The servers, each in its own process: the api (page cache on, as deployed), the api with
//    PAGE_CACHE_MB=0 (every page read from SQLite), and the PostgreSQL route (bench/peer-route.ts,
//    a `pg` pool of --pool connections). The first pages of /providers?limit=50 must be equal
//    JSON documents both ways (PostgreSQL's text differs only in whitespace, inside jsonb
//    metadata and between array elements), their cursors too; otherwise the bench stops.
// 4. autocannon against each (BENCH_CONNECTIONS, BENCH_DURATION_SECONDS), after a warm-up.
// Ends with one line of JSON: {"replicaRps", "postgresRps", "replicaP99Ms", "postgresP99Ms",
// "replicaUncachedRps"} (the last: the api with PAGE_CACHE_MB=0).
//
// Environment: BENCH_DURATION_SECONDS (8 per run), BENCH_CONNECTIONS (16); BENCH_PEER_CPU_PROF=<dir>
// runs the servers under `node --cpu-prof`, their profiles written to <dir> when they stop.
import type { ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { type BenchConfig, ConfigError, loadBenchConfig } from '../src/config.ts'
import { startPostgres, type StartedPostgres } from '../test/harness/postgres.ts'
import { freePort } from '../test/harness/process.ts'
import { benchDataset } from './dataset.ts'
import {
  autocannon,
  BenchFailure,
  failedRuns,
  type LoadResult,
  resultLine,
  startChild,
  stopChildren,
  waitFor,
} from './http-load.ts'
import { canonicalJson, loadBothSides } from './peer-load.ts'

const CURSOR_SECRET = 'bench-peer-cursor-secret'
const PAGES_COMPARED = 3

function log(line: string): void {
  process.stdout.write(`${line}\n`)
}

interface Page {
  status: number
  body: string
}

async function get(url: string, key: string): Promise<Page> {
  const response = await fetch(url, { headers: { authorization: `Bearer ${key}` } })
  return { status: response.status, body: await response.text() }
}

/**
 * A key both servers answer /providers with (one without providers:read:sensitive: the route on
 * PostgreSQL serves the base variant), after checking that the first pages are the same
 * documents both ways, cursors included.
 */
async function comparedKey(
  keys: readonly string[],
  replicaBase: string,
  postgresBase: string,
): Promise<{ key: string; firstPage: string; documents: number }> {
  for (const key of keys) {
    let path = '/providers?limit=50'
    const first = await get(`${replicaBase}${path}`, key)
    if (first.status !== 200) continue
    for (let page = 0; page < PAGES_COMPARED; page++) {
      const replica = page === 0 ? first : await get(`${replicaBase}${path}`, key)
      const postgres = await get(`${postgresBase}${path}`, key)
      if (replica.status !== 200 || postgres.status !== 200) {
        throw new BenchFailure(
          `${path}: the replica answered ${replica.status}, PostgreSQL ${postgres.status}`,
        )
      }
      if (canonicalJson(replica.body) !== canonicalJson(postgres.body)) {
        throw new BenchFailure(
          `${path}: the replica and PostgreSQL served different documents\n` +
            `  replica:    ${replica.body.slice(0, 600)}\n  postgresql: ${postgres.body.slice(0, 600)}`,
        )
      }
      const next = (JSON.parse(replica.body) as { nextCursor: string | null }).nextCursor
      if (next === null) break
      path = `/providers?limit=50&cursor=${next}`
    }
    const documents = (JSON.parse(first.body) as { data: unknown[] }).data.length
    return { key, firstPage: first.body, documents }
  }
  throw new BenchFailure('no API key of the dataset may read /providers on the replica')
}

async function main(bench: BenchConfig): Promise<void> {
  const { values } = parseArgs({
    options: {
      events: { type: 'string', default: '1000000' },
      pool: { type: 'string', default: '4' },
    },
  })
  const targetEvents = Number(values.events)
  const poolSize = Number(values.pool)
  if (!Number.isSafeInteger(targetEvents) || targetEvents < 1) {
    throw new ConfigError('--events must be a positive integer')
  }
  if (!Number.isSafeInteger(poolSize) || poolSize < 1) {
    throw new ConfigError('--pool must be a positive integer')
  }
  const dataset = await benchDataset(targetEvents, log)
  const { organizations } = dataset
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-peer-'))
  const children: ChildProcess[] = []
  let postgres: StartedPostgres | undefined
  try {
    log(`loading ${dataset.events} events into PostgreSQL and into the replica...`)
    const t0 = Date.now()
    postgres = await startPostgres()
    const url = postgres.url
    const { rows, providers } = await loadBothSides(
      dataset.path,
      url,
      dataDir,
      organizations.map((o) => o.id),
    )
    log(
      `  ${rows} rows in PostgreSQL, ${providers} providers in the replica, ` +
        `${((Date.now() - t0) / 1000).toFixed(0)} s`,
    )

    const [port, adminPort, uncachedPort, uncachedAdminPort, postgresPort] = [
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
    ]
    const profileDir = process.env.BENCH_PEER_CPU_PROF
    const profile = profileDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', profileDir]
    const startApi = (apiPort: number, apiAdminPort: number, env: Record<string, string> = {}) =>
      startChild(
        ['api/main.ts'],
        {
          DATA_DIR: dataDir,
          HOST: '127.0.0.1',
          PORT: String(apiPort),
          ADMIN_PORT: String(apiAdminPort),
          LOG_LEVEL: 'warn',
          CURSOR_SECRET,
          RATE_LIMIT_PER_KEY: '1000000000',
          RATE_LIMIT_PER_ORGANIZATION: '1000000000',
          // Throughput at saturation is what is compared: shedding would answer 503 there (and
          // on a loaded machine, to the pages compared), where the PostgreSQL route queues.
          API_SHED_EVENT_LOOP_DELAY_MS: '0',
          API_SHED_QUEUE_DELAY_MS: '0',
          API_SHED_MAX_IN_FLIGHT: '0',
          ...env,
        },
        profile,
      )
    const api = startApi(port, adminPort)
    const uncachedApi = startApi(uncachedPort, uncachedAdminPort, { PAGE_CACHE_MB: '0' })
    const route = startChild(
      ['bench/peer-route.ts', String(postgresPort), url, String(poolSize), CURSOR_SECRET],
      {},
      profile,
    )
    children.push(api, uncachedApi, route)
    const replicaBase = `http://127.0.0.1:${port}/api/v1`
    const uncachedBase = `http://127.0.0.1:${uncachedPort}/api/v1`
    const postgresBase = `http://127.0.0.1:${postgresPort}`
    await Promise.all([
      waitFor(`http://127.0.0.1:${adminPort}/readyz`),
      waitFor(`http://127.0.0.1:${uncachedAdminPort}/readyz`),
      waitFor(`${postgresBase}/healthz`),
    ])

    const keys = organizations.flatMap((o) =>
      o.keys
        .filter((k) => k.scopes.includes('providers:read'))
        .filter((k) => !k.scopes.includes('providers:read:sensitive'))
        .map((k) => k.rawKey),
    )
    const { key, firstPage, documents } = await comparedKey(keys, replicaBase, postgresBase)
    const uncachedFirst = await get(`${uncachedBase}/providers?limit=50`, key)
    if (uncachedFirst.body !== firstPage) {
      throw new BenchFailure('the api without its page cache served another first page')
    }
    log(
      `first ${PAGES_COMPARED} pages equal both ways; page of ${documents}: ` +
        `${Buffer.byteLength(firstPage)} bytes; ${bench.connections} connections, ` +
        `${bench.durationSeconds} s per run; pg pool of ${poolSize}`,
    )

    const urls = {
      replica: [`${replicaBase}/providers?limit=50`, api],
      postgres: [`${postgresBase}/providers?limit=50`, route],
      replicaUncached: [`${uncachedBase}/providers?limit=50`, uncachedApi],
    } as const
    // Warm-up: JIT, SQLite's and PostgreSQL's caches, the pool's connections and statements.
    for (const [url, server] of Object.values(urls)) await autocannon(bench, url, key, server)
    const results: Record<string, LoadResult> = {}
    for (const [name, [url, server]] of Object.entries(urls)) {
      results[name] = await autocannon(bench, url, key, server)
    }
    for (const [name, r] of Object.entries(results)) log(resultLine(name, r))
    const failed = failedRuns(results)
    if (failed.length > 0) {
      throw new BenchFailure(
        `requests failed during measured runs, the figures above are not valid:\n  ${failed.join('\n  ')}`,
      )
    }
    const replica = results.replica as LoadResult
    const postgresResult = results.postgres as LoadResult
    const uncached = results.replicaUncached as LoadResult
    const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
    log(
      `machine load average ${load} (cores: ${availableParallelism()}); server cpu is the Node ` +
        `process only (PostgreSQL's backends not counted)\n` +
        `replica/postgres ${(replica.rps / postgresResult.rps).toFixed(1)}x (target >= 5x), ` +
        `without the page cache ${(uncached.rps / postgresResult.rps).toFixed(1)}x`,
    )
    log(
      JSON.stringify({
        replicaRps: replica.rps,
        postgresRps: postgresResult.rps,
        replicaP99Ms: replica.p99,
        postgresP99Ms: postgresResult.p99,
        replicaUncachedRps: uncached.rps,
      }),
    )
  } finally {
    await stopChildren(children)
    await postgres?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

try {
  await main(loadBenchConfig(process.env))
} catch (error) {
  if (!(error instanceof ConfigError || error instanceof BenchFailure)) throw error
  process.stderr.write(`bench:peer: ${error.message}\n`)
  process.exitCode = 1
}
