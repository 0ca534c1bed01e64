// A worker thread that builds the deferred documents of organization files (see build-pool.ts).
// Each job opens the file itself, builds in one transaction exactly as the projector's own thread
// would (OrganizationFile.buildDocuments), and closes it before answering.
import Database from 'better-sqlite3'
import { existsSync } from 'node:fs'
import { parentPort } from 'node:worker_threads'
import { priorStampsFrom } from '../documents/prior-stamps.ts'
import { messageOf, type BuildJob, type BuildResult } from './build-pool.ts'
import { openOrganizationFile } from '../storage/organization-file.ts'

function build(job: BuildJob): BuildResult {
  const started = process.hrtime.bigint()
  const previous =
    job.previousPath !== undefined && existsSync(job.previousPath)
      ? new Database(job.previousPath, { readonly: true, fileMustExist: true })
      : undefined
  try {
    const file = openOrganizationFile(job.organizationId, job.path, {
      offsetGuard: false,
      deferDocuments: true,
      unpublished: job.unpublished,
      ...(previous === undefined ? {} : { priorStamp: priorStampsFrom(previous) }),
    })
    try {
      file.setCacheKiB(job.cacheKiB)
      const stats = file.buildDocuments(new Date(job.now))
      file.boundWal(job.walCheckpointBytes)
      return {
        organizationId: job.organizationId,
        stats,
        seconds: Number(process.hrtime.bigint() - started) / 1e9,
      }
    } finally {
      file.close()
    }
  } finally {
    previous?.close()
  }
}

parentPort?.on('message', (job: BuildJob) => {
  let result: BuildResult
  try {
    result = build(job)
  } catch (error) {
    result = { organizationId: job.organizationId, error: messageOf(error) }
  }
  parentPort?.postMessage(result)
})
