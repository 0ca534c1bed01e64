// The operators' rebuild commands that build aside: a per-organization rebuild (`--rebuild --org`)
// and a dry run (`--rebuild --dry-run`, whole or per organization).
//
// The unit of a swap is a file. In a generation of shared files (ORGANIZATION_FILES) `--org`
// rebuilds the whole shared file of each organization asked for, every organization it holds:
// a file's applied offsets are the file's, so one organization alone could not be replayed into
// it while the others skip (docs/many-organizations.md). Every organization rebuilt is reported.
//
//   1. checks first, touching nothing: a replica to rebuild, the organizations known to it, Kafka
//      reachable, no other rebuild running (a lock naming its holder), the disk space the files
//      built aside need;
//   2. replays every change topic into DATA_DIR/rebuilds/<run>/ (aside.ts), keeping only the
//      organizations asked for;
//   3. compares each rebuilt file with the live one, by served content (documents/compare.ts);
//   4. a dry run stops there; a rebuild hands each file over to the live projector, which swaps
//      it in between two batches (handover.ts), and waits until it has;
//   5. removes what it built aside. A run killed at any point leaves the live files as they were;
//      the next run removes what it left behind.
import Database from 'better-sqlite3'
import { randomBytes } from 'node:crypto'
import {
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  statfsSync,
  statSync,
} from 'node:fs'
import { basename, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kafka, logLevel as kafkaLogLevel } from 'kafkajs'
import type { Logger } from 'pino'
import type { ProjectorConfig } from '../../src/config.ts'
import {
  currentGeneration,
  databaseFileOf,
  isOrganizationId,
  organizationFileName,
  organizationsWithFiles,
  parseFileName,
  type Generation,
} from '../../src/layout.ts'
import { fileKeyOf, sharedFileVersionName } from '../../src/organization-files.ts'
import { readOrganizationFiles, readSharedFiles } from '../storage/control-file.ts'
import { readRoutedOrganizations } from '../storage/route-file.ts'
import { syncDirectory } from '../storage/durable.ts'
import { compareDocumentFiles, type ResourceDiff } from '../documents/index.ts'
import type { OrganizationFilter } from '../lanes/apply.ts'
import { buildAside } from './aside.ts'
import {
  handoverPending,
  replacedFiles,
  requestHandover,
  withdrawHandover,
} from '../storage/handover.ts'
import { acquireRebuildLock, describeHolder } from './lock.ts'
import { rebuildReport, type OrganizationReport, type RebuildReport } from './report.ts'

/** A problem found before anything was built: one line for the operator, exit 2. */
export class RebuildRefused extends Error {
  override name = 'RebuildRefused'
}

export interface AsideRebuildDeps {
  config: ProjectorConfig
  logger: Logger
  clock?: () => Date
  onProgress?: (done: number, total: number) => void
  signal?: AbortSignal
}

export interface AsideRebuildOptions {
  /** Only these organizations; absent: every one (dry run only). */
  organizations?: readonly string[]
  dryRun: boolean
}

export async function rebuildAside(
  deps: AsideRebuildDeps,
  options: AsideRebuildOptions,
): Promise<RebuildReport> {
  const { config, logger } = deps
  const clock = deps.clock ?? (() => new Date())
  const started = performance.now()
  const live = currentGeneration(config.dataDir)
  if (live === undefined || !existsSync(live.controlPath)) {
    throw new RebuildRefused(
      `${config.dataDir} holds no replica to rebuild (no CURRENT generation)`,
    )
  }
  const sharedFiles = readSharedFiles(live.controlPath)
  const asked = options.organizations === undefined ? undefined : new Set(options.organizations)
  const known = knownOrganizations(live)
  if (asked !== undefined) {
    const unknown = [...asked].filter((id) => !known.has(id))
    if (unknown.length > 0) {
      throw new RebuildRefused(
        `unknown organization${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}: not in the replica`,
      )
    }
    if (!options.dryRun && !caughtUp(live)) {
      throw new RebuildRefused('the replica has not caught up yet: rebuild it whole, or wait')
    }
  }

  // Checked before the lock and the scratch folder: otherwise kafkajs's retries end, half a
  // minute later, in a stack-less error and exit 1.
  await checkKafka(config)

  const command = `rebuild${options.dryRun ? ' --dry-run' : ''}${asked ? ` --org ${[...asked].join(',')}` : ''}`
  const lock = acquireRebuildLock(config.dataDir, command, clock())
  if (!lock.held) {
    throw new RebuildRefused(`another rebuild is running: ${describeHolder(lock.holder)}`)
  }
  const rebuildsDir = join(config.dataDir, 'rebuilds')
  try {
    removeLeftovers(rebuildsDir, live, logger)
    // What the replay keeps: every organization of the asked ones' files (in a generation of
    // shared files, every one it holds, known to the live replica or not: the topics are what a
    // file is rebuilt from; else the asked ones), and of them those the live replica knows.
    const files = asked === undefined ? undefined : fileKeys(asked, sharedFiles)
    const keep = files === undefined ? undefined : inFiles(files, sharedFiles)
    const wanted =
      asked === undefined || keep === undefined
        ? undefined
        : new Set([...asked, ...[...known].filter((id) => keep.has(id))])
    if (asked !== undefined && wanted !== undefined && wanted.size > asked.size) {
      logger.info(
        { asked: asked.size, rebuilt: wanted.size, files: files?.size },
        'the organizations asked for share files: each file is rebuilt whole, with every organization it holds',
      )
    }
    checkDiskSpace(config.dataDir, live, files)
    const run = `${clock()
      .toISOString()
      .replace(/[-:.TZ]/g, '')}-${randomBytes(3).toString('hex')}`
    const dir = join(rebuildsDir, run)
    mkdirSync(dir, { recursive: true })
    try {
      const built = await buildAside({
        config,
        logger,
        dir,
        groupId: `${config.kafka.groupId}.rebuild-${run}`,
        live,
        ...(keep === undefined ? {} : { organizations: keep }),
        // Built as the live generation keeps its files, so that a shared one is handed over whole.
        organizationFiles: sharedFiles,
        ...(deps.onProgress === undefined ? {} : { onProgress: deps.onProgress }),
        ...(deps.signal === undefined ? {} : { signal: deps.signal }),
        clock,
      })
      const livePath = liveOrganizationPaths(live)
      // Every organization rebuilt (in a shared file, those the topics have as well as those the
      // live replica knows), or every one of both sides.
      const organizations =
        wanted === undefined
          ? new Set([...built.organizations, ...organizationsWithRows(live)])
          : new Set([...wanted, ...built.organizations])
      const reports: OrganizationReport[] = []
      for (const organizationId of [...organizations].sort()) {
        const rebuilt = built.generation.filePath(fileKeyOf(organizationId, sharedFiles))
        reports.push({
          organizationId,
          resources: existsSync(rebuilt)
            ? compareDocumentFiles(rebuilt, livePath(organizationId), {
                organization: organizationId,
              })
            : removedAll(livePath(organizationId), organizationId),
        })
      }
      if (!options.dryRun) {
        await handOver(deps, live, built.generation, built.position, reports, sharedFiles)
      }
      return rebuildReport(
        options.dryRun,
        reports,
        built.events,
        (performance.now() - started) / 1e3,
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  } finally {
    lock.release()
  }
}

/** Every organization whose rows are in one of `files` (by key), by its id. */
function inFiles(files: ReadonlySet<string>, sharedFiles: number): OrganizationFilter {
  return { has: (id) => files.has(fileKeyOf(id, sharedFiles)) }
}

function fileKeys(organizations: Iterable<string>, sharedFiles: number): Set<string> {
  return new Set([...organizations].map((id) => fileKeyOf(id, sharedFiles)))
}

/**
 * Hands each rebuilt file to the live projector and waits until it serves them all: a file of
 * one organization, or a shared file of several (each of them reported swapped with it).
 */
async function handOver(
  deps: AsideRebuildDeps,
  live: Generation,
  rebuilt: Generation,
  position: { topic: string; partition: number; offset: string }[],
  reports: OrganizationReport[],
  sharedFiles: number,
): Promise<void> {
  const { logger } = deps
  const clock = deps.clock ?? (() => new Date())
  const version = `r${clock()
    .toISOString()
    .replace(/[-:.TZ]/g, '')}`
  const byFile = new Map<string, OrganizationReport[]>()
  for (const report of reports) {
    const key = fileKeyOf(report.organizationId, sharedFiles)
    byFile.set(key, [...(byFile.get(key) ?? []), report])
  }
  const waiting = new Map<string, string>()
  for (const fileKey of byFile.keys()) {
    const source = rebuilt.filePath(fileKey)
    // No rows in the topics: there is no file to serve instead (left as it is, and reported).
    if (!existsSync(source)) continue
    foldWal(source)
    const file = versionName(fileKey, version)
    renameSync(source, live.filePath(fileKey, file))
    waiting.set(fileKey, file)
  }
  // The moves made durable before the live projector may name the files in control.db (a synced
  // commit): a power cut after it must not leave control.db naming a file the folder lost.
  await syncDirectory(live.organizationsDir)
  for (const [fileKey, file] of waiting) {
    requestHandover(live, {
      fileKey,
      file,
      organizations: byFile.get(fileKey)!.map((r) => r.organizationId),
      position,
      requestedAt: clock().toISOString(),
      requestedBy: `pid ${process.pid}`,
    })
  }
  const deadline = performance.now() + deps.config.handoverTimeoutMs
  while (waiting.size > 0) {
    const files = readOrganizationFiles(live.controlPath)
    for (const [fileKey, file] of waiting) {
      if (!handoverPending(live, fileKey) && files.get(fileKey) === file) {
        waiting.delete(fileKey)
        for (const report of byFile.get(fileKey)!) report.swapped = { file }
        logger.info(
          { fileKey, file, organizations: byFile.get(fileKey)!.length },
          'the live projector now serves the rebuilt file',
        )
      }
    }
    if (waiting.size === 0) break
    if (performance.now() > deadline || deps.signal?.aborted === true) {
      for (const [fileKey, file] of waiting) {
        // Withdrawn before the projector claimed it: the file is not needed. Claimed: it is
        // being taken, and stays.
        if (withdrawHandover(live, fileKey)) rmSync(live.filePath(fileKey, file), { force: true })
      }
      const organizations = [...waiting.keys()].flatMap((key) =>
        byFile.get(key)!.map((r) => r.organizationId),
      )
      throw new RebuildRefused(
        `the live projector did not take the rebuilt files of ${organizations.join(', ')} in time: is it running? (nothing was swapped for them)`,
      )
    }
    await sleep(200)
  }
}

/** The name of a rebuilt file of `fileKey`: `<organizationId>.<version>.db`, `shared-<k>.<version>.db`. */
function versionName(fileKey: string, version: string): string {
  return isOrganizationId(fileKey)
    ? organizationFileName(fileKey, version)
    : sharedFileVersionName(fileKey, version)
}

/** Refuses (exit 2) when no broker of KAFKA_BROKERS answers: the replay could not begin. */
async function checkKafka(config: ProjectorConfig): Promise<void> {
  const admin = new Kafka({
    clientId: config.kafka.clientId,
    brokers: config.kafka.brokers,
    logLevel: kafkaLogLevel.NOTHING,
    connectionTimeout: 5_000,
    retry: { retries: 2 },
  }).admin()
  try {
    await admin.connect()
  } catch (error) {
    throw new RebuildRefused(
      `cannot reach Kafka at ${config.kafka.brokers.join(',')} (KAFKA_BROKERS): ${(error as Error).message}`,
    )
  } finally {
    await admin.disconnect().catch(() => undefined)
  }
}

/** A file built aside is one file before it moves: its WAL folded in, no -wal or -shm beside it. */
function foldWal(path: string): void {
  const db = new Database(path)
  try {
    db.pragma('journal_mode = DELETE')
  } finally {
    db.close()
  }
}

function removedAll(livePath: string | undefined, organizationId: string): ResourceDiff[] {
  if (livePath === undefined) return []
  return compareDocumentFiles(livePath, undefined, { organization: organizationId }).map((d) => ({
    ...d,
    appeared: { count: 0, ids: [] },
    disappeared: d.appeared,
  }))
}

/**
 * The organizations with rows in the live generation: those with a file, or, in a generation of
 * shared files, every one routed there.
 */
export function organizationsWithRows(live: Generation): string[] {
  if (readSharedFiles(live.controlPath) === 0) return organizationsWithFiles(live)
  return readRoutedOrganizations(live)
}

/**
 * The live file of an organization, its own or the one it shares, read once from control.db;
 * undefined when there is none.
 */
export function liveOrganizationPaths(live: Generation): (id: string) => string | undefined {
  const files = readOrganizationFiles(live.controlPath)
  const sharedFiles = readSharedFiles(live.controlPath)
  return (id) => {
    const key = fileKeyOf(id, sharedFiles)
    const path = live.filePath(key, files.get(key))
    return existsSync(path) ? path : undefined
  }
}

/** Organizations in the live control.db, or with rows. */
export function knownOrganizations(live: Generation): Set<string> {
  const known = new Set(organizationsWithRows(live))
  const db = new Database(live.controlPath, { readonly: true, fileMustExist: true })
  try {
    for (const id of db.prepare('SELECT id FROM organizations').pluck().all() as string[]) {
      known.add(id)
    }
  } finally {
    db.close()
  }
  return known
}

function caughtUp(live: Generation): boolean {
  const db = new Database(live.controlPath, { readonly: true, fileMustExist: true })
  try {
    return db.prepare(`SELECT 1 FROM replica_state WHERE key = 'caught_up_at'`).get() !== undefined
  } finally {
    db.close()
  }
}

/**
 * Removes what killed rebuilds left, unless a rebuild runs now (it holds the lock, and clears
 * them itself when it starts). For `verify --repair`, whose killed runs leave a rebuild's scratch
 * folder and which rebuilds nothing when it finds no drift.
 */
export function removeRebuildLeftovers(dataDir: string, logger: Logger, now: Date): void {
  const live = currentGeneration(dataDir)
  if (live === undefined) return
  const lock = acquireRebuildLock(dataDir, 'verify --repair (clearing leftovers)', now)
  if (!lock.held) return
  try {
    removeLeftovers(join(dataDir, 'rebuilds'), live, logger)
  } finally {
    lock.release()
  }
}

/**
 * What a killed run left: its scratch folder, and rebuilt files moved into the live folder that
 * no request names and control.db does not point at. Called with the lock held.
 */
function removeLeftovers(rebuildsDir: string, live: Generation, logger: Logger): void {
  if (existsSync(rebuildsDir)) {
    for (const name of readdirSync(rebuildsDir)) {
      rmSync(join(rebuildsDir, name), { recursive: true, force: true })
      logger.info({ run: name }, 'removed what an earlier rebuild left behind')
    }
  }
  for (const path of replacedFiles(live, readOrganizationFiles(live.controlPath))) {
    // Rebuilt files only: a first-named one is left to the projector's sweep (projector.ts).
    if (parseFileName(databaseFileOf(basename(path)))?.version === undefined) continue
    // A replaced file the projector removes after a grace period is left to it.
    if (Date.now() - statSync(path).mtimeMs < 120_000) continue
    rmSync(path, { force: true })
  }
}

/**
 * Refuses to start without room for what is built aside: the organizations' files as they are
 * now, twice over (mirror rows and documents are written once into the file and once into its
 * WAL before a checkpoint), and 64 MB.
 */
function checkDiskSpace(
  dataDir: string,
  live: Generation,
  fileKeys: ReadonlySet<string> | undefined,
): void {
  let bytes = 0
  for (const name of readdirSync(live.organizationsDir)) {
    const parsed = parseFileName(databaseFileOf(name))
    if (parsed === undefined) continue
    if (fileKeys !== undefined && !fileKeys.has(parsed.fileKey)) continue
    bytes += statSync(join(live.organizationsDir, name)).size
  }
  if (fileKeys === undefined) {
    // A whole rebuild writes both again; a generation made before 2026-11-30 has no routes.db.
    for (const path of live.indexPaths) {
      if (existsSync(path)) bytes += statSync(path).size
    }
  }
  const fs = statfsSync(dataDir)
  const problem = diskSpaceProblem(dataDir, bytes, fs.bavail * fs.bsize)
  if (problem !== undefined) throw new RebuildRefused(problem)
}

/** The refusal for `free` bytes when the files rebuilt are `bytes` now; undefined: room enough. */
export function diskSpaceProblem(dataDir: string, bytes: number, free: number): string | undefined {
  const needed = bytes * 2 + 64 * 1024 * 1024
  if (free >= needed) return undefined
  return `not enough disk space in ${dataDir}: the rebuild needs ${mb(needed)} MB free, there are ${mb(free)} MB`
}

function mb(bytes: number): number {
  return Math.ceil(bytes / (1024 * 1024))
}
