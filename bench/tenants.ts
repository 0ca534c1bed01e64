// `npm run bench:tenants`: the same change events as a few large organizations and as many small
// ones, in one run, through every path of the replica (issue 22: one SQLite file per
// organization must not make many organizations slower or bigger).
//
//   npm run bench:tenants [-- --events 1850000] [--organizations 3000] [--few-organizations 7]
//     [--only file,kafka,rebuild,api] [--no-file] [--no-kafka] [--no-rebuild] [--no-api]
//     [--datasets few,many] [--changes N] [--change-rate 200] [--change-seconds 30]
//     [--clients 3000] [--connections 16] [--api-seconds 10]
//
// Two datasets from the project's generator (scripts/dataset, schemaless, cached in
// <cache>/bench), of about --events Debezium events each: "few" is --few-organizations
// organizations of many providers, "many" is --organizations organizations of few providers,
// sized so that both hold about the same number of events (printed, with their ratio). Both file
// loads run first, before the broker starts (few, then many), then each dataset's live parts in
// turn, few first:
// 1. file: `projector --from-file` in a child process (as bench:projector): events/s and the
//    child's peak RSS.
// 2. kafka: the dataset is produced into a real broker (the test harness's), under a topic prefix
//    of its own, and the live projector (`projector/main.ts`, a child) loads it until /readyz
//    (printed as the load rate). Then change events for existing rows spread over every
//    organization (provider renames: the provider's latest row with a new last_name, `op: u`,
//    a higher LSN): a burst of --changes (default events/20, at most 20,000), timed from its first record
//    produced to the projector's offsets committed past its last: the applied events/s. Then a
//    steady stream at --change-rate for --change-seconds, where 10 changes a second are followed
//    on the api (`GET /providers/{id}` every 10 ms, later every tenth of the time waited, until it
//    serves the new name): the p99 of a change's time from its Kafka record timestamp (set by the producer
//    when it sends, so at or before its append) to being served. Then the same burst again, the
//    files written by the stream: reported beside the first, which the target judges. And the
//    live projector's peak RSS by then (every organization file it wrote is open, up to
//    OPEN_FILES_MAX: docs/many-organizations.md).
// 3. api (`api/main.ts`, a child, on the live projector's files; on the file run's with
//    --no-kafka --no-rebuild): --clients simulated clients spread over every organization, each
//    with one of its organization's keys, driven by bench/client-mix.ts in a process of its own:
//    80% the spec's polling loop (`/providers?updated_since=<its own watermark>`, overlap 2 s,
//    mostly small pages), 15% first pages (`/providers?limit=50`), 5% detail reads. Requests/s
//    and p99 with --connections in flight (saturation), then p99 at half that rate.
// 4. rebuild: `projector --rebuild` as a second process, timed from its start until the data
//    directory names the new generation (as bench:rebuild).
// Then the targets (each many figure at least 0.8x its few figure, peak RSS under 500 MB, api p99
// under 10 ms at half saturation), whether each is met, and one line of JSON:
//   {"organizations", "fileEventsPerSecondMany", "fileEventsPerSecondFew", "peakRssMbMany",
//    "kafkaEventsPerSecondMany", "kafkaEventsPerSecondFew", "rebuildSecondsMany",
//    "rebuildSecondsFew", "apiRpsMany", "apiRpsFew", "apiP99MsMany", ...more}
// A part not run is null. LANES, OPEN_FILES_MAX, PAGE_CACHE_MB and ORGANIZATION_FILES pass
// through to the projector and api processes (ORGANIZATION_FILES=100: both datasets' organizations
// in shared files, src/organization-files.ts).
import { spawn } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import type { Admin, Kafka, Producer } from 'kafkajs'
import { changeTopics } from '../projector/sources/kafka.ts'
import { currentGenerationName } from '../src/layout.ts'
import { kafkaClient, startKafka, type StartedKafka } from '../test/harness/kafka.ts'
import { makeTempDir } from '../test/harness/process.ts'
import { repoRoot } from '../test/harness/paths.ts'
import {
  startApi,
  startProjector,
  type ApiProcess,
  type ProjectorProcess,
} from '../test/support/e2e.ts'
import type { MixPlan, MixResult } from './client-mix.ts'
import { type BenchDatasetFile, generatedDataset } from './dataset.ts'
import { produceFile } from './produce.ts'
import { endOffsets, peakRssMbOf, projectFile, waitCommitted } from './projector-run.ts'
import { Renames, sampleProviders, sizeFor, type SampledProvider } from './tenant-changes.ts'
import { metricSum, percentile, readyz, waitUntil } from './wait.ts'

// ---- Options -----------------------------------------------------------------------------------

const PARTS = ['file', 'kafka', 'rebuild', 'api'] as const
type Part = (typeof PARTS)[number]
type Which = 'few' | 'many'

function fail(message: string): never {
  process.stderr.write(`bench:tenants: ${message}\n`)
  process.exit(2)
}

function parseOptions() {
  try {
    return parseArgs({
      options: {
        events: { type: 'string', default: '1850000' },
        organizations: { type: 'string', default: '3000' },
        'few-organizations': { type: 'string', default: '7' },
        only: { type: 'string' },
        'no-file': { type: 'boolean', default: false },
        'no-kafka': { type: 'boolean', default: false },
        'no-rebuild': { type: 'boolean', default: false },
        'no-api': { type: 'boolean', default: false },
        datasets: { type: 'string', default: 'few,many' },
        changes: { type: 'string' },
        'change-rate': { type: 'string', default: '200' },
        'change-seconds': { type: 'string', default: '30' },
        clients: { type: 'string', default: '3000' },
        connections: { type: 'string', default: '16' },
        'api-seconds': { type: 'string', default: '10' },
      },
    }).values
  } catch (error) {
    fail((error as Error).message)
  }
}
const values = parseOptions()

function integer(name: keyof typeof values, min = 1): number {
  const value = Number(values[name])
  if (!Number.isSafeInteger(value) || value < min) fail(`--${name} must be an integer >= ${min}`)
  return value
}
const targetEvents = integer('events', 100)
const manyOrganizations = integer('organizations')
const fewOrganizations = integer('few-organizations')
const changes =
  values.changes === undefined
    ? Math.min(20_000, Math.round(targetEvents / 20))
    : integer('changes')
const changeRate = integer('change-rate')
const changeSeconds = integer('change-seconds')
const clientCount = integer('clients')
const connections = integer('connections')
const apiSeconds = integer('api-seconds')

const parts: ReadonlySet<Part> = (() => {
  if (values.only !== undefined) {
    const only = values.only.split(',').map((p) => p.trim())
    for (const p of only) if (!(PARTS as readonly string[]).includes(p)) fail(`--only: ${p}?`)
    return new Set(only as Part[])
  }
  return new Set(PARTS.filter((p) => values[`no-${p}`] !== true))
})()
/** Whether any part runs on a broker (started once the file loads are done). */
const needsBroker = parts.has('kafka') || parts.has('rebuild')
const datasets: Which[] = (() => {
  const list = values.datasets.split(',').map((d) => d.trim())
  for (const d of list) if (d !== 'few' && d !== 'many') fail(`--datasets: ${d}?`)
  return list as Which[]
})()

/** Settings an operator tunes pass through to the projector and api children. */
const passEnv: Record<string, string> = Object.fromEntries(
  ['LANES', 'OPEN_FILES_MAX', 'PAGE_CACHE_MB', 'ORGANIZATION_FILES']
    .filter((name) => process.env[name] !== undefined)
    .map((name) => [name, process.env[name]!]),
)

const TARGET = { manyToFew: 0.8, peakRssMb: 500, apiP99HalfMs: 10 }

/** The polling clients' watermark overlap (the spec's minute or two, compressed). */
const API_OVERLAP_MS = 2000

function log(line: string): void {
  process.stderr.write(`${line}\n`)
}

const seconds = (since: number) => (performance.now() - since) / 1000

// ---- One dataset, every part ---------------------------------------------------------------------

interface Figures {
  events: number
  organizations: number
  fileEventsPerSecond: number | null
  peakRssMb: number | null
  kafkaLoadEventsPerSecond: number | null
  kafkaEventsPerSecond: number | null
  kafkaWarmEventsPerSecond: number | null
  kafkaSteadyEventsPerSecond: number | null
  kafkaP99Ms: number | null
  /** The live projector's peak RSS, its load and its changes (every file they wrote open). */
  kafkaPeakRssMb: number | null
  rebuildSeconds: number | null
  api: MixResult | null
  apiHalf: MixResult | null
}

/** Whether the key may list providers (and is neither revoked nor expired: the api says). */
function providerKeys(dataset: BenchDatasetFile): Map<string, string[]> {
  return new Map(
    dataset.organizations.map((org) => [
      org.id,
      org.keys.filter((k) => k.scopes.includes('providers:read')).map((k) => k.rawKey),
    ]),
  )
}

/** The keys the api accepts for each organization (the generator revokes and expires some). */
async function workingKeys(
  baseUrl: string,
  dataset: BenchDatasetFile,
): Promise<Map<string, string[]>> {
  const working = new Map<string, string[]>()
  const queue = [...providerKeys(dataset)]
  const probe = async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      const [organizationId, keys] = next
      const ok: string[] = []
      for (const key of keys) {
        const response = await fetch(`${baseUrl}/providers?limit=1`, {
          headers: { authorization: `Bearer ${key}` },
        })
        await response.arrayBuffer()
        if (response.status === 200) ok.push(key)
      }
      if (ok.length > 0) working.set(organizationId, ok)
    }
  }
  await Promise.all(Array.from({ length: 8 }, probe))
  return working
}

/** bench/client-mix.ts in a process of its own. */
async function clientMix(plan: MixPlan, dir: string): Promise<MixResult> {
  const planFile = join(dir, 'mix-plan.json')
  writeFileSync(planFile, JSON.stringify(plan))
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/client-mix.ts', planFile], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.on('data', (d: Buffer) => (out += d.toString()))
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  if (code !== 0) throw new Error(`client-mix exited ${code}`)
  return JSON.parse(out.trim().split('\n').at(-1)!) as MixResult
}

function mixLine(name: string, r: MixResult): string {
  return (
    `  ${name.padEnd(18)} ${String(r.rps).padStart(6)} req/s  p50 ${r.p50Ms} ms  p99 ${r.p99Ms} ms` +
    `  max ${r.maxMs} ms  (poll p99 ${r.byKind.poll.p99Ms}, page ${r.byKind.page.p99Ms}, ` +
    `detail ${r.byKind.detail.p99Ms})  ${r.bytesPerRequest} B/req  ${r.rowsPerPoll} rows/poll` +
    `  errors ${r.errors}  non-2xx ${r.non2xx}`
  )
}

/** The api part: the client mix at saturation, then at half that rate. */
async function measureApi(
  api: ApiProcess,
  dataset: BenchDatasetFile,
  providers: readonly SampledProvider[],
  dir: string,
): Promise<{ api: MixResult; apiHalf: MixResult }> {
  const keys = await workingKeys(api.baseUrl, dataset)
  const ids = new Map<string, string[]>()
  for (const p of providers) {
    const list = ids.get(p.organizationId) ?? []
    if (list.length < 200) list.push(p.id)
    ids.set(p.organizationId, list)
  }
  const organizations = [...keys].map(([id, k]) => ({ keys: k, providerIds: ids.get(id) ?? [] }))
  log(
    `api: ${clientCount} clients over ${organizations.length} organizations ` +
      `(of ${dataset.organizations.length}), ${connections} connections, ${apiSeconds} s a run`,
  )
  const plan: MixPlan = {
    baseUrl: api.baseUrl,
    organizations,
    clients: clientCount,
    connections,
    seconds: apiSeconds,
    warmupSeconds: 3,
    mix: { poll: 0.8, page: 0.15, detail: 0.05 },
    overlapMs: API_OVERLAP_MS,
  }
  const before = await api.metrics()
  const saturated = await clientMix(plan, dir)
  log(mixLine('saturation', saturated))
  log(pageCacheLine(before, await api.metrics()))
  const half = Math.max(1, Math.round(saturated.rps / 2))
  const apiHalf = await clientMix({ ...plan, rate: half }, dir)
  log(mixLine(`at ${half} req/s`, apiHalf))
  for (const r of [saturated, apiHalf]) {
    if (r.errors > 0 || r.non2xx > 0)
      throw new Error(`api requests failed, the figures are not valid: ${r.firstFailure}`)
  }
  return { api: saturated, apiHalf }
}

/**
 * The api's page-cache lookups between two scrapes of its metrics: a hit is a page (or a quiet
 * poll's empty answer) not read from the file, which is what separates the datasets' costs.
 */
function pageCacheLine(before: string, after: string): string {
  const delta = (result: string) => {
    const name = `api_page_cache_lookups_total{result="${result}"}`
    return metricSum(after, name) - metricSum(before, name)
  }
  const [hits, misses] = [delta('hit'), delta('miss')]
  const share = hits + misses === 0 ? 0 : Math.round((100 * hits) / (hits + misses))
  return `  page cache over that run: ${hits} hits, ${misses} misses (${share}% hits)`
}

/** The projector's batches between two scrapes of its metrics: how many, how big, how long. */
function batchLine(before: string, after: string): string {
  const delta = (name: string) => metricSum(after, name) - metricSum(before, name)
  const batches = delta('replica_projector_batch_apply_seconds_count')
  const applySeconds = delta('replica_projector_batch_apply_seconds_sum')
  const events = delta('replica_projector_events_total')
  const documents = delta('replica_projector_documents_total')
  if (batches === 0) return 'no batches'
  return (
    `${batches} batches of ${Math.round(events / batches)} events, ` +
    `${Math.round((1000 * applySeconds) / batches)} ms each to apply and commit ` +
    `(${applySeconds.toFixed(1)} s in all), ${Math.round((documents / Math.max(1, events)) * 100) / 100} documents recomputed an event`
  )
}

/** Follows one rename on the api until it is served; resolves its ms from the record's timestamp. */
async function servedAfter(
  baseUrl: string,
  key: string,
  providerId: string,
  lastName: string,
  recordTimestamp: number,
): Promise<number> {
  const needle = `"lastName":${JSON.stringify(lastName)}`
  const deadline = Date.now() + 120_000
  for (;;) {
    const response = await fetch(`${baseUrl}/providers/${providerId}`, {
      headers: { authorization: `Bearer ${key}` },
    })
    const body = await response.text()
    if (response.status === 200 && body.includes(needle)) return Date.now() - recordTimestamp
    if (Date.now() > deadline) throw new Error(`rename of ${providerId} not served in 120 s`)
    // Every 10 ms at first, then a tenth of the time waited so far: a backlogged projector is
    // not also made to share the cores with hundreds of polls a second.
    await sleep(Math.min(1000, Math.max(10, (Date.now() - recordTimestamp) / 10)))
  }
}

/** The Kafka part's change stream: a burst for the applied rate, then a steady stream. */
async function measureChanges(
  kafka: Kafka,
  admin: Admin,
  live: ProjectorProcess,
  api: ApiProcess,
  dataset: BenchDatasetFile,
  providers: readonly SampledProvider[],
  prefix: string,
  dir: string,
): Promise<{ burst: number; warmBurst: number; steady: number; p99Ms: number }> {
  const topic = `${prefix}.public.providers`
  const topics = changeTopics(prefix)
  const renames = new Renames(providers, topic, prefix)

  // The burst, produced from a file as the dataset was: the producer outruns the projector. Its
  // first writes to each file since the lanes started are in it (the target's figure).
  const burst = await measureBurst(kafka, admin, live, renames, dataset, topics, dir, 'a burst')

  // The steady stream, 20 sends a second; one rename in each tenth of a second followed.
  const keys = providerKeys(dataset)
  const producer: Producer = kafka.producer()
  await producer.connect()
  const perTick = changeRate / 20
  const follow: Array<Promise<number>> = []
  log(`kafka: ${changeRate} renames/s for ${changeSeconds} s, 10 a second followed on the api...`)
  const t0 = performance.now()
  let sent = 0
  let carry = 0
  for (let tick = 0; tick < changeSeconds * 20; tick++) {
    const due = t0 + tick * 50
    const wait = due - performance.now()
    if (wait > 0) await sleep(wait)
    carry += perTick
    const count = Math.floor(carry)
    carry -= count
    const now = Date.now()
    const batch = Array.from({ length: count }, () => renames.next(now))
    await producer.send({
      topic,
      acks: 1,
      messages: batch.map((r) => ({ key: r.key, value: r.value, timestamp: String(now) })),
    })
    sent += count
    const followed = tick % 2 === 0 ? batch[0] : undefined
    const key = followed === undefined ? undefined : keys.get(followed.provider.organizationId)?.[0]
    if (followed !== undefined && key !== undefined) {
      follow.push(servedAfter(api.baseUrl, key, followed.provider.id, followed.lastName, now))
    }
  }
  await waitCommitted(admin, live.groupId, topics, await endOffsets(admin, topics), 20)
  const steadySeconds = seconds(t0)
  await producer.disconnect()
  const latencies = (await Promise.all(follow)).sort((a, b) => a - b)
  const p99Ms = percentile(latencies, 99)
  log(
    `  ${sent} renames applied in ${steadySeconds.toFixed(1)} s (${Math.round(sent / steadySeconds)}/s); ` +
      `record to served, ${latencies.length} followed: p50 ${percentile(latencies, 50)} ms, ` +
      `p99 ${p99Ms} ms, max ${latencies.at(-1)} ms`,
  )
  // The same burst again, once the steady stream has written to most files: what a projector that
  // has run a while does with a backlog (docs/many-organizations.md), reported beside the first.
  const warmBurst = await measureBurst(
    kafka,
    admin,
    live,
    renames,
    dataset,
    topics,
    dir,
    'after the steady stream, a burst',
  )
  return { burst, warmBurst, steady: Math.round(sent / steadySeconds), p99Ms }
}

/** A burst of `changes` renames, timed from its first record produced to its offsets committed. */
async function measureBurst(
  kafka: Kafka,
  admin: Admin,
  live: ProjectorProcess,
  renames: Renames,
  dataset: BenchDatasetFile,
  topics: string[],
  dir: string,
  what: string,
): Promise<number> {
  const burstFile = join(dir, 'renames.ndjson')
  renames.writeFile(burstFile, changes)
  log(`kafka: ${what} of ${changes} renames over ${dataset.organizations.length} organizations...`)
  const before = await live.metrics()
  const t0 = performance.now()
  await produceFile(kafka, burstFile, Number.POSITIVE_INFINITY, [renames.topic])
  const producedSeconds = seconds(t0)
  await waitCommitted(admin, live.groupId, topics, await endOffsets(admin, topics), 20)
  const burstSeconds = seconds(t0)
  rmSync(burstFile)
  const rate = Math.round(changes / burstSeconds)
  log(
    `  applied and committed in ${burstSeconds.toFixed(1)} s: ${rate} events/s ` +
      `(produced in ${producedSeconds.toFixed(1)} s)`,
  )
  log(`  ${batchLine(before, await live.metrics())}`)
  return rate
}

/**
 * Waits for the projector's /readyz, failing when its consumer group has had no member for a
 * minute: a consumer that crashed and did not come back leaves the process waiting forever.
 */
async function waitServing(live: ProjectorProcess, admin: Admin, what: string): Promise<void> {
  let checked = 0
  let memberlessSince: number | undefined
  await waitUntil(
    what,
    async () => {
      if (await readyz(live.adminUrl)) return true
      if (Date.now() - checked < 5000) return false
      checked = Date.now()
      const [group] = (await admin.describeGroups([live.groupId])).groups
      if (group !== undefined && group.members.length > 0) {
        memberlessSince = undefined
        return false
      }
      memberlessSince ??= checked
      if (checked - memberlessSince > 60_000) {
        throw new Error(
          `${what}: its consumer group ${live.groupId} has had no member for 60 s ` +
            `(${group?.state ?? 'unknown'}); see ${live.proc.logFile} (REPLICA_KEEP_TMP=1 keeps it)`,
        )
      }
      return false
    },
    60 * 60_000,
  )
}

/**
 * One dataset's figures of one stage: `file`, its file load (and the api on its files when no
 * broker is wanted at all); `live`, what runs on the broker (Kafka, the api on the live files,
 * the rebuild), given the figures of its file stage to add to.
 */
async function measureDataset(
  which: Which,
  broker: StartedKafka | undefined,
  work: string,
  stage: 'file' | 'live',
  fileFigures?: Figures,
): Promise<Figures> {
  const organizations = which === 'few' ? fewOrganizations : manyOrganizations
  const dataset = await generatedDataset(sizeFor(targetEvents, organizations), log, 'schemaless')
  const figures: Figures = fileFigures ?? {
    events: dataset.events,
    organizations,
    fileEventsPerSecond: null,
    peakRssMb: null,
    kafkaLoadEventsPerSecond: null,
    kafkaEventsPerSecond: null,
    kafkaWarmEventsPerSecond: null,
    kafkaPeakRssMb: null,
    kafkaSteadyEventsPerSecond: null,
    kafkaP99Ms: null,
    rebuildSeconds: null,
    api: null,
    apiHalf: null,
  }
  const dir = join(work, which)
  const logDir = join(dir, 'logs')
  mkdirSync(logDir, { recursive: true })
  log('')
  log(`== ${which}: ${organizations} organizations, ${dataset.events} events (${stage}) ==`)

  const apiOnFile = stage === 'file' && parts.has('api') && !needsBroker
  if (stage === 'file' && (parts.has('file') || apiOnFile)) {
    log(`file: projector --from-file...`)
    const summary = await projectFile(dataset.path, join(dir, 'file'), passEnv)
    figures.fileEventsPerSecond = Math.round(summary.records / summary.seconds)
    figures.peakRssMb = summary.peakRssMb
    log(
      `  ${summary.records} records in ${summary.seconds.toFixed(1)} s: ` +
        `${figures.fileEventsPerSecond} events/s, peak RSS ${summary.peakRssMb} MB`,
    )
    if (!apiOnFile) rmSync(join(dir, 'file'), { recursive: true, force: true })
  }
  const needsProviders = apiOnFile || (stage === 'live' && (parts.has('api') || parts.has('kafka')))
  const providers = needsProviders ? await sampleProviders(dataset) : []

  const started: Array<ProjectorProcess | ApiProcess> = []
  try {
    if (apiOnFile) {
      const api = await startApi({ dataDir: join(dir, 'file'), logDir, env: passEnv })
      started.push(api)
      await waitUntil('the api ready', () => readyz(api.adminUrl), 60_000)
      Object.assign(figures, await measureApi(api, dataset, providers, dir))
    }
    if (stage === 'file' || broker === undefined) return figures

    const kafka = kafkaClient(broker.brokers, `bench-tenants-${which}`)
    const admin = kafka.admin()
    await admin.connect()
    const prefix = which
    const topics = changeTopics(prefix)
    // The dataset's never-consumed table too: produced to, it would be created on the fly.
    const created = [...topics, `${prefix}.public.payer_portal_logins`]
    await admin.createTopics({ waitForLeaders: true, topics: created.map((topic) => ({ topic })) })
    log(`kafka: producing ${dataset.events} events...`)
    let t0 = performance.now()
    await produceFile(kafka, dataset.path, Number.POSITIVE_INFINITY, topics, prefix)
    log(`  in ${seconds(t0).toFixed(1)} s`)

    const dataDir = join(dir, 'data')
    log('kafka: the live projector loads them...')
    t0 = performance.now()
    const live = await startProjector({
      brokers: broker.brokers,
      dataDir,
      groupId: `bench-tenants-${which}`,
      logDir,
      label: 'projector',
      env: { TOPIC_PREFIX: prefix, ...passEnv },
    })
    started.push(live)
    await waitServing(live, admin, 'the live projector ready')
    const loadSeconds = seconds(t0)
    figures.kafkaLoadEventsPerSecond = Math.round(dataset.events / loadSeconds)
    log(
      `  ready after ${loadSeconds.toFixed(1)} s: ${figures.kafkaLoadEventsPerSecond} events/s ` +
        `(from the projector's start)`,
    )

    if (parts.has('kafka') || parts.has('api')) {
      const api = await startApi({ dataDir, logDir, env: passEnv })
      started.push(api)
      await waitUntil('the api ready', () => readyz(api.adminUrl), 60_000)
      if (parts.has('kafka')) {
        const c = await measureChanges(kafka, admin, live, api, dataset, providers, prefix, dir)
        figures.kafkaEventsPerSecond = c.burst
        figures.kafkaWarmEventsPerSecond = c.warmBurst
        figures.kafkaSteadyEventsPerSecond = c.steady
        figures.kafkaP99Ms = c.p99Ms
        figures.kafkaPeakRssMb = peakRssMbOf(live.proc.child.pid)
      }
      if (parts.has('api')) {
        // Past the pollers' overlap, the renames are behind every watermark: small pages.
        if (parts.has('kafka')) await sleep(API_OVERLAP_MS + 1000)
        Object.assign(figures, await measureApi(api, dataset, providers, dir))
      }
    }

    if (parts.has('rebuild')) {
      log('rebuild: projector --rebuild...')
      const before = currentGenerationName(dataDir)
      t0 = performance.now()
      const rebuilding = await startProjector({
        brokers: broker.brokers,
        dataDir,
        groupId: `bench-tenants-${which}`,
        logDir,
        label: 'rebuild',
        args: ['--rebuild'],
        env: { TOPIC_PREFIX: prefix, ...passEnv },
      })
      started.push(rebuilding)
      await waitUntil(
        'the rebuilt generation served',
        () => {
          const now = currentGenerationName(dataDir)
          return now !== undefined && now !== before
        },
        60 * 60_000,
      )
      figures.rebuildSeconds = Math.round(seconds(t0) * 10) / 10
      log(`  swapped after ${figures.rebuildSeconds} s`)
    }
    await admin.deleteTopics({ topics: created })
    await admin.disconnect()
    return figures
  } catch (error) {
    log(`bench:tenants (${which}) failed; logs in ${logDir}`)
    throw error
  } finally {
    for (const proc of started.reverse()) await proc.stop()
  }
}

// ---- The run -------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const work = makeTempDir('bench-tenants-')
  let broker: StartedKafka | undefined
  let finished = false
  const results: Partial<Record<Which, Figures>> = {}
  try {
    log(`parts: ${[...parts].join(', ')}; datasets: ${datasets.join(', ')}`)
    // Every dataset's file load first, on a machine without a broker: run after the first
    // dataset's live parts, the second one's load met the broker's log cleaner and deletions,
    // and the writeback of the first one's rebuild (many/few 0.76-0.82 in whole runs, 1.03 in a
    // file-only run of the same code).
    for (const which of datasets)
      results[which] = await measureDataset(which, undefined, work.path, 'file')
    if (needsBroker) {
      log('starting Kafka...')
      broker = await startKafka()
      for (const which of datasets) {
        results[which] = await measureDataset(which, broker, work.path, 'live', results[which])
      }
    }
    finished = true
  } finally {
    await broker?.stop()
    if (finished) work.remove()
  }
  const few = results.few
  const many = results.many
  const ratio = (m: number | null | undefined, f: number | null | undefined) =>
    m == null || f == null || f === 0 ? null : Math.round((m / f) * 100) / 100

  log('')
  if (few !== undefined && many !== undefined) {
    log(
      `events: few ${few.events}, many ${many.events} ` +
        `(many/few ${(many.events / few.events).toFixed(3)})`,
    )
    if (Math.abs(many.events / few.events - 1) > 0.05)
      log('  the datasets differ by more than 5%: raise --events or lower --organizations')
  }
  const checks: Array<[string, boolean | null]> = [
    [
      `file events/s, many >= ${TARGET.manyToFew}x few`,
      meets(ratio(many?.fileEventsPerSecond, few?.fileEventsPerSecond)),
    ],
    [
      `kafka events/s, many >= ${TARGET.manyToFew}x few`,
      meets(ratio(many?.kafkaEventsPerSecond, few?.kafkaEventsPerSecond)),
    ],
    [
      `rebuild, many's rate >= ${TARGET.manyToFew}x few's`,
      meets(
        ratio(rate(many?.rebuildSeconds, many?.events), rate(few?.rebuildSeconds, few?.events)),
      ),
    ],
    [`api req/s, many >= ${TARGET.manyToFew}x few`, meets(ratio(many?.api?.rps, few?.api?.rps))],
    [
      `peak RSS (file load, many) < ${TARGET.peakRssMb} MB`,
      many?.peakRssMb == null ? null : many.peakRssMb < TARGET.peakRssMb,
    ],
    [
      `api p99 at half saturation (many) < ${TARGET.apiP99HalfMs} ms`,
      many?.apiHalf == null ? null : many.apiHalf.p99Ms < TARGET.apiP99HalfMs,
    ],
  ]
  log('targets:')
  for (const [what, met] of checks)
    log(`  ${met === null ? 'not measured' : met ? 'met   ' : 'MISSED'}  ${what}`)
  log(
    `  ${'figure'.padEnd(34)} ${'few'.padStart(10)} ${'many'.padStart(10)} ${'many/few'.padStart(9)}`,
  )
  const rows: Array<[string, number | null | undefined, number | null | undefined]> = [
    ['file events/s', few?.fileEventsPerSecond, many?.fileEventsPerSecond],
    ['file peak RSS MB', few?.peakRssMb, many?.peakRssMb],
    ['kafka load events/s', few?.kafkaLoadEventsPerSecond, many?.kafkaLoadEventsPerSecond],
    ['kafka change burst events/s', few?.kafkaEventsPerSecond, many?.kafkaEventsPerSecond],
    [
      'kafka burst after the stream ev/s',
      few?.kafkaWarmEventsPerSecond,
      many?.kafkaWarmEventsPerSecond,
    ],
    ['kafka record to served p99 ms', few?.kafkaP99Ms, many?.kafkaP99Ms],
    ['live projector peak RSS MB', few?.kafkaPeakRssMb, many?.kafkaPeakRssMb],
    ['rebuild s', few?.rebuildSeconds, many?.rebuildSeconds],
    ['api req/s (saturation)', few?.api?.rps, many?.api?.rps],
    ['api p99 ms (saturation)', few?.api?.p99Ms, many?.api?.p99Ms],
    ['api p99 ms (half saturation)', few?.apiHalf?.p99Ms, many?.apiHalf?.p99Ms],
  ]
  for (const [name, f, m] of rows) {
    const cell = (v: number | null | undefined) => String(v ?? '-').padStart(10)
    log(`  ${name.padEnd(34)} ${cell(f)} ${cell(m)} ${String(ratio(m, f) ?? '-').padStart(9)}`)
  }

  process.stdout.write(
    `${JSON.stringify({
      organizations: manyOrganizations,
      fileEventsPerSecondMany: many?.fileEventsPerSecond ?? null,
      fileEventsPerSecondFew: few?.fileEventsPerSecond ?? null,
      peakRssMbMany: many?.peakRssMb ?? null,
      kafkaEventsPerSecondMany: many?.kafkaEventsPerSecond ?? null,
      kafkaEventsPerSecondFew: few?.kafkaEventsPerSecond ?? null,
      rebuildSecondsMany: many?.rebuildSeconds ?? null,
      rebuildSecondsFew: few?.rebuildSeconds ?? null,
      apiRpsMany: many?.api?.rps ?? null,
      apiRpsFew: few?.api?.rps ?? null,
      apiP99MsMany: many?.api?.p99Ms ?? null,
      apiP99MsHalfMany: many?.apiHalf?.p99Ms ?? null,
      apiP99MsHalfFew: few?.apiHalf?.p99Ms ?? null,
      peakRssMbFew: few?.peakRssMb ?? null,
      kafkaP99MsMany: many?.kafkaP99Ms ?? null,
      kafkaP99MsFew: few?.kafkaP99Ms ?? null,
      kafkaLoadEventsPerSecondMany: many?.kafkaLoadEventsPerSecond ?? null,
      kafkaLoadEventsPerSecondFew: few?.kafkaLoadEventsPerSecond ?? null,
      kafkaWarmEventsPerSecondMany: many?.kafkaWarmEventsPerSecond ?? null,
      kafkaWarmEventsPerSecondFew: few?.kafkaWarmEventsPerSecond ?? null,
      kafkaPeakRssMbMany: many?.kafkaPeakRssMb ?? null,
      kafkaPeakRssMbFew: few?.kafkaPeakRssMb ?? null,
      eventsMany: many?.events ?? null,
      eventsFew: few?.events ?? null,
      fewOrganizations,
    })}\n`,
  )
}

/** Events per second of a rebuild. */
function rate(rebuildSeconds: number | null | undefined, events: number | undefined) {
  return rebuildSeconds == null || events === undefined ? null : events / rebuildSeconds
}

/** Whether a many/few ratio meets the target. */
function meets(value: number | null): boolean | null {
  return value === null ? null : value >= TARGET.manyToFew
}

await main()
