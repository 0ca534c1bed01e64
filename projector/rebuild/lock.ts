// One rebuild at a time per data directory: a lock file naming its holder. A holder that died
// (SIGKILL, a crash) leaves the file behind; the next run sees its process is gone and takes over.
import { hostname } from 'node:os'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface LockHolder {
  pid: number
  host: string
  command: string
  since: string
}

export type LockResult = { held: true; release: () => void } | { held: false; holder: LockHolder }

export function rebuildLockPath(dataDir: string): string {
  return join(dataDir, 'rebuild.lock')
}

export function acquireRebuildLock(dataDir: string, command: string, now: Date): LockResult {
  const path = rebuildLockPath(dataDir)
  const me: LockHolder = { pid: process.pid, host: hostname(), command, since: now.toISOString() }
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, `${JSON.stringify(me)}\n`, { flag: 'wx' })
      return { held: true, release: () => rmSync(path, { force: true }) }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
    const holder = readHolder(path)
    if (holder !== undefined && holder.host === me.host && !processAlive(holder.pid)) {
      rmSync(path, { force: true })
      continue
    }
    if (holder !== undefined) return { held: false, holder }
    // Unreadable: being written this instant, or damaged. Name it as it is.
    return {
      held: false,
      holder: { pid: 0, host: 'unknown', command: 'unknown', since: 'unknown' },
    }
  }
  return { held: false, holder: readHolder(path) ?? me }
}

export function describeHolder(holder: LockHolder): string {
  return `pid ${holder.pid} on ${holder.host}, running '${holder.command}' since ${holder.since}`
}

function readHolder(path: string): LockHolder | undefined {
  try {
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockHolder>
    if (typeof parsed.pid !== 'number' || typeof parsed.host !== 'string') return undefined
    return {
      pid: parsed.pid,
      host: parsed.host,
      command: String(parsed.command),
      since: String(parsed.since),
    }
  } catch {
    return undefined
  }
}

/** Whether a process runs under `pid` on this host (EPERM: another user's, alive too). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
