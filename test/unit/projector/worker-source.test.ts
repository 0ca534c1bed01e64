// A worker's script (projector/lanes/worker-source.ts): the TypeScript module bundled, running
// without tsx's loader, with its own module URL and the packages it imports.
import { readdirSync } from 'node:fs'
import { Worker } from 'node:worker_threads'
import { describe, expect, it } from 'vitest'
import { workerModule, workerSource } from '../../../projector/lanes/worker-source.ts'

const echo = new URL('../../fixtures/workers/echo.ts', import.meta.url)
// Declared as the projector declares its lanes' and workers' modules: bundled with the first
// module asked for (echo, below), in one child.
const answerer = workerModule(new URL('../../fixtures/workers/answerer.ts', import.meta.url))

const threads = (): number => readdirSync('/proc/self/task').length

describe('a worker’s script', () => {
  it('runs the module with its own import.meta.url and the packages it imports', async () => {
    const before = threads()
    const worker = new Worker(workerSource(echo), { eval: true })
    try {
      const answer = await new Promise((resolve, reject) => {
        worker.once('message', resolve)
        worker.once('error', reject)
      })
      expect(answer).toEqual({
        moduleUrl: echo.href,
        parsed: 7,
        controlPath: '/data/generations/g1/control.db',
      })
      // One thread for the worker: no loader's thread beside it.
      expect(threads()).toBe(before + 1)
    } finally {
      await worker.terminate()
    }
  })

  it('bundles a module once per process', () => {
    expect(workerSource(echo)).toBe(workerSource(echo))
  })

  it('gives a module bundled beside another its own script', async () => {
    workerSource(echo)
    const worker = new Worker(workerSource(answerer), { eval: true })
    try {
      const answer = new Promise((resolve, reject) => {
        worker.once('message', resolve)
        worker.once('error', reject)
      })
      worker.postMessage({ seq: 1, type: 'echo', value: 42 })
      expect(await answer).toEqual({ seq: 1, ok: true, value: 42 })
    } finally {
      await worker.terminate()
    }
  })
})
