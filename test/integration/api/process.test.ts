// The api as users run it: `npx tsx api/main.ts` with its environment, over the network, stopped
// with SIGTERM. The test runs the tsx binary npx would run: npx itself (through `sh -c`) does not
// pass a SIGTERM on to its child.
import { type ChildProcess, spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { allScopes, newDataDir, ReplicaFixture } from './fixtures.ts'

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url))

describe('api process', () => {
  let replica: ReplicaFixture
  let child: ChildProcess
  let url = ''
  let adminUrl = ''
  let output = ''
  let key = ''
  let providerId = ''

  beforeAll(async () => {
    replica = ReplicaFixture.create()
    const org = replica.organization()
    providerId = org.provider().sensitive.id
    key = replica.key(org.id, { scopes: allScopes }).raw
    replica.publish()
    child = spawn(join(repoRoot, 'node_modules/.bin/tsx'), ['api/main.ts'], {
      cwd: repoRoot,
      env: {
        ...process.env,
        DATA_DIR: replica.dataDir,
        HOST: '127.0.0.1',
        PORT: '0',
        ADMIN_PORT: '0',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    child.stderr?.on('data', (d: Buffer) => (output += d.toString()))
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`api did not start:\n${output}`)), 60_000)
      child.once('exit', (code) => reject(new Error(`api exited with ${code}:\n${output}`)))
      child.stdout?.on('data', (d: Buffer) => {
        output += d.toString()
        const match = /"url":"([^"]+)","adminUrl":"([^"]+)"/.exec(output)
        if (match !== null) {
          clearTimeout(timer)
          url = match[1] as string
          adminUrl = match[2] as string
          resolve()
        }
      })
    })
  })

  afterAll(() => {
    if (child?.exitCode === null) child.kill('SIGKILL')
    replica?.destroy()
  })

  it('serves the API and the operations endpoints over the network', async () => {
    const response = await fetch(`${url}/api/v1/providers/${providerId}`, {
      headers: { authorization: `Bearer ${key}` },
    })
    expect(response.status).toBe(200)
    expect(((await response.json()) as { data: { id: string } }).data.id).toBe(providerId)
    expect((await fetch(`${adminUrl}/healthz`)).status).toBe(200)
    expect((await fetch(`${adminUrl}/readyz`)).status).toBe(200)
    const metrics = await (await fetch(`${adminUrl}/metrics`)).text()
    expect(metrics).toContain(
      'api_http_requests_total{route="/api/v1/providers/:id",status="200"} 1',
    )
    expect(metrics).toMatch(/api_open_file_handles 2/)
    expect(metrics).toContain('api_http_request_duration_seconds_bucket')
    expect(new URL(adminUrl).hostname).toBe('127.0.0.1')
  })

  it('logs the key id and never the raw key', () => {
    expect(output).not.toContain(key)
    expect(output).toMatch(/"keyId":"[0-9a-f-]{36}"/)
  })

  it('stops cleanly on SIGTERM', async () => {
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    expect(await exited).toBe(0)
    expect(output).toContain('"msg":"stopping"')
  })
})

describe('api process configuration', () => {
  it('refuses to start, naming DATA_DIR, when the data directory does not exist', async () => {
    const missing = join(newDataDir(), 'missing')
    const child = spawn(join(repoRoot, 'node_modules/.bin/tsx'), ['api/main.ts'], {
      cwd: repoRoot,
      env: { ...process.env, DATA_DIR: missing, PORT: '0', ADMIN_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
    expect(code).toBe(2)
    expect(stderr).toContain(`api: invalid configuration`)
    expect(stderr).toContain(`DATA_DIR: must be an existing directory: ${missing}`)
    rmSync(dirname(missing), { recursive: true, force: true })
  })
})
