// Reusable response buffers. Pages are ~100-500 KB; allocating a fresh buffer of that size per
// request costs about as much CPU as the rest of the request (new memory is faulted in, then
// freed), so pages are written into slabs that are reused once their response is done.
//
// A slab goes back to the pool only when the response's 'close' event fires: by then Node has
// handed every byte to the kernel (or dropped the connection), so nothing reads it any more.

export type Allocate = (size: number) => Buffer

export interface Lease {
  readonly allocate: Allocate
  /** Gives the slab back; safe to call more than once. */
  readonly release: () => void
}

export class ResponseBuffers {
  readonly #slabSize: number
  readonly #maxFree: number
  readonly #free: Buffer[] = []

  constructor(options: { slabSize?: number; maxFree?: number } = {}) {
    this.#slabSize = options.slabSize ?? 512 * 1024
    this.#maxFree = options.maxFree ?? 32
  }

  get free(): number {
    return this.#free.length
  }

  /** One request's allocator: its first allocation that fits takes a slab. */
  lease(): Lease {
    let slab: Buffer | undefined
    return {
      allocate: (size) => {
        if (slab !== undefined || size > this.#slabSize) return Buffer.allocUnsafe(size)
        slab = this.#free.pop() ?? Buffer.allocUnsafeSlow(this.#slabSize)
        return slab.subarray(0, size)
      },
      release: () => {
        if (slab === undefined) return
        if (this.#free.length < this.#maxFree) this.#free.push(slab)
        slab = undefined
      },
    }
  }
}

/**
 * A buffer of its own, never pooled or reused: for a body kept after its response is done (the
 * page cache). `Buffer.allocUnsafe` would hand small sizes out of a shared 8 KB pool, which the
 * kept body would then hold alive.
 */
export const ownedBuffer: Allocate = (size) => Buffer.allocUnsafeSlow(size)
