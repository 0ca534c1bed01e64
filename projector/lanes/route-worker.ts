// The routing index on a worker thread of its own (route-thread.ts starts it): it answers each
// batch's routes (storage/route-file.ts `resolve`, the code the single-threaded applier runs
// inline) while the main thread reads and packs the next batch. Every request gets one answer,
// in order.
import { parentPort, workerData } from 'node:worker_threads'
import { generation as generationAt } from '../../src/layout.ts'
import { openRouteFile } from '../storage/route-file.ts'
import { failedAnswer } from './lane-failure.ts'
import type { RouteThreadOptions, RouteThreadRequest, RouteThreadAnswer } from './route-thread.ts'

const options = workerData as RouteThreadOptions
const generation = generationAt(options.dataDir, options.generationName)
// Carried over from control.db already, by the applier that started this thread (apply.ts).
const file = openRouteFile(generation.routesPath)
if (options.cacheKiB !== undefined) file.setCacheKiB(options.cacheKiB)

function answer(request: RouteThreadRequest): RouteThreadAnswer {
  const { seq } = request
  switch (request.type) {
    case 'resolve': {
      if (request.hold) file.begin()
      // Live, each batch commits its own: the log was synced with the last batch's files.
      else file.boundWal(options.walCheckpointBytes)
      const found = file.resolve(request.routes)
      return { seq, ok: true, found, unsyncedWal: file.takeUnsyncedWal() }
    }
    case 'commit':
      file.commit()
      file.boundWal(options.walCheckpointBytes)
      return { seq, ok: true }
    case 'rollback':
      file.rollback()
      return { seq, ok: true, organizations: file.organizations() }
    case 'close':
      file.close()
      return { seq, ok: true }
  }
}

parentPort?.on('message', (request: RouteThreadRequest) => {
  let reply: RouteThreadAnswer
  try {
    reply = answer(request)
  } catch (error) {
    reply = failedAnswer(request.seq, error)
  }
  const transfer = reply.ok && reply.found !== undefined ? [reply.found.buffer as ArrayBuffer] : []
  parentPort?.postMessage(reply, transfer)
})
