import { describe, expect, it } from 'vitest'
import { ResponseBuffers } from '../../../api/buffers.ts'

describe('ResponseBuffers', () => {
  it('reuses a slab only after its lease is released', () => {
    const buffers = new ResponseBuffers({ slabSize: 1024, maxFree: 1 })
    const first = buffers.lease()
    const a = first.allocate(100)
    const second = buffers.lease()
    const b = second.allocate(100)
    expect(a.buffer).not.toBe(b.buffer)
    first.release()
    first.release()
    expect(buffers.free).toBe(1)
    const third = buffers.lease()
    expect(third.allocate(10).buffer).toBe(a.buffer)
    second.release()
    third.release()
    expect(buffers.free).toBe(1) // maxFree
  })

  it('allocates outside the pool for oversized or second allocations', () => {
    const buffers = new ResponseBuffers({ slabSize: 64 })
    const lease = buffers.lease()
    expect(lease.allocate(100)).toHaveLength(100)
    const slab = lease.allocate(10)
    const extra = lease.allocate(10)
    expect(extra.buffer).not.toBe(slab.buffer)
    lease.release()
    expect(buffers.free).toBe(1)
  })
})
