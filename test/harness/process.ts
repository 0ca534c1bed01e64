// Child processes and temp dirs of the harness: each is registered so that it is stopped and
// removed by its owner's stop(), and also when this Node process exits (a crashed or interrupted
// test run must not leave brokers or databases behind holding ports).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

/** A harness failure: the message says what is missing or what went wrong, with log tails. */
export class HarnessError extends Error {
  override name = 'HarnessError'
}

/** Thrown by a waitFor probe to stop waiting at once (a state that will not get better). */
export class GiveUp extends HarnessError {
  override name = 'GiveUp'
}

const liveGroups = new Set<number>()
const livePids = new Set<number>()
const liveDirs = new Set<string>()
let hooked = false

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    // Negative pid: the whole process group (runuser's child postgres, the JVM's helpers).
    process.kill(-pid, signal)
  } catch {
    // already gone
  }
}

function cleanupSync(): void {
  for (const pid of liveGroups) killGroup(pid, 'SIGKILL')
  liveGroups.clear()
  for (const pid of livePids) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
  livePids.clear()
  if (process.env.REPLICA_KEEP_TMP !== '1') {
    for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true })
  }
  liveDirs.clear()
}

function hookExit(): void {
  if (hooked) return
  hooked = true
  process.on('exit', cleanupSync)
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      cleanupSync()
      // Re-raise so the default (or the test runner's) handling still happens.
      process.kill(process.pid, signal)
    })
  }
}

/** Kills a process started by someone else (a library) at exit; returns the unregister call. */
export function registerPid(pid: number): () => void {
  hookExit()
  livePids.add(pid)
  return () => livePids.delete(pid)
}

/** A temp dir removed by remove() or at exit (kept when REPLICA_KEEP_TMP=1, for debugging). */
export function makeTempDir(prefix: string): { path: string; remove(): void } {
  hookExit()
  const path = mkdtempSync(join(tmpdir(), `replica-${prefix}-`))
  liveDirs.add(path)
  return {
    path,
    remove() {
      liveDirs.delete(path)
      if (process.env.REPLICA_KEEP_TMP !== '1') rmSync(path, { recursive: true, force: true })
    },
  }
}

// Ports handed out below the kernel's ephemeral range: a port taken from inside it can be taken
// again, between freePort() and the child's listen(), as the source port of any outgoing
// connection (a test's JVMs, Kafka clients and fetches open thousands). A CI run failed that way:
// the api exited with EADDRINUSE. Below the range only another listener can collide, and every
// listener the tests start takes its port from here, checked by a bind.
const EPHEMERAL_LOW = ephemeralRangeLow()
const LISTEN_PORTS = { low: Math.max(10_000, EPHEMERAL_LOW - 20_000), high: EPHEMERAL_LOW - 1 }

function ephemeralRangeLow(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)
    const value = Number(low)
    return Number.isInteger(value) ? value : 0
  } catch {
    return 0 // not Linux: let the OS pick (port 0) and accept its small race
  }
}

/** Ports this process handed out: two calls at once (Promise.all) never get the same one. */
const handedOut = new Set<number>()

/** A TCP port free on 127.0.0.1 right now, outside the range outgoing connections draw from. */
export async function freePort(): Promise<number> {
  if (LISTEN_PORTS.high - LISTEN_PORTS.low < 1000) return bindablePort(0)
  for (let attempt = 0; attempt < 50; attempt++) {
    const span = LISTEN_PORTS.high - LISTEN_PORTS.low + 1
    const candidate = LISTEN_PORTS.low + Math.floor(Math.random() * span)
    if (handedOut.has(candidate)) continue
    handedOut.add(candidate)
    try {
      return await bindablePort(candidate)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error
    }
  }
  return bindablePort(0)
}

/** Binds `port` (0: any) on 127.0.0.1, closes it, and returns the port number. */
async function bindablePort(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => {
      const address = server.address()
      if (address === null || typeof address === 'string') {
        server.close()
        reject(new HarnessError('could not allocate a port'))
        return
      }
      server.close(() => resolve(address.port))
    })
  })
}

/** The absolute path of an executable on PATH, or undefined. */
export function which(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue
    const candidate = join(dir, command)
    if (existsSync(candidate)) return candidate
  }
  return undefined
}

/** Runs a command to completion; throws with its output when it fails. */
export function run(command: string, args: string[], options: { cwd?: string } = {}): string {
  const result = spawnSync(command, args, {
    cwd: options.cwd,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  })
  if (result.error) throw new HarnessError(`${command} could not run: ${result.error.message}`)
  if (result.status !== 0) {
    const output = `${result.stdout}\n${result.stderr}`.trim().split('\n').slice(-40).join('\n')
    throw new HarnessError(
      `${command} ${args.join(' ')} failed (exit ${result.status}):\n${output}`,
    )
  }
  return result.stdout
}

/** Like run(), without blocking the event loop (for slow commands such as a first mvn run). */
export async function runAsync(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
    child.once('error', (error) =>
      reject(new HarnessError(`${command} could not run: ${error.message}`)),
    )
    child.once('close', (code) => {
      if (code === 0) {
        resolve(output)
        return
      }
      const tail = output.trim().split('\n').slice(-40).join('\n')
      reject(new HarnessError(`${command} ${args.join(' ')} failed (exit ${code}):\n${tail}`))
    })
  })
}

export interface ManagedProcess {
  readonly name: string
  readonly child: ChildProcess
  readonly logFile: string
  /** The exit code once it exited (signal exits are -1), else null. */
  exitCode(): number | null
  /** The last lines of its log, for error messages. */
  logTail(lines?: number): string
  /** Signals the process group, waits, and escalates to SIGKILL after timeoutMs. */
  stop(timeoutMs?: number): Promise<void>
}

export interface StartOptions {
  cwd?: string
  env?: NodeJS.ProcessEnv
  logFile: string
  /** SIGTERM by default; PostgreSQL wants SIGINT (fast shutdown, no waiting for clients). */
  stopSignal?: NodeJS.Signals
}

/** Starts a long-running child in its own process group, stdout and stderr into logFile. */
export function startProcess(
  name: string,
  command: string,
  args: string[],
  options: StartOptions,
): ManagedProcess {
  hookExit()
  const log = openSync(options.logFile, 'a')
  let child: ChildProcess
  try {
    child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', log, log],
      detached: true,
    })
  } finally {
    closeSync(log)
  }
  let code: number | null = null
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (exitCode) => {
      code = exitCode ?? -1
      if (child.pid !== undefined) liveGroups.delete(child.pid)
      resolve()
    })
    child.once('error', (error) => {
      // Could not spawn at all: say so in the log, where error messages look.
      appendFileSync(options.logFile, `\nspawn ${command} failed: ${error.message}\n`)
      code = -1
      resolve()
    })
  })
  if (child.pid !== undefined) liveGroups.add(child.pid)
  // The harness owns its children; it must not keep the test process alive on its own.
  child.unref()

  const logTail = (lines = 60): string => {
    try {
      return readFileSync(options.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
    } catch {
      return '(no log)'
    }
  }

  return {
    name,
    child,
    logFile: options.logFile,
    exitCode: () => code,
    logTail,
    async stop(timeoutMs = 15_000) {
      const pid = child.pid
      if (pid === undefined || code !== null) return
      killGroup(pid, options.stopSignal ?? 'SIGTERM')
      // The timer is cancelled once the process exits, so it cannot hold the event loop open.
      const timer = new AbortController()
      const timedOut = await Promise.race([
        exited.then(() => false),
        sleep(timeoutMs, true, { signal: timer.signal }).catch(() => false),
      ])
      timer.abort()
      if (timedOut) {
        killGroup(pid, 'SIGKILL')
        await exited
      }
      // Helpers left in the group (postgres backends after runuser exits) go too.
      killGroup(pid, 'SIGKILL')
      liveGroups.delete(pid)
    },
  }
}

/**
 * Polls `probe` until it returns a value other than undefined. Fails early when `process` exits,
 * and on timeout; both errors carry the process's log tail.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  options: { timeoutMs: number; intervalMs?: number; process?: ManagedProcess },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs
  let lastError: unknown
  for (;;) {
    const proc = options.process
    if (proc !== undefined && proc.exitCode() !== null) {
      throw new HarnessError(
        `${proc.name} exited (code ${proc.exitCode()}) while waiting for ${what}; log ${proc.logFile}:\n${proc.logTail()}`,
      )
    }
    try {
      const value = await probe()
      if (value !== undefined) return value
    } catch (error) {
      if (error instanceof GiveUp) throw error
      lastError = error
    }
    if (Date.now() > deadline) {
      const reason = lastError instanceof Error ? ` (last error: ${lastError.message})` : ''
      const log = proc !== undefined ? `; log ${proc.logFile}:\n${proc.logTail()}` : ''
      throw new HarnessError(
        `timed out after ${options.timeoutMs} ms waiting for ${what}${reason}${log}`,
      )
    }
    await sleep(options.intervalMs ?? 250)
  }
}
