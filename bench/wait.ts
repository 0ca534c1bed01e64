// What the benchmarks share to wait and to count: polling a condition, readiness, percentiles,
// and sums of Prometheus metrics.
import { setTimeout as sleep } from 'node:timers/promises'

/** Polls `probe` every 20 ms until it is true; throws after `ms`. */
export async function waitUntil(
  what: string,
  probe: () => Promise<boolean> | boolean,
  ms: number,
): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s`)
    await sleep(20)
  }
}

/** Whether a process's operations server at `url` answers /readyz with 200. */
export async function readyz(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/readyz`)).status === 200
  } catch {
    return false
  }
}

/** The p-th percentile (nearest rank) of ascending values; NaN when there are none. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

/** A metric's value summed over its labels, from Prometheus text. */
export function metricSum(text: string, name: string): number {
  let sum = 0
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) {
      sum += Number(line.slice(line.lastIndexOf(' ') + 1))
    }
  }
  return sum
}
