// `npm run bench:live-apply`: what the projector's lanes spend on a live change, measured apart
// from the pipeline. bench:freshness times the whole pipeline on two shared cores, where a run
// moves by half from the next; this times one part of it, steadily enough to compare two commits.
//
// One generated organization (scripts/dataset) is loaded by `projector --from-file` (its snapshot,
// as an initial load), then its streamed changes are applied as live groups of --group events: a
// projector (projector.ts, the file source's path) on the caught-up data directory, each group one
// `runFile`, so each is routed, handed to the lanes, applied to the mirror, its documents rebuilt
// and compared, committed and synced, as a live Kafka group is. It runs in a process of its own
// with `npm run projector`'s node flags.
//
//   npm run bench:live-apply [-- --providers 400] [--rounds 200] [--group 150] [--lanes 1]
//       [--events 60000] [--encoding schemas|schemaless]
//
// --encoding is the events' envelope: `schemas` (the default, as every figure before 2026-11-30
// evening was taken) or `schemaless`, the shipped connector's.
//
// Ends with one line of JSON: {"events", "groups", "groupEvents", "lanes", "usPerEvent" (wall),
// "cpuUsPerEvent" (the process, every thread), "laneCpuUsPerEvent" (the busiest thread but the
// main one: with --lanes 1, the lane), "mainCpuUsPerEvent"}. The lane's figure is the one to
// compare: the main thread's counts `runFile`'s own cost per call (opening its file and control.db,
// reading the file), which a Kafka source does not pay per group.
import { spawn } from 'node:child_process'
import { createReadStream, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'
import { createProjector } from '../projector/projector.ts'
import { loadProjectorConfig } from '../src/config.ts'
import { createLogger } from '../src/log.ts'
import { repoRoot } from '../test/harness/paths.ts'
import { liveOrganization } from './live-org.ts'
import type { BenchEncoding } from './dataset.ts'
import { chunksOf } from './live-writer.ts'
import { threadTicks } from './machine-cpu.ts'
import { projectorNodeFlags } from './projector-run.ts'

const { values } = parseArgs({
  options: {
    providers: { type: 'string', default: '400' },
    rounds: { type: 'string', default: '200' },
    group: { type: 'string', default: '150' },
    lanes: { type: 'string', default: '1' },
    events: { type: 'string', default: '60000' },
    encoding: { type: 'string', default: 'schemas' },
    // The child's: the caught-up data directory and the stream to apply.
    apply: { type: 'string' },
    stream: { type: 'string' },
  },
})

function positive(name: keyof typeof values): number {
  const value = Number(values[name])
  if (!Number.isSafeInteger(value) || value < 1)
    throw new Error(`--${name} must be a positive integer`)
  return value
}

const groupEvents = positive('group')
const lanes = positive('lanes')
const maxEvents = positive('events')
const encoding: BenchEncoding =
  values.encoding === 'schemas' || values.encoding === 'schemaless'
    ? values.encoding
    : (() => {
        throw new Error('--encoding must be schemas or schemaless')
      })()
/** Microseconds per clock tick of /proc (USER_HZ). */
const TICK_US = 10_000

/** The first `limit` lines of a file (a stream with schemas is too large for one string). */
async function firstLines(path: string, limit: number): Promise<string[]> {
  const lines: string[] = []
  for await (const line of createInterface({ input: createReadStream(path) })) {
    if (line !== '') lines.push(line)
    if (lines.length >= limit) break
  }
  return lines
}

/** The child: applies the stream as live groups and prints the figures. */
async function applyLive(dataDir: string, streamFile: string): Promise<void> {
  const lines = await firstLines(streamFile, maxEvents)
  const config = loadProjectorConfig({ DATA_DIR: dataDir, LANES: String(lanes), LOG_LEVEL: 'warn' })
  const projector = createProjector({ config, logger: createLogger('projector', 'warn') })
  const groupFile = join(dataDir, 'live-group.ndjson')
  const before = threadTicks(process.pid)
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  let events = 0
  let groups = 0
  for (const group of chunksOf(lines, groupEvents)) {
    writeFileSync(groupFile, `${group.join('\n')}\n`)
    events += (await projector.runFile(groupFile)).records
    groups++
  }
  const wallMs = performance.now() - started
  const cpu = process.cpuUsage(cpuBefore)
  const after = threadTicks(process.pid)
  await projector.stop()
  const spent = [...after].map(([tid, ticks]) => ({
    tid,
    us: (ticks - (before.get(tid) ?? 0)) * TICK_US,
  }))
  const main = spent.find((t) => t.tid === process.pid)?.us ?? 0
  const lane = Math.max(0, ...spent.filter((t) => t.tid !== process.pid).map((t) => t.us))
  const perEvent = (us: number) => Math.round((us / events) * 10) / 10
  const figures = {
    events,
    groups,
    groupEvents,
    lanes,
    encoding,
    usPerEvent: perEvent(wallMs * 1000),
    cpuUsPerEvent: perEvent(cpu.user + cpu.system),
    laneCpuUsPerEvent: perEvent(lane),
    mainCpuUsPerEvent: perEvent(main),
  }
  process.stdout.write(`${JSON.stringify(figures)}\n`)
}

/** The parent: loads the organization, runs the child, removes what it made. */
async function main(): Promise<void> {
  const log = (line: string) => process.stderr.write(`${line}\n`)
  const organization = await liveOrganization(
    positive('providers'),
    positive('rounds'),
    log,
    encoding,
  )
  try {
    log(
      `applying up to ${Math.min(maxEvents, organization.events.stream)} of its ` +
        `${organization.events.stream} streamed changes in live groups of ${groupEvents}...`,
    )
    const forwarded = process.argv.slice(2)
    const child = spawn(
      process.execPath,
      [
        ...projectorNodeFlags,
        'bench/live-apply.ts',
        ...forwarded,
        '--apply',
        organization.dataDir,
        '--stream',
        organization.streamFile,
      ],
      { cwd: repoRoot, stdio: ['ignore', 'inherit', 'inherit'] },
    )
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
    if (code !== 0) throw new Error(`the live run exited with ${code}`)
  } finally {
    rmSync(dirname(organization.dataDir), { recursive: true, force: true })
  }
}

if (values.apply !== undefined && values.stream !== undefined) {
  await applyLive(values.apply, values.stream)
} else {
  await main()
}
