// The lanes' routing index, kept by a worker thread of its own (route-worker.ts). Routing is the
// largest of the main thread's writes in a load (a random B-tree insert per upsert: 10-15% of a
// Kafka load's time, docs/performance.md), and the main thread is what limits a load over Kafka.
// Here the index resolves batch N's routes while the main thread reads and collects batch N+1;
// requests are answered in order, so every batch finds the routes of the batches before it.
import type { ResolvedRoutes, RouteAnswer, RouteBatch } from '../storage/route-file.ts'
import type { FailedAnswer, LaneFailure } from './lane-failure.ts'
import { ThreadChannel } from './thread-channel.ts'
import { workerModule } from './worker-source.ts'

const routeWorker = workerModule(new URL('./route-worker.ts', import.meta.url))

export interface RouteThreadOptions {
  dataDir: string
  generationName: string
  walCheckpointBytes: number
  /** The index's share of the page cache (cache-budget.ts); undefined: SQLite's default. */
  cacheKiB: number | undefined
}

export type RouteThreadRequest =
  | { seq: number; type: 'resolve'; routes: RouteBatch; hold: boolean }
  | { seq: number; type: 'commit' | 'rollback' | 'close' }

export type RouteThreadAnswer =
  | {
      seq: number
      ok: true
      /** A batch's routes (`resolve`). */
      found?: RouteAnswer
      /** The index's log, its commit unsynced (`resolve` of a batch not held). */
      unsyncedWal?: string
      /** Every organization code recorded, after a rollback. */
      organizations?: Array<[number, string]>
    }
  | FailedAnswer

/** The routing thread's requests, each a step of a batch or of the load's held transaction. */
export class RouteThread {
  readonly #channel: ThreadChannel<RouteThreadRequest, RouteThreadAnswer>

  constructor(options: RouteThreadOptions) {
    // Small: it holds a batch's arrays at a time.
    this.#channel = new ThreadChannel({
      lane: 'routes',
      module: routeWorker,
      workerData: options,
      youngGenerationMb: 4,
    })
  }

  get failure(): LaneFailure | undefined {
    return this.#channel.failure
  }

  /** Resolves a batch's routes, joining the load's held transaction if `hold`. */
  async resolve(routes: RouteBatch, hold: boolean): Promise<ResolvedRoutes> {
    const answer = await this.#channel.request({ type: 'resolve', routes, hold })
    return { found: answer.found!, unsyncedWal: answer.unsyncedWal }
  }

  /** Commits the load's held transaction (before the files the routes lead to). */
  async commit(): Promise<void> {
    await this.#channel.request({ type: 'commit' })
  }

  /** Rolls the held transaction back: the codes recorded, to read back. */
  async rollback(): Promise<Array<[number, string]>> {
    return (await this.#channel.request({ type: 'rollback' })).organizations ?? []
  }

  /** Commits what it holds and closes the file, then ends the thread. */
  async close(): Promise<void> {
    try {
      if (this.failure === undefined) await this.#channel.request({ type: 'close' })
    } finally {
      await this.terminate()
    }
  }

  terminate(): Promise<void> {
    return this.#channel.terminate()
  }
}
