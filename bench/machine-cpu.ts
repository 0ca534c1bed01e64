// Where a machine's CPU goes over a stretch of a benchmark: every process's CPU time (user and
// system, from /proc/<pid>/stat), summed by the role its command line names, against the machine's
// own time (/proc/stat). A benchmark that runs the whole pipeline on one machine says with it
// which part of the pipeline the cores were spent on. Linux only; elsewhere the shares are empty.
import { readdirSync, readFileSync } from 'node:fs'

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
  let pids: string[] = []
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name))
  } catch {
    return { byRole, machineBusy: 0, machineTotal: 0 }
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ')
      // utime and stime: fields 14 and 15 of stat, 12 and 13 after the command's parenthesis.
      const ticks = Number(fields[11]) + Number(fields[12])
      const commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
        .replace(/\0$/, '')
        .replaceAll('\0', ' ')
      const name = role(commandLine, Number(pid)) ?? 'other'
      byRole.set(name, (byRole.get(name) ?? 0) + ticks)
    } catch {
      // Gone meanwhile.
    }
  }
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1)
  const ticks = cpu.map(Number)
  // user nice system idle iowait irq softirq steal: idle, iowait and steal (a virtual machine's
  // time taken by its host) are not this machine's work.
  const machineTotal = ticks.slice(0, 8).reduce((a, b) => a + b, 0)
  const machineBusy = machineTotal - (ticks[3] ?? 0) - (ticks[4] ?? 0) - (ticks[7] ?? 0)
  return { byRole, machineBusy, machineTotal }
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
