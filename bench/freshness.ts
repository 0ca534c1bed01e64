// `npm run bench:freshness`: how long a committed change takes to be served, on the real pipeline
// with the shipped settings, under a write load that steps up (issue 18, docs/freshness.md).
//
//   npm run bench:freshness [-- --seconds 30] [--rates 50,500,2000,max] [--organizations 4]
//     [--providers 100] [--probe-ms 250] [--identifier-mix steady|growing] [--warm-up 30]
//
// PostgreSQL, Kafka and Kafka Connect with Debezium as the e2e harness starts them
// (test/support/e2e.ts: deploy/debezium/connector.json as shipped; PostgreSQL commits
// synchronously, fsync off; the JVMs with their default compilers, not the tests' quick-start
// ones), plus the projector and the api as users run them.
//
// - The steps measure a running deployment, not one just started: the writer first drives the mix
//   at WARM_UP_RATE for --warm-up seconds (0: none), unmeasured, so that the JVMs have compiled
//   their hot code, and the projector's lanes and PostgreSQL their caches, as they have in a
//   pipeline that has run for a while. Cold, the first step paid for those compiles on the same two
//   cores (docs/freshness.md).
// - A writer drives the product's write mix through SQL across the organizations: provider
//   renames, several providers renamed with an identifier replaced in one transaction, identifiers
//   added and removed (each provider holds about two: --identifier-mix steady, the default; or
//   `growing`, the mix before 2026-11-28), membership moves, enrollment status changes, documents
//   added. Rates step up (--rates, transactions/s; `max`: as fast as 8 connections commit),
//   --seconds each. Each transaction is one round trip (prepared statements; the multi-row one as
//   one message), as an application sends them: the writer stands in for the product and its
//   database, which in production do not share the replica's cores (WRITES).
// - A prober renames a provider of its own every --probe-ms (at most two probes in flight) and
//   times from COMMIT returning to the api serving the new name, both by a detail GET and by the
//   spec's `updated_since` loop (overlap 250 ms, following cursors), polled every 10 and 20 ms.
//   Each sample is split into hops: commit, Kafka append (the record's timestamp), the projector's
//   commit (the document's updatedAt: the replica's stamp is the batch's commit time), served.
// - The projector's consumer lag is sampled every second; a quiet organization's
//   `Replica-Lag-Ms` every half second, all run long.
// It prints a table per step, the hops, each part of the pipeline's CPU over the step (PostgreSQL,
// Connect, the broker, the projector, the api, this bench), the targets, and one line of JSON:
//   {"p50Ms","p99Ms","p99MsAt2000","quietStalenessMs","maxTps","projectorKeptUp"}
// p50Ms and p99Ms are the detail GET's at 500 transactions/s; maxTps the rate the `max` step
// committed; projectorKeptUp whether the lag stayed bounded at the highest rate reached.
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, logLevel } from 'kafkajs'
import pg from 'pg'
import { consumerLagBy, metricValue, Pipeline, TOPIC_PREFIX } from '../test/support/e2e.ts'
import {
  CREATED_AT,
  insertApiKey,
  insertEnrollment,
  insertGroupMembership,
  insertOrganization,
  insertProvider,
  insertProviderGroup,
  insertProviderIdentifier,
  type Sql,
} from '../test/support/e2e-sql.ts'
import { cpuShares, cpuSnapshot, formatShares, type ProcessRole } from './machine-cpu.ts'
import { percentile } from './wait.ts'

function parseOptions() {
  try {
    return parseArgs({
      options: {
        seconds: { type: 'string', default: '30' },
        rates: { type: 'string', default: '50,500,2000,max' },
        organizations: { type: 'string', default: '4' },
        providers: { type: 'string', default: '100' },
        'probe-ms': { type: 'string', default: '250' },
        'identifier-mix': { type: 'string', default: 'steady' },
        'warm-up': { type: 'string', default: '30' },
      },
    }).values
  } catch (error) {
    process.stderr.write(`bench:freshness: ${(error as Error).message}\n`)
    process.exit(2)
  }
}

const options = parseOptions()
const STEP_SECONDS = Number(options.seconds)
const RATES = options.rates.split(',').map((r) => (r === 'max' ? Infinity : Number(r)))
const ORGANIZATIONS = Number(options.organizations)
const PROVIDERS = Number(options.providers)
const PROBE_MS = Number(options['probe-ms'])
const WARM_UP_SECONDS = Number(options['warm-up'])
if (!(WARM_UP_SECONDS >= 0)) {
  process.stderr.write('bench:freshness: --warm-up must be a number of seconds, 0 or more\n')
  process.exit(2)
}
/** Transactions/s of the warm-up: between the steps' rates, so that all of them run warm code. */
const WARM_UP_RATE = 1_000
/**
 * `steady`: each organization's identifiers stay at about IDENTIFIERS_PER_PROVIDER a provider,
 * removed as often as added, as in a product whose providers renew their credentials. `growing`:
 * the mix before 2026-11-28, which added five identifiers for each one it removed, so that by the
 * 2,000/s step every provider carried dozens, and each rename rebuilt a document many times the
 * size of a real one (kept to compare with earlier runs).
 */
const IDENTIFIER_MIX = options['identifier-mix']
if (IDENTIFIER_MIX !== 'steady' && IDENTIFIER_MIX !== 'growing') {
  process.stderr.write('bench:freshness: --identifier-mix must be steady or growing\n')
  process.exit(2)
}
const IDENTIFIERS_PER_PROVIDER = 2
const WRITERS = 8
const POLL_MS = 10
/** The list loop's poll interval: each poll may walk several pages of 200. */
const LIST_POLL_MS = 20
/**
 * The `updated_since` loop's overlap. The spec asks clients for minutes (their clock against the
 * replica's stamps); here both are this machine's clock, and a window of seconds at 2,000 changes a
 * second is thousands of documents a poll, which would load the api more than the writes do.
 */
const OVERLAP_MS = 250

interface Org {
  id: string
  key: string
  providers: string[]
  groups: string[]
  memberships: string[]
  enrollments: string[]
  identifiers: string[]
}

/** What a probe saw: when its rename committed, and when and how it was first served. */
interface Probed {
  marker: string
  committedAt: number
  detailMs: number
  listMs: number | undefined
  /** The served document's updatedAt (the projector's stamp), and when it was first served. */
  stamp: number | undefined
  servedAt: number | undefined
}

interface Sample {
  detailMs: number
  listMs: number | undefined
  /** Commit to the Kafka record's timestamp, to the projector's stamp, to first served. */
  kafkaMs: number | undefined
  projectorMs: number | undefined
  servedMs: number | undefined
}

interface StepResult {
  rate: number
  tps: number
  samples: Sample[]
  lags: number[]
  /** The quiet organization's stated lags while the step ran (ms), one every half second. */
  quietMs: number[]
  /** Each part of the pipeline's share of one core over the step (machine-cpu.ts). */
  cpu: Array<[string, number]>
  /** The projector's groups over the step, from its /metrics. */
  groups: GroupFigures
}

/** The projector's applied groups: how many, of how many events, delivered to committed in all. */
interface GroupFigures {
  groups: number
  events: number
  applySeconds: number
}

/** The projector's group counters now (a step's figures are the difference of two readings). */
async function groupFigures(pipeline: Pipeline): Promise<GroupFigures> {
  const text = await pipeline.projector!.metrics()
  return {
    groups: metricValue(text, 'replica_projector_batch_apply_seconds_count'),
    events: metricValue(text, 'replica_projector_events_total'),
    applySeconds: metricValue(text, 'replica_projector_batch_apply_seconds_sum'),
  }
}

function groupsBetween(a: GroupFigures, b: GroupFigures): GroupFigures {
  return {
    groups: b.groups - a.groups,
    events: b.events - a.events,
    applySeconds: b.applySeconds - a.applySeconds,
  }
}

/** The pipeline's processes by their command lines; the bench is this process. */
const pipelineRole: ProcessRole = (commandLine, pid) => {
  if (pid === process.pid) return 'bench (writer, prober)'
  if (/^postgres[: ]|\/bin\/postgres /.test(commandLine)) return 'PostgreSQL'
  if (commandLine.includes('org.apache.kafka.connect.')) return 'Connect with Debezium'
  if (commandLine.includes(' kafka.Kafka ')) return 'Kafka broker'
  if (commandLine.includes('projector/main.ts')) return 'projector'
  if (commandLine.includes('api/main.ts')) return 'api'
  return undefined
}

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!

async function seed(sql: Sql, name: string, providers: number): Promise<Org> {
  const organization = await insertOrganization(sql, { name })
  const key = (await insertApiKey(sql, organization.id)).raw
  const org: Org = {
    id: organization.id,
    key,
    providers: [],
    groups: [],
    memberships: [],
    enrollments: [],
    identifiers: [],
  }
  for (let g = 0; g < 2; g++) org.groups.push((await insertProviderGroup(sql, org.id)).id)
  for (let i = 0; i < providers; i++) {
    const provider = await insertProvider(sql, org.id, { first_name: 'Ada', last_name: `P${i}` })
    org.providers.push(provider.id)
    const membership = await insertGroupMembership(sql, org.id, provider.id, org.groups[0]!)
    org.memberships.push(membership.id)
    if (IDENTIFIER_MIX === 'steady') {
      for (let k = 0; k < IDENTIFIERS_PER_PROVIDER; k++)
        org.identifiers.push((await insertProviderIdentifier(sql, org.id, provider.id)).id)
    }
    if (i % 4 === 0) org.enrollments.push((await insertEnrollment(sql, org.id, provider.id)).id)
  }
  return org
}

/**
 * The writer's statements. Each transaction is one round trip, as an application that prepares
 * its statements sends it: the single-row ones are prepared once a connection (node-postgres's
 * named statements: PostgreSQL parses and plans each once), and the multi-row transaction is one
 * message of statements (PostgreSQL's simple query protocol, values as escaped literals). The
 * rows, transactions and WAL are the same as statement by statement; what goes is the writer's
 * and PostgreSQL's cost per round trip, which on these two cores the replica's own processes paid
 * for (2026-11-29: the writer sent about two round trips a transaction, seven for a multi-row one).
 */
const WRITES = {
  rename: 'update providers set last_name = $2, updated_at = now() where id = $1',
  addIdentifier: `insert into provider_identifiers (id, organization_id, provider_id, type, value, created_at)
    values ($1, $2, $3, 'state_license', $4, $5)`,
  removeIdentifier: 'delete from provider_identifiers where id = $1',
  moveMembership: 'update group_memberships set provider_group_id = $2 where id = $1',
  enrollmentStatus: 'update enrollments set status = $2 where id = $1',
  addDocument: `insert into documents (id, organization_id, provider_id, type, file_name, content_type,
      size_bytes, uploaded_at, storage_key)
    values ($1, $2, $3, 'license', 'license.pdf', 'application/pdf', 1000, now(), $4)`,
} as const

/** A write as a named (prepared) statement of WRITES. */
function prepared(name: keyof typeof WRITES, values: unknown[]): pg.QueryConfig {
  return { name: `bench-${name}`, text: WRITES[name], values }
}

/** A new identifier of one of the organization's providers: its id and the insert's values. */
function newIdentifier(org: Org): { id: string; values: string[] } {
  const id = randomUUID()
  const value = `LIC-${randomUUID().slice(0, 6)}`
  return { id, values: [id, org.id, pick(org.providers), value, CREATED_AT] }
}

/**
 * One of the organization's identifiers, taken out of its list (a concurrent writer cannot pick
 * it too); undefined when it has none.
 */
function takeIdentifier(org: Org): string | undefined {
  if (org.identifiers.length === 0) return undefined
  return org.identifiers.splice(Math.floor(Math.random() * org.identifiers.length), 1)[0]
}

/**
 * Several providers renamed and an identifier replaced (steady) or added (growing), in one
 * transaction sent as one message. The providers in id order, as an application locking several
 * rows would: two such transactions taking the same providers in opposite orders deadlocked, and
 * PostgreSQL rolled one back.
 */
function multiRowTransaction(client: pg.PoolClient, org: Org): { text: string; added: string } {
  const literal = (value: string) => client.escapeLiteral(value)
  const renamed = [pick(org.providers), pick(org.providers), pick(org.providers)].sort()
  const identifier = newIdentifier(org)
  const removed = IDENTIFIER_MIX === 'steady' ? takeIdentifier(org) : undefined
  const text = [
    'begin',
    ...renamed.map(
      (id) =>
        `update providers set last_name = ${literal(`M${randomUUID().slice(0, 8)}`)} where id = ${literal(id)}`,
    ),
    WRITES.addIdentifier.replace(/\$(\d)/g, (_, n: string) =>
      literal(identifier.values[Number(n) - 1]!),
    ),
    ...(removed === undefined
      ? []
      : [`delete from provider_identifiers where id = ${literal(removed)}`]),
    'commit',
  ].join(';\n')
  return { text, added: identifier.id }
}

/** One transaction of the product's write mix, on a pooled connection. */
async function writeOne(pool: pg.Pool, orgs: Org[]): Promise<void> {
  const org = pick(orgs)
  const roll = Math.random()
  const client = await pool.connect()
  try {
    if (roll < 0.45) {
      await client.query(prepared('rename', [pick(org.providers), `L${randomUUID().slice(0, 8)}`]))
    } else if (roll < 0.6) {
      const { text, added } = multiRowTransaction(client, org)
      await client.query(text)
      org.identifiers.push(added)
    } else if (roll < 0.77) {
      // Growing: added in 12 of these 17 rolls, removed in 5. Steady: removed while above the
      // organization's steady count, added otherwise.
      const remove =
        IDENTIFIER_MIX === 'steady'
          ? org.identifiers.length > org.providers.length * IDENTIFIERS_PER_PROVIDER
          : roll >= 0.72
      const removed = remove ? takeIdentifier(org) : undefined
      if (removed !== undefined) await client.query(prepared('removeIdentifier', [removed]))
      else if (!remove) {
        const identifier = newIdentifier(org)
        await client.query(prepared('addIdentifier', identifier.values))
        org.identifiers.push(identifier.id)
      }
    } else if (roll < 0.87) {
      await client.query(prepared('moveMembership', [pick(org.memberships), pick(org.groups)]))
    } else if (roll < 0.95) {
      await client.query(
        prepared('enrollmentStatus', [
          pick(org.enrollments),
          pick(['in_progress', 'submitted', 'approved', 'denied']),
        ]),
      )
    } else {
      await client.query(
        prepared('addDocument', [
          randomUUID(),
          org.id,
          pick(org.providers),
          `s3://bench/${randomUUID()}`,
        ]),
      )
    }
  } catch (error) {
    await client.query('rollback').catch(() => undefined)
    throw error
  } finally {
    client.release()
  }
}

/** `drive`, with each part of the pipeline's share of one core meanwhile (machine-cpu.ts). */
async function driveMeasured(
  pool: pg.Pool,
  orgs: Org[],
  rate: number,
  until: number,
): Promise<{ tps: number; cpu: Array<[string, number]> }> {
  const before = cpuSnapshot(pipelineRole)
  const tps = await drive(pool, orgs, rate, until)
  return { tps, cpu: cpuShares(before, cpuSnapshot(pipelineRole), availableParallelism()) }
}

/** Commits the mix at `rate` transactions/s (Infinity: as fast as the pool) until `until`. */
async function drive(pool: pg.Pool, orgs: Org[], rate: number, until: number): Promise<number> {
  let issued = 0
  let committed = 0
  let inFlight = 0
  const started = performance.now()
  const failures: unknown[] = []
  while (Date.now() < until) {
    const due =
      rate === Infinity
        ? issued + WRITERS - inFlight
        : Math.floor(((performance.now() - started) / 1000) * rate)
    while (issued < due && inFlight < WRITERS * 4) {
      issued++
      inFlight++
      writeOne(pool, orgs).then(
        () => {
          committed++
          inFlight--
        },
        (error: unknown) => {
          failures.push(error)
          inFlight--
        },
      )
    }
    await sleep(rate === Infinity ? 1 : 5)
  }
  while (inFlight > 0) await sleep(5)
  if (failures.length > 0) {
    process.stderr.write(
      `bench:freshness: ${failures.length} transactions failed: ${String(failures[0])}\n`,
    )
  }
  return committed / ((performance.now() - started) / 1000)
}

async function main(): Promise<void> {
  const t0 = Date.now()
  const orgs: Org[] = []
  let probeOrg: Org | undefined
  let quiet: Org | undefined
  process.stderr.write(
    'starting PostgreSQL, Kafka, Connect with Debezium, the projector and the api...\n',
  )
  const pipeline = await Pipeline.start({
    jvmCompilation: 'steady',
    beforeConnector: async (sql) => {
      for (let i = 0; i < ORGANIZATIONS; i++)
        orgs.push(await seed(sql, `Bench Org ${i}`, PROVIDERS))
      probeOrg = await seed(sql, 'Probe Org', 8)
      quiet = await seed(sql, 'Quiet Org', 2)
    },
  })
  const api = pipeline.api.baseUrl
  const pool = new pg.Pool({ connectionString: pipeline.postgres.url, max: WRITERS + 2 })
  const kafka = new Kafka({
    clientId: 'bench-freshness',
    brokers: pipeline.kafka.brokers,
    logLevel: logLevel.NOTHING,
  })
  const admin = kafka.admin()
  const consumer = kafka.consumer({
    groupId: `bench-freshness-${randomUUID()}`,
    maxWaitTimeInMs: 100,
  })
  try {
    await pipeline.caughtUp(pipeline.projector!)
    const settings = await pool.query<{ name: string; setting: string }>(
      `select name, setting from pg_settings where name in ('synchronous_commit', 'fsync', 'wal_level')`,
    )
    process.stderr.write(
      `PostgreSQL: ${settings.rows.map((r) => `${r.name}=${r.setting}`).join(', ')} (fsync off on these disposable machines; commits synchronous as in production)\n`,
    )

    // Kafka append times of the probes: the record's timestamp, by marker. Read between steps,
    // not during them: decoding every provider change on the bench's thread took a tenth of a core
    // from the pipeline at 2,000 transactions/s (2026-11-29).
    const providersTopic = `${TOPIC_PREFIX}.public.providers`
    const appended = new Map<string, number>()
    await admin.connect()
    const lag = () => consumerLagBy(admin, pipeline.projector!.groupId)
    await consumer.connect()
    await consumer.subscribe({ topics: [providersTopic], fromBeginning: false })
    await consumer.run({
      eachMessage: async ({ message }) => {
        const text = message.value?.toString('utf8') ?? ''
        const marker = /"last_name":"(probe-[0-9a-f-]+)"/.exec(text)?.[1]
        if (marker !== undefined) appended.set(marker, Number(message.timestamp))
      },
    })

    const drained = () =>
      pipeline.eventually(
        'the projector to drain',
        async () => ((await lag()) === 0 ? true : undefined),
        { timeoutMs: 300_000, intervalMs: 500 },
      )
    if (WARM_UP_SECONDS > 0) {
      process.stderr.write(
        `warm-up: ${WARM_UP_RATE} transactions/s for ${WARM_UP_SECONDS} s, not measured...\n`,
      )
      const until = Date.now() + WARM_UP_SECONDS * 1000
      const { tps, cpu } = await driveMeasured(pool, orgs, WARM_UP_RATE, until)
      process.stderr.write(
        `  committed ${Math.round(tps)} transactions/s; CPU, share of one core: ${formatShares(cpu, availableParallelism())}\n`,
      )
      await drained()
    }

    // A quiet organization's stated lag, all run long.
    let quietStalenessMs = 0
    let quietUnknown = 0
    let quietDuringStep: number[] = []
    let watching = true
    const watcher = (async () => {
      while (watching) {
        const r = await fetch(`${api}/providers/${quiet!.providers[0]}`, {
          headers: { authorization: `Bearer ${quiet!.key}` },
        }).catch(() => undefined)
        const lag = r?.headers.get('replica-lag-ms')
        await r?.arrayBuffer()
        if (lag === 'unknown' || lag === undefined || lag === null) quietUnknown++
        else {
          quietStalenessMs = Math.max(quietStalenessMs, Number(lag))
          quietDuringStep.push(Number(lag))
        }
        await sleep(500)
      }
    })()

    const results: StepResult[] = []
    for (const rate of RATES) {
      const label = rate === Infinity ? 'max' : String(rate)
      process.stderr.write(`step ${label} transactions/s for ${STEP_SECONDS} s...\n`)
      const until = Date.now() + STEP_SECONDS * 1000
      const groupsBefore = await groupFigures(pipeline)
      quietDuringStep = []
      const lags: number[] = []
      const lagSampler = (async () => {
        while (Date.now() < until) {
          lags.push(await lag().catch(() => NaN))
          await sleep(1_000)
        }
      })()
      const probed: Probed[] = []
      consumer.pause([{ topic: providersTopic }])
      const prober = (async () => {
        await sleep(2_000)
        const inFlight = new Set<Promise<void>>()
        while (Date.now() < until - 1_000) {
          if (inFlight.size < 2) {
            const p: Promise<void> = probe(pool, api, probeOrg!).then(
              (s) => {
                if (s !== undefined) probed.push(s)
              },
              (error: unknown) => {
                process.stderr.write(`probe failed: ${String(error)}\n`)
              },
            )
            inFlight.add(p)
            void p.finally(() => inFlight.delete(p))
          }
          await sleep(PROBE_MS)
        }
        await Promise.all(inFlight)
      })()
      const { tps, cpu } = await driveMeasured(pool, orgs, rate, until)
      const groups = groupsBetween(groupsBefore, await groupFigures(pipeline))
      await Promise.all([lagSampler, prober])
      consumer.resume([{ topic: providersTopic }])
      const samples = await hops(probed, appended)
      results.push({ rate, tps, samples, lags, quietMs: [...quietDuringStep], cpu, groups })
      report(label, results.at(-1)!)
      // Let the pipeline drain before the next step.
      await drained()
    }
    watching = false
    await watcher
    // One response's headers, as a client sees them.
    const sample = await fetch(`${api}/providers/${orgs[0]!.providers[0]}`, {
      headers: { authorization: `Bearer ${orgs[0]!.key}` },
    })
    await sample.arrayBuffer()
    process.stderr.write(
      `\none response: HTTP ${sample.status}\n${[...sample.headers]
        .filter(([name]) => name !== 'date' && name !== 'connection' && name !== 'keep-alive')
        .map(([name, value]) => `${name}: ${value}`)
        .join('\n')}\n`,
    )

    const at = (r: number) => results.find((x) => x.rate === r)
    const detail = (s: StepResult | undefined) =>
      (s?.samples ?? []).map((x) => x.detailMs).sort((a, b) => a - b)
    const at500 = detail(at(500))
    const at2000 = detail(at(2000))
    const maxStep = at(Infinity)
    const highest = [...results].sort((a, b) => b.tps - a.tps)[0]
    const keptUp = highest === undefined ? false : lagBounded(highest.lags)
    const json = {
      p50Ms: round(percentile(at500, 50)),
      p99Ms: round(percentile(at500, 99)),
      p99MsAt2000: round(percentile(at2000, 99)),
      quietStalenessMs: quietStalenessMs,
      maxTps: maxStep === undefined ? null : Math.round(maxStep.tps),
      projectorKeptUp: keptUp,
    }
    process.stderr.write(
      `\nquiet organization: largest Replica-Lag-Ms ${quietStalenessMs} (${quietUnknown} answers said unknown)\n` +
        `targets: p99 <= 100 ms at 500/s: ${json.p99Ms} ${json.p99Ms <= 100 ? 'met' : 'NOT met'}; ` +
        `p99 <= 250 ms at 2000/s: ${json.p99MsAt2000} ${json.p99MsAt2000 <= 250 ? 'met' : 'NOT met'}` +
        `${(at(2000)?.tps ?? 0) < 1900 ? ` (2000/s not reached: ${Math.round(at(2000)?.tps ?? 0)}/s committed)` : ''}; ` +
        `quiet staleness <= 2000 ms: ${quietStalenessMs <= 2000 ? 'met' : 'NOT met'}; projector kept up at ${Math.round(highest?.tps ?? 0)}/s: ${keptUp}\n` +
        `(${Math.round((Date.now() - t0) / 1000)} s in all; machine load average at the end ` +
        `${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} on ` +
        `${availableParallelism()} cores)\n`,
    )
    process.stdout.write(`${JSON.stringify(json)}\n`)
  } finally {
    await consumer.disconnect().catch(() => undefined)
    await admin.disconnect().catch(() => undefined)
    await pool.end().catch(() => undefined)
    await pipeline.stop()
  }
}

/** One probe: a rename of a provider of its own, timed until the api serves it both ways. */
async function probe(pool: pg.Pool, api: string, org: Org): Promise<Probed | undefined> {
  const id = pick(org.providers)
  const marker = `probe-${randomUUID()}`
  await pool.query(`update providers set last_name = $2 where id = $1`, [id, marker])
  const committedAt = Date.now()
  const committed = performance.now()
  const headers = { authorization: `Bearer ${org.key}` }
  const deadline = committed + 60_000
  let servedAt: number | undefined
  let stamp: number | undefined
  const detail = (async () => {
    while (performance.now() < deadline) {
      const r = await fetch(`${api}/providers/${id}`, { headers })
      const body = (await r.json()) as { data?: { lastName: string; updatedAt: string } }
      if (body.data?.lastName === marker) {
        servedAt = Date.now()
        stamp = Date.parse(body.data.updatedAt)
        return performance.now() - committed
      }
      await sleep(POLL_MS)
    }
    return undefined
  })()
  const list = (async () => {
    const since = new Date(committedAt - OVERLAP_MS).toISOString()
    while (performance.now() < deadline) {
      let cursor: string | null = null
      do {
        const url: string = `${api}/providers?limit=200&updated_since=${encodeURIComponent(since)}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`
        const r = await fetch(url, { headers })
        const text = await r.text()
        if (text.includes(marker)) return performance.now() - committed
        // The envelope ends with nextCursor: read it without parsing the page.
        cursor = /"nextCursor":(?:"([^"]*)"|null)\}$/.exec(text)?.[1] ?? null
      } while (cursor !== null)
      await sleep(LIST_POLL_MS)
    }
    return undefined
  })()
  const [detailMs, listMs] = await Promise.all([detail, list])
  if (detailMs === undefined) return undefined
  return { marker, committedAt, detailMs, listMs, stamp, servedAt }
}

/**
 * The step's probes split into hops, once the bench's consumer has read their Kafka records
 * (resumed after the step: it waits for them, 30 s at most; a probe whose record it did not see
 * has no Kafka hop).
 */
async function hops(probed: Probed[], appended: Map<string, number>): Promise<Sample[]> {
  const deadline = Date.now() + 30_000
  while (probed.some((p) => !appended.has(p.marker)) && Date.now() < deadline) await sleep(50)
  return probed.map(({ marker, committedAt, detailMs, listMs, stamp, servedAt }) => {
    const kafkaAt = appended.get(marker)
    appended.delete(marker)
    return {
      detailMs,
      listMs,
      kafkaMs: kafkaAt === undefined ? undefined : kafkaAt - committedAt,
      projectorMs: kafkaAt === undefined || stamp === undefined ? undefined : stamp - kafkaAt,
      servedMs: stamp === undefined || servedAt === undefined ? undefined : servedAt - stamp,
    }
  })
}

/** Whether the lag stayed bounded: its last third no higher than its first third plus a margin. */
function lagBounded(lags: number[]): boolean {
  const known = lags.filter((l) => Number.isFinite(l))
  if (known.length < 3) return known.every((l) => l < 1_000)
  const third = Math.floor(known.length / 3)
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length
  return mean(known.slice(-third)) <= mean(known.slice(0, third)) * 1.5 + 100
}

function round(n: number): number {
  return Number.isFinite(n) ? Math.round(n * 10) / 10 : Number.NaN
}

function stats(values: (number | undefined)[]): string {
  const v = values.filter((x): x is number => x !== undefined).sort((a, b) => a - b)
  if (v.length === 0) return 'n/a'
  return `${round(percentile(v, 50))} / ${round(percentile(v, 90))} / ${round(percentile(v, 99))} / ${round(v.at(-1)!)}`
}

function report(label: string, r: StepResult): void {
  const lags = r.lags.filter((l) => Number.isFinite(l))
  process.stderr.write(
    [
      `  ${label}/s: committed ${Math.round(r.tps)} transactions/s, ${r.samples.length} samples (load average ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]})`,
      `    commit to served, detail GET      p50/p90/p99/max ms: ${stats(r.samples.map((s) => s.detailMs))}`,
      `    commit to served, updated_since   p50/p90/p99/max ms: ${stats(r.samples.map((s) => s.listMs))}`,
      `    hop commit -> Kafka append        p50/p90/p99/max ms: ${stats(r.samples.map((s) => s.kafkaMs))}`,
      `    hop Kafka -> projector commit     p50/p90/p99/max ms: ${stats(r.samples.map((s) => s.projectorMs))}`,
      `    hop projector commit -> served    p50/p90/p99/max ms: ${stats(r.samples.map((s) => s.servedMs))}`,
      `    projector groups: ${formatGroups(r.groups)}`,
      `    consumer lag (records): max ${lags.length === 0 ? 'n/a' : Math.max(...lags)}, samples ${lags.join(' ')}`,
      `    quiet organization's Replica-Lag-Ms   p50/p90/p99/max ms: ${stats(r.quietMs)}`,
      `    CPU, share of one core: ${formatShares(r.cpu, availableParallelism())}`,
      '',
    ].join('\n'),
  )
}

/**
 * A step's groups: their rate, mean size, and the mean time from a group's first delivery by
 * kafkajs to its files committed (the projector's batch_apply_seconds: it counts the wait behind
 * the group before).
 */
function formatGroups(g: GroupFigures): string {
  if (g.groups === 0) return 'none'
  const perSecond = Math.round(g.groups / STEP_SECONDS)
  const size = Math.round(g.events / g.groups)
  const ms = ((g.applySeconds * 1000) / g.groups).toFixed(1)
  return `${perSecond}/s, ${size} events each, ${ms} ms each from delivered to committed`
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:freshness: ${(error as Error).stack ?? String(error)}\n`)
  process.exitCode = 1
})
