// One lane on a worker thread: it owns the organizations the main thread assigned to it
// (lane-hint.ts), is the only writer of their files, and answers each request in order. What it
// does with a batch is lane-core.ts, the same code a single-threaded applier runs inline
// (apply.ts); this file only gives that core its thread's view of control.db and prior stamps.
// Started by lanes.ts; every request gets one answer.
import Database from 'better-sqlite3'
import { parentPort, workerData } from 'node:worker_threads'
import { generation as generationAt } from '../../src/layout.ts'
import { LaneCore } from './lane-core.ts'
import type { LaneOptions, LaneRequest } from './lane-protocol.ts'
import { openPriorGeneration } from '../storage/prior-stamps.ts'

const options = workerData as LaneOptions
const generation = generationAt(options.dataDir, options.generationName)
const prior =
  options.previousGenerationName === undefined
    ? undefined
    : openPriorGeneration(generationAt(options.dataDir, options.previousGenerationName))
const control = new Database(generation.controlPath, { readonly: true, fileMustExist: true })
const fileOf = control.prepare<[string], string>(
  'SELECT file FROM organization_files WHERE organization_id = ?',
)
fileOf.pluck()
const deferDocuments = options.deferDocumentsUntilCaughtUp && !options.caughtUp

const core = new LaneCore({
  lane: options.lane,
  lanes: options.lanes,
  generation,
  topicPrefix: options.topicPrefix,
  offsetGuard: options.offsetGuard,
  walCheckpointBytes: options.walCheckpointBytes,
  deferDocuments: () => deferDocuments,
  unpublished: options.unpublished,
  maxOpenFiles: options.maxOpenFiles,
  cacheBudgetBytes: options.cacheBudgetBytes,
  fileOf: (fileKey) => fileOf.get(fileKey),
  sharedFiles: options.sharedFiles,
  ...(prior === undefined ? {} : { priorStamp: prior.priorStamp.bind(prior) }),
})

const hooks = {
  retirePrior: () => prior?.close(),
  close: () => {
    prior?.close()
    control.close()
  },
}

parentPort?.on('message', (request: LaneRequest) => {
  const answer = core.answer(request, hooks)
  if (request.type !== 'batch' || !answer.ok) {
    parentPort?.postMessage(answer)
    return
  }
  // The batch's buffer, applied and referenced by nothing now, goes back to the main thread's
  // pool (pack.ts BufferPool) rather than waiting here for a collection that external memory
  // triggers only after tens of MB.
  const buffer = request.buf.buffer as ArrayBuffer
  parentPort?.postMessage({ ...answer, buffer }, [buffer])
})
