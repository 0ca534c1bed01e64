// A worker thread that builds the deferred documents of organization files (see build-pool.ts).
// Each job opens the file itself, builds in one transaction exactly as the projector's own thread
// would (OrganizationFile.buildDocuments), and closes it before answering.
import { parentPort } from 'node:worker_threads'
import { generation as generationAt } from '../../src/layout.ts'
import { isSharedFileName } from '../../src/organization-files.ts'
import { messageOf, type BuildJob, type BuildResult } from './build-pool.ts'
import { openOrganizationFile } from '../storage/organization-file.ts'
import { openPriorGeneration, type PriorGeneration } from '../storage/prior-stamps.ts'

/**
 * The generation a rebuild replaces, opened once for this worker's jobs: one build's jobs all name
 * the same one, and its handles on the previous files are bounded (prior-stamps.ts).
 */
let prior: { name: string; generation: PriorGeneration } | undefined

function priorGeneration(job: BuildJob): PriorGeneration | undefined {
  const previous = job.previousGeneration
  if (previous === undefined) return undefined
  if (prior?.name !== previous.name) {
    prior?.generation.close()
    const generation = openPriorGeneration(generationAt(previous.dataDir, previous.name))
    prior = { name: previous.name, generation }
  }
  return prior.generation
}

function build(job: BuildJob): BuildResult {
  const started = process.hrtime.bigint()
  const previous = priorGeneration(job)
  const file = openOrganizationFile(job.fileKey, job.path, {
    offsetGuard: false,
    deferDocuments: true,
    unpublished: job.unpublished,
    layout: isSharedFileName(job.fileKey) ? 'shared' : 'own',
    ...(previous === undefined ? {} : { priorStamp: previous.priorStamp.bind(previous) }),
  })
  try {
    file.setCacheKiB(job.cacheKiB)
    const stats = file.buildDocuments(new Date(job.now))
    file.boundWal(job.walCheckpointBytes)
    return {
      fileKey: job.fileKey,
      stats,
      seconds: Number(process.hrtime.bigint() - started) / 1e9,
    }
  } finally {
    file.close()
  }
}

parentPort?.on('message', (job: BuildJob) => {
  let result: BuildResult
  try {
    result = build(job)
  } catch (error) {
    result = { fileKey: job.fileKey, error: messageOf(error) }
  }
  parentPort?.postMessage(result)
})
