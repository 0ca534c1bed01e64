// Every stage of the projector's write path on one thread, timed: what `npm run
// bench:projector:stages` measures. Reading and parsing the file (sources/, decode/), decoding and
// validating (classify.ts), routing each row in the routing index (route-file.ts), writing the mirror
// rows into the organization files (organization-file.ts) and building their documents once at
// the end, with transactions held as in an initial load. No lanes and no coordination: the sum
// is the time one event takes one thread, and the process's CPU over the run adds what V8's
// collector threads and the kernel spent beside it.
import { join } from 'node:path'
import { cacheShares } from '../projector/storage/cache-budget.ts'
import { classifyRecord } from '../projector/routing/classify.ts'
import {
  OrganizationCodes,
  openRouteFile,
  RouteBatchBuilder,
  RouteKind,
} from '../projector/storage/route-file.ts'
import {
  openOrganizationFile,
  type OrganizationEvent,
  type OrganizationFile,
} from '../projector/storage/organization-file.ts'
import { FILE_BATCH_RECORDS, LOAD_COMMIT_EVENTS } from '../projector/projector.ts'
import { readRecordBatches } from '../projector/sources/file.ts'
import { loadProjectorConfig } from '../src/config.ts'

/**
 * Events applied to a file at a time in an initial load, as a lane applies them (lane.ts's
 * LOAD_APPLY_EVENTS: lane.ts is a worker's entry point, so it is not imported here).
 */
const APPLY_EVENTS = 500

/** Nanoseconds spent in each stage of the write path, over all the events. */
export interface StageNanos {
  readAndParse: bigint
  decode: bigint
  route: bigint
  write: bigint
  build: bigint
}

/**
 * Runs every stage of the write path over the first `targetEvents` lines of the file at `path`,
 * on this thread, as the projector runs them in an initial load, and times each. Leaves
 * `routes.db` and one `<organization id>.db` per organization, closed, in `dir`.
 */
export async function runWritePath(
  path: string,
  dir: string,
  targetEvents: number,
  topicPrefix: string,
): Promise<{ events: number; nanos: StageNanos; cpuMicros: number }> {
  const routeFile = openRouteFile(join(dir, 'routes.db'))
  const codes = new OrganizationCodes([])
  // The projector's default cache budget, shared as the projector shares it (cache-budget.ts).
  const { sqliteCacheBytes } = loadProjectorConfig({ DATA_DIR: dir })
  const files = new Map<string, OrganizationFile>()
  const fileOf = (organizationId: string) => {
    let file = files.get(organizationId)
    if (file === undefined) {
      file = openOrganizationFile(organizationId, join(dir, `${organizationId}.db`), {
        offsetGuard: false,
        deferDocuments: true,
      })
      files.set(organizationId, file)
      const { organizationKiB } = cacheShares(sqliteCacheBytes, files.size)
      for (const each of files.values()) each.setCacheKiB(organizationKiB)
      file.begin()
    }
    return file
  }
  routeFile.setCacheKiB(cacheShares(sqliteCacheBytes, 1).routesKiB)
  const nanos: StageNanos = { readAndParse: 0n, decode: 0n, route: 0n, write: 0n, build: 0n }
  // The process's CPU, every thread's: V8's collector runs partly on threads of its own, beside
  // the stages' wall time.
  const cpu = process.cpuUsage()
  const appliedAt = new Date()
  const ignore = () => {}
  let events = 0
  let uncommitted = 0
  const commitAll = () => {
    for (const file of files.values()) {
      file.commit()
      file.begin()
    }
    routeFile.commit()
  }
  try {
    const batches = readRecordBatches(path, FILE_BATCH_RECORDS)
    for (;;) {
      let started = process.hrtime.bigint()
      const next = await batches.next()
      let clock = process.hrtime.bigint()
      nanos.readAndParse += clock - started
      if (next.done === true) break
      const records = next.value

      started = clock
      const decoded: OrganizationEvent[] = []
      for (const record of records) {
        const classified = classifyRecord(record, topicPrefix)
        if (classified.kind === 'organization') decoded.push(classified.event)
      }
      clock = process.hrtime.bigint()
      nanos.decode += clock - started

      started = clock
      const routed: Array<[string, OrganizationEvent]> = []
      routeFile.begin()
      const batch = new RouteBatchBuilder(codes)
      const asked: Array<[number, OrganizationEvent, string | undefined]> = []
      for (const event of decoded) {
        const { change } = event
        if (change.kind === 'upsert') {
          const organizationId = (change.row as { organization_id: string }).organization_id
          asked.push([
            batch.add(change.table, change.id, RouteKind.Route, organizationId),
            event,
            organizationId,
          ])
        } else if (change.kind === 'delete') {
          asked.push([batch.add(change.table, change.id, RouteKind.Lookup), event, undefined])
        }
      }
      const routes = batch.build()
      const found = routeFile.resolve(routes)
      codes.recorded(routes)
      for (const [route, event, organizationId] of asked) {
        const code = found[route]!
        const to = organizationId ?? (code > 0 ? codes.idOf(code) : undefined)
        if (to !== undefined) routed.push([to, event])
      }
      clock = process.hrtime.bigint()
      nanos.route += clock - started

      started = clock
      for (let from = 0; from < routed.length; from += APPLY_EVENTS) {
        const byOrganization = new Map<string, OrganizationEvent[]>()
        for (const [organizationId, event] of routed.slice(from, from + APPLY_EVENTS)) {
          let list = byOrganization.get(organizationId)
          if (list === undefined) byOrganization.set(organizationId, (list = []))
          list.push(event)
        }
        for (const [organizationId, list] of byOrganization)
          fileOf(organizationId).apply(list, appliedAt, ignore)
      }
      uncommitted += records.length
      if (uncommitted >= LOAD_COMMIT_EVENTS) {
        commitAll()
        uncommitted = 0
      }
      nanos.write += process.hrtime.bigint() - started
      events += records.length
      if (events >= targetEvents) {
        await batches.return(undefined)
        break
      }
    }
    let started = process.hrtime.bigint()
    for (const file of files.values()) file.commit()
    routeFile.commit()
    nanos.write += process.hrtime.bigint() - started

    started = process.hrtime.bigint()
    for (const file of files.values()) file.buildDocuments(appliedAt)
    nanos.build += process.hrtime.bigint() - started
  } finally {
    for (const file of files.values()) file.close()
    routeFile.close()
  }
  const { user, system } = process.cpuUsage(cpu)
  return { events, nanos, cpuMicros: user + system }
}
