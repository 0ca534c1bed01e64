// `npm run verify`: the replica checked against PostgreSQL, the source of truth.
//
//   1. one snapshot of the product database (REPEATABLE READ READ ONLY), and where the replica
//      stood at that moment (lag.ts);
//   2. every organization's documents built from it by the projector's own code, aside in
//      DATA_DIR/verify/<run>/ (build.ts);
//   3. a wait, bounded, until the live replica has applied everything before the snapshot;
//   4. each organization's built documents compared with the live file by served content
//      (documents/compare.ts), and control.db's organizations and API keys row by row
//      (control.ts); an organization whose file (or control.db) applied changes made after the
//      snapshot is checked again with a new snapshot (up to three passes), since its differences
//      may be those changes;
//   5. with --repair, the drifted organizations rebuilt from the topics (the per-organization
//      rebuild, in this process), control.db's organizations and API keys replaced with what
//      their topics hold (repair.ts), both through the live projector, and checked again.
//
// The live replica is only read, except by --repair's rebuild, whose hand-over leaves the live
// file serving and unchanged if it is killed at any point. A run killed here leaves only its
// scratch folder, which the next run removes.
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, rmSync, statfsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import type { Logger } from 'pino'
import type { VerifyConfig } from '../../src/config.ts'
import {
  currentGeneration,
  databaseFileOf,
  parseFileName,
  type Generation,
} from '../../src/layout.ts'
import { fileKeyOf } from '../../src/organization-files.ts'
import { readSharedFiles } from '../storage/control-file.ts'
import { documentDifferences, IDS_PER_LIST } from '../documents/index.ts'
import { processAlive } from '../rebuild/lock.ts'
import {
  knownOrganizations,
  liveOrganizationPaths,
  organizationsWithRows,
  rebuildAside,
  removeRebuildLeftovers,
} from '../rebuild/run.ts'
import { buildExpected, type RefusedRow } from './build.ts'
import { compareControlFiles, type ControlTableDiff } from './control.ts'
import { eventsBehindNow, openKafkaView, pastEnds, waitForReplica, type KafkaView } from './lag.ts'
import {
  hasDrift,
  type ControlVerdict,
  type LagReport,
  type OrganizationVerdict,
  type VerifyReport,
} from './report.ts'
import { repairControl } from './repair.ts'
import { repairFromSource, type SourceScope } from './source-repair.ts'
import { classify, sample, settleAgain, type Classified } from './settle.ts'
import { openProductDatabase, VerifyRefused } from './source.ts'

/**
 * Passes at most: the first, then re-checks of documents that changed after the snapshot. Each
 * re-check reads only the organizations with such documents, and a document settles unless it
 * changed again within the pass (settle.ts), so a few more passes cost little and let busy
 * organizations settle.
 */
const MAX_PASSES = 5

/**
 * How far the replica's clock may be behind PostgreSQL's: a document stamped this close before
 * the snapshot may have been changed after it (stamps are the projector's clock, the snapshot's
 * instant PostgreSQL's). Keep the two in sync, as Debezium's heartbeat evidence needs too.
 */
const CLOCK_MARGIN_MS = 1_000

export interface VerifyDeps {
  config: VerifyConfig
  logger: Logger
  progress?: { setTotal(total: number): void; add(n: number): void }
  signal?: AbortSignal
  idsPerList?: number
}

export interface VerifyOptions {
  /** Only these organizations; absent: every one, in PostgreSQL or in the replica. */
  organizations?: readonly string[]
  repair: boolean
}

export async function verifyReplica(
  deps: VerifyDeps,
  options: VerifyOptions,
): Promise<VerifyReport> {
  const { config } = deps
  const live = currentGeneration(config.projector.dataDir)
  if (live === undefined || !existsSync(live.controlPath)) {
    throw new VerifyRefused(
      `${config.projector.dataDir} holds no replica to verify (no CURRENT generation)`,
    )
  }
  // Checked before anything is taken or touched (--repair's rebuild lock included): PostgreSQL
  // answers with the grants, and every organization asked for is known to one side or the other.
  await checkSource(config, live, options.organizations)
  const groupId = consumerGroup(live) ?? config.projector.kafka.groupId
  const kafka = await openKafkaView({
    brokers: config.projector.kafka.brokers,
    clientId: config.projector.kafka.clientId,
    topicPrefix: config.projector.topicPrefix,
  })
  try {
    const verifyDir = join(config.projector.dataDir, 'verify')
    removeLeftovers(verifyDir, deps.logger)
    // A killed --repair may have left a rebuild's scratch folder, and this run may rebuild
    // nothing (a killed run's rebuild can have been handed over): cleared here either way.
    if (options.repair) removeRebuildLeftovers(config.projector.dataDir, deps.logger, new Date())
    checkDiskSpace(config.projector.dataDir, live, options.organizations)
    const context = { deps, live, kafka, groupId, verifyDir }
    const report = await checkOrganizations(context, options.organizations, options.organizations)
    if (!options.repair || !report.drift) return report
    const drifted = report.organizations
      .filter((o) => o.status === 'drifted')
      .map((o) => o.organizationId)
    const signal = deps.signal === undefined ? {} : { signal: deps.signal }
    if (drifted.length > 0) {
      deps.logger.info(
        { organizations: drifted },
        'repairing: rebuilding the drifted organizations',
      )
      await rebuildAside(
        { config: config.projector, logger: deps.logger, ...signal },
        { organizations: drifted, dryRun: false },
      )
    }
    const control = report.control.status === 'drifted'
    if (control) {
      deps.logger.info("repairing: control.db's organizations and API keys from their topics")
      await repairControl(
        { config: config.projector, logger: deps.logger, live, ...signal },
        options.organizations,
      )
    }
    const after = await checkOrganizations(context, drifted, options.organizations)
    const repaired = { ...report, repair: { rebuilt: drifted, control, after } }
    const scope = sourceScope(after, options.organizations)
    if (scope === undefined) return repaired
    // Drift a replay of the topics did not mend: the topics never had it. From the source.
    deps.logger.info(
      { organizations: scope.organizations },
      'drift left after the replay: repairing from the source',
    )
    const source = await repairFromSource({ config, logger: deps.logger, live, ...signal }, scope)
    const check = scope.controlTablesWhole ? undefined : scope.organizations
    const afterSource = await checkOrganizations(context, check, options.organizations)
    return {
      ...report,
      repair: { rebuilt: drifted, control, after, source: { ...source, after: afterSource } },
    }
  } finally {
    await kafka.close()
  }
}

/**
 * What is left to re-read from PostgreSQL after the replay: the organizations still drifted, and
 * control.db's rows if they still differ (of the organizations checked; all of them when verify
 * checked all). None when nothing drifted. Pure.
 */
export function sourceScope(
  after: VerifyReport,
  organizations: readonly string[] | undefined,
): SourceScope | undefined {
  const drifted = after.organizations
    .filter((o) => o.status === 'drifted')
    .map((o) => o.organizationId)
  const control = after.control.status === 'drifted'
  const ids = new Set(drifted)
  if (control && organizations !== undefined) for (const id of organizations) ids.add(id)
  const controlTablesWhole = control && organizations === undefined
  if (ids.size === 0 && !controlTablesWhole) return undefined
  return { organizations: [...ids].sort(), controlTablesWhole }
}

/**
 * Refuses (one line, exit 2) when PostgreSQL cannot be read, or when an organization asked for is
 * neither in PostgreSQL nor in the replica: a typo must not pass as "no drift".
 */
async function checkSource(
  config: VerifyConfig,
  live: Generation,
  organizations: readonly string[] | undefined,
): Promise<void> {
  const database = await openProductDatabase(config.databaseUrl, { pageRows: config.pageRows })
  try {
    if (organizations === undefined) return
    const inSource = await database.organizationsIn(organizations)
    const inReplica = knownOrganizations(live)
    const unknown = organizations.filter((id) => !inSource.has(id) && !inReplica.has(id))
    if (unknown.length > 0) {
      throw new VerifyRefused(
        `unknown organization${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}: neither in PostgreSQL nor in the replica`,
      )
    }
  } finally {
    await database.close()
  }
}

interface Context {
  deps: VerifyDeps
  live: Generation
  kafka: KafkaView
  groupId: string
  verifyDir: string
}

/**
 * Checks the documents of `organizations` (absent: all) and control.db's rows of `scope`'s
 * organizations (absent: all), in passes until no document that differs changed after the
 * snapshot (settle.ts).
 */
async function checkOrganizations(
  context: Context,
  organizations: readonly string[] | undefined,
  scope: readonly string[] | undefined,
): Promise<VerifyReport> {
  const started = performance.now()
  const settled = new Map<string, Classified[]>()
  let pending = organizations
  let control: ControlVerdict | undefined
  let lag: LagReport | undefined
  let rowsRead = 0
  // By table and id: a row re-read by a later pass is one row.
  const refused = new Map<string, RefusedRow>()
  let passes = 0
  for (; passes < MAX_PASSES;) {
    passes++
    const pass = await checkPass(context, pending, scope)
    lag ??= pass.lag
    rowsRead += pass.rowsRead
    for (const row of pass.refused) refused.set(`${row.table}\u0000${row.id}`, row)
    const recheck: string[] = []
    for (const [organizationId, resources] of pass.organizations) {
      const before = settled.get(organizationId)
      const now =
        before === undefined ? resources : before.map((b, i) => settleAgain(b, resources[i]!))
      settled.set(organizationId, now)
      if (now.some((r) => r.changing.length > 0)) recheck.push(organizationId)
    }
    // control.db's rows are few: read again on every pass, taken until they settle.
    let recheckControl = false
    if (control === undefined || control.status === 'unsettled') {
      const drifted = hasDrift(pass.control)
      recheckControl = drifted && pass.controlAhead
      control = {
        status: recheckControl ? 'unsettled' : drifted ? 'drifted' : 'equal',
        tables: pass.control,
      }
    }
    if (recheck.length === 0 && !recheckControl) break
    context.deps.logger.info(
      { organizations: recheck, controlDb: recheckControl },
      'changed after the snapshot: checking again',
    )
    pending = recheck
  }
  const limit = context.deps.idsPerList ?? IDS_PER_LIST
  const verdicts = [...settled]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([organizationId, classified]): OrganizationVerdict => {
      const resources = classified.map((c) => ({
        resource: c.resource,
        equal: c.equal,
        differing: sample(c.differing, limit),
        missing: sample(c.missing, limit),
        extra: sample(c.extra, limit),
        changing: sample(
          c.changing.map((d) => d.id),
          limit,
        ),
      }))
      const status = hasDrift(resources)
        ? 'drifted'
        : resources.some((r) => r.changing.count > 0)
          ? 'unsettled'
          : 'equal'
      return { organizationId, status, resources }
    })
  return {
    drift: verdicts.some((v) => v.status === 'drifted') || control!.status === 'drifted',
    unsettled: verdicts.filter((v) => v.status === 'unsettled').map((v) => v.organizationId),
    rowsRead,
    refused: [...refused.values()].sort(
      (x, y) =>
        x.organizationId.localeCompare(y.organizationId) ||
        x.table.localeCompare(y.table) ||
        x.id.localeCompare(y.id),
    ),
    passes,
    seconds: Math.round((performance.now() - started) / 100) / 10,
    lag: lag!,
    organizations: verdicts,
    control: control!,
  }
}

interface Pass {
  /** Each organization's documents, resource by resource, as this pass sorted them. */
  organizations: Map<string, Classified[]>
  control: ControlTableDiff[]
  /** Whether the live control.db applied a change Kafka received after the snapshot began. */
  controlAhead: boolean
  lag: LagReport
  rowsRead: number
  refused: RefusedRow[]
}

async function checkPass(
  context: Context,
  organizations: readonly string[] | undefined,
  scope: readonly string[] | undefined,
): Promise<Pass> {
  const { deps, live, kafka, groupId } = context
  const { config, logger } = deps
  // The topics' ends before the snapshot: every event below them was committed before it, so a
  // file that applied nothing at or past them is exactly as of the snapshot. (The ends read once
  // Debezium has caught up hold changes made after the snapshot too: a file that applied those
  // was taken for one as of the snapshot, and their documents reported as drift.)
  const before = await kafka.ends()
  const database = await openProductDatabase(config.databaseUrl, { pageRows: config.pageRows })
  const dir = join(context.verifyDir, `${runName()}-${process.pid}`)
  try {
    const eventsBehind = await eventsBehindNow(kafka, groupId)
    const estimate = await database.estimatedRows()
    if (estimate !== undefined && organizations === undefined) deps.progress?.setTotal(estimate)
    mkdirSync(dir, { recursive: true })
    const expected = await buildExpected({
      config: config.projector,
      logger,
      database,
      dir,
      ...(organizations === undefined ? {} : { organizations }),
      ...(scope === undefined ? {} : { controlScope: scope }),
      ...(deps.progress === undefined ? {} : { onRows: (n: number) => deps.progress!.add(n) }),
      ...(deps.signal === undefined ? {} : { signal: deps.signal }),
    })
    const caught = await waitForReplica(database, kafka, {
      groupId,
      slotName: config.slotName,
      heartbeatTopic: config.heartbeatTopic,
      timeoutMs: config.catchUpTimeoutMs,
      ...(deps.signal === undefined ? {} : { signal: deps.signal }),
    })
    const livePath = liveOrganizationPaths(live)
    const builtIds = new Set(expected.organizations)
    const ids = organizations ?? [
      ...new Set([...expected.organizations, ...organizationsWithRows(live)]),
    ]
    const changedSince = new Date(database.snapshot.at.getTime() - CLOCK_MARGIN_MS).toISOString()
    const classified = new Map<string, Classified[]>()
    for (const organizationId of [...ids].sort()) {
      const built = builtIds.has(organizationId)
        ? expected.generation.organizationPath(organizationId)
        : undefined
      // The live file's documents and applied offsets, read in one transaction.
      const found = documentDifferences(built, livePath(organizationId), organizationId)
      const ahead = pastEnds(found.appliedOffsets, before)
      classified.set(
        organizationId,
        found.resources.map((diff) => classify(diff, changedSince, ahead)),
      )
    }
    const control = compareControlFiles(expected.generation.controlPath, live.controlPath, {
      ...(deps.idsPerList === undefined ? {} : { idsPerList: deps.idsPerList }),
      ...(scope === undefined ? {} : { organizations: scope }),
    })
    return {
      organizations: classified,
      control: control.tables,
      controlAhead: pastEnds(control.appliedOffsets, before),
      lag: {
        snapshotLsn: database.snapshot.lsn,
        snapshotAt: database.snapshot.at.toISOString(),
        eventsBehind,
        waitedSeconds: Math.round(caught.waitedSeconds * 10) / 10,
        debezium: caught.debezium,
      },
      rowsRead: expected.rows,
      refused: expected.refused,
    }
  } finally {
    await database.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

function consumerGroup(live: Generation): string | undefined {
  const db = new Database(live.controlPath, { readonly: true, fileMustExist: true })
  try {
    return db
      .prepare(`SELECT value FROM replica_state WHERE key = 'consumer_group'`)
      .pluck()
      .get() as string | undefined
  } finally {
    db.close()
  }
}

/**
 * Refuses to start without room for the files built from PostgreSQL: about the size of the live
 * files checked, twice over (the file and its WAL before a checkpoint), and 64 MB.
 */
function checkDiskSpace(
  dataDir: string,
  live: Generation,
  organizations: readonly string[] | undefined,
): void {
  const sharedFiles = readSharedFiles(live.controlPath)
  // A shared file counts whole for any organization of it asked for: an upper bound.
  const wanted =
    organizations === undefined
      ? undefined
      : new Set(organizations.map((id) => fileKeyOf(id, sharedFiles)))
  let bytes = 0
  for (const name of readdirSync(live.organizationsDir)) {
    const parsed = parseFileName(databaseFileOf(name))
    if (parsed === undefined || (wanted !== undefined && !wanted.has(parsed.fileKey))) continue
    bytes += statSync(join(live.organizationsDir, name)).size
  }
  const needed = bytes * 2 + 64 * 1024 * 1024
  const fs = statfsSync(dataDir)
  const free = fs.bavail * fs.bsize
  if (free < needed) {
    const mb = (n: number) => Math.ceil(n / (1024 * 1024))
    throw new VerifyRefused(
      `not enough disk space in ${dataDir}: verify needs ${mb(needed)} MB free to build the documents from PostgreSQL, there are ${mb(free)} MB`,
    )
  }
}

function runName(): string {
  return `${new Date().toISOString().replace(/[-:.TZ]/g, '')}-${randomBytes(3).toString('hex')}`
}

/** Scratch folders of runs whose process is gone (killed): `<time>-<random>-<pid>`. */
function removeLeftovers(verifyDir: string, logger: Logger): void {
  if (!existsSync(verifyDir)) return
  for (const name of readdirSync(verifyDir)) {
    const pid = Number(/-(\d+)$/.exec(name)?.[1])
    if (Number.isInteger(pid) && pid !== process.pid && processAlive(pid)) continue
    rmSync(join(verifyDir, name), { recursive: true, force: true })
    logger.info({ run: name }, 'removed what an earlier verify left behind')
  }
}
