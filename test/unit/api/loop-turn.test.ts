// How long a request can have waited before the api read it (api/overload.ts LoopTurn): its own
// turn so far, plus the turn before when the two ran back to back and that one served.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { LoopTurn } from '../../../api/overload.ts'

function clocked() {
  const clock = { now: 1000 }
  return { clock, turn: new LoopTurn(() => clock.now) }
}

describe('LoopTurn', () => {
  it('counts the requests read before this one in the same turn', () => {
    const { clock, turn } = clocked()
    expect(turn.waited()).toBe(0)
    clock.now += 7
    expect(turn.waited()).toBe(7)
    clock.now += 5
    expect(turn.waited()).toBe(12)
  })

  it('counts the turn before too when it served and the loop went on at once', async () => {
    const { clock, turn } = clocked()
    turn.waited()
    turn.serve()
    clock.now += 15
    await nextTurn() // the turn ends at 1015
    clock.now += 0.5
    // Read at once after: it may have arrived just after the turn before began, at 1000.
    expect(turn.waited()).toBe(15.5)
  })

  it('counts only its own turn after an idle loop', async () => {
    const { clock, turn } = clocked()
    turn.waited()
    turn.serve()
    clock.now += 15
    await nextTurn()
    clock.now += 200 // idle: a request that had waited would have been read at once
    expect(turn.waited()).toBe(0)
  })

  it('counts only its own turn after one that refused everything, so that one turn serves', async () => {
    const { clock, turn } = clocked()
    turn.waited() // not served
    clock.now += 30
    await nextTurn()
    expect(turn.waited()).toBe(0)
  })
})
