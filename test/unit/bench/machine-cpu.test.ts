// bench/machine-cpu.ts's arithmetic: the shares bench:freshness prints for each step.
import { describe, expect, it } from 'vitest'
import { cpuShares } from '../../../bench/machine-cpu.ts'

describe('cpuShares', () => {
  it('orders the roles by their share and ends with the machine', () => {
    const before = {
      byRole: new Map([
        ['a', 100],
        ['b', 100],
      ]),
      machineBusy: 0,
      machineTotal: 0,
    }
    const after = {
      byRole: new Map([
        ['a', 150],
        ['b', 250],
        ['c', 10],
      ]),
      machineBusy: 300,
      machineTotal: 400,
    }
    // 400 ticks on 2 cores: 200 ticks a core.
    expect(cpuShares(before, after, 2)).toEqual([
      ['b', 75],
      ['a', 25],
      ['c', 5],
      ['machine', 150],
    ])
  })
})
