// A thread the main thread talks to by request and answer (projector/lanes/thread-channel.ts), as
// the lanes and the routing thread are: answers in order, a request's own error kept to it, and a
// thread's failure or death failing everything it had not answered, and everything after.
import { afterEach, describe, expect, it } from 'vitest'
import { LaneFailure } from '../../../projector/lanes/lane-failure.ts'
import { ThreadChannel } from '../../../projector/lanes/thread-channel.ts'

type Request = { seq: number } & (
  { type: 'echo'; value: number } | { type: 'bad-line' } | { type: 'disk-full' } | { type: 'exit' }
)
type Answer =
  | { seq: number; ok: true; value?: number }
  | { seq: number; ok: false; message: string; code?: string; own?: boolean }

const answerer = new URL('../../fixtures/workers/answerer.ts', import.meta.url)
const channels: Array<ThreadChannel<Request, Answer>> = []

function channel(lane: number | 'routes', heard: number[] = []): ThreadChannel<Request, Answer> {
  const c = new ThreadChannel<Request, Answer>({
    lane,
    module: answerer,
    workerData: undefined,
    youngGenerationMb: 4,
    requestError: (answer) => (answer.own === true ? new Error(answer.message) : undefined),
    onAnswer: (answer) => heard.push(answer.value ?? -1),
  })
  channels.push(c)
  return c
}

afterEach(async () => {
  await Promise.all(channels.splice(0).map((c) => c.terminate()))
})

describe('a thread channel', () => {
  it('answers each request with its own answer, in order', async () => {
    const heard: number[] = []
    const c = channel(0, heard)
    const answers = await Promise.all([1, 2, 3].map((value) => c.request({ type: 'echo', value })))
    expect(answers.map((a) => a.value)).toEqual([1, 2, 3])
    expect(heard).toEqual([1, 2, 3])
  })

  it('keeps a request’s own error to that request', async () => {
    const c = channel(0)
    await expect(c.request({ type: 'bad-line' })).rejects.toThrow('line 3: not JSON')
    expect(c.failure).toBeUndefined()
    await expect(c.request({ type: 'echo', value: 4 })).resolves.toMatchObject({ value: 4 })
  })

  it('fails what is in flight and everything after with one failure naming the thread', async () => {
    const c = channel(1)
    const failing = c.request({ type: 'disk-full' })
    const behind = c.request({ type: 'echo', value: 5 })
    const failure = await failing.catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(LaneFailure)
    expect(failure).toMatchObject({ lane: 1, code: 'SQLITE_FULL' })
    expect((failure as Error).message).toBe('lane 1: database or disk is full')
    await expect(behind).rejects.toBe(failure)
    await expect(c.request({ type: 'echo', value: 6 })).rejects.toBe(failure)
  })

  it('fails what is in flight when the thread dies', async () => {
    const c = channel('routes')
    const dying = c.request({ type: 'exit' })
    const behind = c.request({ type: 'echo', value: 7 })
    await expect(dying).rejects.toThrow('routing index: routing thread exited (3)')
    await expect(behind).rejects.toBe(c.failure)
  })

  it('refuses requests once terminated', async () => {
    const c = channel(2)
    await c.terminate()
    await expect(c.request({ type: 'echo', value: 8 })).rejects.toThrow('lane 2 has stopped')
  })
})
