// bench/machine-cpu.ts on this machine's /proc: bench:freshness says which part of the pipeline the
// cores went to from it, so a process that spins must show as about one core under its role, and
// one that sleeps as nothing.
import { spawn, type ChildProcess } from 'node:child_process'
import { availableParallelism } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it } from 'vitest'
import { Worker } from 'node:worker_threads'
import {
  cpuShares,
  cpuSnapshot,
  formatShares,
  threadTicks,
  type ProcessRole,
} from '../../../bench/machine-cpu.ts'

const children: ChildProcess[] = []
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL')
})

function node(script: string, tag: string): ChildProcess {
  const child = spawn(process.execPath, ['-e', script, tag], { stdio: 'ignore' })
  children.push(child)
  return child
}

const role: ProcessRole = (commandLine) =>
  commandLine.endsWith(' spinner-under-test')
    ? 'spinner'
    : commandLine.endsWith(' sleeper-under-test')
      ? 'sleeper'
      : undefined

describe.runIf(process.platform === 'linux')('bench/machine-cpu.ts', () => {
  it('gives a spinning process about a core under its role, a sleeping one none', async () => {
    node('for (;;) {}', 'spinner-under-test')
    node('setInterval(() => {}, 1000)', 'sleeper-under-test')
    await sleep(300)
    const before = cpuSnapshot(role)
    await sleep(1_500)
    const cores = availableParallelism()
    const shares = new Map(cpuShares(before, cpuSnapshot(role), cores))
    // A core when it gets one; other tests may run beside it on a small machine.
    expect(shares.get('spinner')).toBeGreaterThan(40)
    expect(shares.get('spinner')).toBeLessThanOrEqual(105)
    expect(shares.get('sleeper') ?? 0).toBeLessThan(5)
    expect(shares.get('machine')).toBeGreaterThanOrEqual(shares.get('spinner')! - 5)
    expect(shares.get('machine')).toBeLessThanOrEqual(cores * 100 + 5)
    expect(formatShares([...shares], cores)).toMatch(
      new RegExp(`spinner \\d+%.*machine \\d+% of ${cores * 100}%$`),
    )
  })

  // bench:live-apply reads a lane's CPU as the busiest thread but the main one.
  it('counts a thread’s CPU under its own id: a spinning worker’s, not the main thread’s', async () => {
    const worker = new Worker('const end = Date.now() + 3000; while (Date.now() < end) {}', {
      eval: true,
    })
    try {
      await sleep(200)
      const before = threadTicks(process.pid)
      await sleep(1_000)
      const after = threadTicks(process.pid)
      const spent = [...after].map(([tid, ticks]) => ({
        tid,
        ticks: ticks - (before.get(tid) ?? 0),
      }))
      const main = spent.find((t) => t.tid === process.pid)!.ticks
      const busiest = Math.max(...spent.filter((t) => t.tid !== process.pid).map((t) => t.ticks))
      // A second is 100 ticks; on a shared machine the worker gets part of a core.
      expect(busiest).toBeGreaterThan(30)
      expect(main).toBeLessThan(busiest / 2)
    } finally {
      await worker.terminate()
    }
  })
})
