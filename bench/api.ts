// Benchmark of the api (`npm run bench:api`): an organization of 10,000 providers (stored bodies
// of 2-3 KB, written the way the projector writes them) in a temporary data directory, the api as
// a child process, and autocannon in another child process, for:
//   list    first page of 50 providers
//   cursor  a page of 50 by cursor, from the middle of the list
//   since   a page of 50 with updated_since in the middle of the list
//   detail  one provider
//   bare    a bare Fastify route (its own child process) returning a constant body of the size
//           of a list page: the ceiling the list is compared with
//   notModified  the list request with If-None-Match naming its current ETag: 304, no body
//           (a poller whose page did not change); counted by status 304, not 2xx
//   listUncached  the list request again, on a second api process with PAGE_CACHE_MB=0: every
//           page read from SQLite (nothing writes to the file during the bench, so the first
//           api serves list, cursor and since from its page cache after their first request)
// then the list page again at half its saturation rate, for latency without queueing, and the
// bare route at that same rate: the latency the machine itself adds (other processes holding
// the cores), the floor of the list's.
// Last, the overload run: the list page offered at twice its saturation rate over
// BENCH_OVERLOAD_CONNECTIONS connections (bench/overload-load.ts), the api shedding what it
// cannot serve (api/overload.ts): the p99 of the requests it served, and every response that was
// neither a 2xx nor a 503 api_temporarily_unavailable with Retry-After, plus connection errors.
// Prints the figures, then one line of JSON:
//   {"listRps","bareRps","listP50Ms","listP99Ms","cursorRps","detailRps","listUncachedRps",
//    "overloadServedP99Ms","overloadErrors","overloadServedRps","overloadShed",
//    "overloadNoShedServedP99Ms","notModifiedRps","notModifiedCpuMs","listCpuMs"} (overloadNoShed:
// the same overload on an api that does not shed)
// A measured run other than the overload run with any error or non-2xx response (a 304 run: any
// error) makes the figures meaningless: the bench then exits 1 instead of printing that line.
//
// Environment: BENCH_DURATION_SECONDS (8 per run), BENCH_CONNECTIONS (16),
// BENCH_OVERLOAD_CONNECTIONS (128); the api's own API_SHED_* pass through; BENCH_API_CPU_PROF=<dir>
// runs the api processes under `node --cpu-prof`, their profiles written to <dir> when they stop
// (open them in Chrome DevTools or speedscope to see where a request's time goes);
// BENCH_API_NODE_FLAGS: more node flags for the api processes (`--trace-gc`, which NODE_OPTIONS
// refuses).
import type { ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import Fastify from 'fastify'
import { type BenchConfig, ConfigError, loadBenchConfig } from '../src/config.ts'
import { freePort } from '../test/harness/process.ts'
import { allScopes, ReplicaFixture, stamp } from '../test/integration/api/fixtures.ts'
import { spawn } from 'node:child_process'
import { repoRoot } from '../test/harness/paths.ts'
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

const PROVIDERS = 10_000

// `tsx bench/api.ts --bare <port> <bodyFile>`: the bare server, run in its own process.
if (process.argv[2] === '--bare') {
  const body = readFileSync(process.argv[4] as string)
  const app = Fastify()
  app.get('/bare', (_request, reply) => reply.type('application/json; charset=utf-8').send(body))
  await app.listen({ host: '127.0.0.1', port: Number(process.argv[3]) })
} else {
  try {
    await main(loadBenchConfig(process.env))
  } catch (error) {
    if (!(error instanceof ConfigError || error instanceof BenchFailure)) throw error
    process.stderr.write(`bench:api: ${error.message}\n`)
    process.exitCode = 1
  }
}

function buildOrganization(): { replica: ReplicaFixture; key: string; ids: string[] } {
  const replica = ReplicaFixture.create()
  const org = replica.organization()
  const ids: string[] = []
  const insert = org.db.transaction(() => {
    for (let i = 0; i < PROVIDERS; i++) {
      const { sensitive } = org.provider(
        {
          lastName: `Provider${i}`,
          secondarySpecialty: i % 2 === 0 ? 'Internal Medicine' : null,
          secondarySpecialtyTaxonomyCode: i % 2 === 0 ? '207R00000X' : null,
          groupMemberships: Array.from({ length: 1 + (i % 3) }, (_, g) => ({
            providerGroupId: randomUUID(),
            name: `Regional Medical Group ${g}`,
            npi: '1999999984',
            tin: '123456789',
          })),
          providerIds: Array.from({ length: 3 + (i % 3) }, (_, n) => ({
            id: randomUUID(),
            type: ['dea', 'state_license', 'board_certification', 'cds', 'malpractice'][
              n
            ] as string,
            value: `ID-${i}-${n}-${randomUUID().slice(0, 8)}`,
            issuedOn: '2021-03-01',
            expiresOn: '2027-03-01',
            metadata: { state: 'IL', verifiedBy: 'primary_source', note: 'verified annually' },
          })),
        },
        // 20 stamps share each second: ties are ordered by id, as in real bursts.
        { updatedAt: stamp(Math.floor(i / 20)) },
      )
      ids.push(sensitive.id)
    }
  })
  insert()
  const key = replica.key(org.id, {
    scopes: allScopes.filter((s) => s !== 'providers:read:sensitive'),
  }).raw
  replica.publish()
  return { replica, key, ids }
}

async function main(bench: BenchConfig): Promise<void> {
  process.stdout.write(`building an organization of ${PROVIDERS} providers...\n`)
  const { replica, key, ids } = buildOrganization()
  const [port, adminPort, barePort] = [await freePort(), await freePort(), await freePort()]
  const [uncachedPort, uncachedAdminPort] = [await freePort(), await freePort()]
  const [sheddingPort, sheddingAdminPort] = [await freePort(), await freePort()]
  const children: ChildProcess[] = []
  const bodyFile = join(replica.dataDir, 'bare-body.json')
  const profileDir = process.env.BENCH_API_CPU_PROF
  const profile = [
    ...(profileDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', profileDir]),
    ...(process.env.BENCH_API_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== ''),
  ]
  // The capacity runs measure what the api can serve, so nothing is refused there (on a busy
  // machine the shipped thresholds shed even 16 connections); the overload run has an api of its
  // own with the shipped load shedding, or the API_SHED_* of the environment.
  const noShedding = { API_SHED_EVENT_LOOP_DELAY_MS: '0', API_SHED_MAX_IN_FLIGHT: '0' }
  const startApi = (apiPort: number, apiAdminPort: number, env: Record<string, string> = {}) =>
    startChild(
      ['api/main.ts'],
      {
        DATA_DIR: replica.dataDir,
        HOST: '127.0.0.1',
        PORT: String(apiPort),
        ADMIN_PORT: String(apiAdminPort),
        LOG_LEVEL: 'warn',
        RATE_LIMIT_PER_KEY: '1000000000',
        RATE_LIMIT_PER_ORGANIZATION: '1000000000',
        ...env,
      },
      profile,
    )
  try {
    children.push(startApi(port, adminPort, noShedding))
    const base = `http://127.0.0.1:${port}/api/v1`
    const auth = { authorization: `Bearer ${key}` }
    await waitFor(`${base}/providers?limit=1`, auth)

    const first = await fetch(`${base}/providers?limit=50`, { headers: auth })
    const etag = first.headers.get('etag')
    const firstPage = await first.text()
    if (etag === null) throw new BenchFailure('the list page has no ETag')
    // A cursor from the middle of the list: walk half of it in pages of 200.
    let middle = ''
    for (let page = 0; page < PROVIDERS / 400; page++) {
      const query = middle === '' ? '' : `&cursor=${middle}`
      const response = await fetch(`${base}/providers?limit=200${query}`, { headers: auth })
      middle = ((await response.json()) as { nextCursor: string }).nextCursor
    }
    writeFileSync(bodyFile, firstPage)
    children.push(startChild(['bench/api.ts', '--bare', String(barePort), bodyFile], {}))
    await waitFor(`http://127.0.0.1:${barePort}/bare`)
    children.push(startApi(uncachedPort, uncachedAdminPort, { ...noShedding, PAGE_CACHE_MB: '0' }))
    children.push(startApi(sheddingPort, sheddingAdminPort))
    const sheddingList = `http://127.0.0.1:${sheddingPort}/api/v1/providers?limit=50`
    await waitFor(sheddingList, auth)
    const uncachedList = `http://127.0.0.1:${uncachedPort}/api/v1/providers?limit=50`
    await waitFor(uncachedList, auth)
    const uncachedPage = await (await fetch(uncachedList, { headers: auth })).text()
    if (uncachedPage !== firstPage) throw new BenchFailure('the uncached api served another page')

    const urls = {
      list: `${base}/providers?limit=50`,
      cursor: `${base}/providers?limit=50&cursor=${middle}`,
      since: `${base}/providers?limit=50&updated_since=${encodeURIComponent(stamp(PROVIDERS / 40))}`,
      detail: `${base}/providers/${ids[PROVIDERS / 2]}`,
      bare: `http://127.0.0.1:${barePort}/bare`,
    }
    process.stdout.write(
      `page of 50: ${firstPage.length} bytes; ${bench.connections} connections, ` +
        `${bench.durationSeconds} s per run\n`,
    )
    const [apiProcess, bareProcess, uncachedProcess] = children as [
      ChildProcess,
      ChildProcess,
      ChildProcess,
    ]
    // Warm up the servers (JIT, SQLite's page cache) before measuring.
    await autocannon(bench, urls.list, key, apiProcess)
    await autocannon(bench, urls.bare, undefined, bareProcess)
    await autocannon(bench, uncachedList, key, uncachedProcess)

    const results: Record<string, LoadResult> = {}
    for (const [name, url] of Object.entries(urls)) {
      results[name] = await autocannon(
        bench,
        url,
        name === 'bare' ? undefined : key,
        name === 'bare' ? bareProcess : apiProcess,
      )
    }
    results.listUncached = await autocannon(bench, uncachedList, key, uncachedProcess)
    const notModified = await autocannon(bench, urls.list, key, apiProcess, undefined, [
      `if-none-match=${etag}`,
    ])
    const half = Math.max(1, Math.round((results.list as LoadResult).rps / 2))
    results.listHalf = await autocannon(bench, urls.list, key, apiProcess, half)
    results.bareHalf = await autocannon(bench, urls.bare, undefined, bareProcess, half)

    for (const [name, r] of Object.entries(results))
      process.stdout.write(`${resultLine(name, r)}\n`)
    process.stdout.write(`${resultLine('notModified (304)', notModified)}\n`)
    // Twice the saturation rate: to the api that sheds, then, for comparison, to the one that
    // does not (what the same load costs the requests served when they all queue).
    const overloadRate = 2 * (results.list as LoadResult).rps
    await overloadRun(sheddingList, key, overloadRate, bench) // warm-up
    const overload = await overloadRun(sheddingList, key, overloadRate, bench)
    const queued = await overloadRun(urls.list, key, overloadRate, bench)
    for (const [name, r] of [
      ['overload', overload],
      ['overloadNoShed', queued],
    ] as const) {
      process.stdout.write(
        `${name.padEnd(14)} offered ${overloadRate} req/s over ${bench.overloadConnections} ` +
          `connections: served ${r.servedRps} req/s (p50 ${r.servedP50Ms} ms, p99 ` +
          `${r.servedP99Ms} ms), shed ${r.shed} with 503 and Retry-After, other non-2xx ` +
          `${r.wrong}, connection errors ${r.errors}\n`,
      )
    }
    // Every one of the 304 run's answers is a 304, which autocannon counts as non-2xx: only
    // errors fail it, and a body would show as bytes per request.
    const failed = [
      ...failedRuns(results),
      ...(notModified.errors > 0 ? [`notModified: ${notModified.errors} errors`] : []),
    ]
    if (failed.length > 0) {
      throw new BenchFailure(
        `requests failed during measured runs, the figures above are not valid:\n  ${failed.join('\n  ')}`,
      )
    }
    const list = results.list as LoadResult
    const bare = results.bare as LoadResult
    const listHalf = results.listHalf
    const uncached = results.listUncached
    const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
    process.stdout.write(
      `machine load average ${load} (cores: ${availableParallelism()}); server CPU per request ` +
        `list/bare ${(list.cpuMsPerRequest / bare.cpuMsPerRequest).toFixed(2)}x\n` +
        `list/bare ${((100 * list.rps) / bare.rps).toFixed(1)}% (target >= 50%), without the ` +
        `page cache ${((100 * uncached.rps) / bare.rps).toFixed(1)}%; ` +
        `p99 at ${half} req/s (half saturation) ${listHalf.p99} ms (target < 10 ms), the bare ` +
        `route's at the same rate ${results.bareHalf.p99} ms; a 304 costs ` +
        `${notModified.cpuMsPerRequest} ms of api CPU against ${list.cpuMsPerRequest} ms for the ` +
        `cached page (${((100 * notModified.cpuMsPerRequest) / list.cpuMsPerRequest).toFixed(0)}%)\n` +
        `overload at 2x saturation: served p99 ${overload.servedP99Ms} ms (target < 50 ms; ` +
        `${queued.servedP99Ms} ms without shedding), ` +
        `${overload.wrong + overload.errors} responses other than 2xx or 503 with Retry-After ` +
        `(target 0)\n`,
    )
    process.stdout.write(
      `${JSON.stringify({
        listRps: list.rps,
        bareRps: bare.rps,
        listP50Ms: listHalf.p50,
        listP99Ms: listHalf.p99,
        cursorRps: (results.cursor as LoadResult).rps,
        detailRps: (results.detail as LoadResult).rps,
        listUncachedRps: uncached.rps,
        overloadServedP99Ms: overload.servedP99Ms,
        overloadErrors: overload.wrong + overload.errors,
        overloadServedRps: overload.servedRps,
        overloadShed: overload.shed,
        overloadNoShedServedP99Ms: queued.servedP99Ms,
        notModifiedRps: notModified.rps,
        notModifiedCpuMs: notModified.cpuMsPerRequest,
        listCpuMs: list.cpuMsPerRequest,
      })}\n`,
    )
  } finally {
    await stopChildren(children)
    replica.destroy()
    rmSync(bodyFile, { force: true })
  }
}

interface OverloadResult {
  servedRps: number
  servedP50Ms: number
  servedP99Ms: number
  shed: number
  wrong: number
  errors: number
}

/** The overload run, in a process of its own (bench/overload-load.ts). */
async function overloadRun(
  url: string,
  key: string,
  rate: number,
  bench: BenchConfig,
): Promise<OverloadResult> {
  const args = [url, key, String(rate), String(bench.overloadConnections)]
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'bench/overload-load.ts', ...args, String(bench.durationSeconds)],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] },
  )
  let out = ''
  child.stdout.on('data', (d: Buffer) => (out += d.toString()))
  const code = await new Promise((resolve) => child.on('exit', resolve))
  if (code !== 0) throw new BenchFailure(`the overload run failed (exit ${String(code)})`)
  return JSON.parse(out) as OverloadResult
}
