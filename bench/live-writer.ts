// The steady change stream of bench:api's live run, in a process of its own (its CPU is the
// machine's, as a projector beside the api would be):
//   tsx bench/live-writer.ts <dataDir> <streamFile> <eventsPerSecond>
// One projector (projector.ts, the file source's path: runFile) on a data directory that has
// caught up already, so that each change is applied and its documents built at once, as live.
// Every TICK_MS it writes the next eventsPerSecond * TICK_MS / 1000 lines of the stream file to a
// file of their own and applies it: about 1000 / TICK_MS commits a second, each of which changes
// the file's data_version and so turns the api's page cache over. On SIGTERM it finishes the
// chunk in hand and prints one line of JSON: {"events","commits","seconds","exhausted"}
// (exhausted: the stream ran out before the end, and the rate was not kept).
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { createProjector } from '../projector/projector.ts'
import { loadProjectorConfig } from '../src/config.ts'
import { createLogger } from '../src/log.ts'

const TICK_MS = 100

/** The stream's lines cut into the chunks applied one per tick, in order. */
export function chunksOf(lines: readonly string[], perChunk: number): string[][] {
  const chunks: string[][] = []
  for (let at = 0; at < lines.length; at += perChunk) chunks.push(lines.slice(at, at + perChunk))
  return chunks
}

if (process.argv[1]?.endsWith('live-writer.ts') === true) {
  const [dataDir, streamFile, rate] = process.argv.slice(2) as [string, string, string]
  const perChunk = Math.max(1, Math.round((Number(rate) * TICK_MS) / 1000))
  const lines = readFileSync(streamFile, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
  const config = loadProjectorConfig({ DATA_DIR: dataDir, LANES: '1', LOG_LEVEL: 'warn' })
  const projector = createProjector({ config, logger: createLogger('projector', 'warn') })
  const chunkFile = join(dataDir, 'live-chunk.ndjson')
  let stopping = false
  process.once('SIGTERM', () => (stopping = true))
  const started = performance.now()
  let events = 0
  let commits = 0
  let exhausted = true
  for (const chunk of chunksOf(lines, perChunk)) {
    if (stopping) {
      exhausted = false
      break
    }
    const due = started + commits * TICK_MS
    const wait = due - performance.now()
    if (wait > 0) await sleep(wait)
    writeFileSync(chunkFile, `${chunk.join('\n')}\n`)
    const summary = await projector.runFile(chunkFile)
    events += summary.records
    commits++
  }
  // Ran out: keep the process up until told to stop, so the bench sees the same life either way.
  while (!stopping) await sleep(TICK_MS)
  await projector.stop()
  rmSync(chunkFile, { force: true })
  const seconds = (performance.now() - started) / 1000
  process.stdout.write(`${JSON.stringify({ events, commits, seconds, exhausted })}\n`)
}
