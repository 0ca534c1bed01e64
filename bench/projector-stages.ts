// `npm run bench:projector:stages`: what the first stages of the projector's write path cost per
// event on this machine, on the bench dataset, in one pass on one thread as the projector runs
// them: reading and parsing the file (sources/file.ts), decoding and validating (decode.ts), and
// routing each row in control.db (control-file.ts, transactions held as in an initial load).
// What 50,000 events/s allows per event (20 µs), less these, is what is left for the organization
// files' writes and the document build; `npm run bench:projector` measures the whole.
//
//   npm run bench:projector:stages [-- --events 1000000]
//
// Ends with one line of JSON: {"events", "readAndParseMicros", "decodeMicros", "routeMicros",
// "firstStagesMicros", "budgetMicros"}, each per event.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { controlTables, type OrganizationTable } from '../schema/events.ts'
import { openControlFile } from '../projector/control-file.ts'
import { decodeRecord, type RowChange } from '../projector/decode.ts'
import { FILE_BATCH_RECORDS, LOAD_COMMIT_EVENTS } from '../projector/projector.ts'
import { readRecordBatches } from '../projector/sources/file.ts'
import { benchDataset } from './dataset.ts'

const { values } = parseArgs({ options: { events: { type: 'string', default: '1000000' } } })
const targetEvents = Number(values.events)
if (!Number.isSafeInteger(targetEvents) || targetEvents < 1)
  throw new Error('--events must be a positive integer')

const TARGET_EVENTS_PER_SECOND = 50_000
/** The dataset's topic prefix (scripts/dataset), the projector's default. */
const TOPIC_PREFIX = 'product'

const log = (line: string) => process.stderr.write(`${line}\n`)
const { path } = await benchDataset(targetEvents, log)
const dir = mkdtempSync(join(tmpdir(), 'bench-stages-'))
const control = openControlFile(join(dir, 'control.db'))
const nanos = { readAndParse: 0n, decode: 0n, route: 0n }
let events = 0
let uncommitted = 0
try {
  const batches = readRecordBatches(path, FILE_BATCH_RECORDS)
  for (;;) {
    let started = process.hrtime.bigint()
    const next = await batches.next()
    let now = process.hrtime.bigint()
    nanos.readAndParse += now - started
    if (next.done === true) break
    const records = next.value

    started = now
    const changes: Array<RowChange & { table: OrganizationTable }> = []
    for (const record of records) {
      const decoded = decodeRecord(record, TOPIC_PREFIX)
      if (decoded.kind === 'change' && !controlTables.has(decoded.change.table))
        changes.push(decoded.change as RowChange & { table: OrganizationTable })
    }
    now = process.hrtime.bigint()
    nanos.decode += now - started

    started = now
    control.begin()
    control.transaction(() => {
      for (const change of changes) {
        if (change.kind === 'upsert') {
          const organizationId = (change.row as { organization_id: string }).organization_id
          control.route(change.table, change.id, organizationId)
        } else if (change.kind === 'delete') control.routeOf(change.table, change.id)
      }
    })
    uncommitted += records.length
    if (uncommitted >= LOAD_COMMIT_EVENTS) {
      control.commit()
      uncommitted = 0
    }
    nanos.route += process.hrtime.bigint() - started
    events += records.length
    if (events >= targetEvents) break
  }
  const started = process.hrtime.bigint()
  control.commit()
  nanos.route += process.hrtime.bigint() - started
} finally {
  control.close()
  rmSync(dir, { recursive: true, force: true })
}

const perEvent = (n: bigint) => Number((Number(n) / 1000 / events).toFixed(2))
const result = {
  events,
  readAndParseMicros: perEvent(nanos.readAndParse),
  decodeMicros: perEvent(nanos.decode),
  routeMicros: perEvent(nanos.route),
  firstStagesMicros: perEvent(nanos.readAndParse + nanos.decode + nanos.route),
  budgetMicros: 1e6 / TARGET_EVENTS_PER_SECOND,
}
log(
  `${events} events, per event: read and parse ${result.readAndParseMicros} µs, decode ` +
    `${result.decodeMicros} µs, route ${result.routeMicros} µs; ${result.budgetMicros} µs allowed ` +
    `in all at ${TARGET_EVENTS_PER_SECOND} events/s`,
)
console.log(JSON.stringify(result))
