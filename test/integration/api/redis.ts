// A real Redis server for the shared-limit tests: the harness's startRedis() when the harness has
// one, otherwise redis-server (Debian's package) started here on a free loopback port. Never a
// silent skip: a missing redis-server is an error that says how to install it.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'

export interface RunningRedis {
  url: string
  stop(): Promise<void>
}

type Harness = { startRedis?: () => Promise<RunningRedis> }

export async function startRedis(): Promise<RunningRedis> {
  const harnessModule = new URL('../../harness/redis.ts', import.meta.url)
  if (existsSync(harnessModule)) {
    const harness = (await import(harnessModule.href)) as Harness
    if (typeof harness.startRedis === 'function') return harness.startRedis()
  }
  return startOwnRedis()
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

async function startOwnRedis(): Promise<RunningRedis> {
  if (spawnSync('redis-server', ['--version']).error !== undefined) {
    throw new Error(
      'redis-server is not installed: the shared rate-limit tests need a real Redis ' +
        '(apt-get install -y redis-server)',
    )
  }
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'api-redis-'))
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let output = ''
  child.stdout.on('data', (d: Buffer) => (output += d.toString()))
  child.stderr.on('data', (d: Buffer) => (output += d.toString()))
  const url = `redis://127.0.0.1:${port}`
  const deadline = Date.now() + 10_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`redis-server exited:\n${output}`)
    const client = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    client.on('error', () => {})
    try {
      await client.connect()
      if ((await client.ping()) === 'PONG') {
        client.disconnect()
        break
      }
    } catch {
      client.disconnect()
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`redis-server did not answer on ${url}:\n${output}`)
    }
    await sleep(50)
  }
  return {
    url,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve))
        child.kill('SIGTERM')
        await exited
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
