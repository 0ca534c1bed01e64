// How long the Kafka source holds an initial load's batches before committing them.
import { describe, expect, it } from 'vitest'
import { holdMs } from '../../../projector/sources/kafka.ts'

describe('holdMs', () => {
  it('holds 5 s while commits are quick', () => {
    expect(holdMs(0)).toBe(5_000)
    expect(holdMs(1_000)).toBe(5_000)
  })

  it('holds four times as long as the last commit took once that is longer: commits stay a fifth of the load', () => {
    expect(holdMs(3_000)).toBe(12_000)
    expect(holdMs(20_000)).toBe(80_000)
  })
})
