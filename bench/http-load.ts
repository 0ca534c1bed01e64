// What the HTTP benchmarks (bench/api.ts, bench/peer.ts) share: servers as child processes,
// autocannon in a process of its own (its command line, or bench/distinct-load.ts for distinct
// pages), and the server's CPU time per request from /proc.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { BenchConfig } from '../src/config.ts'
import { repoRoot } from '../test/harness/paths.ts'
import type { DistinctPlan } from './distinct-load.ts'
import { processTicks } from './machine-cpu.ts'

const autocannonBin = join(repoRoot, 'node_modules/.bin/autocannon')

/** A bench whose figures must not be used (a run had failed requests, or the servers disagree). */
export class BenchFailure extends Error {
  override name = 'BenchFailure'
}

/** A TypeScript entry point in its own Node process (one process, so its CPU time is its own). */
export function startChild(
  args: string[],
  env: Record<string, string>,
  nodeOptions: string[] = [],
): ChildProcess {
  return spawn(process.execPath, [...nodeOptions, '--import', 'tsx', ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  })
}

/** Stops the children and waits for them to exit. */
export async function stopChildren(children: readonly ChildProcess[]): Promise<void> {
  for (const child of children) child.kill('SIGTERM')
  await Promise.all(
    children.map((c) =>
      c.exitCode === null && c.signalCode === null
        ? new Promise((resolve) => c.once('exit', resolve))
        : Promise.resolve(),
    ),
  )
}

export async function waitFor(url: string, headers: Record<string, string> = {}): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      const response = await fetch(url, { headers })
      if (response.ok) return
    } catch {
      // not up yet
    }
    await sleep(100)
  }
  throw new Error(`${url} did not come up`)
}

export interface LoadResult {
  /** CPU time (user + system) of the server process per request, in ms. */
  cpuMsPerRequest: number
  /**
   * The share of the run (%) the server's main thread spent runnable but waiting for a core: on
   * a machine of two cores shared with the load and a writer, the latency that is the machine's.
   */
  serverWaitPct: number
  /**
   * The same of the load's own process (autocannon), sampled every 200 ms until it exits: on a
   * machine of two cores, a client that takes one whole bounds what the server can be shown to do.
   */
  clientCpuMsPerRequest: number
  rps: number
  p50: number
  p99: number
  errors: number
  non2xx: number
  bytesPerRequest: number
}

/**
 * What a server had used when a run began: its CPU seconds, and how long its main thread had
 * waited, runnable, for a core (the scheduler's run queue, /proc/<pid>/task/<pid>/schedstat), in
 * ms, at `at` (performance.now()).
 */
interface ServerSample {
  cpu: number
  waitedMs: number
  at: number
}

function sampleServer(pid: number): ServerSample {
  const fields = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')
  return { cpu: cpuSeconds(pid), waitedMs: Number(fields[1]) / 1e6, at: performance.now() }
}

/** CPU seconds (user + system) a process has used so far, from /proc. */
export function cpuSeconds(pid: number): number {
  return processTicks(pid).ticks / 100 // clock ticks (USER_HZ 100)
}

/** One autocannon run against `url` served by `server`, as fast as it answers. */
export async function autocannon(
  bench: BenchConfig,
  url: string,
  key: string | undefined,
  server: ChildProcess,
  /** More request headers, `name=value` (autocannon's -H). */
  headers: readonly string[] = [],
): Promise<LoadResult> {
  const before = sampleServer(server.pid as number)
  const args = ['--json', '-c', String(bench.connections), '-d', String(bench.durationSeconds)]
  if (key !== undefined) args.push('-H', `authorization=Bearer ${key}`)
  for (const header of headers) args.push('-H', header)
  args.push(url)
  const child = spawn(autocannonBin, args, { stdio: ['ignore', 'pipe', 'ignore'] })
  const { out, cpu } = await stdoutOf(child)
  return loadResult(server, before, out, cpu)
}

/**
 * `rate` requests a second to `url` served by `server`, spread evenly (bench/paced-load.ts; not
 * autocannon's -R, which sends each second's share in a burst).
 */
export function pacedLoad(
  bench: BenchConfig,
  url: string,
  key: string | undefined,
  server: ChildProcess,
  rate: number,
): Promise<LoadResult & { next: number }> {
  const { origin, pathname, search } = new URL(url)
  const plan: DistinctPlan = {
    origin,
    paths: [`${pathname}${search}`],
    start: 0,
    headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
    connections: bench.connections,
    seconds: bench.durationSeconds,
    rate,
  }
  return loadProcess('bench/paced-load.ts', plan, server)
}

/** The rest of a distinct-pages plan (bench/distinct-load.ts): what a run adds is the load's size. */
export type DistinctPages = Pick<DistinctPlan, 'origin' | 'paths' | 'start'>

/**
 * One run of distinct pages against `server` (bench/distinct-load.ts): each request the next of
 * `pages.paths`, from `pages.start`; with `rate`, that many requests a second paced evenly
 * (bench/paced-load.ts). Also returns the index the next run should start at, so that no path is
 * asked for twice while still in the page cache.
 */
export async function distinctLoad(
  bench: BenchConfig,
  pages: DistinctPages,
  key: string,
  server: ChildProcess,
  rate?: number,
): Promise<LoadResult & { next: number }> {
  const plan: DistinctPlan = {
    ...pages,
    headers: { authorization: `Bearer ${key}` },
    connections: bench.connections,
    seconds: bench.durationSeconds,
    ...(rate === undefined ? {} : { rate }),
  }
  return loadProcess(
    rate === undefined ? 'bench/distinct-load.ts' : 'bench/paced-load.ts',
    plan,
    server,
  )
}

/** A load `script` run on `plan` in a process of its own, against `server`. */
async function loadProcess(
  script: string,
  plan: DistinctPlan,
  server: ChildProcess,
): Promise<LoadResult & { next: number }> {
  const before = sampleServer(server.pid as number)
  const dir = mkdtempSync(join(tmpdir(), 'bench-load-'))
  try {
    const planFile = join(dir, 'plan.json')
    writeFileSync(planFile, JSON.stringify(plan))
    const child = spawn(process.execPath, ['--import', 'tsx', script, planFile], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const { out, cpu } = await stdoutOf(child)
    return {
      ...loadResult(server, before, out, cpu),
      next: (JSON.parse(out) as { next: number }).next,
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** What the child printed, and about the CPU seconds it used (its last sample before it exited). */
async function stdoutOf(child: ChildProcess): Promise<{ out: string; cpu: number }> {
  let out = ''
  let cpu = 0
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()))
  const sample = () => {
    try {
      cpu = cpuSeconds(child.pid as number)
    } catch {
      // exited between two samples
    }
  }
  const sampling = setInterval(sample, 200)
  await new Promise((resolve) => child.on('exit', resolve))
  clearInterval(sampling)
  return { out, cpu }
}

/** A run's figures from autocannon's JSON, with what the server used since `before`. */
function loadResult(
  server: ChildProcess,
  before: ServerSample,
  out: string,
  clientCpu: number,
): LoadResult {
  const after = sampleServer(server.pid as number)
  const cpu = after.cpu - before.cpu
  const r = JSON.parse(out) as {
    /** `sent`: a paced load's requests, its warm-up's included (bench/paced-load.ts). */
    requests: { average: number; total: number; sent?: number }
    latency: { p50: number; p99: number }
    throughput: { total: number }
    errors: number
    non2xx: number
  }
  // The CPU is the whole run's: a paced load's warm-up is in it, and so are its requests.
  const served = r.requests.sent ?? r.requests.total
  return {
    cpuMsPerRequest: served > 0 ? Math.round((cpu * 1e6) / served) / 1000 : 0,
    serverWaitPct:
      Math.round((1000 * (after.waitedMs - before.waitedMs)) / (after.at - before.at)) / 10,
    clientCpuMsPerRequest: served > 0 ? Math.round((clientCpu * 1e6) / served) / 1000 : 0,
    rps: Math.round(r.requests.average),
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors,
    non2xx: r.non2xx,
    bytesPerRequest: r.requests.total > 0 ? Math.round(r.throughput.total / r.requests.total) : 0,
  }
}

/** The measured runs that had errors or non-2xx responses, one line each. */
export function failedRuns(results: Record<string, LoadResult>): string[] {
  return Object.entries(results)
    .filter(([, r]) => r.errors > 0 || r.non2xx > 0)
    .map(([name, r]) => `${name}: ${r.errors} errors, ${r.non2xx} non-2xx responses`)
}

/**
 * How busy the run kept the server: its CPU per request times the rate, as a share of one core
 * (the api is one thread). Spread evenly, a request costs more CPU than in the back-to-back load
 * of a saturation run (each is a wake-up of its own: the cached list page 0.12-0.19 ms against
 * 0.06-0.09), so half the saturation rate can keep a server more than half busy.
 */
export function busyPct(r: LoadResult): number {
  return Math.round((r.rps * r.cpuMsPerRequest) / 10)
}

/** One line of figures of a run. */
export function resultLine(name: string, r: LoadResult): string {
  return (
    `${name.padEnd(14)} ${String(r.rps).padStart(7)} req/s  p50 ${r.p50} ms  p99 ${r.p99} ms` +
    `  server cpu ${r.cpuMsPerRequest} ms/req (busy ${busyPct(r)}%, waited for a core ` +
    `${r.serverWaitPct}% of the run)` +
    `  client cpu ${r.clientCpuMsPerRequest} ms/req` +
    `  ${r.bytesPerRequest} B/req` +
    `  errors ${r.errors}  non-2xx ${r.non2xx}`
  )
}
