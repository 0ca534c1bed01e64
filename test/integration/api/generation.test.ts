// Following the CURRENT generation pointer: a rebuild publishes a new generation and the api
// moves to it between requests, failing none, and closes the old files once idle.
import { rmSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { ReplicaFixture } from './fixtures.ts'
import { type RunningApi, startApi } from './server.ts'

async function until(condition: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await new Promise((r) => setTimeout(r, 10))
  }
}

describe('generation switch', () => {
  const cleanup: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step()
  })

  it('moves to a newly published generation without failing a request', async () => {
    const first = ReplicaFixture.create({ name: 'g1' })
    cleanup.push(() => rmSync(first.dataDir, { recursive: true, force: true }))
    const org1 = first.organization()
    const orgId = org1.id
    for (let i = 0; i < 20; i++) org1.provider({ lastName: 'One' })
    const raw = first.key(orgId).raw
    first.publish()
    first.close()

    const api: RunningApi = await startApi(first.dataDir, {
      generationCheckMs: 20,
      env: { RATE_LIMIT_PER_KEY: '1000000', RATE_LIMIT_PER_ORGANIZATION: '1000000' },
    })
    cleanup.push(() => api.close())

    const seen = new Set<string>()
    const failures: string[] = []
    let running = true
    const client = async () => {
      while (running) {
        const response = await api.get('/providers?limit=5', raw)
        const text = await response.text()
        if (response.status !== 200) failures.push(`${response.status} ${text}`)
        else seen.add(text.includes('"lastName":"Two"') ? 'g2' : 'g1')
      }
    }
    const clients = Array.from({ length: 4 }, client)

    await until(() => seen.has('g1'))
    // The rebuild: the same organization and key replayed into a new generation.
    const second = ReplicaFixture.create({ dataDir: first.dataDir, name: 'g2' })
    const org2 = second.organization({ id: orgId })
    for (let i = 0; i < 20; i++) org2.provider({ lastName: 'Two' })
    second.key(orgId, { raw })
    second.publish()
    second.close()
    await until(() => seen.has('g2'))
    await new Promise((r) => setTimeout(r, 100))
    // Once every request has moved on, the old generation can be deleted from disk.
    rmSync(first.generation.dir, { recursive: true, force: true })
    await new Promise((r) => setTimeout(r, 200))
    running = false
    await Promise.all(clients)

    expect(failures).toEqual([])
    expect(seen).toEqual(new Set(['g1', 'g2']))
    expect(api.api.replica.generationName).toBe('g2')
    // control.db and the one organization file of g2; g1's handles are closed.
    expect(api.api.replica.openFiles).toBe(2)
  })

  it('keeps an old generation open while a request holds it, and closes it after', async () => {
    const first = ReplicaFixture.create({ name: 'g1' })
    cleanup.push(() => rmSync(first.dataDir, { recursive: true, force: true }))
    first.publish()
    first.close()
    const api = await startApi(first.dataDir, { generationCheckMs: 0 })
    cleanup.push(() => api.close())
    const { replica } = api.api

    const held = replica.acquire()
    expect(held.name).toBe('g1')
    const second = ReplicaFixture.create({ dataDir: first.dataDir, name: 'g2' })
    second.publish()
    second.close()
    const next = replica.acquire()
    expect(next.name).toBe('g2')
    expect(replica.openFiles).toBe(2) // both control files
    replica.release(held)
    expect(replica.openFiles).toBe(1)
    replica.release(next)
  })

  it('keeps serving the current generation while a newly published one is not usable yet', async () => {
    const first = ReplicaFixture.create({ name: 'g1' })
    cleanup.push(() => rmSync(first.dataDir, { recursive: true, force: true }))
    const org = first.organization()
    org.provider()
    const key = first.key(org.id)
    first.publish()
    const api = await startApi(first.dataDir, { generationCheckMs: 0 })
    cleanup.push(() => api.close())
    cleanup.push(() => first.close())
    expect((await api.get('/providers', key.raw)).status).toBe(200)
    // CURRENT names a generation whose control file does not exist.
    const broken = ReplicaFixture.create({ dataDir: first.dataDir, name: 'g2' })
    broken.close()
    rmSync(broken.generation.controlPath)
    broken.publish({ caughtUp: false })
    expect((await api.get('/providers', key.raw)).status).toBe(200)
    expect(api.api.replica.generationName).toBe('g1')
  })

  it('finishes a request in flight when the server closes', async () => {
    const replica = ReplicaFixture.create()
    cleanup.push(() => replica.destroy())
    const org = replica.organization()
    for (let i = 0; i < 200; i++) org.provider()
    const key = replica.key(org.id)
    replica.publish()
    const api = await startApi(replica.dataDir)
    const received = new Promise((resolve) => api.api.app.server.once('request', resolve))
    const inFlight = api.get('/providers?limit=200', key.raw)
    // Close once the server has the request, while its hooks are still running.
    await received
    const closing = api.close()
    const response = await inFlight
    expect(response.status).toBe(200)
    expect(((await response.json()) as { data: unknown[] }).data).toHaveLength(200)
    await closing
  })
})
