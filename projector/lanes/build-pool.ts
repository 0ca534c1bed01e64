// Builds the deferred documents of several organization files at once: on worker threads, and on
// the projector's own thread beside them.
//
// An initial load (or a rebuild) defers every document until the replica has caught up; the build
// that follows is most of the load's tail, and organization files are independent, so it spreads
// over the machine's cores. The caller must not write to those files meanwhile (the applier
// refuses batches while a build runs, and the Kafka source waits for it: see apply.ts).
import { Worker } from 'node:worker_threads'
import type { RefreshStats } from '../documents/index.ts'
import { workerModule, workerSource } from './worker-source.ts'

const buildWorker = workerModule(new URL('./build-worker.ts', import.meta.url))

export interface BuildJob {
  /** The file's key (lane-core.ts): an organization's id, or a shared file's name. */
  fileKey: string
  path: string
  /** The generation a rebuild replaces: unchanged documents keep its stamps. */
  previousGeneration?: { dataDir: string; name: string }
  /** ISO time of the build: every document written is stamped from it. */
  now: string
  cacheKiB: number
  walCheckpointBytes: number
  /** The generation is not published yet (organization-file.ts `unpublished`). */
  unpublished: boolean
}

/** A file whose documents were built. */
export interface BuiltFile {
  fileKey: string
  stats: RefreshStats
  seconds: number
  error?: undefined
}

export type BuildResult = BuiltFile | { fileKey: string; error: string }

/**
 * Splits jobs into `lanes` lists of about equal work (largest file first, each to the lightest
 * list), so that no lane waits on another for its next job.
 */
export function shareJobs<T extends { bytes: number }>(jobs: readonly T[], lanes: number): T[][] {
  const lists = Array.from({ length: Math.max(1, lanes) }, () => ({ bytes: 0, jobs: [] as T[] }))
  for (const job of [...jobs].sort((a, b) => b.bytes - a.bytes)) {
    const lightest = lists.reduce((min, list) => (list.bytes < min.bytes ? list : min))
    lightest.jobs.push(job)
    lightest.bytes += job.bytes
  }
  return lists.map((list) => list.jobs).filter((list) => list.length > 0)
}

/**
 * Builds the jobs on `workers` threads and, when `here` is given, on this thread too (between
 * jobs it yields, so the workers' results are heard). `done` hears of each job as it ends. A job
 * that fails, or whose worker cannot start or dies, ends as an error result: the caller builds it
 * on its own thread instead.
 */
export async function buildInParallel(
  jobs: readonly (BuildJob & { bytes: number })[],
  options: { workers: number; here?: (job: BuildJob) => BuildResult; signal?: AbortSignal },
  done: (result: BuildResult) => void,
): Promise<void> {
  const { here, signal } = options
  const lanes = shareJobs(jobs, options.workers + (here === undefined ? 0 : 1))
  const onThisThread = here === undefined ? [] : (lanes.pop() ?? [])
  await Promise.all([
    ...lanes.map((list) => onWorker(list, done, signal)),
    (async () => {
      for (const job of onThisThread) {
        await new Promise((resolve) => setImmediate(resolve))
        if (signal?.aborted === true) {
          done({ fileKey: job.fileKey, error: 'stopped' })
          continue
        }
        let result: BuildResult
        try {
          result = here!(job)
        } catch (error) {
          result = { fileKey: job.fileKey, error: messageOf(error) }
        }
        done(result)
      }
    })(),
  ])
}

/**
 * Posts every job to one new worker, which builds them in order and answers each. Aborting
 * terminates it: the build in hand rolls back (its file stays deferred, built at the next start).
 */
function onWorker(
  jobs: readonly BuildJob[],
  done: (result: BuildResult) => void,
  signal: AbortSignal | undefined,
): Promise<void> {
  return new Promise((resolve) => {
    const pending = new Map(jobs.map((job) => [job.fileKey, job]))
    // A small young generation: V8 sizes it for throughput by default, and here (where the
    // load's memory peaks) the default cost 50 MB of resident memory for no measurable speed.
    const worker = new Worker(workerSource(buildWorker), {
      eval: true,
      resourceLimits: { maxYoungGenerationSizeMb: 8 },
    })
    const finish = (reason?: string) => {
      if (reason !== undefined) {
        for (const job of pending.values()) done({ fileKey: job.fileKey, error: reason })
      }
      pending.clear()
      signal?.removeEventListener('abort', stop)
      worker.removeAllListeners()
      void worker.terminate().then(() => resolve())
    }
    const stop = () => finish('stopped')
    if (signal?.aborted === true) return stop()
    signal?.addEventListener('abort', stop, { once: true })
    worker.on('message', (result: BuildResult) => {
      pending.delete(result.fileKey)
      done(result)
      if (pending.size === 0) finish()
    })
    worker.on('error', (error: Error) => finish(error.message))
    worker.on('exit', (code: number) => finish(`build worker exited (${code})`))
    for (const job of jobs) worker.postMessage(job)
  })
}

/** What of an error crosses threads and reaches the logs: its message, never its stack. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
