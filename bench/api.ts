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
//   listUncached  distinct pages of 50 (bench/distinct-pages.ts): each request a cursor or an
//           `updated_since` value not asked for since some 20,000 requests before, far more than
//           the page cache holds, so every page is read from SQLite (nothing writes to the file
//           during these runs, so the api serves list, cursor and since from its page cache after
//           their second request); the api's page-cache metric must count no hit in the run
// then the list page again at half its saturation rate, for latency without queueing, and the
// bare route at that same rate: the latency the machine itself adds (other processes holding
// the cores), the floor of the list's.
// Then the overload run: the detail read offered at twice its saturation rate over
// BENCH_OVERLOAD_CONNECTIONS connections (bench/overload-load.ts), the api shedding what it
// cannot serve (api/overload.ts): the p99 of the requests it served, and every response that was
// neither a 2xx nor a 503 api_temporarily_unavailable with Retry-After, plus connection errors.
// The detail read, not the list page: a client on the same two cores spends more CPU receiving a
// 133 KB page than the api spends serving it (measured: the client 110% of a core, the api 65%),
// so a flood of list pages saturated the client, and the run measured the client's queue.
// Last, the live run: an organization of LIVE_PROVIDERS providers loaded by the projector from the
// generated dataset (bench/live-org.ts), served by an api of its own while a projector applies
// the dataset's streamed changes at LIVE_EVENTS_PER_SECOND in commits of a tenth of a second
// (bench/live-writer.ts, the file source's path), each commit emptying that file's cached pages:
// distinct pages at saturation (live), then at half that rate (liveHalf: its p99 is liveP99Ms),
// then the bare route at that rate beside the same writer (liveBareHalf), then liveHalf again with
// the writer at a lower CPU priority (liveNicedHalf), as README advises when they share a host.
// Prints the figures, then one line of JSON:
//   {"listRps","bareRps","listP50Ms","listP99Ms","cursorRps","detailRps","listUncachedRps",
//    "overloadServedP99Ms","overloadErrors","overloadServedRps","overloadShed",
//    "overloadNoShedServedP99Ms","notModifiedRps","notModifiedCpuMs","listCpuMs",
//    "listUncachedCpuMs","liveRps","liveP99Ms","liveBareP99Ms","liveNicedWriterP99Ms","liveCpuMs",
//    "liveEventsPerSecond",
//    "listUncachedRatio","liveRatio"} (overloadNoShed: the same overload on an api that does not
// shed; the ratios are to bareRps; liveEventsPerSecond: what the writer applied; liveBareP99Ms:
// the bare route at liveHalf's rate beside the same writer, the floor of liveP99Ms;
// liveNicedWriterP99Ms: liveHalf again with the writer's threads at nice 10)
// The runs at half a saturation rate are paced evenly (bench/paced-load.ts), not autocannon's -R,
// whose connections each send their second's share in one burst.
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
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, setPriority } from 'node:os'
import { dirname, join } from 'node:path'
import Fastify from 'fastify'
import { type BenchConfig, ConfigError, loadBenchConfig } from '../src/config.ts'
import { freePort } from '../test/harness/process.ts'
import { spawn } from 'node:child_process'
import { repoRoot } from '../test/harness/paths.ts'
import { stamp } from '../test/integration/api/fixtures.ts'
import { buildOrganization, PROVIDERS } from './api-organization.ts'
import { distinctPaths } from './distinct-pages.ts'
import { listPositions, liveOrganization, organizationFile } from './live-org.ts'
import { projectorNodeFlags } from './projector-run.ts'
import {
  autocannon,
  BenchFailure,
  busyPct,
  type DistinctPages,
  distinctLoad,
  failedRuns,
  type LoadResult,
  pacedLoad,
  resultLine,
  startChild,
  stopChildren,
  waitFor,
} from './http-load.ts'

/** The live run's organization (the generator's largest) and its change stream. */
const LIVE_PROVIDERS = 5000
const LIVE_UPDATE_ROUNDS = 3
const LIVE_EVENTS_PER_SECOND = 200
const PAGE_LIMIT = 50
/** The live writer's priority in its last run (nice; the api's is 0). */
const WRITER_NICE = 10
/** Set on the api processes, so that the bench can sign the cursors of its distinct pages. */
const CURSOR_SECRET = 'bench-api-cursor-secret'

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

async function main(bench: BenchConfig): Promise<void> {
  process.stdout.write(`building an organization of ${PROVIDERS} providers...\n`)
  const { replica, key, ids, organizationId } = buildOrganization()
  const live = await liveOrganization(LIVE_PROVIDERS, LIVE_UPDATE_ROUNDS, (line) =>
    process.stdout.write(`${line}\n`),
  )
  const [port, adminPort, barePort] = [await freePort(), await freePort(), await freePort()]
  const [livePort, liveAdminPort] = [await freePort(), await freePort()]
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
  const noShedding = {
    API_SHED_EVENT_LOOP_DELAY_MS: '0',
    API_SHED_QUEUE_DELAY_MS: '0',
    API_SHED_MAX_IN_FLIGHT: '0',
  }
  const startApi = (
    apiPort: number,
    apiAdminPort: number,
    env: Record<string, string> = {},
    dataDir = replica.dataDir,
  ) =>
    startChild(
      ['api/main.ts'],
      {
        DATA_DIR: dataDir,
        CURSOR_SECRET,
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
    children.push(startApi(sheddingPort, sheddingAdminPort))
    const sheddingDetail = `http://127.0.0.1:${sheddingPort}/api/v1/providers/${ids[PROVIDERS / 2]}`
    await waitFor(sheddingDetail, auth)
    let uncachedPages: DistinctPages = {
      origin: `http://127.0.0.1:${port}`,
      // The cursor run's page (a cursor on the middle row) is one of these paths: measured
      // first, it is then in the page cache, and the uncached run that reaches it finds a hit.
      paths: distinctPaths({
        organizationId,
        cursorSecret: CURSOR_SECRET,
        positions: listPositions(
          organizationFile(replica.dataDir, organizationId),
          'doc_providers',
        ),
        limit: PAGE_LIMIT,
      }).filter((path) => path !== `/api/v1/providers?limit=${PAGE_LIMIT}&cursor=${middle}`),
      start: 0,
    }
    uncachedPages = (await checkDistinctPages(uncachedPages, key)).pages

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
    const [apiProcess, bareProcess] = children as [ChildProcess, ChildProcess]
    // Warm up the servers (JIT, SQLite's page cache) before measuring.
    await autocannon(bench, urls.list, key, apiProcess)
    await autocannon(bench, urls.bare, undefined, bareProcess)
    uncachedPages = {
      ...uncachedPages,
      start: (await distinctLoad(bench, uncachedPages, key, apiProcess)).next,
    }

    const results: Record<string, LoadResult> = {}
    for (const [name, url] of Object.entries(urls)) {
      results[name] = await autocannon(
        bench,
        url,
        name === 'bare' ? undefined : key,
        name === 'bare' ? bareProcess : apiProcess,
      )
    }
    const hitsBefore = await pageCacheHits(adminPort)
    results.listUncached = await distinctLoad(bench, uncachedPages, key, apiProcess)
    const uncachedHits = (await pageCacheHits(adminPort)) - hitsBefore
    if (uncachedHits > 0) {
      throw new BenchFailure(`the uncached run found ${uncachedHits} pages in the page cache`)
    }
    const notModified = await autocannon(bench, urls.list, key, apiProcess, [
      `if-none-match=${etag}`,
    ])
    const half = Math.max(1, Math.round((results.list as LoadResult).rps / 2))
    results.listHalf = await pacedLoad(bench, urls.list, key, apiProcess, half)
    results.bareHalf = await pacedLoad(bench, urls.bare, undefined, bareProcess, half)

    for (const [name, r] of Object.entries(results))
      process.stdout.write(`${resultLine(name, r)}\n`)
    process.stdout.write(`${resultLine('notModified (304)', notModified)}\n`)
    // Twice the saturation rate: to the api that sheds, then, for comparison, to the one that
    // does not (what the same load costs the requests served when they all queue).
    const overloadRate = 2 * (results.detail as LoadResult).rps
    await overloadRun(sheddingDetail, key, overloadRate, bench) // warm-up
    const overload = await overloadRun(sheddingDetail, key, overloadRate, bench)
    const queued = await overloadRun(urls.detail, key, overloadRate, bench)
    for (const [name, r] of [
      ['overload', overload],
      ['overloadNoShed', queued],
    ] as const) {
      process.stdout.write(
        `${name.padEnd(14)} offered ${overloadRate} req/s over ${bench.overloadConnections} ` +
          `connections: served ${r.servedRps} req/s (p50 ${r.servedP50Ms} ms, p99 ` +
          `${r.servedP99Ms} ms), shed ${r.shed} with 503 and Retry-After, other non-2xx ` +
          `${r.wrong}, connection errors ${r.errors}, not sent (every connection waiting) ` +
          `${r.unsent}\n`,
      )
    }
    // The live run, last: its writer's commits would turn the other runs' caches over.
    const liveApi = startApi(livePort, liveAdminPort, noShedding, live.dataDir)
    children.push(liveApi)
    await waitFor(`http://127.0.0.1:${livePort}/api/v1/providers?limit=1`, {
      authorization: `Bearer ${live.key}`,
    })
    let livePages: DistinctPages = {
      origin: `http://127.0.0.1:${livePort}`,
      paths: distinctPaths({
        organizationId: live.organizationId,
        cursorSecret: CURSOR_SECRET,
        positions: listPositions(
          organizationFile(live.dataDir, live.organizationId),
          'doc_providers',
        ),
        limit: PAGE_LIMIT,
      }),
      start: 0,
    }
    const liveChecked = await checkDistinctPages(livePages, live.key)
    const livePageBytes = liveChecked.bytes
    livePages = liveChecked.pages
    const writer = startWriter(live.dataDir, live.streamFile)
    let written: WriterSummary
    try {
      // The warm-up runs with the writer too: the JIT sees the path it is measured on.
      livePages = {
        ...livePages,
        start: (await distinctLoad(bench, livePages, live.key, liveApi)).next,
      }
      const liveRun = await distinctLoad(bench, livePages, live.key, liveApi)
      results.live = liveRun
      livePages = { ...livePages, start: liveRun.next }
      const liveHalfRate = Math.max(1, Math.round(liveRun.rps / 2))
      const liveHalfRun = await distinctLoad(bench, livePages, live.key, liveApi, liveHalfRate)
      results.liveHalf = liveHalfRun
      livePages = { ...livePages, start: liveHalfRun.next }
      // The bare route at the same rate, beside the same writer: the latency the machine adds.
      results.liveBareHalf = await pacedLoad(bench, urls.bare, undefined, bareProcess, liveHalfRate)
      // Then the writer at a lower priority, as README advises for a projector sharing the api's
      // host: the api then gets a core first when both want one.
      lowerPriority(writer.pid as number, WRITER_NICE)
      results.liveNicedHalf = await distinctLoad(bench, livePages, live.key, liveApi, liveHalfRate)
    } finally {
      written = await stopWriter(writer)
    }
    const liveEventsPerSecond = Math.round(written.events / written.seconds)
    process.stdout.write(
      `live: ${live.events.snapshot} snapshot events loaded, page of 50 ${livePageBytes} bytes; ` +
        `the writer applied ${written.events} events in ${written.commits} commits over ` +
        `${written.seconds.toFixed(1)} s (${liveEventsPerSecond}/s, asked ${LIVE_EVENTS_PER_SECOND}` +
        `${written.exhausted ? ', the stream ran out' : ''})\n` +
        `${resultLine('live', results.live)}\n${resultLine('liveHalf', results.liveHalf)}\n` +
        `${resultLine('liveBareHalf', results.liveBareHalf)}\n` +
        `${resultLine('liveNicedHalf', results.liveNicedHalf)}\n`,
    )
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
    const liveResult = results.live
    const liveHalf = results.liveHalf
    const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
    process.stdout.write(
      `machine load average ${load} (cores: ${availableParallelism()}); server CPU per request ` +
        `list/bare ${(list.cpuMsPerRequest / bare.cpuMsPerRequest).toFixed(2)}x\n` +
        `list/bare ${((100 * list.rps) / bare.rps).toFixed(1)}% (target >= 50%), distinct ` +
        `pages (no page cache hit) ${((100 * uncached.rps) / bare.rps).toFixed(1)}% (target >= ` +
        `50%), and under live writes ${((100 * liveResult.rps) / bare.rps).toFixed(1)}% (target ` +
        `>= 50%) with p99 ${liveHalf.p99} ms at half that rate (the api ${busyPct(liveHalf)}% ` +
        `busy; target < 10 ms; the bare route's ` +
        `beside the same writer ${results.liveBareHalf.p99} ms; ${results.liveNicedHalf.p99} ms ` +
        `with the writer at nice ${WRITER_NICE}); ` +
        `p99 at ${half} req/s (half saturation, the api ${busyPct(listHalf)}% busy) ` +
        `${listHalf.p99} ms (target < 10 ms), the bare ` +
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
        listUncachedCpuMs: uncached.cpuMsPerRequest,
        liveRps: liveResult.rps,
        liveP99Ms: liveHalf.p99,
        liveBareP99Ms: results.liveBareHalf.p99,
        liveNicedWriterP99Ms: results.liveNicedHalf.p99,
        liveCpuMs: liveResult.cpuMsPerRequest,
        liveEventsPerSecond,
        listUncachedRatio: ratio(uncached.rps, bare.rps),
        liveRatio: ratio(liveResult.rps, bare.rps),
      })}\n`,
    )
  } finally {
    await stopChildren(children)
    replica.destroy()
    rmSync(bodyFile, { force: true })
    rmSync(dirname(live.dataDir), { recursive: true, force: true })
  }
}

function ratio(a: number, b: number): number {
  return b === 0 ? 0 : Math.round((100 * a) / b) / 100
}

/**
 * Checks that the first and the last of the distinct pages are whole pages of 200 (a path the api
 * refused would make the run a count of errors). Returns the first one's size in bytes, and the
 * pages the runs may ask for: all but those two. A page read a second time at one state of its
 * file is kept in the page cache (api/page-cache.ts), so a run that came round to a checked page
 * would read it a second time and then find it.
 */
async function checkDistinctPages(
  pages: DistinctPages,
  key: string,
): Promise<{ bytes: number; pages: DistinctPages }> {
  if (pages.paths.length < 3) throw new BenchFailure('too few distinct pages to ask for')
  let bytes = 0
  for (const path of [pages.paths[0], pages.paths.at(-1)] as string[]) {
    const response = await fetch(`${pages.origin}${path}`, {
      headers: { authorization: `Bearer ${key}` },
    })
    const body = await response.text()
    const rows = response.ok ? (JSON.parse(body) as { data: unknown[] }).data.length : 0
    if (rows !== PAGE_LIMIT) {
      throw new BenchFailure(`${path}: ${response.status} with ${rows} rows: ${body.slice(0, 200)}`)
    }
    bytes ||= Buffer.byteLength(body)
  }
  return { bytes, pages: { ...pages, paths: pages.paths.slice(1, -1) } }
}

/** Page-cache hits the api has counted so far (its admin port's metrics). */
async function pageCacheHits(adminPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text()
  const line = text
    .split('\n')
    .find((l) => l.startsWith('api_page_cache_lookups_total{result="hit"}'))
  if (line === undefined) throw new BenchFailure('the api reports no page-cache hits metric')
  return Number(line.split(' ').at(-1))
}

interface WriterSummary {
  events: number
  commits: number
  seconds: number
  exhausted: boolean
}

/** Sets every thread of process `pid` to `nice` (Linux: a priority is a thread's own). */
function lowerPriority(pid: number, nice: number): void {
  for (const thread of readdirSync(`/proc/${pid}/task`)) setPriority(Number(thread), nice)
}

/** The live run's change stream (bench/live-writer.ts), as the projector is started. */
function startWriter(dataDir: string, streamFile: string): ChildProcess {
  return spawn(
    process.execPath,
    [
      ...projectorNodeFlags,
      'bench/live-writer.ts',
      dataDir,
      streamFile,
      String(LIVE_EVENTS_PER_SECOND),
    ],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] },
  )
}

async function stopWriter(writer: ChildProcess): Promise<WriterSummary> {
  let out = ''
  writer.stdout?.on('data', (d: Buffer) => (out += d.toString()))
  const exited = new Promise((resolve) => writer.once('exit', resolve))
  writer.kill('SIGTERM')
  const code = await exited
  if (code !== 0) throw new BenchFailure(`the live writer failed (exit ${String(code)})`)
  return JSON.parse(out) as WriterSummary
}

interface OverloadResult {
  servedRps: number
  servedP50Ms: number
  servedP99Ms: number
  shed: number
  wrong: number
  errors: number
  unsent: number
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
