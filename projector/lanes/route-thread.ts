// The lanes' routing index, kept by a worker thread of its own (route-worker.ts). Routing is the
// largest of the main thread's writes in a load (a random B-tree insert per upsert: 10-15% of a
// Kafka load's time, docs/performance.md), and the main thread is what limits a load over Kafka.
// Here the index resolves batch N's routes while the main thread reads and collects batch N+1;
// requests are answered in order, so every batch finds the routes of the batches before it.
import { Worker } from 'node:worker_threads'
import { workerSource } from './worker-source.ts'
import type { ResolvedRoutes, RouteAnswer, RouteBatch } from '../storage/route-file.ts'
import { LaneFailure } from './lane-failure.ts'

const routeWorker = new URL('./route-worker.ts', import.meta.url)

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
  | { seq: number; ok: false; message: string; code?: string }

type Answered = Extract<RouteThreadAnswer, { ok: true }>
type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never

interface Pending {
  resolve: (answer: Answered) => void
  reject: (error: Error) => void
}

/** The thread, and the requests it has not answered yet. A failure fails every one of them. */
export class RouteThread {
  readonly #worker: Worker
  readonly #pending = new Map<number, Pending>()
  #seq = 0
  failure: LaneFailure | undefined

  constructor(options: RouteThreadOptions) {
    // Small: it holds a batch's arrays at a time (lanes.ts says why lanes are kept small too).
    this.#worker = new Worker(workerSource(routeWorker), {
      eval: true,
      workerData: options,
      resourceLimits: { maxYoungGenerationSizeMb: 4 },
    })
    this.#worker.on('message', (answer: RouteThreadAnswer) => {
      const pending = this.#pending.get(answer.seq)
      if (!answer.ok) return this.#fail(answer.message, answer.code)
      this.#pending.delete(answer.seq)
      pending?.resolve(answer)
    })
    this.#worker.on('error', (error: Error) => this.#fail(error.message))
    this.#worker.on('exit', (code: number) => this.#fail(`routing thread exited (${code})`))
  }

  #fail(message: string, code?: string): void {
    this.failure ??= new LaneFailure('routes', message, code)
    for (const p of this.#pending.values()) p.reject(this.failure)
    this.#pending.clear()
  }

  #request(request: DistributiveOmit<RouteThreadRequest, 'seq'>): Promise<Answered> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    const seq = ++this.#seq
    return new Promise((resolve, reject) => {
      this.#pending.set(seq, { resolve, reject })
      this.#worker.postMessage({ ...request, seq })
    })
  }

  /** Resolves a batch's routes, joining the load's held transaction if `hold`. */
  async resolve(routes: RouteBatch, hold: boolean): Promise<ResolvedRoutes> {
    const answer = await this.#request({ type: 'resolve', routes, hold })
    return { found: answer.found!, unsyncedWal: answer.unsyncedWal }
  }

  /** Commits the load's held transaction (before the files the routes lead to). */
  async commit(): Promise<void> {
    await this.#request({ type: 'commit' })
  }

  /** Rolls the held transaction back: the codes recorded, to read back. */
  async rollback(): Promise<Array<[number, string]>> {
    return (await this.#request({ type: 'rollback' })).organizations ?? []
  }

  /** Commits what it holds and closes the file, then ends the thread. */
  async close(): Promise<void> {
    try {
      if (this.failure === undefined) await this.#request({ type: 'close' })
    } finally {
      await this.terminate()
    }
  }

  async terminate(): Promise<void> {
    this.#worker.removeAllListeners()
    for (const p of this.#pending.values()) p.reject(new Error('the routing thread has stopped'))
    this.#pending.clear()
    await this.#worker.terminate()
  }
}
