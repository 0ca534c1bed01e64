// A real Redis for the shared rate-limit tests: the system's redis-server (Debian's redis-server
// package) on a free port, no persistence, in a temp dir.
import { connect } from 'node:net'
import { join } from 'node:path'
import { freePort, HarnessError, makeTempDir, startProcess, waitFor, which } from './process.ts'

export interface StartedRedis {
  /** redis://127.0.0.1:<port> */
  url: string
  port: number
  stop(): Promise<void>
}

/** One PING over a raw socket: true on +PONG. */
async function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    socket.setTimeout(1000)
    let reply = ''
    socket.on('connect', () => socket.write('PING\r\n'))
    socket.on('data', (chunk) => {
      reply += chunk.toString('utf8')
      if (reply.includes('\r\n')) {
        socket.destroy()
        resolve(reply.startsWith('+PONG'))
      }
    })
    socket.on('timeout', () => {
      socket.destroy()
      resolve(false)
    })
    socket.on('error', () => resolve(false))
  })
}

export async function startRedis(): Promise<StartedRedis> {
  const server = which('redis-server')
  if (server === undefined) {
    throw new HarnessError(
      'redis-server not found on PATH: install it with apt-get install -y redis-server',
    )
  }
  const tmp = makeTempDir('redis')
  const port = await freePort()
  const proc = startProcess(
    'redis-server',
    server,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      tmp.path,
      '--save',
      '',
      '--appendonly',
      'no',
      // Tests never daemonize it: the harness owns the process.
      '--daemonize',
      'no',
    ],
    { logFile: join(tmp.path, 'redis.log') },
  )
  try {
    await waitFor(
      `redis-server on port ${port}`,
      async () => ((await ping(port)) ? true : undefined),
      {
        timeoutMs: 15_000,
        intervalMs: 100,
        process: proc,
      },
    )
  } catch (error) {
    await proc.stop()
    tmp.remove()
    throw error
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      await proc.stop()
      tmp.remove()
    },
  }
}
