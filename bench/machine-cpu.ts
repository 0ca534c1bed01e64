// Where a machine's CPU goes over a stretch of a benchmark: every process's CPU time (user and
// system, from /proc/<pid>/stat), summed by the role its command line names, against the machine's
// own time (/proc/stat). A benchmark that runs the whole pipeline on one machine says with it
// which part of the pipeline the cores were spent on. Linux only; elsewhere the shares are empty.
// The readings themselves (a process's ticks, every process's, the machine's) are also what
// bench/http-load.ts samples a server by and bench/rebuild.ts sums its children by.
import { readdirSync, readFileSync } from 'node:fs'

/** A process's CPU time so far, in clock ticks (USER_HZ, 100 a second on Linux). */
export interface ProcessCpu {
  pid: number
  parent: number
  ticks: number
  /** Its arguments joined by spaces. */
  commandLine: string
}

/** One process's CPU ticks so far (user and system) and its parent, from /proc/<pid>/stat. */
export function processTicks(pid: number): { parent: number; ticks: number } {
  return ticksOf(`/proc/${pid}/stat`)
}

/** Each thread's CPU ticks so far (user and system) in a process, by thread id. */
export function threadTicks(pid: number): Map<number, number> {
  const threads = new Map<number, number>()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      threads.set(Number(tid), ticksOf(`/proc/${pid}/task/${tid}/stat`).ticks)
    } catch {
      // Ended between the listing and the read.
    }
  }
  return threads
}

function ticksOf(statPath: string): { parent: number; ticks: number } {
  const stat = readFileSync(statPath, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ')
  // ppid, utime and stime: fields 4, 14 and 15 of proc(5); 2, 12 and 13 after the command.
  return { parent: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) }
}

/** Every process's CPU time so far, from /proc (none where there is no /proc). */
export function readProcesses(): ProcessCpu[] {
  let pids: string[] = []
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name))
  } catch {
    return []
  }
  const processes: ProcessCpu[] = []
  for (const pid of pids) {
    try {
      const { parent, ticks } = processTicks(Number(pid))
      const commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
        .replace(/\0$/, '')
        .replaceAll('\0', ' ')
      processes.push({ pid: Number(pid), parent, ticks, commandLine })
    } catch {
      // Gone meanwhile.
    }
  }
  return processes
}

/**
 * The machine's CPU time so far, every core, in clock ticks (/proc/stat): in all (user, nice,
 * system, idle, iowait, irq, softirq, steal), idle (idle and iowait), and steal (a virtual
 * machine's time taken by its host).
 */
export function readMachineTicks(): { total: number; idle: number; steal: number } {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!
    const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number)
    return {
      total: ticks.reduce((a, b) => a + b, 0),
      idle: (ticks[3] ?? 0) + (ticks[4] ?? 0),
      steal: ticks[7] ?? 0,
    }
  } catch {
    return { total: 0, idle: 0, steal: 0 }
  }
}

/** The role of a process by its command line (arguments joined by spaces); undefined: other. */
export type ProcessRole = (commandLine: string, pid: number) => string | undefined

/** CPU ticks by role, and the machine's busy and total ticks, at one instant. */
export interface CpuSnapshot {
  byRole: Map<string, number>
  machineBusy: number
  machineTotal: number
}

/** Every process's CPU ticks so far, summed by `role`; processes of no role count as `other`. */
export function cpuSnapshot(role: ProcessRole): CpuSnapshot {
  const byRole = new Map<string, number>()
  for (const { pid, ticks, commandLine } of readProcesses()) {
    const name = role(commandLine, pid) ?? 'other'
    byRole.set(name, (byRole.get(name) ?? 0) + ticks)
  }
  // Steal is not this machine's work.
  const machine = readMachineTicks()
  return {
    byRole,
    machineBusy: machine.total - machine.idle - machine.steal,
    machineTotal: machine.total,
  }
}

/**
 * Each role's share of one core between two snapshots, in percent, largest first, then the
 * machine's busy share of all its cores (`machine`, out of 100 x cores). A process that started
 * between them counts its whole time; one that ended, none.
 */
export function cpuShares(
  before: CpuSnapshot,
  after: CpuSnapshot,
  cores: number,
): Array<[string, number]> {
  const elapsed = (after.machineTotal - before.machineTotal) / cores
  if (elapsed <= 0) return []
  const shares: Array<[string, number]> = []
  for (const [name, ticks] of after.byRole) {
    const used = ticks - (before.byRole.get(name) ?? 0)
    if (used > 0) shares.push([name, Math.round((used / elapsed) * 100)])
  }
  shares.sort((a, b) => b[1] - a[1])
  shares.push(['machine', Math.round(((after.machineBusy - before.machineBusy) / elapsed) * 100)])
  return shares
}

/** `role 45%, role 30%, ..., machine 190% of 200%`. */
export function formatShares(shares: Array<[string, number]>, cores: number): string {
  return shares
    .map(([name, pct]) =>
      name === 'machine' ? `machine ${pct}% of ${cores * 100}%` : `${name} ${pct}%`,
    )
    .join(', ')
}
