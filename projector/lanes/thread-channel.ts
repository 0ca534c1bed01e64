// A worker thread the main thread talks to by request and answer: a lane (lane.ts) or the routing
// thread (route-worker.ts). Each request carries a sequence number and gets exactly one answer, in
// order. A failure the thread reports, or its death, is the thread's: it fails every request not
// answered yet and every one after with one LaneFailure, so the commit barrier sees one failure
// however many batches were in flight (lane-failure.ts).
import { Worker } from 'node:worker_threads'
import { workerSource } from './worker-source.ts'
import { LaneFailure, type FailedAnswer } from './lane-failure.ts'

export type ThreadAnswer = { seq: number; ok: true } | FailedAnswer
export type Answered<A extends ThreadAnswer> = Extract<A, { ok: true }>
export type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never

export interface ThreadChannelOptions<A extends ThreadAnswer> {
  /** Who the thread is, in a LaneFailure: a lane's number, or `routes`. */
  lane: number | 'routes'
  /** The worker's module, run bundled (worker-source.ts). */
  module: URL
  workerData: unknown
  /**
   * V8's young generation for the thread, in MB. Its default is sized for throughput, at tens of
   * MB of resident memory per thread for no measurable speed here (docs/performance.md).
   */
  youngGenerationMb: number
  /**
   * A failure that is the request's own, not the thread's (a file line that is not a record):
   * the error that rejects that request alone. Undefined: the thread has failed.
   */
  requestError?: (answer: Extract<A, { ok: false }>) => Error | undefined
  /** Hears each answer before its request resolves. */
  onAnswer?: (answer: Answered<A>) => void
}

interface Pending<A extends ThreadAnswer> {
  resolve: (answer: Answered<A>) => void
  reject: (error: Error) => void
}

export class ThreadChannel<Q extends { seq: number }, A extends ThreadAnswer> {
  readonly #worker: Worker
  readonly #pending = new Map<number, Pending<A>>()
  readonly #lane: number | 'routes'
  #seq = 0
  #stopped = false
  failure: LaneFailure | undefined

  constructor(options: ThreadChannelOptions<A>) {
    this.#lane = options.lane
    this.#worker = new Worker(workerSource(options.module), {
      eval: true,
      workerData: options.workerData,
      resourceLimits: { maxYoungGenerationSizeMb: options.youngGenerationMb },
    })
    this.#worker.on('message', (answer: A) => {
      const pending = this.#pending.get(answer.seq)
      this.#pending.delete(answer.seq)
      if (answer.ok) {
        options.onAnswer?.(answer as Answered<A>)
        pending?.resolve(answer as Answered<A>)
        return
      }
      const failed = answer as Extract<A, { ok: false }>
      const own = options.requestError?.(failed)
      if (own !== undefined) pending?.reject(own)
      else this.#fail(failed.message, pending, failed.code)
    })
    this.#worker.on('error', (error: Error) => this.#fail(error.message))
    this.#worker.on('exit', (code: number) =>
      this.#fail(`${this.#lane === 'routes' ? 'routing' : 'lane'} thread exited (${code})`),
    )
  }

  get #name(): string {
    return this.#lane === 'routes' ? 'the routing thread' : `lane ${this.#lane}`
  }

  #fail(message: string, pending?: Pending<A>, code?: string): void {
    this.failure ??= new LaneFailure(this.#lane, message, code)
    pending?.reject(this.failure)
    for (const p of this.#pending.values()) p.reject(this.failure)
    this.#pending.clear()
  }

  /** Sends a request; resolves with its answer, in order. */
  request(request: DistributiveOmit<Q, 'seq'>, transfer: ArrayBuffer[] = []): Promise<Answered<A>> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    if (this.#stopped) return Promise.reject(new Error(`${this.#name} has stopped`))
    const seq = ++this.#seq
    return new Promise((resolve, reject) => {
      this.#pending.set(seq, { resolve, reject })
      this.#worker.postMessage({ ...request, seq }, transfer)
    })
  }

  /** Ends the thread; what it had not answered rejects. */
  async terminate(): Promise<void> {
    this.#stopped = true
    this.#worker.removeAllListeners()
    for (const p of this.#pending.values()) p.reject(new Error(`${this.#name} has stopped`))
    this.#pending.clear()
    await this.#worker.terminate()
  }
}
