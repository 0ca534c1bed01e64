// `npm run bench:projector:stages`: what each stage of the projector's write path costs per event
// on this machine, on the bench dataset in both of the JsonConverter's encodings (with schemas,
// Debezium's default, and schemas.enable=false), in one pass each on one thread (write-path.ts):
// reading and parsing, decoding and validating, routing, writing the mirror rows and building the
// documents. Their sum is the time one event takes one thread. The process's CPU over the same
// run also counts V8's collector threads and the kernel: cores / that CPU per event is the most
// any split of this work over the cores could reach (`ceilingEventsPerSecond`).
// `npm run bench:projector` measures the whole projector.
//
// For comparison, in the same run: the first --compare-events lines read by the file source
// (sourceParseMicros) and the same lines parsed each whole by JSON.parse (what the file source
// would cost without its schema-skipping fast path: wholeLineJsonParseMicros), alternated twice,
// the better of each kept.
//
//   npm run bench:projector:stages [-- --events 1000000] [--compare-events 200000]
//       [--encoding schemas|schemaless|both]
//
// Ends with one line of JSON: {"events", "cores", "schemas": {...}, "schemaless": {...},
// "budgetMicros"}, each encoding with "readAndParseMicros", "decodeMicros", "routeMicros",
// "firstStagesMicros" (the three before), "writeMicros", "buildMicros", "wholePathMicros",
// "cpuMicros", "sourceParseMicros", "wholeLineJsonParseMicros", per event, and
// "ceilingEventsPerSecond".
import { mkdtempSync, rmSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { FILE_BATCH_RECORDS } from '../projector/projector.ts'
import { readRecordBatches } from '../projector/sources/file.ts'
import { type BenchEncoding, benchDataset } from './dataset.ts'
import { runWritePath } from './write-path.ts'

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '1000000' },
    'compare-events': { type: 'string', default: '200000' },
    encoding: { type: 'string', default: 'both' },
  },
})
const targetEvents = Number(values.events)
const compareEvents = Number(values['compare-events'])
if (!Number.isSafeInteger(targetEvents) || targetEvents < 1)
  throw new Error('--events must be a positive integer')
if (!Number.isSafeInteger(compareEvents) || compareEvents < 0)
  throw new Error('--compare-events must be a non-negative integer')
const encodings: BenchEncoding[] =
  values.encoding === 'both'
    ? ['schemas', 'schemaless']
    : values.encoding === 'schemas' || values.encoding === 'schemaless'
      ? [values.encoding]
      : (() => {
          throw new Error('--encoding must be schemas, schemaless or both')
        })()

const TARGET_EVENTS_PER_SECOND = 50_000
const CORES = availableParallelism()
/** The dataset's topic prefix (scripts/dataset), the projector's default. */
const TOPIC_PREFIX = 'product'

const log = (line: string) => process.stderr.write(`${line}\n`)

interface StageMicros {
  readAndParseMicros: number
  decodeMicros: number
  routeMicros: number
  firstStagesMicros: number
  writeMicros: number
  buildMicros: number
  wholePathMicros: number
  cpuMicros: number
  ceilingEventsPerSecond: number
  sourceParseMicros: number | null
  wholeLineJsonParseMicros: number | null
}

/** Every stage over the file, as the projector runs them; µs per event. */
async function stages(path: string): Promise<{ events: number; micros: StageMicros }> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-stages-'))
  let run: Awaited<ReturnType<typeof runWritePath>>
  try {
    run = await runWritePath(path, dir, targetEvents, TOPIC_PREFIX)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  const { events, nanos, cpuMicros } = run
  const perEvent = (n: bigint) => Number((Number(n) / 1000 / events).toFixed(2))
  const whole = nanos.readAndParse + nanos.decode + nanos.route + nanos.write + nanos.build
  return {
    events,
    micros: {
      readAndParseMicros: perEvent(nanos.readAndParse),
      decodeMicros: perEvent(nanos.decode),
      routeMicros: perEvent(nanos.route),
      firstStagesMicros: perEvent(nanos.readAndParse + nanos.decode + nanos.route),
      writeMicros: perEvent(nanos.write),
      buildMicros: perEvent(nanos.build),
      wholePathMicros: perEvent(whole),
      cpuMicros: Number((cpuMicros / events).toFixed(2)),
      ceilingEventsPerSecond: Math.round((CORES * 1e6 * events) / cpuMicros),
      sourceParseMicros: null,
      wholeLineJsonParseMicros: null,
    },
  }
}

/** The first `limit` lines read by the file source; µs per line. */
async function sourceParse(path: string, limit: number): Promise<number> {
  let lines = 0
  const started = process.hrtime.bigint()
  for await (const batch of readRecordBatches(path, FILE_BATCH_RECORDS)) {
    lines += batch.length
    if (lines >= limit) break
  }
  return Number((Number(process.hrtime.bigint() - started) / 1000 / lines).toFixed(2))
}

/**
 * The first `limit` lines read in the same 4 MB chunks, each parsed whole by JSON.parse: the
 * naive read-and-parse, for comparison with readRecordBatches. µs per line.
 */
async function wholeLineJsonParse(path: string, limit: number): Promise<number> {
  const file = await open(path, 'r')
  const chunk = Buffer.allocUnsafe(4 << 20)
  let lines = 0
  let sink = 0
  const started = process.hrtime.bigint()
  try {
    let position = 0
    let carry: Buffer | undefined
    outer: for (;;) {
      const { bytesRead } = await file.read(chunk, 0, chunk.length, position)
      if (bytesRead === 0) break
      position += bytesRead
      let buf = chunk.subarray(0, bytesRead)
      if (carry !== undefined) buf = Buffer.concat([carry, buf])
      let start = 0
      for (let lf = buf.indexOf(0x0a); lf !== -1; lf = buf.indexOf(0x0a, start)) {
        const record = JSON.parse(buf.toString('utf8', start, lf)) as { topic: string }
        sink += record.topic.length
        start = lf + 1
        if (++lines >= limit) break outer
      }
      carry = Buffer.from(buf.subarray(start))
    }
  } finally {
    await file.close()
  }
  if (sink === 0) throw new Error('nothing parsed')
  return Number((Number(process.hrtime.bigint() - started) / 1000 / lines).toFixed(2))
}

const result: Record<string, unknown> & { events: number } = { events: 0, cores: CORES }
for (const encoding of encodings) {
  const { path } = await benchDataset(targetEvents, log, encoding)
  const { events, micros } = await stages(path)
  if (compareEvents > 0) {
    const source: number[] = []
    const whole: number[] = []
    for (let round = 0; round < 2; round++) {
      source.push(await sourceParse(path, compareEvents))
      whole.push(await wholeLineJsonParse(path, compareEvents))
    }
    micros.sourceParseMicros = Math.min(...source)
    micros.wholeLineJsonParseMicros = Math.min(...whole)
  }
  result.events = events
  result[encoding] = micros
  log(
    `${encoding}: ${events} events, per event: read and parse ${micros.readAndParseMicros} µs ` +
      `(first ${compareEvents} lines: ${micros.sourceParseMicros ?? '-'} µs, JSON.parse of each ` +
      `whole line ${micros.wholeLineJsonParseMicros ?? '-'} µs), decode ` +
      `${micros.decodeMicros} µs, route ${micros.routeMicros} µs (these three ${micros.firstStagesMicros} µs), ` +
      `write ${micros.writeMicros} µs, build ${micros.buildMicros} µs; in all ${micros.wholePathMicros} µs ` +
      `(${micros.cpuMicros} µs of the process's CPU), at most ${micros.ceilingEventsPerSecond} events/s on ${CORES} cores`,
  )
}
result.budgetMicros = 1e6 / TARGET_EVENTS_PER_SECOND
log(
  `${result.budgetMicros as number} µs allowed per event in all at ${TARGET_EVENTS_PER_SECOND} events/s`,
)
console.log(JSON.stringify(result))
