// `npm run bench:scale`: the replica at many more organizations than bench:tenants's 3,000, scaled
// down in their size (issue 22: 30,000 organizations, on paper and by a scaled-down simulation).
//
//   npm run bench:scale [-- --organizations 30000] [--providers 2] [--requests 2000]
//
// One dataset from the project's generator (schemaless, cached in <cache>/bench), loaded with
// `projector --from-file` into a fresh data directory with the settings as they are
// (ORGANIZATION_FILES, OPEN_FILES_MAX... pass through; by default `auto`). Then it measures what
// docs/many-organizations.md's "30,000 organizations" table reckons:
// - the load: events/s and peak RSS;
// - disk: the organizations' files in all and per organization, control.db with the routing index, and what one
//   organization file costs empty (its schema's pages);
// - the api (`api/main.ts`, a child): its start until /readyz answers, then --requests first pages
//   of organizations drawn at random, each its first request (its file opened, cold), then the
//   same again (warm): p50 and p99 of each, and the descriptors the api holds after.
// It ends with one line of JSON.
import { readdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { openForWriting } from '../src/sqlite.ts'
import { currentGeneration } from '../src/layout.ts'
import { makeTempDir } from '../test/harness/process.ts'
import { startApi } from '../test/support/e2e.ts'
import { generatedDataset } from './dataset.ts'
import { projectFile } from './projector-run.ts'
import { percentile, readyz, waitUntil } from './wait.ts'

function fail(message: string): never {
  process.stderr.write(`bench:scale: ${message}\n`)
  process.exit(2)
}

const values = (() => {
  try {
    return parseArgs({
      options: {
        organizations: { type: 'string', default: '30000' },
        providers: { type: 'string', default: '2' },
        requests: { type: 'string', default: '2000' },
      },
    }).values
  } catch (error) {
    fail((error as Error).message)
  }
})()

function integer(name: keyof typeof values): number {
  const value = Number(values[name])
  if (!Number.isSafeInteger(value) || value < 1) fail(`--${name} must be an integer >= 1`)
  return value
}
const organizations = integer('organizations')
const providers = integer('providers')
const requests = integer('requests')

/** Settings an operator tunes pass through to the projector and the api. */
const tuned = Object.fromEntries(
  ['ORGANIZATION_FILES', 'OPEN_FILES_MAX', 'LANES', 'PAGE_CACHE_MB']
    .filter((name) => process.env[name] !== undefined)
    .map((name) => [name, process.env[name]!]),
)

const log = (line: string) => process.stdout.write(`${line}\n`)
const mb = (bytes: number) => Math.round((bytes / (1024 * 1024)) * 10) / 10

/** Bytes of every file in `dir` (not below it). */
function bytesIn(dir: string): { files: number; bytes: number } {
  let bytes = 0
  let files = 0
  for (const name of readdirSync(dir)) {
    const stat = statSync(join(dir, name))
    if (!stat.isFile()) continue
    bytes += stat.size
    if (name.endsWith('.db')) files++
  }
  return { files, bytes }
}

/** The size of a new, empty organization file: what each file costs before its first row. */
function emptyFileBytes(dir: string): number {
  const path = join(dir, 'empty.db')
  openForWriting(path, 'organization').close()
  const bytes = statSync(path).size
  rmSync(path, { force: true })
  return bytes
}

function descriptorsOf(pid: number | undefined): number | null {
  if (pid === undefined) return null
  try {
    return readdirSync(`/proc/${pid}/fd`).length
  } catch {
    return null
  }
}

async function timedGets(baseUrl: string, keys: readonly string[]): Promise<number[]> {
  const times: number[] = []
  for (const key of keys) {
    const t0 = performance.now()
    const response = await fetch(`${baseUrl}/providers?limit=50`, {
      headers: { authorization: `Bearer ${key}` },
    })
    await response.arrayBuffer()
    if (response.status !== 200) throw new Error(`GET /providers answered ${response.status}`)
    times.push(performance.now() - t0)
  }
  return times.sort((a, b) => a - b)
}

const round = (ms: number) => Math.round(ms * 100) / 100

async function main(): Promise<void> {
  const dataset = await generatedDataset(
    { organizations, providersPerOrganization: providers, updateRounds: 3 },
    log,
    'schemaless',
  )
  log(`${organizations} organizations x ${providers} providers: ${dataset.events} events`)
  const work = makeTempDir('bench-scale')
  try {
    const dataDir = join(work.path, 'data')
    log('file: projector --from-file...')
    const load = await projectFile(dataset.path, dataDir, tuned)
    const eventsPerSecond = Math.round(load.records / load.seconds)
    log(
      `  ${eventsPerSecond} events/s, peak RSS ${load.peakRssMb} MB (${load.seconds.toFixed(1)} s)`,
    )

    const generation = currentGeneration(dataDir)!
    const files = bytesIn(generation.organizationsDir)
    // control.db and the routing index beside it (in control.db until 2026-11-30): figures
    // comparable across that change.
    const control = statSync(generation.controlPath).size + statSync(generation.routesPath).size
    const empty = emptyFileBytes(work.path)
    log(
      `disk: ${files.files} organization files, ${mb(files.bytes)} MB (${Math.round(files.bytes / organizations / 1024)} KB an organization); control.db and routes.db ${mb(control)} MB (${Math.round(control / organizations / 1024)} KB an organization); an empty file ${Math.round(empty / 1024)} KB`,
    )

    log('api: start, then first pages of organizations drawn at random, cold then warm...')
    const t0 = performance.now()
    const api = await startApi({ dataDir, logDir: work.path, env: tuned })
    try {
      await waitUntil('the api to be ready', () => readyz(api.adminUrl), 60_000)
      const startMs = performance.now() - t0
      const drawn = Array.from(
        { length: Math.min(requests, dataset.organizations.length) },
        (_, i) => dataset.organizations[(i * 7919) % dataset.organizations.length]!,
      )
      const keys = drawn.map((o) => o.keys[0]!.rawKey)
      const cold = await timedGets(api.baseUrl, keys)
      const warm = await timedGets(api.baseUrl, keys)
      const descriptors = descriptorsOf(api.proc.child.pid)
      log(
        `  ready in ${Math.round(startMs)} ms; cold p50 ${round(percentile(cold, 50))} ms, p99 ${round(percentile(cold, 99))} ms; warm p50 ${round(percentile(warm, 50))} ms, p99 ${round(percentile(warm, 99))} ms; ${descriptors} descriptors after ${keys.length} organizations`,
      )
      log(
        JSON.stringify({
          organizations,
          events: dataset.events,
          organizationFiles: files.files,
          fileEventsPerSecond: eventsPerSecond,
          peakRssMb: load.peakRssMb,
          filesMb: mb(files.bytes),
          fileKbPerOrganization: Math.round(files.bytes / organizations / 1024),
          controlMb: mb(control),
          controlKbPerOrganization: Math.round(control / organizations / 1024),
          emptyFileKb: Math.round(empty / 1024),
          apiReadyMs: Math.round(startMs),
          apiColdP50Ms: round(percentile(cold, 50)),
          apiColdP99Ms: round(percentile(cold, 99)),
          apiWarmP50Ms: round(percentile(warm, 50)),
          apiWarmP99Ms: round(percentile(warm, 99)),
          apiDescriptors: descriptors,
          settings: tuned,
        }),
      )
    } finally {
      await api.stop()
    }
  } finally {
    work.remove()
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:scale: ${(error as Error).stack ?? String(error)}\n`)
  process.exit(1)
})
