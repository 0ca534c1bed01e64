// The document build at catch-up: every file whose documents an initial load (or a rebuild)
// deferred is built once, on build workers (build-pool.ts) and on this thread beside them, through
// the inline lane's files (lane-core.ts). A file is built whole: a shared file's organizations
// each in its scope. The applier (apply.ts) decides when.
import { statSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Logger } from 'pino'
import type { Generation } from '../../src/layout.ts'
import { buildInParallel, type BuildJob, type BuildResult, type BuiltFile } from './build-pool.ts'
import { cacheShares, MIN_CACHE_KIB } from '../storage/cache-budget.ts'
import type { RefreshStats } from '../documents/index.ts'
import { addDocumentStats, type LaneCore } from './lane-core.ts'

export interface DocumentBuildContext {
  core: LaneCore
  /** Files built already, by key, as the load's last round committed (lane-core.ts). */
  builtAlready: ReadonlySet<string>
  logger: Logger
  clock: () => Date
  walCheckpointBytes: number
  cacheBudgetBytes: number | undefined
  /** A rebuild's previous generation: the workers read its stamps. */
  previousGeneration: Generation | undefined
  /** The generation's files, by key (lane-core.ts). */
  knownFiles: () => string[]
  /** Stopped (`stopBuilding`, `close`): the build goes on at the next start. */
  stopping: () => boolean
  signal: AbortSignal
}

/** One catch-up's build, and what it built. */
export class DocumentBuild {
  readonly built: RefreshStats = { rewritten: 0, unchanged: 0, removed: 0 }
  /** Files built on workers: the pass on this thread that follows need not open them. */
  readonly #builtIds: Set<string>

  constructor(readonly context: DocumentBuildContext) {
    this.#builtIds = new Set(context.builtAlready)
  }

  /**
   * Builds every file whose documents are deferred, on worker threads and on this thread beside
   * them; one that fails on a worker is logged and left to the pass on this thread, which follows
   * (`onThisThread`).
   */
  async onWorkers(workers: number): Promise<void> {
    const { logger, stopping, signal } = this.context
    const jobs = this.#jobs(workers)
    const here = (job: BuildJob): BuildResult => {
      if (stopping()) return { fileKey: job.fileKey, error: 'stopped' }
      // Sized like the workers' files: opened alone, it would be given the whole budget.
      return this.buildHere(job.fileKey, new Date(job.now), job.cacheKiB)
    }
    await buildInParallel(jobs, { workers, here, signal }, (result) => {
      // Stopped meanwhile: the build goes on at the next start (caught_up_at is not set).
      if (stopping()) return
      if (result.error !== undefined) {
        logger.warn(
          { file: result.fileKey, error: result.error },
          'could not build the documents of an organization file in parallel; building it alone',
        )
        return
      }
      this.#report(result)
      this.#builtIds.add(result.fileKey)
    })
  }

  /** A job per file still deferred; this thread lets go of them. */
  #jobs(workers: number): Array<BuildJob & { bytes: number }> {
    const { core, clock, cacheBudgetBytes, walCheckpointBytes } = this.context
    const now = clock().toISOString()
    const previous = this.context.previousGeneration
    // The budget split among the builds that run at once (this thread's and the workers').
    const cacheKiB =
      cacheBudgetBytes === undefined
        ? MIN_CACHE_KIB
        : cacheShares(cacheBudgetBytes, workers + 1).organizationKiB
    const jobs: Array<BuildJob & { bytes: number }> = []
    for (const fileKey of this.context.knownFiles()) {
      if (this.#builtIds.has(fileKey)) continue
      // Only a file this thread has open is asked whether it is built: opening every file to ask
      // cost the main thread 5 s at 3,000 organizations before any worker started. A worker given
      // a file built already (a build a stop cut short) finds it so and writes nothing.
      const open = core.files.get(fileKey)
      if (open?.documentsLive === true) continue
      // A worker may write the file: this thread's handle (and what it remembers) goes.
      core.closeFiles([fileKey])
      const path = core.pathOf(fileKey)
      jobs.push({
        fileKey,
        path,
        ...(previous === undefined
          ? {}
          : { previousGeneration: { dataDir: dataDirOf(previous), name: previous.name } }),
        now,
        cacheKiB,
        walCheckpointBytes,
        unpublished: core.options.unpublished,
        bytes: statSync(path).size,
      })
    }
    return jobs
  }

  /**
   * Builds, on this thread, every file not built yet, until a pass finds nothing to build: a
   * batch applied while this one yielded may have brought a new organization. The last pass does
   * not yield, so no batch comes between it and the caller's record of the catch-up. False:
   * stopped meanwhile.
   */
  async onThisThread(): Promise<boolean> {
    const { core, clock, stopping } = this.context
    for (let buildingAny = true; buildingAny;) {
      buildingAny = false
      for (const fileKey of this.context.knownFiles()) {
        if (this.#builtIds.has(fileKey)) continue
        if (core.file(fileKey).documentsLive) continue
        this.#report(this.buildHere(fileKey, clock()))
        buildingAny = true
        await new Promise((resolve) => setImmediate(resolve))
        // Stopped meanwhile: the build goes on at the next start (caught_up_at is not set).
        if (stopping()) return false
      }
    }
    return true
  }

  /** Builds one file's deferred documents on this thread. */
  buildHere(fileKey: string, now: Date, cacheKiB?: number): BuiltFile {
    const { core, walCheckpointBytes } = this.context
    const started = process.hrtime.bigint()
    const file = core.file(fileKey)
    if (cacheKiB !== undefined) file.setCacheKiB(cacheKiB)
    const stats = file.buildDocuments(now)
    file.boundWal(walCheckpointBytes)
    // Built, it goes: kept, thousands of organizations built one after another would all stay
    // open, each with the statements and page cache its build filled (3,000 of 20 providers: a
    // peak of 3.1 GB). Closing commits what a load held in it (organization-file.ts).
    if (!file.inTransaction) core.closeFiles([fileKey])
    return { fileKey, stats, seconds: Number(process.hrtime.bigint() - started) / 1e9 }
  }

  /** Counts and logs one file's build, wherever it ran. */
  #report(result: BuiltFile): void {
    addDocumentStats(this.built, result.stats)
    this.context.logger.info(
      {
        // An organization's id (its own file), or a shared file's name.
        file: result.fileKey,
        documents: result.stats.rewritten,
        seconds: result.seconds,
      },
      'built the documents of an organization loaded in bulk',
    )
  }
}

/** The data directory a generation lives in (`<DATA_DIR>/generations/<name>`). */
function dataDirOf(generation: Generation): string {
  return dirname(dirname(generation.dir))
}
