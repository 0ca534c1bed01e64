// What the projector benchmarks share: the projector command on a file in a child process (as
// `npm run projector` starts it), and waiting for a consumer group to commit up to the ends of
// its topics.
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import type { Admin } from 'kafkajs'
import { isolatedChildEnv } from '../src/config.ts'
import { repoRoot, scriptNodeFlags } from '../test/harness/paths.ts'

/**
 * How `npm run projector` starts node (package.json), so that the file runs measure the projector
 * as it is started, V8's young generation included.
 */
export const projectorNodeFlags = [...scriptNodeFlags('projector'), '--import', 'tsx']

/** The summary `projector --from-file` prints as its last line. */
export interface FileRunSummary {
  records: number
  seconds: number
  peakRssMb: number
  lanes?: number
}

/**
 * The projector command on the file, in a child process; its last log line is the summary.
 * `env`: more environment for the child (LANES, OPEN_FILES_MAX, ...).
 */
export function projectFile(
  path: string,
  dataDir: string,
  env: Record<string, string> = {},
): Promise<FileRunSummary> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...projectorNodeFlags, 'projector/main.ts', '--from-file', path],
      {
        cwd: repoRoot,
        env: isolatedChildEnv(process.env, { DATA_DIR: dataDir, LOG_LEVEL: 'info', ...env }),
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    )
    let last = ''
    createInterface({ input: child.stdout }).on('line', (line) => (last = line))
    child.on('error', reject)
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`projector exited ${code}`))
      resolve(JSON.parse(last) as FileRunSummary)
    })
  })
}

/**
 * A running process's peak resident memory in MB, from Linux's /proc (VmHWM); null elsewhere.
 * For a process that still runs: `resourceUsage()` gives a child's only after its exit.
 */
export function peakRssMbOf(pid: number | undefined): number | null {
  if (pid === undefined) return null
  try {
    const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
    return kb === undefined ? null : Math.round(Number(kb) / 1024)
  } catch {
    return null
  }
}

/** The end offset of every partition of `topics`, by `topic:partition`. */
export async function endOffsets(admin: Admin, topics: string[]): Promise<Map<string, bigint>> {
  const ends = new Map<string, bigint>()
  for (const topic of topics) {
    for (const p of await admin.fetchTopicOffsets(topic))
      ends.set(`${topic}:${p.partition}`, BigInt(p.high))
  }
  return ends
}

/** Resolves once `groupId` has committed every partition of `topics` up to `ends`. */
export async function waitCommitted(
  admin: Admin,
  groupId: string,
  topics: string[],
  ends: Map<string, bigint>,
  intervalMs = 100,
): Promise<void> {
  for (;;) {
    const committed = await admin.fetchOffsets({ groupId, topics })
    const done = committed.every((t) =>
      t.partitions.every((p) => {
        const end = ends.get(`${t.topic}:${p.partition}`) ?? 0n
        return end === 0n || (p.offset !== '-1' && BigInt(p.offset) >= end)
      }),
    )
    if (done) return
    await new Promise((r) => setTimeout(r, intervalMs))
  }
}
