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
  organizationsWithFiles,
  parseOrganizationFileName,
  type Generation,
} from '../../src/layout.ts'
import { readOrganizationFiles } from '../control-file.ts'
import { compareDocumentFiles, comparedResources, type ResourceDiff } from '../documents/index.ts'
import { processAlive } from '../rebuild/lock.ts'
import { knownOrganizations, rebuildAside, removeRebuildLeftovers } from '../rebuild/run.ts'
import { buildExpected, type RefusedRow } from './build.ts'
import { compareControlFiles, type ControlTableDiff } from './control.ts'
import {
  appliedPast,
  openKafkaView,
  eventsBehindNow,
  waitForReplica,
  type KafkaView,
} from './lag.ts'
import {
  hasDrift,
  toVerdict,
  type ControlVerdict,
  type LagReport,
  type OrganizationVerdict,
  type VerifyReport,
} from './report.ts'
import { repairControl } from './repair.ts'
import { openProductDatabase, VerifyRefused } from './source.ts'

/** Passes at most: the first, then re-checks of organizations that changed after the snapshot. */
const MAX_PASSES = 3

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
    return { ...report, repair: { rebuilt: drifted, control, after } }
  } finally {
    await kafka.close()
  }
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
 * organizations (absent: all), in passes until nothing that differs changed after the snapshot.
 */
async function checkOrganizations(
  context: Context,
  organizations: readonly string[] | undefined,
  scope: readonly string[] | undefined,
): Promise<VerifyReport> {
  const started = performance.now()
  const final = new Map<string, OrganizationVerdict>()
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
    for (const verdict of pass.verdicts) {
      if (verdict.status === 'drifted' && pass.ahead.has(verdict.organizationId)) {
        recheck.push(verdict.organizationId)
        final.set(verdict.organizationId, { ...verdict, status: 'unsettled' })
      } else final.set(verdict.organizationId, verdict)
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
  const verdicts = [...final.values()].sort((a, b) =>
    a.organizationId < b.organizationId ? -1 : 1,
  )
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
  verdicts: OrganizationVerdict[]
  /** Organizations whose live file applied a change made after the snapshot. */
  ahead: Set<string>
  control: ControlTableDiff[]
  /** Whether the live control.db applied a change made after the snapshot. */
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
    const liveFiles = readOrganizationFiles(live.controlPath)
    const livePath = (id: string) => {
      const path = live.organizationPath(id, liveFiles.get(id))
      return existsSync(path) ? path : undefined
    }
    const builtIds = new Set(expected.organizations)
    const ids = organizations ?? [
      ...new Set([...expected.organizations, ...organizationsWithFiles(live)]),
    ]
    const verdicts: OrganizationVerdict[] = []
    const ahead = new Set<string>()
    const options = deps.idsPerList === undefined ? {} : { idsPerList: deps.idsPerList }
    for (const organizationId of [...ids].sort()) {
      const actual = livePath(organizationId)
      const built = builtIds.has(organizationId)
        ? expected.generation.organizationPath(organizationId)
        : undefined
      let diffs: ResourceDiff[]
      if (built !== undefined) diffs = compareDocumentFiles(built, actual, options)
      else if (actual !== undefined) diffs = onlyInReplica(actual, options)
      else diffs = comparedResources.map((resource) => emptyDiff(resource))
      const resources = diffs.map(toVerdict)
      if (actual !== undefined && appliedPast(actual, caught.ends)) ahead.add(organizationId)
      verdicts.push({
        organizationId,
        status: hasDrift(resources) ? 'drifted' : 'equal',
        resources,
      })
    }
    return {
      verdicts,
      ahead,
      control: compareControlFiles(expected.generation.controlPath, live.controlPath, {
        ...options,
        ...(scope === undefined ? {} : { organizations: scope }),
      }),
      controlAhead: appliedPast(live.controlPath, caught.ends),
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

/** A live file with no counterpart built from PostgreSQL: every document is extra. */
function onlyInReplica(path: string, options: { idsPerList?: number }): ResourceDiff[] {
  return compareDocumentFiles(path, undefined, options).map((d) => ({
    ...d,
    appeared: { count: 0, ids: [] },
    disappeared: d.appeared,
  }))
}

function emptyDiff(resource: ResourceDiff['resource']): ResourceDiff {
  const none = { count: 0, ids: [] }
  return { resource, equal: 0, changed: none, appeared: none, disappeared: none }
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
  const wanted = organizations === undefined ? undefined : new Set(organizations)
  let bytes = 0
  for (const name of readdirSync(live.organizationsDir)) {
    const parsed = parseOrganizationFileName(databaseFileOf(name))
    if (parsed === undefined || (wanted !== undefined && !wanted.has(parsed.organizationId))) {
      continue
    }
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
